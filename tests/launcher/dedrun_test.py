#!/usr/bin/python3
"""dedrun, the launcher (issue: a volunteer joins with one command).

Each test runs dedrun as a user would: its flags and usage errors, a
trainer under dedrun averaging with one under plain mpirun + preload, its
signals and the lifetime of its children, and its progress line on a
pseudo-terminal. The helpers (jobs, checks, the trainer) are mp_test's.
"""
import argparse
import os
import pty
import re
import select
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mp"))
import mp_test as mp  # noqa: E402
from mp_test import Fail, check, free_port, swarm_env  # noqa: E402

TESTS = {}


def test(fn):
    TESTS[fn.__name__] = fn
    return fn


def base_env(**extra):
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
                "ASAN_OPTIONS": "detect_leaks=0"})
    env.update({k: str(v) for k, v in extra.items()})
    return env


def dedrun_cmd(*args):
    """dedrun with the sanitizer runtimes, if any, preloaded into the ranks."""
    pre = ["-x", "LD_PRELOAD=" + mp.ARGS.preload_extra] if mp.ARGS.preload_extra else []
    return [mp.ARGS.dedrun] + pre + list(args)


def cli(*args, env=None, timeout=60):
    return subprocess.run([mp.ARGS.dedrun] + list(args), capture_output=True, text=True,
                          env=env or base_env(), timeout=timeout)


def run_dedrun(*args, timeout=120):
    """dedrun running a program (dedrun_cmd: sanitizer runtimes preloaded)."""
    return subprocess.run(dedrun_cmd(*args), capture_output=True, text=True, env=base_env(),
                          timeout=timeout)


class Proc(mp.Job):
    """dedrun running a trainer, output to files (mp_test's Job, but the
    command is dedrun's own, not mpirun's)."""

    def __init__(self, name, argv, env, workdir):
        self.name, self.dir, self.cmd = name, workdir, argv
        self.out_path = os.path.join(workdir, name + ".out")
        self.err_path = os.path.join(workdir, name + ".err")
        self.t0 = time.time()
        self.proc = subprocess.Popen(argv, stdout=open(self.out_path, "w"),
                                     stderr=open(self.err_path, "w"), cwd=workdir, env=env,
                                     start_new_session=True)
        self.rc = None
        self.seconds = 0.0


def procs_with(marker):
    """Pids of processes whose command line holds |marker|."""
    r = subprocess.run(["pgrep", "-f", "--", marker], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split() if int(p) != os.getpid()]


def wait_gone(marker, timeout):
    deadline = time.time() + timeout
    while procs_with(marker) and time.time() < deadline:
        time.sleep(0.1)
    return procs_with(marker)


def swarm_flags(port, first, min_peers):
    """The flags a volunteer types for what swarm_env puts in -x."""
    env = swarm_env(port, first, min_peers)
    return ["--run", env["DEDMPI_RUN"], "--join", env["DEDMPI_JOIN"], "--listen",
            env["DEDMPI_LISTEN"], "--min-peers", env["DEDMPI_MIN_PEERS"], "--log", "info"]


# ---------------------------------------------------------------- tests


