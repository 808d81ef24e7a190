#!/usr/bin/python3
"""The churn soak of issue 22, in full (not a test: run it by hand).

Six keyed single-rank trainer jobs (examples/trainer) on one swarm on
loopback, DEDMPI_ROUND_TIMEOUT=20s; for 3 minutes, at random times, a random
job is SIGKILLed and a replacement joins in its place, another is SIGSTOPped
for 2 to 6 s; each job trains 400 steps from the run's step when it starts
and is replaced when it finishes or dies. Then the survivors train to their
ends. The driver is tests/mp/soak.py (mp.churn_soak is its short version);
this prints its counts as a table (kills, stops, joins, the longest call,
calls at the bound, resets, failed joins, protocol-violation drops, ...),
then the timeline and every problem found with the log lines behind it.
Exit status 1 if it found any.

Environment: BUILD_DIR (default ./build), SOAK_SEED (default: drawn and
printed; it replays the schedule, not the machine's timing), SOAK_SECONDS
(180), SOAK_BOUND (20), SOAK_STEPS (400), SOAK_JOBS (6).
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "mp"))
import soak  # noqa: E402

BUILD = os.path.abspath(os.environ.get("BUILD_DIR", os.path.join(ROOT, "build")))


def main():
    cfg = soak.Config(trainer=os.path.join(BUILD, "examples", "trainer"),
                      lib=os.path.join(BUILD, "shim", "libdedmpi.so"),
                      jobs=int(os.environ.get("SOAK_JOBS", "6")),
                      duration=float(os.environ.get("SOAK_SECONDS", "180")),
                      bound_s=float(os.environ.get("SOAK_BOUND", "20")),
                      steps=int(os.environ.get("SOAK_STEPS", "400")),
                      seed=os.environ.get("SOAK_SEED"))
    for path in (cfg.trainer, cfg.lib):
        if not os.path.exists(path):
            sys.exit("%s missing: build first (BUILD_DIR=%s)" % (path, BUILD))
    res = soak.run(cfg)
    print("\nchurn soak, counts:")
    print(res.table())
    print("\ntimeline:")
    print(res.timeline())
    if res.problems:
        print("\n%d problems (seed %d, logs in %s):" % (len(res.problems), res.seed, cfg.workdir))
        print(res.report())
        return 1
    print("\nno problem found (seed %d, logs in %s)" % (res.seed, cfg.workdir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
