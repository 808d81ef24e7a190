#!/usr/bin/python3
"""Price of the sessions' encryption on loopback, from one run.

The swarm all-reduce (2 single-rank jobs, 64 MiB of float32, as in
loopback.py) with libdedmpi.so as built, against the same code built with
DEDMPI_NULL_CIPHER (a test-only switch: the handshake stays, frames go in
the clear with a zero tag). The two alternate several times; each side's
median is kept. Prints the throughput ratio encrypted / null and the
cipher the sessions chose (AES-256-GCM where both ends have it in
hardware, XChaCha20-Poly1305 otherwise).

The null-cipher library is built into NULL_BUILD_DIR (default
<BUILD_DIR>-nullcipher) when missing. Environment as loopback.py:
BUILD_DIR, BENCH_MIB (default 64), BENCH_TRIALS (default 3); BENCH_JOBS
(default 2).
"""
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loopback  # noqa: E402

NULL_BUILD = os.path.abspath(os.environ.get("NULL_BUILD_DIR", loopback.BUILD + "-nullcipher"))
NULL_LIB = os.path.join(NULL_BUILD, "shim", "libdedmpi.so")


def build_null():
    if os.path.exists(NULL_LIB):
        return
    os.makedirs(NULL_BUILD, exist_ok=True)
    for cmd in (["cmake", "-S", loopback.ROOT, "-B", NULL_BUILD, "-DCMAKE_BUILD_TYPE=Release",
                 "-DDEDMPI_NULL_CIPHER=ON", "-DDEDMPI_TESTS=OFF"],
                ["cmake", "--build", NULL_BUILD, "--target", "dedmpi", "-j2"]):
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            sys.exit("building the null-cipher library failed:\n" + r.stdout[-3000:])


def main():
    for path in (loopback.LIB, loopback.BENCH):
        if not os.path.exists(path):
            sys.exit("missing %s: build first (BUILD_DIR=%s)" % (path, loopback.BUILD))
    build_null()
    mib = int(os.environ.get("BENCH_MIB", "64"))
    trials = int(os.environ.get("BENCH_TRIALS", "3"))
    jobs = int(os.environ.get("BENCH_JOBS", "2"))
    count = mib * 1024 * 1024 // 4
    enc, null, errs = [], [], []
    for _ in range(trials):
        enc += loopback.swarm_allreduce(count, 5, loopback.LIB, jobs, {"DEDMPI_LOG": "info"}, errs)
        null += loopback.swarm_allreduce(count, 5, NULL_LIB, jobs)
    ciphers = set(re.findall(r"sessions use (\S+)", "".join(errs)))
    e, n = statistics.median(enc), statistics.median(null)
    print("crypto allreduce_mib=%d jobs=%d cipher=%s encrypted_s=%.4f null_cipher_s=%.4f "
          "throughput_ratio=%.2f" % (mib, jobs, ",".join(sorted(ciphers)) or "?", e, n, n / e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