@test
def flags():
    """--help documents the flags and every DEDMPI_* variable; --version;
    each kind of bad command line exits 2 with a message and the usage; bad
    settings are refused before anything starts, as are a malformed --host,
    a hostfile that is missing, unreadable or malformed, and hosts with
    --standalone; a missing mpirun or library is a clear error (exit 1),
    with --host too (no falling back to this machine alone). --host and
    --hostfile naming this machine, without -n, run a rank per slot."""
    r = cli("--help")
    check(r.returncode == 0 and "usage: dedrun" in r.stdout, "--help:\n" + r.stdout + r.stderr)
    for want in ("-n, -np N", "-x VAR[=VALUE]", "--join HOST:PORT", "--swarm-key-file",
                 "--mode M", "-H, --host LIST", "--hostfile FILE", "--machinefile",
                 "DEDMPI_ROUND_TIMEOUT (default: 60s)", "DEDMPI_PROGRESS"):
        check(want in r.stdout, "--help lacks %r:\n%s" % (want, r.stdout))
    r = cli("--version")
    check(r.returncode == 0 and re.match(r"dedrun \d+\.\d+\.\d+$", r.stdout.strip()),
          "--version: %r" % r.stdout)
    wd = tempfile.mkdtemp(prefix="dedrun-flags-")
    hostfiles = {}
    for name, text in (("bad", "# hosts\nnode1 slots=2\nnode2 slot=2\n"), ("empty", "# none\n"),
                       ("zero", "node1 slots=0\n")):
        hostfiles[name] = os.path.join(wd, name)
        with open(hostfiles[name], "w") as f:
            f.write(text)
    bad = [
        (["--bogus", "true"], "unknown option --bogus"),
        (["--host", "a,,b", "true"], "--host a,,b: an empty entry"),
        (["-H", "a:0", "true"], "-H a:0: 'a:0': expected HOST:SLOTS, SLOTS a number from 1"),
        (["--host=node1:2,bad/name", "true"], "'bad/name' is not a host name"),
        (["--host", "a", "--host", "b", "true"], "--host given twice"),
        (["--hostfile"], "--hostfile needs a value"),
        (["--hostfile", "/nonexistent/hosts", "true"],
         "--hostfile /nonexistent/hosts: No such file or directory"),
        (["--hostfile", wd, "true"], "not a regular file"),
        (["--machinefile", hostfiles["bad"], "true"],
         "line 3: 'node2 slot=2': expected HOST [slots=N] [max_slots=N]"),
        (["--hostfile", hostfiles["empty"], "true"], "no host in it"),
        (["--hostfile", hostfiles["zero"], "true"], "line 1: 'node1 slots=0'"),
        (["--standalone", "--host", "a", "true"], "go with a trainer that mpirun runs"),
        (["--backbone", "--hostfile", hostfiles["bad"]], "line 3"),
        (["-n"], "-n needs a value"),
        (["-n", "zero", "true"], "expected a number of ranks"),
        (["-np", "0", "true"], "expected a number of ranks"),
        (["--join"], "--join needs a value"),
        (["-x", "=v", "true"], "expected VAR or VAR=VALUE"),
        ([], "no program to run"),
        (["--id", "--new-key"], "exclude each other"),
        (["--new-key", "true"], "take no program"),
        (["--expires", "7d", "true"], "--expires goes with --invite"),
        (["--mode", "bogus", "true"], "DEDMPI_MODE='bogus': expected node, client or aux"),
        (["-x", "DEDMPI_STREAMS=99", "true"], "DEDMPI_STREAMS='99'"),
        (["--listen", "nowhere", "true"], "DEDMPI_LISTEN='nowhere'"),
    ]
    for args, want in bad:
        r = cli(*args)
        # A bad setting is named as the variable it sets; a bad command line gets the usage.
        usage = want.startswith("DEDMPI_") or "usage: dedrun" in r.stderr
        check(r.returncode == 2 and want in r.stderr and usage,
              "dedrun %s: expected exit 2, %r and the usage; got %d:\n%s" %
              (" ".join(args), want, r.returncode, r.stderr))
    r = cli("/bin/true", env=base_env(PATH="/nonexistent"))
    check(r.returncode == 0 and "no mpirun on PATH: running on dedmpi's own MPI library" in
          r.stderr, "no mpirun: %d %s" % (r.returncode, r.stderr))
    r = cli("--host", "localhost", "/bin/true", env=base_env(PATH="/nonexistent"))
    check(r.returncode == 1 and "--host and --hostfile need Open MPI's mpirun" in r.stderr,
          "--host without mpirun: %d %s" % (r.returncode, r.stderr))
    r = cli("--standalone", "-n", "2", "/bin/true")
    check(r.returncode == 2 and "give --listen HOST:PORT" in r.stderr,
          "2 standalone processes with no way to meet: %d %s" % (r.returncode, r.stderr))
    r = cli("true", env=base_env(DEDMPI_LIB="/nonexistent/libdedmpi.so"))
    check(r.returncode == 1 and "libdedmpi.so not found at /nonexistent" in r.stderr,
          "no library: %d %s" % (r.returncode, r.stderr))
    r = cli("--no-progress", "/nonexistent/trainer")
    check(r.returncode != 0, "a program that does not exist: exit 0")
    # -np and -x (VAR=VALUE, and a bare VAR from the environment) reach
    # every rank; dedrun's own variables (DEDMPI_LIB) are known but stay
    # with it; the library is preloaded after what the user preloads.
    show = 'echo "rank=$OMPI_COMM_WORLD_RANK a=$DEDRUN_A b=$DEDRUN_B lib=$DEDMPI_LIB pre=$LD_PRELOAD"'
    r = subprocess.run(dedrun_cmd("--no-progress", "-np", "2", "-x", "DEDRUN_A=1 2", "-x",
                                  "DEDRUN_B", "/bin/sh", "-c", show), capture_output=True,
                       text=True, env=base_env(DEDRUN_B="b", DEDMPI_LIB=mp.ARGS.lib), timeout=60)
    ranks = sorted(re.findall(r"^rank=(\d) a=1 2 b=b lib= pre=(.*libdedmpi\.so\S*)$", r.stdout, re.M))
    check(r.returncode == 0 and [x[0] for x in ranks] == ["0", "1"] and
          "unknown variable" not in r.stderr,
          "-np 2 -x: rc %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
    # On hosts (this one here), without -n: a rank per slot, rank 0 here.
    for opt in (["--host", "localhost:2"], ["--hostfile", os.path.join(wd, "local")]):
        with open(os.path.join(wd, "local"), "w") as f:
            f.write("localhost slots=2  # this machine\n")
        r = subprocess.run(dedrun_cmd("--no-progress", *opt, "-x", "DEDRUN_A=1 2", "/bin/sh", "-c",
                                      show), capture_output=True, text=True,
                           env=base_env(DEDMPI_LIB=mp.ARGS.lib), timeout=60)
        ranks = sorted(re.findall(r"^rank=(\d) a=1 2 b= lib= pre=.*libdedmpi\.so", r.stdout, re.M))
        check(r.returncode == 0 and ranks == ["0", "1"] and "runs on" not in r.stderr,
              "%s: rc %d\n%s%s" % (" ".join(opt), r.returncode, r.stdout, r.stderr))
    print("  --help, --version, %d usage errors, missing mpirun and library checked; -np 2 and "
          "-x reach both ranks; --host and --hostfile without -n run a rank per slot" % len(bad))


@test
def key_file():
    """--swarm-key-file (or DEDMPI_SWARM_KEY_FILE in dedrun's environment) is
    checked before anything starts, with the library's own message and exit
    2: missing, not a regular file, readable by others, or a key that looks
    mistyped (63 hex digits); the backbone checks it too. An unknown DEDMPI_*
    variable stops dedrun the same way unless DEDMPI_UNKNOWN_VARS=warn."""
    wd = tempfile.mkdtemp(prefix="dedrun-key-")
    marker = os.path.join(wd, "started")
    prog = ["/bin/sh", "-c", "touch " + marker]

    def key(name, text, mode):
        path = os.path.join(wd, name)
        with open(path, "w") as f:
            f.write(text + "\n")
        os.chmod(path, mode)
        return path

    good = key("good.key", "5a" * 32, 0o600)
    bad = [
        (key("open.key", "5a" * 32, 0o644),
         "DEDMPI_SWARM_KEY_FILE=%s: others may read or write it (mode 644): it holds the run's "
         "secret; chmod 600 it" % os.path.join(wd, "open.key")),
        (key("typo.key", "5a" * 31 + "5", 0o600),
         "DEDMPI_SWARM_KEY_FILE: 63 hex digits: a key has 64; a typo? (a passphrase of hex digits "
         "only is refused)"),
        (os.path.join(wd, "missing.key"),
         "DEDMPI_SWARM_KEY_FILE=%s: No such file or directory" % os.path.join(wd, "missing.key")),
        (wd, "DEDMPI_SWARM_KEY_FILE=%s: not a regular file" % wd),
    ]
    n = 0
    for path, want in bad:
        for how in ("flag", "env", "backbone"):
            if how == "flag":
                r = cli("--no-progress", "--swarm-key-file", path, *prog, timeout=30)
            elif how == "env":
                r = cli("--no-progress", *prog, env=base_env(DEDMPI_SWARM_KEY_FILE=path), timeout=30)
            else:
                r = cli("--backbone", "--listen", "127.0.0.1:0", "--swarm-key-file", path, timeout=30)
            check(r.returncode == 2 and "dedrun: " + want in r.stderr and not os.path.exists(marker)
                  and "listening" not in r.stderr,
                  "%s %s: expected exit 2 and %r before anything started; got %d:\n%s" %
                  (how, path, want, r.returncode, r.stderr))
            n += 1
    r = cli("--no-progress", *prog, env=base_env(DEDMPI_MINPEERS="2"), timeout=30)
    check(r.returncode == 2 and "dedrun: unknown variable DEDMPI_MINPEERS (did you mean "
          "DEDMPI_MIN_PEERS?)" in r.stderr and not os.path.exists(marker),
          "an unknown variable: %d\n%s" % (r.returncode, r.stderr))
    # Downgraded to a warning, it passes, and so does a private key file.
    r = subprocess.run(dedrun_cmd("--no-progress", "--swarm-key-file", good, *prog),
                       capture_output=True, text=True, timeout=60,
                       env=base_env(DEDMPI_MINPEERS="2", DEDMPI_UNKNOWN_VARS="warn"))
    check(r.returncode == 0 and os.path.exists(marker) and "dedrun: warning: unknown variable "
          "DEDMPI_MINPEERS" in r.stderr, "warn: %d\n%s" % (r.returncode, r.stderr))
    print("  %d refused key files (flag, environment, backbone) and an unknown variable stopped "
          "dedrun before it started anything; DEDMPI_UNKNOWN_VARS=warn lets it pass" % n)


@test
def trainer():
    """A 2-rank trainer job under dedrun (flags, not -x) and a 1-rank job under
    plain mpirun with the library preloaded train one model in one run: both
    end with bit-identical parameters, dedrun exits 0, and (its stderr not a
    terminal) it printed plain progress lines naming the run, 2 peers and
    2 contributors."""
    port = free_port()
    wd = tempfile.mkdtemp(prefix="dedrun-")
    common = ["--steps", "40", "--buckets", "2", "--log-every", "10", "--shards", "3"]
    a = Proc("dedrun", dedrun_cmd("-n", "2", *swarm_flags(port, True, 2),
                                  *mp.trainer_cmd(False, common + ["--shard-base", "0", "--out",
                                                                   "params-a.bin"])),
             base_env(), wd)
    b = mp.Job("plain", 1, mp.trainer_cmd(False, common + ["--shard-base", "2", "--out",
                                                            "params-b.bin"]),
               swarm_env(port, False, 2), workdir=wd)
    rc = a.wait(180)
    b.wait(60)
    check(rc == 0 and b.rc == 0, "jobs failed:\n%s\n%s" % (a.describe(), b.describe()))
    pa = open(os.path.join(wd, "params-a.bin"), "rb").read()
    pb = open(os.path.join(wd, "params-b.bin"), "rb").read()
    check(pa and pa == pb, "parameters differ: %s vs %s" % (mp.final_line(b), a.out[-300:]))
    lines = re.findall(r"^dedrun: run mp-%d \| (\d+) peers? \| round (\d+) \| [\d.]+ m?s \| [\d.]+ MB/s "
                       r"\| (\d+) contributors?" % port, a.err, re.M)
    check(lines, "no progress line:\n" + a.describe())
    check(any(p == "2" and c == "2" for p, _, c in lines),
          "no progress line with 2 peers and 2 contributors: %s" % lines)
    print("  identical parameters (%d bytes); %d progress lines, e.g. %s" %
          (len(pa), len(lines), lines[-1]))


def long_trainer(port, marker):
    return dedrun_cmd("--no-progress", *swarm_flags(port, True, 1),
                      *mp.trainer_cmd(False, ["--steps", "100000", "--step-ms", "20",
                                              "--log-every", "5", "--out", marker]))


@test
def signals():
    """SIGTERM to dedrun reaches the trainer (through mpirun) at once and dedrun
    exits with mpirun's outcome; SIGKILL to dedrun (no chance to forward) still takes
    its children along; SIGKILL to mpirun (its ranks orphaned) makes dedrun end
    the ranks it adopted. Each time no process of the job is left."""
    notes = []
    for sig, target in ((signal.SIGTERM, "dedrun"), (signal.SIGKILL, "dedrun"),
                        (signal.SIGKILL, "mpirun")):
        port = free_port()
        wd = tempfile.mkdtemp(prefix="dedrun-")
        marker = "params-sig%d-%s-%d.bin" % (sig, target, port)
        p = Proc("dedrun", long_trainer(port, marker), base_env(), wd)
        deadline = time.time() + 60
        while not re.search(r"step \d+ loss", p.out) and time.time() < deadline:
            check(p.proc.poll() is None, "dedrun ended early:\n" + p.describe())
            time.sleep(0.1)
        check(re.search(r"step \d+ loss", p.out), "the trainer never stepped:\n" + p.describe())
        check(procs_with(marker), "no trainer process found by %s" % marker)
        t0 = time.time()
        if target == "dedrun":
            p.proc.send_signal(sig)
        else:
            mpirun = [q for q in procs_with(marker)
                      if re.search(r"(mpirun|orterun)$", os.readlink("/proc/%d/exe" % q))]
            check(len(mpirun) == 1, "no mpirun found: %s" % mpirun)
            os.kill(mpirun[0], sig)
        rc = p.wait(30)
        left = wait_gone(marker, 20)
        took = time.time() - t0
        if left:
            subprocess.run(["pkill", "-9", "-f", marker])
        check(not left, "after %s to %s, processes left: %s\n%s" %
              (sig.name, target, left, p.describe()))
        if sig == signal.SIGTERM:
            # Forwarded, mpirun ends the job itself, well before dedrun's 10 s
            # grace would run out and SIGKILL it (137).
            check(rc not in (0, 137, "timeout") and took < 8,
                  "dedrun exited %s, %.1f s after SIGTERM:\n%s" % (rc, took, p.describe()))
        notes.append("%s to %s: dedrun rc %s, job gone in %.1f s" % (sig.name, target, rc, took))
    print("  " + "; ".join(notes))


@test
def orphans():
    """A process the trainer leaves behind (here a background helper its
    shell started, which lives on when the trainer exits) is ended by
    dedrun when the trainer is done: dedrun adopts the job's orphans."""
    marker = "dedrun-orphan-%d" % free_port()
    helper = "/usr/bin/python3 -c 'import time; time.sleep(600)' %s &" % marker
    p = Proc("orphans", dedrun_cmd("--standalone", "--no-progress", "/bin/sh", "-c",
                                   helper + " exec /bin/true"), base_env(),
             tempfile.mkdtemp(prefix="dedrun-"))
    rc = p.wait(30)
    left = wait_gone(marker, 10)
    if left:
        subprocess.run(["pkill", "-9", "-f", marker])
    check(rc == 0 and not left, "rc %s, left behind: %s\n%s" % (rc, left, p.describe()))
    check("1 process of the job outlived it: ended" in p.err, "not reported:\n" + p.describe())
    print("  the trainer's leftover helper was ended by dedrun")


def render(stream):
    """The lines a terminal shows for |stream|: \\r returns to column 0,
    ESC[K clears to the end of the line, \\n ends it."""
    lines, cur, col = [], [], 0
    i = 0
    while i < len(stream):
        ch = stream[i]
        if stream.startswith("\x1b[K", i):
            del cur[col:]
            i += 3
            continue
        if ch == "\r":
            col = 0
        elif ch == "\n":
            lines.append("".join(cur))
            cur, col = [], 0
        else:
            if col < len(cur):
                cur[col] = ch
            else:
                cur.append(ch)
            col += 1
        i += 1
    return lines, "".join(cur)


@test
def progress_tty():
    """On a terminal (a pseudo-terminal here) dedrun keeps one updating
    progress line below the trainer's output: the rendered screen has every
    line the trainer printed intact, progress updates were drawn (ESC[K) with
    2 peers, and the last line is dedrun's summary of the rounds."""
    port = free_port()
    wd = tempfile.mkdtemp(prefix="dedrun-")
    common = ["--steps", "60", "--buckets", "2", "--log-every", "5", "--shards", "2",
              "--step-ms", "10"]
    master, slave = pty.openpty()
    argv = dedrun_cmd("--run", "mp-%d" % port, "--listen", "127.0.0.1:%d" % port, "--min-peers",
                      "2", *mp.trainer_cmd(False, common + ["--shard-base", "0", "--out",
                                                            "params-a.bin"]))
    p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=wd,
                         env=base_env(TERM="xterm", COLUMNS="200"), start_new_session=True)
    os.close(slave)
    b = mp.Job("plain", 1, mp.trainer_cmd(False, common + ["--shard-base", "1", "--out",
                                                            "params-b.bin"]),
               swarm_env(port, False, 2, DEDMPI_LOG="warn"), workdir=wd)
    raw = b""
    deadline = time.time() + 180
    while time.time() < deadline:
        r, _, _ = select.select([master], [], [], 0.5)
        if r:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            raw += data
        elif p.poll() is not None:
            break
    rc = p.wait(timeout=30)
    os.close(master)
    b.wait(60)
    text = raw.decode("utf-8", "replace")
    lines, last = render(text)
    shown = "\n".join(lines + [last])
    check(rc == 0 and b.rc == 0, "jobs failed (rc %s, %s):\n%s\n%s" % (rc, b.rc, shown[-3000:],
                                                                      b.describe()))
    # Same parameters in both jobs: the same checksum at every logged step.
    want = re.findall(r"^step (\d+) loss \S+ checksum (0x[0-9a-f]{8})$", b.out, re.M)
    got = [m.groups() for m in (re.match(r"^step (\d+) loss \S+ checksum (0x[0-9a-f]{8})$", l)
                                for l in lines) if m]
    check(want and got == want,
          "the trainer's lines are not intact on the screen (%d of %d):\n%s" %
          (len(got), len(want), shown[-3000:]))
    check("\x1b[K" in text and re.search(r"dedrun: run mp-%d \| 2 peers \| round \d+" % port, text),
          "no progress line drawn:\n" + repr(text[-2000:]))
    summary = [l for l in lines if re.match(r"dedrun: \d+ rounds; last: run mp-%d" % port, l)]
    check(summary and lines[-1] == summary[-1] and not last.strip(),
          "the screen does not end with dedrun's summary:\n" + shown[-1500:])
    print("  %d trainer lines intact; %d progress draws; %s" %
          (len(got), text.count("\x1b[K"), summary[-1]))


