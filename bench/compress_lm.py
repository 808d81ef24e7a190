#!/usr/bin/python3
"""Compression and training quality on a real model, from one run (issue 23).

Trains examples/transformer.py (a small character-level GPT in PyTorch,
CPU, with mpi4py; the text is the licences Debian ships) in a swarm of 3
single-rank jobs with libdedmpi.so preloaded, once per codec
(DEDMPI_COMPRESS none, fp16, bf16, int8, topk, and topk with
DEDMPI_FEEDBACK=off), every swarm from the same seeds. Checks that each
swarm's jobs end bit-identical, prints the final held-out losses and each
one's ratio to the uncompressed swarm's as a table, and writes the
held-out loss curves side by side to a PNG (matplotlib).

Environment: BUILD_DIR (default ./build), LM_STEPS (default 400),
LM_PNG (default BUILD_DIR/bench/compress_lm.png).
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(os.environ.get("BUILD_DIR", os.path.join(ROOT, "build")))
LIB = os.path.join(BUILD, "shim", "libdedmpi.so")
TRAINER = os.path.join(ROOT, "examples", "transformer.py")
STEPS = int(os.environ.get("LM_STEPS", "400"))
PNG = os.environ.get("LM_PNG", os.path.join(BUILD, "bench", "compress_lm.png"))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
JOBS = 3
RUNS = [("none", {}), ("fp16", {}), ("bf16", {}), ("int8", {}), ("topk", {}),
        ("topk, no feedback", {"DEDMPI_COMPRESS": "topk", "DEDMPI_FEEDBACK": "off"})]


sys.path.insert(0, os.path.join(ROOT, "tests", "mp"))
from ports import free_port  # noqa: E402


def swarm(name, xenv):
    """One swarm of JOBS jobs; returns job 0's eval curve, its final loss and
    every job's checksum."""
    port = free_port()
    procs = []
    for i in range(JOBS):
        env = {"LD_PRELOAD": LIB, "DEDMPI_RUN": "lm-%d" % port, "DEDMPI_MIN_PEERS": str(JOBS),
               "DEDMPI_JOIN": "127.0.0.1:%d" % port, "DEDMPI_STEP_ROUNDS": "2",
               "DEDMPI_LISTEN": "127.0.0.1:%d" % port if i == 0 else "127.0.0.1:0",
               "DEDMPI_COMPRESS": name}
        env.update(xenv)
        cmd = ["mpirun", "-np", "1", "--oversubscribe", "--bind-to", "none"]
        for k, v in env.items():
            cmd += ["-x", "%s=%s" % (k, v)]
        cmd += ["/usr/bin/python3", TRAINER, "--steps", str(STEPS), "--shards", str(JOBS),
                "--shard-base", str(i), "--buckets", "2"]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env=ENV, text=True))
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=1800)
        if p.returncode != 0:
            sys.exit("%s: a job failed:\n%s\n%s" % (name, out, err[-3000:]))
        outs.append(out)
    curve = [(int(s), float(e)) for s, e in re.findall(r"^step (\d+) train \S+ eval (\S+)",
                                                        outs[0], re.M)]
    finals = [re.search(r"^final loss (\S+) checksum (\S+)", o, re.M) for o in outs]
    if not all(finals):
        sys.exit("%s: no final line" % name)
    return curve, float(finals[0].group(1)), [f.group(2) for f in finals]


def main():
    if not os.path.exists(LIB):
        sys.exit("no %s: build first" % LIB)
    r = subprocess.run(["/usr/bin/python3", "-c", "import torch, mpi4py"], capture_output=True)
    if r.returncode != 0:
        sys.exit("the transformer needs PyTorch and mpi4py for /usr/bin/python3: "
                 "apt-get install python3-torch python3-mpi4py (and python3-matplotlib for "
                 "the picture)")
    results = []
    for label, xenv in RUNS:
        curve, final, sums = swarm(label if not xenv else xenv["DEDMPI_COMPRESS"], xenv)
        same = len(set(sums)) == 1
        results.append((label, curve, final, same))
        print("%-18s final %.4f  jobs bit-identical: %s" % (label, final, "yes" if same else
                                                            "NO " + " ".join(sums)), flush=True)
    base = results[0][2]
    print("\n| codec | final held-out loss | vs none |")
    print("|---|---|---|")
    for label, _, final, _ in results:
        print("| %s | %.4f | %+.2f %% |" % (label, final, 100.0 * (final - base) / base))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\nno matplotlib (python3-matplotlib): no picture")
        return 0 if all(r[3] for r in results) else 1
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, curve, _, _ in results:
        ax.plot([s for s, _ in curve], [e for _, e in curve], label=label,
                linestyle="--" if "no feedback" in label else "-")
    ax.set_xlabel("step")
    ax.set_ylabel("held-out loss (nats per character)")
    ax.set_title("Small transformer LM, swarm of %d jobs: DEDMPI_COMPRESS" % JOBS)
    ax.grid(alpha=0.3)
    ax.legend()
    os.makedirs(os.path.dirname(PNG), exist_ok=True)
    fig.savefig(PNG, dpi=100, bbox_inches="tight")
    print("\nwrote %s" % PNG)
    return 0 if all(r[3] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
