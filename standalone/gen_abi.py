#!/usr/bin/env python3
"""gen_abi.py: the parts of dedmpi's own libmpi.so.40 that Open MPI's ABI
dictates, generated at build time from Open MPI's installed mpi.h (a build
dependency; nothing of it is committed).

  gen_abi.py PREPROCESSED_MPI_H IMPL.c OUT_DIR

PREPROCESSED_MPI_H is `cc -E -P` of a file that includes <mpi.h>. IMPL.c
is the hand-written implementation (mpi1.c): every `PMPI_<name>(` it
defines at the start of a line is implemented there. It is refused if an
error message of it could name anything but the MPI function the
application called (check_names). Writes:

  abi_objects.c  every predefined object (ompi_mpi_comm_world, ...) at
                 exactly Open MPI's size, default visibility, starting
                 with a header {magic, kind, index} (abi.h): executables
                 copy-relocate these, and a handle is decoded by looking
                 at the bytes it points to.
  abi_objects.h  the objects' indexes per kind and their names.
  abi_stubs.c    every other PMPI_ function: each answers
                 MPI_ERR_UNSUPPORTED_OPERATION through the error handler of
                 the call's communicator with a log line naming it (a _c2f
                 then returns -1, an object-returning call its NULL); and
                 every MPI_ function as a weak alias of its PMPI_ (the
                 shim's own MPI_Allreduce and friends, defined strongly,
                 take precedence).
"""
import os
import re
import sys

# Open MPI 4.1's PREDEFINED_*_PAD: the size of each kind of object
# (checked with nm -S on Open MPI's libmpi.so.40).
SIZES = {
    "communicator": 512, "datatype": 512, "win": 512, "op": 2048, "errhandler": 1024,
    "group": 256, "request": 256, "message": 256, "info": 256, "file": 1536,
}
NULLS = {
    "MPI_Comm": "MPI_COMM_NULL", "MPI_Datatype": "MPI_DATATYPE_NULL", "MPI_Op": "MPI_OP_NULL",
    "MPI_Group": "MPI_GROUP_NULL", "MPI_Request": "MPI_REQUEST_NULL",
    "MPI_Errhandler": "MPI_ERRHANDLER_NULL", "MPI_Info": "MPI_INFO_NULL",
    "MPI_Message": "MPI_MESSAGE_NULL", "MPI_Win": "MPI_WIN_NULL", "MPI_File": "MPI_FILE_NULL",
    "double": "0.0", "int": None,
}


# Objects Open MPI's libmpi.so.40 exports that its mpi.h declares only
# with MPI-1 compatibility (MPI_LB, MPI_UB) or for its C++ layer: older
# binaries may copy-relocate them.
EXTRA_OBJECTS = [("datatype", "ompi_mpi_lb"), ("datatype", "ompi_mpi_ub"),
                 ("errhandler", "ompi_mpi_errors_throw_exceptions")]
# Functions removed in MPI-3.0 that libmpi.so.40 still exports (mpi.h
# declares them with OMPI_OMIT_MPI1_COMPAT_DECLS=0, which the build sets
# for this script, the stubs and mpi1.c): mpi1.c implements those with an
# exact successor it implements (under their own names, which their errors
# give) and the extent queries; the rest answer unsupported under their
# own names.
REMOVED = ["Address", "Errhandler_create", "Errhandler_get", "Errhandler_set", "Type_hindexed",
           "Type_hvector", "Type_struct", "Type_extent", "Type_lb", "Type_ub"]


def parse(pre):
    text = re.sub(r"\s+", " ", open(pre).read())
    text = text.replace('__attribute__((visibility("default")))', "")
    funcs, objs = {}, []
    for st in (x.strip() for x in text.split(";")):
        if "{" in st or "typedef" in st:
            continue
        m = re.match(r"^(?:extern )?([A-Za-z_][A-Za-z_0-9 *]*?)\s*\b(P?MPI_[A-Za-z0-9_]+)\s*"
                     r"\((.*)\)\s*(?:__attribute__.*)?$", st)
        if m:
            funcs[m.group(2)] = (m.group(1).strip(), m.group(3).strip())
            continue
        m = re.match(r"^extern struct ompi_predefined_([a-z]+)_t (ompi_[a-z_0-9]+)$", st)
        if m:
            objs.append((m.group(1), m.group(2)))
    return funcs, objs


def check_names(impl):
    """mpi1.c's errors name the MPI function the application called: FN
    (a PMPI_ function's own name) and RAISE (which gives it) appear only in
    PMPI_ functions, which pass it to the helpers that may raise, and no
    function there calls a PMPI_ one (that one's errors would give its own
    name). Top-level functions start at the first column and end at a "}"
    there. Returns the problems found."""
    problems, name = [], None
    for no, line in enumerate(open(impl), 1):
        m = re.match(r"^[A-Za-z_][\w \*]*?\b(\w+)\(", line)
        if m and not line.rstrip().endswith(";") and not line.startswith("#"):
            name = m.group(1)
            continue
        if line.startswith("}"):
            name = None
        if name is None:
            continue
        if not name.startswith("PMPI_") and re.search(r"\bFN\b|\bRAISE\(", line):
            problems.append("%s:%d: %s uses FN or RAISE: give it the caller's name (fn)" %
                            (impl, no, name))
        for call in re.findall(r"\b(PMPI_\w+)\(", line):
            problems.append("%s:%d: %s calls %s: call the helper they share, with its name" %
                            (impl, no, name, call))
    return problems