def openmpi_maps(pid):
    """The files of Open MPI's (not dedmpi's) that process |pid| has mapped, and
    the path its libmpi.so.40 was loaded from."""
    files = set()
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6:
                files.add(parts[5])
    ompi = sorted(p for p in files if "openmpi" in p or "libopen-" in p or "libmca_" in p or
                  ("libmpi" in p and "/standalone/" not in p and "/dedmpi/" not in p))
    ours = sorted(p for p in files if p.endswith("libmpi.so.40"))
    return ompi, ours


def maps_once_loaded(pid, timeout=60):
    """openmpi_maps(pid) once the process has loaded a libmpi.so.40."""
    deadline = time.time() + timeout
    while True:
        ompi, ours = openmpi_maps(pid)
        if ours or time.time() > deadline:
            return ompi, ours
        time.sleep(0.02)


def wait_pid(marker, timeout=60):
    """The trainer process whose command line holds |marker| (not dedrun's)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for pid in procs_with(marker):
            try:
                exe = os.readlink("/proc/%d/exe" % pid)
            except OSError:
                continue
            if not exe.endswith("/dedrun") and "mpirun" not in exe and "orterun" not in exe:
                return pid
        time.sleep(0.05)
    raise Fail("no process with %s started" % marker)


def mpicc_trainer():
    """examples/trainer.c as a user builds it: with Open MPI's mpicc."""
    exe = os.path.join(mp.ARGS.examples, "trainer_mpicc")
    check(os.path.exists(exe), "%s missing: mpicc was not found at build time" % exe)
    return exe


