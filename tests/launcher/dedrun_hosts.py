#!/usr/bin/python3
"""dedrun --host / --hostfile: one job spread over two hosts joins a swarm.

The hosts are network namespaces of the WAN lab (tests/wan/wanlab.py):
three hosts, 10.91.0.1-3, on 100 Mbit/s links 1 ms apart. mpirun reaches
the other hosts through `--mca plm_rsh_agent` (as OMPI_MCA_plm_rsh_agent in
dedrun's environment) set to an ssh stand-in that runs the command in that
host's namespace, with a hostname of its own and, as ssh would, a fresh
environment: what a remote rank knows came through mpirun (-x), not by
inheritance, so the test sees what a real second machine would get.

dedrun runs in host 1 (10.91.0.1). Checked:
  1. `--host 10.91.0.2,10.91.0.1` (no -n: a rank per slot): rank 0 runs
     here although this host is listed second (Open MPI 4.1 puts rank 0 on
     mpirun's host when it is listed), rank 1 in host 2; rank 1 has the
     library preloaded, dedrun's DEDMPI_* settings and the user's -x, and
     not a variable of dedrun's environment that nothing exported;
  2. `--hostfile` naming hosts 2 and 3 only: dedrun says rank 0 runs on
     10.91.0.2, warns that `--listen 10.91.0.1:PORT` is this machine, and
     rank 0 does run in host 2;
  3. a 2-rank trainer job under `dedrun --host 10.91.0.1,10.91.0.2
     --listen 0.0.0.0:PORT` (rank 1 in host 2, shown by a wrapper) and an
     ordinary 1-rank job (mpirun with the library preloaded) in host 3
     joining it at 10.91.0.1:PORT train one model: both exit 0 with
     bit-identical parameters, and dedrun's progress lines count 2 peers
     and 2 contributors.

Skips (exit 77) where the lab cannot be built (not root, no /dev/net/tun).

    dedrun_hosts.py --dedrun D --lib L --examples E [--relay R] [--preload-extra P]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "wan"))
import wanlab  # noqa: E402

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_btl_vader_single_copy_mechanism": "none", "ASAN_OPTIONS": "detect_leaks=0"}
PORT = 7700
SHOW = ('echo "rank=$OMPI_COMM_WORLD_RANK ns=$(ip netns identify) host=$(hostname) '
        'run=$DEDMPI_RUN a=$DEDRUN_A leak=$DEDRUN_LEAK pre=$LD_PRELOAD"')
SHOW_RE = re.compile(r"^rank=(\d+) ns=(\S*) host=(\S*) run=(\S*) a=(.*) leak=(.*) pre=(.*)$", re.M)
ARGS = None


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


# An ssh stand-in for mpirun: `agent [ssh options] 10.91.0.<i> COMMAND...`
# runs COMMAND in host i's namespace, in a UTS namespace named h<i> (Open
# MPI daemons that share a hostname race on one session folder), with the
# environment ssh would give it (none of mpirun's).
AGENT = r"""#!/bin/sh
while [ "${1#-}" != "$1" ]; do shift; done
host=$1; shift
case "$host" in
  10.91.0.*) i=${host##*.} ;;
  *) echo "agent: unknown host $host" >&2; exit 255 ;;
esac
exec env -i PATH="$PATH" HOME="$HOME" ip netns exec "%(prefix)s-h$i" \
  unshare --uts sh -c 'hostname "$0" && exec sh -c "$*"' "h$i" "$@"
