#!/usr/bin/python3
"""WAN tier: node, client and aux peers training together on shaped links.

Topology `modes` (tests/wan/topologies/modes.toml): h1 a node on a fast
link, h2 a node on a slow one, h3 an aux peer (reduces, brings no
gradient) on a fast link, h4 a client (accepts no connections: it listens
on nothing and calls everyone). Each host runs examples/trainer as a
one-rank job with libdedmpi.so preloaded; the four jobs form a swarm.

Checked:
  - every job finishes every step, and all four print the same final
    parameter checksum (every round's result bit-identical everywhere, the
    aux peer's included);
  - the job logs show the client never listened and the plans never gave
    it a share (but for a plan of the client alone, which reduces nothing
    for anyone: a late client's own attempt);
  - the last plan with all four (a plan may leave out a peer that was
    late for its round: later rounds go on with whoever is there) is the
    LP's and follows the bandwidths: the slow node
    reduces at most half of the fast one's share, the aux peer at least
    half of it.
Each peer declares its lab link with DEDMPI_BANDWIDTH: rates measured from
round traffic alone see a link only when it is the bottleneck (a fast peer
among slow ones reads as slow), which would make the shares depend on the
run; measurement itself is checked by tests/sim/sim_plan.c.
(That the aux peer's gradient stays out of the mean is checked exactly by
tests/sim/sim_modes.c, whose aux peer holds garbage.)

Skips (exit 77) where the lab cannot be built (not root, no TUN).

    wan_modes.py --build BUILD_DIR [--steps N] [-v]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import wanlab  # noqa: E402

MODES = {1: "node", 2: "node", 3: "aux", 4: "client"}
PLAN_RE = re.compile(r"round (\d+): plan (\w+), codec \S+, est [\d.]+ s \(uncompressed\):(.*)")
SHARE_RE = re.compile(r" ([0-9a-f]{8})=([\d.]+)%\((\w+),")
ID_RE = re.compile(r"peer ([0-9a-f]{8}) starting")
CHECK_RE = re.compile(r"final loss \S+ checksum (0x[0-9a-f]+)")
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_btl_vader_single_copy_mechanism": "none"}


LOGDIR = [None]


def fail(msg):
    print("wan.modes FAILED: " + msg, flush=True)
    if LOGDIR[0]:
        print("logs: " + LOGDIR[0], flush=True)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="build directory")
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--relay", default=None)
    ap.add_argument("--preload-extra", default="", help="libraries to preload first (sanitizers)")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    if wanlab.unavailable():
        print("wan.modes: skipped: %s" % wanlab.unavailable())
        return 77
    lib = os.path.join(a.build, "shim", "libdedmpi.so")
    trainer = os.path.join(a.build, "examples", "trainer")
    for p in (lib, trainer):
        if not os.path.exists(p):
            fail("missing %s" % p)
    port = 7600
    with wanlab.Lab("modes", relay=a.relay) as lab:
        print(lab.describe(), flush=True)
        procs = {}
        logdir = LOGDIR[0] = tempfile.mkdtemp(prefix="wan-modes-")
        for i in lab.host_ids():
            env = {"LD_PRELOAD": " ".join(filter(None, [a.preload_extra, lib])),
                   "ASAN_OPTIONS": "detect_leaks=0", "DEDMPI_RUN": "wan-modes-%s" % lab.prefix,
                   "DEDMPI_MODE": MODES[i], "DEDMPI_MIN_PEERS": str(lab.n),
                   "DEDMPI_LOG": "info", "DEDMPI_ROUND_TIMEOUT": "60s",
                   # several connections per pair (lanes) on real sockets
                   "DEDMPI_STREAMS": "3"}
            h = lab.hosts[i - 1]
            env["DEDMPI_BANDWIDTH"] = "%g/%g" % (h.up_mbit, h.down_mbit)
            if MODES[i] != "client":
                env["DEDMPI_LISTEN"] = "%s:%d" % (lab.ip(i), port)
            if i != 1:
                env["DEDMPI_JOIN"] = "%s:%d" % (lab.ip(1), port)
            argv = ["mpirun", "-np", "1", "--bind-to", "none"]
            for k, v in env.items():
                argv += ["-x", "%s=%s" % (k, v)]
            # 2 MiB of float32 gradient (dim 1024 x hidden 512 dominates), one bucket.
            argv += [trainer, "--steps", str(a.steps), "--dim", "1024", "--hidden", "512",
                     "--buckets", "1", "--shard-base", str(i - 1), "--shards", str(lab.n),
                     "--log-every", "1", "--linger-ms", "3000"]
            out = open(os.path.join(logdir, "h%d.out" % i), "w")
            err = open(os.path.join(logdir, "h%d.err" % i), "w")
            procs[i] = lab.popen(i, argv, env=MPI_ENV, stdout=out, stderr=err,
                                 stdin=subprocess.DEVNULL, cwd=logdir)
        deadline = time.monotonic() + 240
        for i, p in procs.items():
            try:
                p.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for q in procs.values():
                    wanlab.kill_group(q)
                break
        outs = {i: open(os.path.join(logdir, "h%d.out" % i)).read() for i in procs}
        errs = {i: open(os.path.join(logdir, "h%d.err" % i)).read() for i in procs}
        if a.v:
            for i in procs:
                print("---- h%d (%s) rc %s\n%s%s" % (i, MODES[i], procs[i].returncode,
                                                   outs[i][-3000:], errs[i][-6000:]))

        def tail(i):
            return "h%d (%s) rc %s:\n%s\n%s" % (i, MODES[i], procs[i].returncode, outs[i][-1500:],
                                               errs[i][-3000:])

        for i, p in procs.items():
            if p.returncode != 0:
                fail("job on " + tail(i))
        sums = {i: CHECK_RE.search(outs[i]) for i in procs}
        for i, m in sums.items():
            if not m:
                fail("no final checksum from " + tail(i))
        if len({m.group(1) for m in sums.values()}) != 1:
            fail("final checksums differ: %s" % {i: m.group(1) for i, m in sums.items()})
        ids = {}
        for i in procs:
            m = ID_RE.search(errs[i])
            if not m:
                fail("no peer id in the log of " + tail(i))
            ids[m.group(1)] = i
        if "listening on port" in errs[4]:
            fail("the client listened:\n" + tail(4))
        # Every plan line any coordinator logged, in round order.
        plans = []
        for i in procs:
            if MODES[i] == "client" and PLAN_RE.search(errs[i]):
                fail("the client coordinated a round:\n" + tail(i))
            for m in PLAN_RE.finditer(errs[i]):
                shares = {ids.get(s): (float(p), mode) for s, p, mode in SHARE_RE.findall(m.group(3))}
                plans.append((int(m.group(1)), m.group(2), shares, m.group(0)))
        plans.sort(key=lambda x: x[0])
        if not plans:
            fail("no plan logged")
        # A member late for a round is left out of it (later rounds go on
        # with whoever is there): a plan may lack one. (A coordinator logs
        # its plan when it changes, so the lines are few.)
        partial = 0
        for rnd, kind, shares, line in plans:
            if None in shares:
                fail("a plan with a peer that is none of the four: " + line)
            if set(shares) != {1, 2, 3, 4}:
                partial += 1
                print("a late peer left out: " + line, flush=True)
            # A plan of one member reduces nothing for anyone: its member
            # keeps its own gradient, and the plan gives it the whole
            # vector whatever its mode (a late client's attempt alone).
            if (4 in shares and (shares[4][1] != "client" or
                                 (len(shares) > 1 and shares[4][0] != 0.0))) or \
                    (3 in shares and shares[3][1] != "aux"):
                fail("the client reduces, or the modes are wrong: " + line)
        full = [p for p in plans if set(p[2]) == {1, 2, 3, 4}]
        if not full:
            fail("no plan with all four peers")
        rnd, kind, shares, line = full[-1]
        print("last plan with all four (round %d): %s" % (rnd, line), flush=True)
        fast, slow, aux = shares[1][0], shares[2][0], shares[3][0]
        if kind != "lp" or not (slow <= 0.5 * fast and aux >= 0.5 * fast):
            fail("the last plan does not follow the bandwidths (fast %.1f%%, slow %.1f%%, aux %.1f%%): %s"
                 % (fast, slow, aux, line))
        print("wan.modes ok: %d steps, checksum %s on all four; last plan fast %.1f%% slow %.1f%% "
              "aux %.1f%% client %.1f%%; %d of %d plans left a late peer out"
              % (a.steps, sums[1].group(1), fast, slow, aux, shares[4][0], partial, len(plans)),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