@test
def standalone_c():
    """The C trainer built with Open MPI's mpicc, under dedrun --standalone
    on dedmpi's own libmpi.so.40, and the same program under plain mpirun
    with the library preloaded train one model in one run: bit-identical
    parameters, and the standalone process has no Open MPI library mapped
    (its libmpi.so.40 is dedmpi's), neither at load nor once it trains."""
    port = free_port()
    wd = tempfile.mkdtemp(prefix="dedrun-")
    common = ["--steps", "60", "--buckets", "2", "--log-every", "20", "--shards", "2",
              "--step-ms", "20"]
    marker = "params-sa-%d.bin" % port
    a = Proc("standalone", dedrun_cmd("--standalone", "--no-progress", *swarm_flags(port, True, 2),
                                      mpicc_trainer(), *common, "--shard-base", "0", "--out",
                                      marker), base_env(), wd)
    b = mp.Job("plain", 1, mp.trainer_cmd(False, common + ["--shard-base", "1", "--out",
                                                            "params-b.bin"]),
               swarm_env(port, False, 2), workdir=wd)
    pid = wait_pid(marker)
    ompi, ours = maps_once_loaded(pid)
    # Again once it trains: nothing loaded later (at MPI_Init, by dlopen) either.
    deadline = time.time() + 60
    while not re.search(r"^step \d+ loss", a.out, re.M) and a.proc.poll() is None and \
            time.time() < deadline:
        time.sleep(0.05)
    try:
        later, _ = openmpi_maps(pid)
        ompi = sorted(set(ompi) | set(later))
    except OSError:
        check(False, "the standalone trainer ended before it could be looked at again:\n" +
              a.describe())
    rc = a.wait(180)
    b.wait(60)
    check(rc == 0 and b.rc == 0, "jobs failed:\n%s\n%s" % (a.describe(), b.describe()))
    check(not ompi, "the standalone process mapped Open MPI's files: %s" % ompi)
    check(len(ours) == 1 and ("/standalone/" in ours[0] or "/dedmpi/" in ours[0]),
          "its libmpi.so.40 is not dedmpi's: %s" % ours)
    pa = open(os.path.join(wd, marker), "rb").read()
    pb = open(os.path.join(wd, "params-b.bin"), "rb").read()
    check(pa and pa == pb, "parameters differ: %s vs %s" % (a.out[-200:], mp.final_line(b)))
    check("standalone MPI" in a.err or "dedmpi" in a.err, "no dedmpi log:\n" + a.describe())
    print("  identical parameters (%d bytes); the standalone process mapped %s and no Open MPI "
          "file" % (len(pa), ours[0]))


