#!/usr/bin/python3
"""dedmpi demo: three Open MPI jobs train one model together through a swarm.

Job A has 2 ranks, jobs B and C one each: four data shards in all. Each job
is an unmodified `mpirun ... examples/trainer` with libdedmpi.so preloaded;
their gradient all-reduces average across the three jobs over loopback TCP.
Then the same training runs as one ordinary 4-rank Open MPI job, for
comparison. Expected: the loss falls in every job, the three jobs end with
bit-identical parameters, and they match the single job within float
tolerance.
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mpirun(np, argv, env):
    cmd = ["mpirun", "-np", str(np), "--oversubscribe", "--bind-to", "none"]
    for k, v in env.items():
        cmd += ["-x", "%s=%s" % (k, v)]
    penv = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return subprocess.Popen(cmd + argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=penv, text=True, bufsize=1)


def follow(name, proc, lines, lock):
    for line in proc.stdout:
        line = line.rstrip()
        lines.append(line)
        if re.match(r"(step|final)", line) or "error" in line:
            with lock:
                print("  %-22s %s" % (name, line), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=150)
    args = ap.parse_args()
    lib = os.path.join(args.build, "shim", "libdedmpi.so")
    trainer = os.path.join(args.build, "examples", "trainer")
    port = free_port()
    common = ["--steps", str(args.steps), "--buckets", "4", "--shards", "4",
              "--log-every", str(max(1, args.steps // 6))]
    # A fresh run secret: every connection is authenticated and encrypted.
    swarm = {"LD_PRELOAD": lib, "DEDMPI_RUN": "demo", "DEDMPI_JOIN": "127.0.0.1:%d" % port,
             "DEDMPI_MIN_PEERS": "3", "DEDMPI_LOG": "warn", "DEDMPI_SWARM_KEY": os.urandom(32).hex()}
    print("dedmpi demo: 3 jobs (2 + 1 + 1 ranks), one swarm on 127.0.0.1:%d, "
          "sessions encrypted under a fresh DEDMPI_SWARM_KEY\n" % port)
    jobs = [("job A (2 ranks)", 2, "0", dict(swarm, DEDMPI_LISTEN="127.0.0.1:%d" % port)),
            ("job B (1 rank)", 1, "2", dict(swarm, DEDMPI_LISTEN="127.0.0.1:0")),
            ("job C (1 rank)", 1, "3", dict(swarm, DEDMPI_LISTEN="127.0.0.1:0"))]
    lock = threading.Lock()
    procs, outs, threads = [], [], []
    t0 = time.time()
    for name, np, base, env in jobs:
        p = mpirun(np, [trainer, "--shard-base", base] + common, env)
        lines = []
        t = threading.Thread(target=follow, args=(name, p, lines, lock))
        t.start()
        procs.append(p)
        outs.append(lines)
        threads.append(t)
    rcs = [p.wait() for p in procs]
    for t in threads:
        t.join()
    swarm_s = time.time() - t0
    finals = []
    for (name, _, _, _), lines, rc in zip(jobs, outs, rcs):
        m = [re.match(r"final loss (\S+) checksum (\S+)", l) for l in lines]
        m = [x for x in m if x]
        if rc != 0 or not m:
            print("\n%s failed (rc %d):\n%s" % (name, rc, "\n".join(lines[-30:])))
            return 1
        finals.append((float(m[-1].group(1)), m[-1].group(2)))
    print("\nthe same training as one 4-rank Open MPI job, without dedmpi:")
    p = mpirun(4, [trainer] + common, {})
    single = []
    follow("one job (4 ranks)", p, single, lock)
    if p.wait() != 0:
        print("\n".join(single[-30:]))
        return 1
    ref = [re.match(r"final loss (\S+) checksum (\S+)", l) for l in single]
    ref = [x for x in ref if x][-1]
    agree = len({c for _, c in finals}) == 1
    first_loss = [float(re.match(r"step \d+ loss (\S+)", l).group(1))
                  for l in outs[0] if re.match(r"step \d+ loss", l)]
    print("\nswarm of 3 jobs: %.1f s; loss %.4f -> %.4f" % (swarm_s, first_loss[0] if first_loss else
                                                           float("nan"), finals[0][0]))
    print("parameters of the 3 jobs bit-identical: %s (checksum %s)" %
          ("yes" if agree else "NO", finals[0][1]))
    print("final loss of one 4-rank job: %s (swarm: %.6f)" % (ref.group(1), finals[0][0]))
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