"""


def topology():
    hosts = [wanlab.HostSpec(name="h%d" % i, up_mbit=100, down_mbit=100, delay_ms=1, loss_pct=0)
             for i in (1, 2, 3)]
    return wanlab.Topology("hosts", hosts, "3 hosts, 100/100 Mbit/s, 1 ms")


class Run:
    """A process in a lab host, output to files (nothing blocks on a pipe)."""

    def __init__(self, lab, host, name, argv, env, wd):
        self.name, self.cmd = name, argv
        self.out_path = os.path.join(wd, name + ".out")
        self.err_path = os.path.join(wd, name + ".err")
        self.t0 = time.time()
        self.proc = lab.popen(host, argv, env=env, stdout=open(self.out_path, "w"),
                              stderr=open(self.err_path, "w"), stdin=subprocess.DEVNULL, cwd=wd)
        self.rc = None

    def wait(self, timeout):
        try:
            self.rc = self.proc.wait(timeout=max(0.1, timeout))
        except subprocess.TimeoutExpired:
            wanlab.kill_group(self.proc)
            self.rc = "timeout"
        self.seconds = time.time() - self.t0
        return self.rc

    @property
    def out(self):
        return open(self.out_path).read()

    @property
    def err(self):
        return open(self.err_path).read()

    def describe(self):
        return "%s rc=%s (%.1fs)\n  cmd: %s\n  stdout:\n%s\n  stderr:\n%s" % (
            self.name, self.rc, getattr(self, "seconds", 0), " ".join(self.cmd),
            self.out[-3000:], self.err[-4000:])


def dedrun(*args):
    """dedrun with the sanitizer runtimes, if any, preloaded into the ranks
    (and their options exported: the remote rank gets nothing else)."""
    pre = ["-x", "LD_PRELOAD=" + ARGS.preload_extra] if ARGS.preload_extra else []
    return [ARGS.dedrun] + pre + ["-x", "ASAN_OPTIONS"] + list(args)


def shown(run):
    """rank -> (netns, hostname, DEDMPI_RUN, DEDRUN_A, DEDRUN_LEAK, LD_PRELOAD)."""
    return {int(m[0]): m[1:] for m in SHOW_RE.findall(run.out)}


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dedrun", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--examples", required=True)
    ap.add_argument("--relay")
    ap.add_argument("--preload-extra", default="")
    ARGS = ap.parse_args()
    for k in ("dedrun", "lib", "examples", "relay"):
        if getattr(ARGS, k):
            setattr(ARGS, k, os.path.abspath(getattr(ARGS, k)))
    why = wanlab.unavailable()
    if why:
        print("launcher.hosts: skipped: %s" % why)
        return 77
    t0 = time.time()
    wd = tempfile.mkdtemp(prefix="dedrun-hosts-")
    try:
        with wanlab.Lab(topology(), relay=ARGS.relay) as lab:
            print(lab.describe(), flush=True)
            run_checks(lab, wd)
    except Fail as e:
        print("FAIL launcher.hosts (%.1fs): %s\nlogs: %s" % (time.time() - t0, e, wd))
        return 1
    print("PASS launcher.hosts (%.1fs)" % (time.time() - t0))
    return 0


def run_checks(lab, wd):
    agent = os.path.join(wd, "agent")
    with open(agent, "w") as f:
        f.write(AGENT % {"prefix": lab.prefix})
    os.chmod(agent, 0o755)
    env = dict(MPI_ENV)
    # mpirun's options for the lab, from dedrun's environment (dedrun passes
    # no mpirun option but the job's own): the agent, and TCP on the lab's
    # subnet for the job's own traffic and for mpirun's daemons.
    mca = lab.mpirun_args()
    for k in range(0, len(mca), 3):
        env["OMPI_MCA_" + mca[k + 1]] = mca[k + 2]
    env["OMPI_MCA_plm_rsh_agent"] = agent
    env["DEDRUN_LEAK"] = "inherited"
    me, h2, h3 = lab.ip(1), lab.ip(2), lab.ip(3)
    lib = os.path.realpath(ARGS.lib)

    # 1. --host, this host listed second, no -n.
    t = time.time()
    r = Run(lab, 1, "show-host", dedrun("--no-progress", "--run", "hosts-show", "--host",
                                        "%s,%s" % (h2, me), "-x", "DEDRUN_A=1",
                                        "/bin/sh", "-c", SHOW), env, wd)
    r.wait(60)
    ranks = shown(r)
    check(r.rc == 0 and sorted(ranks) == [0, 1], "--host: two ranks expected:\n" + r.describe())
    check(ranks[0][0] == lab.ns(1) and ranks[1][0] == lab.ns(2) and ranks[1][1] == "h2",
          "--host %s,%s: rank 0 should run here (host 1), rank 1 in host 2: %s\n%s" %
          (h2, me, ranks, r.describe()))
    for rank, (_, _, run, a, leak, pre) in ranks.items():
        check(run == "hosts-show" and a == "1" and lib in pre.split(),
              "rank %d lacks the library, DEDMPI_RUN or -x DEDRUN_A: %s" % (rank, ranks[rank]))
    check(ranks[1][4] == "", "rank 1 inherited dedrun's environment (the agent leaks it, so "
          "the test proves nothing about -x): %s" % (ranks[1],))
    check("rank 0, the job's swarm peer, runs on" not in r.err, "dedrun thought rank 0 is "
          "elsewhere:\n" + r.err)
    print("  --host %s,%s: rank 0 in %s, rank 1 in %s with the library, DEDMPI_RUN and -x; "
          "(%.1fs)" % (h2, me, ranks[0][0], ranks[1][0], time.time() - t), flush=True)

    # 2. --hostfile without this host: rank 0 on its first host.
    t = time.time()
    hostfile = os.path.join(wd, "hostfile")
    with open(hostfile, "w") as f:
        f.write("# two hosts, not this one\n%s slots=1\n%s  slots = 1 max_slots=2\n" % (h2, h3))
    r = Run(lab, 1, "show-hostfile", dedrun("--run", "hosts-show", "--listen",
                                            "%s:%d" % (me, PORT), "--hostfile", hostfile,
                                            "/bin/sh", "-c", SHOW), env, wd)
    r.wait(60)
    ranks = shown(r)
    check(r.rc == 0 and sorted(ranks) == [0, 1] and ranks[0][0] == lab.ns(2) and
          ranks[1][0] == lab.ns(3), "--hostfile (hosts 2, 3): rank 0 in host 2, rank 1 in "
          "host 3 expected: %s\n%s" % (ranks, r.describe()))
    check(re.search(r"rank 0, the job's swarm peer, runs on %s .*no progress line" %
                    re.escape(h2), r.err) and
          "warning: --listen %s:%d is this machine, but rank 0 listens on %s" % (me, PORT, h2)
          in r.err, "dedrun did not say where rank 0 runs, or did not warn about --listen:\n" +
          r.err)
    print("  --hostfile (hosts 2, 3): rank 0 in %s, rank 1 in %s, and dedrun said so (%.1fs)" %
          (ranks[0][0], ranks[1][0], time.time() - t), flush=True)

    # 3. A 2-rank trainer over hosts 1 and 2, and a 1-rank job in host 3.
    t = time.time()
    common = ["--steps", "30", "--buckets", "2", "--log-every", "10", "--shards", "3"]
    trainer = os.path.join(ARGS.examples, "trainer")
    wrap = ["/bin/sh", "-c", SHOW + '; exec "$@"', "sh"]
    run = "hosts-%s" % lab.prefix
    a = Run(lab, 1, "dedrun", dedrun("-n", "2", "--host", "%s,%s" % (me, h2), "--run", run,
                                     "--listen", "0.0.0.0:%d" % PORT, "--min-peers", "2",
                                     "--log", "info", *wrap, trainer, *common, "--shard-base",
                                     "0", "--out", "params-a.bin"), env, wd)
    plain = {"LD_PRELOAD": " ".join(filter(None, [ARGS.preload_extra, lib])),
             "DEDMPI_RUN": run, "DEDMPI_JOIN": "%s:%d" % (me, PORT),
             "DEDMPI_LISTEN": "%s:%d" % (h3, PORT), "DEDMPI_MIN_PEERS": "2", "DEDMPI_LOG": "info",
             "ASAN_OPTIONS": "detect_leaks=0"}
    argv = ["mpirun", "-np", "1", "--bind-to", "none"]
    for k, v in plain.items():
        argv += ["-x", "%s=%s" % (k, v)]
    b = Run(lab, 3, "plain", argv + [trainer] + common + ["--shard-base", "2", "--out",
                                                         "params-b.bin"], MPI_ENV, wd)
    deadline = time.time() + 120
    a.wait(deadline - time.time())
    b.wait(deadline - time.time())
    check(a.rc == 0 and b.rc == 0, "jobs failed:\n%s\n%s" % (a.describe(), b.describe()))
    ranks = shown(a)
    check(sorted(ranks) == [0, 1] and ranks[0][0] == lab.ns(1) and ranks[1][0] == lab.ns(2),
          "the trainer's ranks should run in hosts 1 and 2: %s\n%s" % (ranks, a.describe()))
    pa = open(os.path.join(wd, "params-a.bin"), "rb").read()
    pb = open(os.path.join(wd, "params-b.bin"), "rb").read()
    ca = re.findall(r"final loss \S+ checksum (\S+)", a.out)
    cb = re.findall(r"final loss \S+ checksum (\S+)", b.out)
    check(pa and pa == pb and ca and ca == cb, "parameters differ (checksums %s, %s):\n%s\n%s" %
          (ca, cb, a.describe(), b.describe()))
    lines = re.findall(r"^dedrun: run %s \| (\d+) peers? \| round (\d+) \| [\d.]+ m?s \| [\d.]+ "
                       r"MB/s \| (\d+) contributors?" % re.escape(run), a.err, re.M)
    check(any(p == "2" and c == "2" for p, _, c in lines),
          "no progress line with 2 peers and 2 contributors: %s\n%s" % (lines, a.describe()))
    print("  trainer: ranks in %s and %s, a 1-rank job in %s: identical parameters (%d bytes, "
          "checksum %s), %d progress lines, the last %s (%.1fs: dedrun %.1fs, plain %.1fs)" %
          (ranks[0][0], ranks[1][0], lab.ns(3), len(pa), ca[-1], len(lines), lines[-1],
           time.time() - t, a.seconds, b.seconds), flush=True)


if __name__ == "__main__":
    sys.exit(main())