@test
def standalone_mpi4py():
    """Debian's mpi4py trainer (examples/trainer.py) as two jobs under dedrun
    --standalone, each on its own data shard: identical parameters at the
    end, and neither process has an Open MPI library mapped."""
    port = free_port()
    wd = tempfile.mkdtemp(prefix="dedrun-")
    common = ["--steps", "100", "--buckets", "2", "--log-every", "20", "--shards", "2"]
    procs, maps = [], []
    for i in (0, 1):
        flags = swarm_flags(port, i == 0, 2)
        procs.append(Proc("py%d" % i, dedrun_cmd("--standalone", "--no-progress", *flags,
                                                 *mp.trainer_cmd(True, common + [
                                                     "--shard-base", str(i), "--out",
                                                     "params-py%d-%d.bin" % (i, port)])),
                          base_env(), wd))
    for i in (0, 1):  # each waits for the other at its first round: both are up at once
        maps.append(maps_once_loaded(wait_pid("params-py%d-%d.bin" % (i, port))))
    for p in procs:
        p.wait(180)
    check(all(p.rc == 0 for p in procs), "jobs failed:\n" + "\n".join(p.describe() for p in procs))
    check(all(not m[0] and len(m[1]) == 1 and "libdedmpi" not in m[1][0] and
              ("/standalone/" in m[1][0] or "/dedmpi/" in m[1][0]) for m in maps),
          "Open MPI files mapped, or another libmpi: %s" % maps)
    blobs = [open(os.path.join(wd, "params-py%d-%d.bin" % (i, port)), "rb").read() for i in (0, 1)]
    check(blobs[0] and blobs[0] == blobs[1], "the two jobs' parameters differ")
    sums = [re.findall(r"final loss \S+ checksum (\S+)", p.out) for p in procs]
    check(sums[0] and sums[0] == sums[1], "final checksums differ: %s" % sums)
    print("  two mpi4py jobs on dedmpi's libmpi.so.40: identical parameters, checksum %s; "
          "libmpi mapped from %s" % (sums[0][0], sorted(set(m[1][0] for m in maps))))


def free_port_pair():
    """A port P with P + 1 free too (dedrun --standalone -n 2 listens on both)."""
    import socket
    for _ in range(100):
        p = free_port()
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            continue
    raise Fail("no two consecutive free ports")


@test
def standalone_many():
    """dedrun --standalone -n 2: two processes, each a job of one rank and a
    peer of its own (process 1 listens on the next port and joins process
    0), train with a plain mpirun job in one run: all three end with the
    same parameter checksum, and the progress line (process 0's alone)
    counts 3 peers and 3 contributors. Then children that ignore SIGTERM:
    a SIGTERM to dedrun is forwarded, and past its grace they are killed;
    a SIGKILL to dedrun takes them along at once (PDEATHSIG)."""
    port = free_port_pair()
    wd = tempfile.mkdtemp(prefix="dedrun-")
    run = "mp-%d" % port
    common = ["--steps", "40", "--buckets", "2", "--log-every", "20", "--shards", "2",
              "--step-ms", "10", "--out", "/dev/null"]
    a = Proc("many", dedrun_cmd("--standalone", "-n", "2", "--run", run, "--listen",
                                "127.0.0.1:%d" % port, "--min-peers", "3", "--log", "info",
                                mpicc_trainer(), *common, "--shard-base", "0"), base_env(), wd)
    env = swarm_env(port, False, 3)
    env["DEDMPI_MIN_PEERS"] = "3"
    b = mp.Job("plain", 1, mp.trainer_cmd(False, common + ["--shard-base", "1"]), env, workdir=wd)
    rc = a.wait(180)
    b.wait(60)
    check(rc == 0 and b.rc == 0, "jobs failed:\n%s\n%s" % (a.describe(), b.describe()))
    sums = re.findall(r"final loss \S+ checksum (\S+)", a.out)
    want = mp.final_line(b)[1]
    check(sums == [want, want], "checksums %s, the plain job's %s:\n%s" % (sums, want, a.describe()))
    lines = re.findall(r"^dedrun: run %s \| (\d+) peers? \| round \d+ \| [\d.]+ m?s \| "
                       r"[\d.]+ MB/s \| (\d+) contributors?" % run, a.err, re.M)
    check(("3", "3") in lines, "no progress line with 3 peers and 3 contributors: %s" % lines)
    notes = ["3 jobs, checksum %s" % want]
    stubborn = ("import signal, sys, time\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "print('ready', flush=True)\n"
                "time.sleep(600)\n")
    for sig in (signal.SIGTERM, signal.SIGKILL):
        marker = "dedrun-stubborn-%d-%d" % (sig, port)
        p = Proc("stubborn%d" % sig, dedrun_cmd("--standalone", "--no-progress", "-n", "2",
                                                "--listen", "127.0.0.1:%d" % port,
                                                "/usr/bin/python3", "-c", stubborn, marker),
                 base_env(), wd)
        deadline = time.time() + 30
        while p.out.count("ready") < 2 and time.time() < deadline:
            time.sleep(0.05)
        check(p.out.count("ready") == 2 and len(procs_with(marker)) >= 2,
              "the two processes did not start:\n" + p.describe())
        t0 = time.time()
        p.proc.send_signal(sig)
        rc = p.wait(30)
        left = wait_gone(marker, 20)
        took = time.time() - t0
        if left:
            subprocess.run(["pkill", "-9", "-f", marker])
        check(not left, "after %s to dedrun, processes left: %s\n%s" % (sig.name, left, p.describe()))
        if sig == signal.SIGTERM:
            check("still running 10 s after the signal: killing it" in p.err and 9 < took < 20,
                  "not killed after the grace (%.1f s):\n%s" % (took, p.describe()))
        else:
            check(took < 5, "children outlived a SIGKILLed dedrun for %.1f s" % took)
        notes.append("%s to dedrun: children ignoring SIGTERM gone in %.1f s" % (sig.name, took))
    print("  " + "; ".join(notes))


