#!/usr/bin/python3
"""Loopback benchmark: dedmpi side by side with Open MPI, from one run.

1. Swarm all-reduce of 64 MiB (float32) among 4 single-rank jobs with
   libdedmpi.so preloaded, against Open MPI's own MPI_Allreduce in one 4-rank
   job over TCP (--mca btl tcp,self): time ratio dedmpi / Open MPI.
2. Pass-through overhead of the shim on an 8-byte MPI_Allreduce latency loop
   (2 ranks, shared memory as Open MPI chooses): time ratio with / without the
   shim. Target <= 1.02.

Each measurement alternates the two sides several times and keeps each
side's median, so that a noisy neighbour hurts both alike. Prints ratios;
the times behind them are printed too, for context only.

Environment: BUILD_DIR (default ./build), BENCH_MIB (default 64),
BENCH_TRIALS (default 3).
"""
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(os.environ.get("BUILD_DIR", os.path.join(ROOT, "build")))
LIB = os.path.join(BUILD, "shim", "libdedmpi.so")
BENCH = os.path.join(BUILD, "bench", "ar_bench")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


sys.path.insert(0, os.path.join(ROOT, "tests", "mp"))
from ports import free_port  # noqa: E402


def mpirun(np, argv, xenv=None, extra=(), bind="none"):
    # Jobs that share the 2 cores are left unbound; the latency loop's two
    # busy-polling ranks are pinned one per core, or they migrate and the
    # timing swings by an order of magnitude.
    cmd = ["mpirun", "-np", str(np), "--oversubscribe", "--bind-to", bind] + list(extra)
    for k, v in (xenv or {}).items():
        cmd += ["-x", "%s=%s" % (k, v)]
    return subprocess.Popen(cmd + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV,
                            text=True)


def finish(procs, timeout=600, errs=None):
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        if p.returncode != 0:
            sys.exit("benchmark run failed:\n%s\n%s" % (out, err))
        outs.append(out)
        if errs is not None:
            errs.append(err)
    return outs


def reps_of(out):
    return [float(x) for x in re.findall(r"^rep \d+ (\S+)", out, re.M)]


def swarm_allreduce(count, reps, lib=LIB, jobs=4, xenv=None, errs=None):
    """Rep times of a swarm of |jobs| single-rank jobs with |lib| preloaded
    (and |xenv|); their stderr appended to |errs| if given."""
    port = free_port()
    procs = []
    for i in range(jobs):
        env = {"LD_PRELOAD": lib, "DEDMPI_RUN": "bench-%d" % port, "DEDMPI_MIN_PEERS": str(jobs),
               "DEDMPI_JOIN": "127.0.0.1:%d" % port,
               "DEDMPI_LISTEN": "127.0.0.1:%d" % port if i == 0 else "127.0.0.1:0"}
        env.update(xenv or {})
        procs.append(mpirun(1, [BENCH, "--count", str(count), "--reps", str(reps), "--warmup", "2"],
                            env))
    outs = finish(procs, errs=errs)
    per_job = [reps_of(o) for o in outs]
    # Rep i of every job is the same swarm round: it took as long as its slowest member saw.
    return [max(js[i] for js in per_job) for i in range(reps)]


def ompi_allreduce(count, reps):
    out = finish([mpirun(4, [BENCH, "--count", str(count), "--reps", str(reps), "--warmup", "2"],
                         extra=["--mca", "btl", "tcp,self"])])[0]
    return reps_of(out)


def latency_loop(preload, iters):
    env = {"LD_PRELOAD": LIB} if preload else {}
    out = finish([mpirun(2, [BENCH, "--loop", str(iters)], env, bind="core")])[0]
    return float(re.search(r"^loop \d+ (\S+)", out, re.M).group(1))


def main():
    for path in (LIB, BENCH):
        if not os.path.exists(path):
            sys.exit("missing %s: build first (BUILD_DIR=%s)" % (path, BUILD))
    mib = int(os.environ.get("BENCH_MIB", "64"))
    trials = int(os.environ.get("BENCH_TRIALS", "3"))
    count = mib * 1024 * 1024 // 4
    swarm, ompi = [], []
    for _ in range(trials):
        swarm += swarm_allreduce(count, 5)
        ompi += ompi_allreduce(count, 5)
    s, o = statistics.median(swarm), statistics.median(ompi)
    print("loopback allreduce_mib=%d jobs=4 dedmpi_s=%.4f openmpi_tcp_s=%.4f ratio=%.2f" %
          (mib, s, o, s / o))
    # Launch-to-launch variation (where the kernel puts the two busy ranks)
    # is larger than the shim's cost, so: many launches, alternating, and
    # the median of the ratios of neighbouring pairs.
    iters = 1000000
    with_shim, without = [], []
    for _ in range(max(15, 4 * trials + 3)):
        without.append(latency_loop(False, iters))
        with_shim.append(latency_loop(True, iters))
    a, b = statistics.median(with_shim), statistics.median(without)
    ratio = statistics.median(x / y for x, y in zip(with_shim, without))
    print("passthrough allreduce_bytes=8 ranks=2 iters=%d pairs=%d with_shim_us=%.3f "
          "without_us=%.3f ratio=%.3f target<=1.02" %
          (iters, len(without), a / iters * 1e6, b / iters * 1e6, ratio))
    return 0


if __name__ == "__main__":
    sys.exit(main())
