#!/usr/bin/python3
"""One rank of torch's Gloo all-reduce, for bench/wan.py (one process per lab host).

    wan_gloo.py --rank R --world N --master ADDR:PORT [--count C] [--reps K] [--warmup W]

In-place SUM of C float32 elements: W warm-ups, then K reps of barrier,
all_reduce, and a MAX all-reduce of the rep's time; rank 0 prints
"rep <i> <seconds>" (the slowest rank's time), as bench/ar_bench.c does.
Set GLOO_SOCKET_IFNAME (wan0 in the lab) so that Gloo uses the lab's links.
"""
import argparse
import datetime
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402  (Debian's python3-torch)
import torch.distributed as dist  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True, help="ADDR:PORT of rank 0's store")
    ap.add_argument("--count", type=int, default=8 << 20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds, per collective")
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://" + a.master, rank=a.rank,
                            world_size=a.world, timeout=datetime.timedelta(seconds=a.timeout))
    x = torch.arange(a.count, dtype=torch.float32).remainder_(97).add_(1).reciprocal_()
    for r in range(-a.warmup, a.reps):
        dist.barrier()
        t = time.perf_counter()
        dist.all_reduce(x, op=dist.ReduceOp.SUM)
        t = torch.tensor([time.perf_counter() - t], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if a.rank == 0 and r >= 0:
            print("rep %d %.6f" % (r, t.item()), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