@test
def standalone_errors():
    """Error handling on dedmpi's own MPI, from a C program built with mpicc:
    an unsupported call answers through the handler of the communicator it
    was given (MPI_ERRORS_RETURN on a duplicate of the world, while the
    world's stays fatal; a user handler is called with the communicator
    and the code); an unsupported file call returns its error (files'
    default handler is MPI_ERRORS_RETURN); MPI-1 calls removed in MPI-3 but
    still exported by libmpi.so.40 work (MPI_Address, MPI_Errhandler_set,
    MPI_Type_extent, MPI_Type_ub). A fatal error's line names the MPI
    function the program called, for calls whose checks are shared with
    others (a helper's name, or the other call's, is a failure)."""
    wd = tempfile.mkdtemp(prefix="dedrun-err-")
    src, exe = os.path.join(wd, "errs.c"), os.path.join(wd, "errs")
    with open(src, "w") as f:
        f.write(r"""
#define OMPI_OMIT_MPI1_COMPAT_DECLS 0
#include <mpi.h>
#include <stdio.h>
#include <string.h>
static MPI_Comm seen;
static int seen_code, calls;
static void handler(MPI_Comm *c, int *code, ...) { seen = *c; seen_code = *code; calls++; }
/* One wrong call |name| under MPI_COMM_WORLD's fatal handler. */
static int fatal(const char *name) {
  double x = 1, y;
  if (!strcmp(name, "MPI_Allreduce")) {
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_NULL);
  } else if (!strcmp(name, "MPI_Reduce")) {
    MPI_Reduce(&x, &y, 1, MPI_DOUBLE, MPI_OP_NULL, 0, MPI_COMM_WORLD);
  } else if (!strcmp(name, "MPI_Iallreduce")) {
    MPI_Request rq;
    MPI_Iallreduce(&x, &y, -1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq);
  } else if (!strcmp(name, "MPI_Send")) {
    MPI_Send(&x, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD);
  } else if (!strcmp(name, "MPI_Type_extent")) {
    MPI_Aint ext;
    MPI_Type_extent(MPI_DATATYPE_NULL, &ext);
  } else if (!strcmp(name, "MPI_Errhandler_set")) {
    MPI_Errhandler_set(MPI_COMM_WORLD, MPI_ERRHANDLER_NULL);
  } else if (!strcmp(name, "MPI_Comm_split_type")) {
    MPI_Comm c;
    MPI_Comm_split_type(MPI_COMM_NULL, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &c);
  } else if (!strcmp(name, "MPI_Get_elements")) {
    MPI_Status st;
    int n;
    memset(&st, 0, sizeof st);
    MPI_Get_elements(&st, MPI_DATATYPE_NULL, &n);
  }
  printf("went on\n");
  return 0;
}
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  if (argc > 1) return fatal(argv[1]);
  MPI_Comm dup, inter;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  int rc = MPI_Comm_spawn("x", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, dup, &inter, MPI_ERRCODES_IGNORE);
  printf("spawn on dup: %d\n", rc);
  MPI_Errhandler eh;
  MPI_Comm_create_errhandler(handler, &eh);
  MPI_Errhandler_set(dup, eh);
  rc = MPI_Comm_spawn("x", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, dup, &inter, MPI_ERRCODES_IGNORE);
  printf("user handler: rc %d calls %d code %d on dup %d\n", rc, calls, seen_code, seen == dup);
  MPI_File fh;
  rc = MPI_File_open(MPI_COMM_WORLD, "/tmp/x", MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
  printf("file open: %d\n", rc);
  int x[2];
  MPI_Aint a0, a1;
  rc = MPI_Address(&x[0], &a0) | MPI_Address(&x[1], &a1);
  printf("address: rc %d diff %ld\n", rc, (long)(a1 - a0));
  MPI_Aint ext = 0, ub = 0;
  rc = MPI_Type_extent(MPI_DOUBLE, &ext) | MPI_Type_ub(MPI_DOUBLE, &ub);
  printf("extent: rc %d %ld %ld\n", rc, (long)ext, (long)ub);
  fflush(stdout);
  MPI_Comm_spawn("x", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE);
  printf("went on\n");
  MPI_Finalize();
  return 0;
}
""")
    r = subprocess.run(["mpicc", "-Wall", "-Werror", "-o", exe, src], capture_output=True, text=True)
    check(r.returncode == 0, "mpicc failed: %s" % r.stderr)
    r = run_dedrun("--standalone", "--no-progress", exe)
    out = r.stdout
    for want in ("spawn on dup: 52", "user handler: rc 52 calls 1 code 52 on dup 1",
                 "file open: 52", "address: rc 0 diff 4", "extent: rc 0 8 8"):
        check(want + "\n" in out, "%r missing (rc %d):\n%s%s" % (want, r.returncode, out, r.stderr))
    check(r.returncode != 0 and "went on" not in out and "MPI_ERRORS_ARE_FATAL" in r.stderr and
          "MPI_Comm_spawn is not supported" in r.stderr,
          "the world's fatal handler did not end it: rc %d\n%s%s" % (r.returncode, out, r.stderr))
    # Each call's checks are shared: with a helper (copy_in, send_self), or
    # with another call (MPI_Allreduce's, MPI_Comm_set_errhandler's, ...).
    fatal = {"MPI_Allreduce": "COMM", "MPI_Reduce": "OP", "MPI_Iallreduce": "COUNT",
             "MPI_Send": "RANK", "MPI_Type_extent": "TYPE", "MPI_Errhandler_set": "ARG",
             "MPI_Comm_split_type": "COMM", "MPI_Get_elements": "TYPE"}
    for name, err in fatal.items():
        r = run_dedrun("--standalone", "--no-progress", exe, name)
        want = "standalone MPI: %s: MPI_ERR_%s: " % (name, err)
        check(r.returncode != 0 and "went on" not in r.stdout and want in r.stderr and
              "MPI_ERRORS_ARE_FATAL" in r.stderr,
              "%s: %r missing (rc %d):\n%s%s" % (name, want, r.returncode, r.stdout, r.stderr))
    print("  errors went to the communicator's handler (return, user, fatal on the world), "
          "file calls returned 52, MPI_Address, MPI_Errhandler_set and the MPI-1 extents work; "
          "%d fatal errors named the call made" % len(fatal))