def arg_names(args):
    """The parameter names of a prototype's argument list ("" for void)."""
    if args in ("", "void"):
        return []
    names = []
    depth, cur = 0, ""
    for ch in args + ",":
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0 and cur.strip() == "...":
            cur = ""  # a variadic function's forwarder passes the named arguments
        elif ch == "," and depth == 0:
            m = re.search(r"\(\s*\*\s*(\w+)\s*\)|(\w+)\s*(\[[^\]]*\])*\s*$", cur.strip())
            names.append(m.group(1) or m.group(2))
            cur = ""
        else:
            cur += ch
    return names


def main():
    pre, impl, out = sys.argv[1:4]
    funcs, objs = parse(pre)
    if len(funcs) < 700 or len(objs) < 90:
        sys.exit("gen_abi.py: %s does not look like Open MPI's mpi.h (%d functions, %d objects)" %
                 (pre, len(funcs), len(objs)))
    missing = ["MPI_" + n for n in REMOVED if "MPI_" + n not in funcs]
    if missing:
        sys.exit("gen_abi.py: %s does not declare %s (preprocess it with "
                 "-DOMPI_OMIT_MPI1_COMPAT_DECLS=0)" % (pre, ", ".join(missing)))
    objs += [o for o in EXTRA_OBJECTS if o not in objs]
    done = set(re.findall(r"^[A-Za-z_][\w \*]*\bPMPI_(\w+)\(", open(impl).read(), re.M))
    problems = check_names(impl)
    if problems:
        sys.exit("gen_abi.py: an error message of %s could name the wrong function:\n  %s" %
                 (impl, "\n  ".join(problems)))
    for name in done:
        if "PMPI_" + name not in funcs:
            sys.exit("gen_abi.py: %s implements PMPI_%s, which mpi.h does not declare" % (impl, name))
    kinds = sorted(SIZES)
    by_kind = {k: [n for kk, n in objs if kk == k] for k in kinds}
    unknown = sorted(set(k for k, _ in objs) - set(kinds))
    if unknown:
        sys.exit("gen_abi.py: objects of unknown kinds %s" % unknown)
    os.makedirs(out, exist_ok=True)
    gen = "/* Generated by standalone/gen_abi.py from Open MPI's mpi.h: do not edit. */\n"

    with open(os.path.join(out, "abi_objects.h"), "w") as f:
        f.write(gen + "#ifndef ABI_OBJECTS_H\n#define ABI_OBJECTS_H\n\n")
        for k in kinds:
            f.write("enum {\n")
            for i, n in enumerate(by_kind[k]):
                f.write("  ABI_%s_%s = %d,\n" % (k.upper(), n[len("ompi_"):].upper(), i))
            f.write("  ABI_%s_COUNT = %d\n};\n" % (k.upper(), len(by_kind[k])))
            f.write("extern const char *const abi_%s_names[ABI_%s_COUNT];\n\n" % (k, k.upper()))
        f.write("#endif\n")

    with open(os.path.join(out, "abi_objects.c"), "w") as f:
        f.write(gen + '#include "abi.h"\n#include "abi_objects.h"\n\n')
        for k in kinds:
            f.write("const char *const abi_%s_names[ABI_%s_COUNT] = {\n" % (k, k.upper()))
            for n in by_kind[k]:
                f.write('    "%s",\n' % n)
            f.write("};\n")
            for i, n in enumerate(by_kind[k]):
                f.write("ABI_OBJECT(%s, %d, ABI_KIND_%s, %d);\n" % (n, SIZES[k], k.upper(), i))
            f.write("\n")

    with open(os.path.join(out, "abi_stubs.c"), "w") as f:
        f.write(gen + "#define OMPI_OMIT_MPI1_COMPAT_DECLS 0 /* the removed MPI-1 calls too */\n"
                "#include <mpi.h>\n\n#include \"abi.h\"\n\n")
        f.write("#pragma GCC diagnostic ignored \"-Wdeprecated-declarations\"\n")
        f.write("#pragma GCC diagnostic ignored \"-Wunused-parameter\"\n\n")
        nstub = 0
        for name in sorted(n for n in funcs if n.startswith("MPI_")):
            ret, args = funcs[name]
            pname = "P" + name
            if ret not in NULLS:
                sys.exit("gen_abi.py: %s returns %s" % (name, ret))
            if name[4:] not in done:
                nstub += 1
                # The error goes to the handler of the call's communicator
                # (its first MPI_Comm argument), else MPI_COMM_WORLD's.
                comms = [n for n in arg_names(args)
                         if re.search(r"(^|,)\s*MPI_Comm\s+%s\s*(,|$)" % n, args)]
                comm = "(const void *)%s" % comms[0] if comms else "0"
                call = "abi_unsupported(\"%s\", %s)" % (name, comm)
                if name.endswith("_c2f"):  # a Fortran handle, not an error code
                    body = "%s;\n  return -1;" % call
                elif NULLS[ret] is None:
                    body = "return %s;" % call
                else:
                    body = "%s;\n  return %s;" % (call, NULLS[ret])
                f.write("ABI_EXPORT %s %s(%s) {\n  %s\n}\n" % (ret, pname, args, body))
                f.write("ABI_EXPORT %s %s(%s) __attribute__((weak, alias(\"%s\")));\n\n" %
                        (ret, name, args, pname))
            else:  # defined in mpi1.c, another unit: a weak forwarder, not an alias
                call = ", ".join(arg_names(args))
                f.write("ABI_EXPORT __attribute__((weak)) %s %s(%s) {\n  return %s(%s);\n}\n\n" %
                        (ret, name, args, pname, call))
    print("gen_abi.py: %d objects, %d functions (%d implemented, %d answer unsupported)" %
          (len(objs), len([n for n in funcs if n.startswith("MPI_")]), len(done), nstub))


if __name__ == "__main__":
    main()