@test
def standalone_unsupported():
    """A call dedmpi's own MPI does not implement (MPI_Cart_create) answers
    MPI_ERR_UNSUPPORTED_OPERATION through the error handler: under mpi4py
    (which sets MPI_ERRORS_RETURN) as an exception with that code and a log
    line naming the function, and the program goes on; with the default
    handler the error is fatal, as in any MPI. mpi4py's lowercase collectives
    (gather, scatter, alltoall: MPI_Gatherv and friends underneath) work."""
    script = ("from mpi4py import MPI\n"
              "c = MPI.COMM_WORLD\n"
              "try:\n"
              "    c.Create_cart([1])\n"
              "    print('no error')\n"
              "except MPI.Exception as e:\n"
              "    print('code', e.Get_error_code(), MPI.ERR_UNSUPPORTED_OPERATION)\n"
              "print('size', c.Get_size(), 'still fine')\n"
              "print('lower', c.gather(5, root=0), c.scatter([7], root=0), c.alltoall([9]),\n"
              "      c.allgather(3), c.reduce(4, root=0), c.bcast('b', root=0))\n")
    r = run_dedrun("--standalone", "--no-progress", "--log", "warn", "/usr/bin/python3", "-c", script)
    check(r.returncode == 0 and re.search(r"^code 52 52$", r.stdout, re.M) and
          "size 1 still fine" in r.stdout and "lower [5] 7 [9] [3] 4 b" in r.stdout,
          "mpi4py: rc %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
    check("MPI_Cart_create is not supported by dedmpi's own MPI library" in r.stderr,
          "no log line naming the function:\n" + r.stderr)
    fatal = ("from mpi4py import MPI\n"
             "MPI.COMM_WORLD.Set_errhandler(MPI.ERRORS_ARE_FATAL)\n"
             "MPI.COMM_WORLD.Create_cart([1])\n"
             "print('went on')\n")
    r = run_dedrun("--standalone", "--no-progress", "/usr/bin/python3", "-c", fatal)
    check(r.returncode != 0 and "went on" not in r.stdout and "MPI_ERRORS_ARE_FATAL" in r.stderr,
          "fatal handler: rc %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
    print("  MPI_Cart_create: error 52 under ERRORS_RETURN, logged; fatal under ERRORS_ARE_FATAL "
          "(exit %d)" % r.returncode)


@test
def standalone_cxx():
    """A C++ program built with Debian's mpicxx (which links libmpi_cxx.so.40,
    needing symbols of Open MPI's internals) loads and runs on dedmpi's own
    libraries, with every symbol bound at start (LD_BIND_NOW)."""
    wd = tempfile.mkdtemp(prefix="dedrun-cxx-")
    src, exe = os.path.join(wd, "app.cc"), os.path.join(wd, "app")
    with open(src, "w") as f:
        f.write("#include <mpi.h>\n#include <cstdio>\nint main(int argc, char **argv) {\n"
                "  MPI_Init(&argc, &argv);\n  int r, n;\n  MPI_Comm_rank(MPI_COMM_WORLD, &r);\n"
                "  MPI_Comm_size(MPI_COMM_WORLD, &n);\n"
                "  std::printf(\"c++ rank %d of %d\\n\", r, n);\n  MPI_Finalize();\n}\n")
    r = subprocess.run(["mpicxx", "-o", exe, src], capture_output=True, text=True)
    check(r.returncode == 0, "mpicxx failed: %s" % r.stderr)
    needed = subprocess.run(["readelf", "-d", exe], capture_output=True, text=True).stdout
    check("libmpi_cxx.so.40" in needed, "mpicxx no longer links libmpi_cxx.so.40:\n" + needed)
    r = run_dedrun("--standalone", "--no-progress", "-x", "LD_BIND_NOW=1", exe)
    check(r.returncode == 0 and "c++ rank 0 of 1" in r.stdout, "rc %d\n%s%s" %
          (r.returncode, r.stdout, r.stderr))
    print("  an mpicxx program (NEEDED libmpi_cxx.so.40) ran standalone with LD_BIND_NOW")


@test
def install():
    """`cmake --install` into a fresh prefix puts dedrun, libdedmpi.so,
    dedmpi's own libmpi.so.40 (in <libdir>/dedmpi, never beside Open MPI's),
    dedmpi.h and a relocatable pkg-config file in place; the installed
    dedrun finds its libraries and runs a trainer both ways; a program
    using dedmpi.h compiles with pkg-config's flags."""
    check(mp.ARGS.build_dir, "--build-dir not given")
    prefix = tempfile.mkdtemp(prefix="dedrun-install-")
    r = subprocess.run(["cmake", "--install", mp.ARGS.build_dir, "--prefix", prefix],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "cmake --install failed:\n%s%s" % (r.stdout, r.stderr))
    have = sorted(os.path.relpath(os.path.join(d, f), prefix) for d, _, fs in os.walk(prefix)
                  for f in fs)
    for pat in (r"^bin/dedrun$", r"^lib[^/]*(/[^/]+)?/libdedmpi\.so$", r"/dedmpi/libmpi\.so\.40$",
                r"/dedmpi/libmpi_cxx\.so\.40$", r"^include/dedmpi\.h$", r"/pkgconfig/dedmpi\.pc$"):
        check(any(re.search(pat, f) for f in have), "nothing installed matches %s: %s" % (pat, have))
    check(not any(re.search(r"(^|/)lib[^/]*/libmpi\.so", f) and "/dedmpi/" not in f for f in have),
          "a libmpi.so installed beside Open MPI's: %s" % have)
    exe = os.path.join(prefix, "bin", "dedrun")
    env = base_env()
    env.pop("DEDMPI_LIB", None)
    for mode in ([], ["--standalone"]):
        port = free_port()
        argv = [exe] + dedrun_cmd(*mode, "--no-progress", *swarm_flags(port, True, 1),
                                  *mp.trainer_cmd(False, ["--steps", "5"]))[1:]
        r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, cwd=prefix)
        check(r.returncode == 0 and "final loss" in r.stdout and "dedmpi[" in r.stderr,
              "installed dedrun %s: rc %d\n%s%s" % (mode, r.returncode, r.stdout[-500:], r.stderr[-1500:]))
    pc = [f for f in have if f.endswith("dedmpi.pc")][0]
    penv = dict(env, PKG_CONFIG_PATH=os.path.join(prefix, os.path.dirname(pc)))
    flags = subprocess.run(["pkg-config", "--cflags", "dedmpi"], capture_output=True, text=True,
                           env=penv).stdout.split()
    check(flags and os.path.realpath(flags[0][2:]) == os.path.realpath(os.path.join(prefix, "include")),
          "pkg-config --cflags: %s" % flags)
    src = os.path.join(prefix, "uses_header.c")
    with open(src, "w") as f:
        f.write("#include <dedmpi.h>\nint main(void) { dedmpi_round_info i; (void)i; return 0; }\n")
    r = subprocess.run(["mpicc", "-fsyntax-only"] + flags + [src], capture_output=True, text=True)
    check(r.returncode == 0, "dedmpi.h with pkg-config's flags: %s" % r.stderr)
    print("  %d files installed under a fresh prefix; installed dedrun ran the trainer with mpirun "
          "and standalone; pkg-config flags compile dedmpi.h" % len(have))


def http_get(port, path, data=None, timeout=5):
    """(status, body) of one request to 127.0.0.1:|port|; |data| is sent raw."""
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data or ("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    m = re.match(rb"HTTP/1\.1 (\d+)", head)
    return (int(m.group(1)) if m else None), body.decode("utf-8", "replace")


def status_json(port):
    import json
    code, body = http_get(port, "/status.json")
    check(code == 200, "/status.json answered %s: %s" % (code, body[:300]))
    return json.loads(body)


def wait_status(port, pred, timeout, what):
    deadline, last = time.time() + timeout, None
    while time.time() < deadline:
        last = status_json(port)
        if pred(last):
            return last
        time.sleep(0.3)
    raise Fail("the status never showed %s; last:\n%s" % (what, last))


def chromium_peer_count(url):
    """The peer count the page shows once Chromium has run its script."""
    exe = next((e for e in ("chromium", "chromium-browser") if subprocess.run(
        ["sh", "-c", "command -v " + e], capture_output=True).returncode == 0), None)
    check(exe, "chromium is not installed (scripts/setup.sh installs it)")
    with tempfile.TemporaryDirectory(prefix="dedrun-chromium-") as prof:
        r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu",
                            "--disable-dev-shm-usage", "--user-data-dir=" + prof,
                            "--virtual-time-budget=8000", "--dump-dom", url],
                           capture_output=True, text=True, timeout=120)
    m = re.search(r'id="peer-count">([^<]*)<', r.stdout)
    check(m, "no peer count in the page Chromium rendered (rc %d):\n%s\n%s" %
          (r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return m.group(1), r.stdout


@test
def backbone():
    """A backbone (dedrun --backbone) with two trainer jobs that bootstrap
    through it, one under dedrun and one under plain mpirun. While they
    train, its status (JSON) counts 2 peers training, lists both with the
    rounds they complete and itself as the backbone, and gives a rate of
    rounds per minute; `dedrun --status` prints the same; the HTML page,
    rendered by headless Chromium, shows 2 peers; malformed requests get
    400, 404, 405 and 431 and the server goes on. After the jobs end, the
    events say both joined and left, and SIGTERM ends the backbone with
    exit 0."""
    port, http = free_port(), free_port()
    wd = tempfile.mkdtemp(prefix="dedrun-")
    run = "mp-%d" % port
    bb = Proc("backbone", [mp.ARGS.dedrun, "--backbone", "--run", run, "--listen",
                           "127.0.0.1:%d" % port, "--http", "127.0.0.1:%d" % http], base_env(), wd)
    deadline = time.time() + 20
    while "status at http://" not in bb.err and time.time() < deadline:
        check(bb.proc.poll() is None, "the backbone ended:\n" + bb.describe())
        time.sleep(0.1)
    check("status at http://127.0.0.1:%d/" % http in bb.err, "no status URL:\n" + bb.describe())
    # Long enough for a rate of rounds (samples 5 s apart while rounds go
    # on), then lingering connected while the checks run, whatever their pace.
    common = ["--steps", "800", "--buckets", "2", "--log-every", "100", "--shards", "2",
              "--step-ms", "20", "--linger-ms", "10000"]
    flags = ["--run", run, "--join", "127.0.0.1:%d" % port, "--listen", "127.0.0.1:0",
             "--min-peers", "2"]
    a = Proc("dedrun", dedrun_cmd(*flags, *mp.trainer_cmd(
        False, common + ["--shard-base", "0", "--out", "params-a.bin"])), base_env(), wd)
    env = swarm_env(port, False, 2)
    env["DEDMPI_MIN_PEERS"] = "2"
    env["DEDMPI_BANDWIDTH"] = "40/80"
    b = mp.Job("plain", 1, mp.trainer_cmd(False, common + ["--shard-base", "1", "--out",
                                                            "params-b.bin"]), env, workdir=wd)
    try:
        st = wait_status(http, lambda s: s["peer_count"] == 2 and s["round"] is not None and
                         sum(1 for p in s["peers"] if p["round"] is not None) == 2, 60,
                         "2 peers training, both with a completed round")
        roles = sorted(p["role"] for p in st["peers"])
        check(roles == ["backbone", "node", "node"] and st["run"] == run and
              [p["self"] for p in st["peers"] if p["role"] == "backbone"] == [True],
              "peers listed wrong: %s" % st["peers"])
        st = wait_status(http, lambda s: (s["rounds_per_min"] or 0) > 0, 30, "a rate of rounds")
        rpm = st["rounds_per_min"]
        # Each peer's published rates reach the status: the plain job
        # publishes 40/80 Mbit/s (DEDMPI_BANDWIDTH; on loopback, rounds of
        # a few ms are too short for the meters, which sim.plan and the WAN
        # lab check).
        # (The other job publishes what its meters measured, which may be
        # more or less than 40/80.)
        st = wait_status(http, lambda s: (40.0, 80.0) in [(p["up_mbit"], p["down_mbit"])
                                                          for p in s["peers"]
                                                          if p["role"] == "node"], 30,
                         "the plain job's published rates")
        rates = ["%.0f/%.0f" % (p["up_mbit"], p["down_mbit"]) for p in st["peers"]
                 if p["role"] == "node"]
        r = cli("--status", "127.0.0.1:%d" % http)
        check(r.returncode == 0 and re.search(r"run '%s': 2 peers training, backbone \w+; round "
                                              r"\d+, [\d.]+ rounds/min" % run, r.stdout),
              "dedrun --status: %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
        rows = re.findall(r"^  ([0-9a-f]{8})  (node|backbone) +(connected|\(this\)) +\S+ +"
                          r"([\d.]+) +([\d.]+) +(\d+|-) ", r.stdout, re.M)
        check(sorted(x[1] for x in rows) == ["backbone", "node", "node"] and
              all(x[5] != "-" for x in rows if x[1] == "node") and
              any(x[3:5] == ("40.0", "80.0") for x in rows) and
              len(re.findall(r"^  \d\d:\d\d:\d\d UTC  [0-9a-f]{8} joined$", r.stdout, re.M)) >= 2,
              "dedrun --status lacks the peers' rows or the joins:\n" + r.stdout)
        count, dom = chromium_peer_count("http://127.0.0.1:%d/" % http)
        check(count == "2", "the page shows %r peers:\n%s" % (count, dom[-1500:]))
        for data, want in ((b"\x16\x03\x01garbage\r\n\r\n", 400),
                           (b"GET /nope HTTP/1.1\r\n\r\n", 404),
                           (b"POST /status.json HTTP/1.1\r\n\r\n", 405),
                           (b"GET / HTTP/1.1\r\nX: " + b"a" * 5000, 431)):
            code, _ = http_get(http, None, data)
            check(code == want, "%r answered %s, not %d" % (data[:30], code, want))
        check(status_json(http)["peer_count"] == 2, "the server broke after bad requests")
    finally:
        rc = a.wait(180)
        b.wait(60)
    check(rc == 0 and b.rc == 0, "jobs failed:\n%s\n%s" % (a.describe(), b.describe()))
    # dedrun's progress line counts the peers that train, as the status
    # does: not the backbone it is also connected to.
    peers = set(re.findall(r"^dedrun: run %s \| (\d+) peers? \| round" % run, a.err, re.M))
    check(peers == {"2"}, "dedrun's progress line counted %s peers:\n%s" % (peers, a.describe()))
    st = wait_status(http, lambda s: sum(e["event"] == "left" for e in s["events"]) >= 2, 30,
                     "both jobs leaving")
    joined = sum(e["event"] == "joined" for e in st["events"])
    check(joined >= 2 and st["peer_count"] == 0, "events or count wrong after the run: %s" % st)
    bb.proc.send_signal(signal.SIGTERM)
    check(bb.wait(30) == 0 and "leaving" in bb.err, "the backbone did not end cleanly:\n" +
          bb.describe())
    print("  2 peers on /status.json, the text status and the page (Chromium), and on dedrun's "
          "progress line; published up/down Mbit/s %s; %.0f rounds/min; %d joins and %d leaves "
          "seen; bad requests answered 400/404/405/431" %
          (", ".join(rates), rpm, joined, sum(e["event"] == "left" for e in st["events"])))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--bin")
    ap.add_argument("--examples", required=True)
    ap.add_argument("--dedrun", required=True)
    ap.add_argument("--preload-extra", default="")
    ap.add_argument("--build-dir", help="the build tree, for the install test")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("tests", nargs="*")
    if "--list" in sys.argv:
        print("\n".join(TESTS))
        return 0
    mp.ARGS = ap.parse_args()
    return mp.run_tests(TESTS, mp.ARGS.tests)


if __name__ == "__main__":
    sys.exit(main())
