#!/usr/bin/python3
"""transformer.py: a small transformer language model, trained data-parallel
with PyTorch (CPU) and mpi4py: an ordinary MPI trainer, the kind dedmpi is
preloaded into. Nothing here knows about dedmpi.

Model: a character-level GPT (token and position embeddings, --layers
pre-norm transformer blocks with causal self-attention, a linear head),
about 110,000 parameters by default.

Text: the licences Debian ships in /usr/share/common-licenses (base-files,
on every Debian machine; no download), each file once, in name order: the
first 90 % train, the last 10 % is the held-out set.

Each step, every rank draws --batch windows of --context characters from
the training text (a pure function of --seed, its data shard and the step:
rank r trains on shard K + r of S, --shard-base K, --shards S), computes
the mean loss's gradient, all-reduces it in --buckets equal float32 pieces
(MPI_Allreduce through mpi4py), divides by the world size and takes an
Adam step. Under dedmpi the all-reduce is the swarm's mean over every
rank of every job, so jobs of a swarm stay bit-identical.

Output (rank 0): `step S train T eval E` every --eval-every steps (E: the
mean loss over the first --eval-windows windows of the held-out text),
then `final loss E checksum C` (C: the CRC-32 of the parameters' bytes).

Usage: mpirun -np N /usr/bin/python3 examples/transformer.py [--steps 400]
"""
import argparse
import os
import sys
import time
import zlib

import numpy as np
from mpi4py import MPI

import torch
from torch import nn

LICENSES = "/usr/share/common-licenses"


def load_text():
    """Every licence once (symlinks resolved), in name order, as bytes."""
    seen, parts = set(), []
    for name in sorted(os.listdir(LICENSES)):
        path = os.path.realpath(os.path.join(LICENSES, name))
        if path in seen or not os.path.isfile(path):
            continue
        seen.add(path)
        with open(path, "rb") as f:
            parts.append(f.read())
    return b"\n".join(parts)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, d, heads, layers, context):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        self.register_buffer("mask", torch.triu(torch.ones(context, context, dtype=torch.bool), 1))

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t))
        for b in self.blocks:
            x = b(x, self.mask[:t, :t])
        return self.head(self.ln(x))


def windows(data, starts, context):
    x = np.stack([data[s:s + context] for s in starts])
    y = np.stack([data[s + 1:s + 1 + context] for s in starts])
    return torch.from_numpy(x.astype(np.int64)), torch.from_numpy(y.astype(np.int64))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=16, help="windows per rank per step")
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--buckets", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shard-base", type=int, default=0)
    ap.add_argument("--shards", type=int, default=0, help="default: the world size")
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--eval-windows", type=int, default=64)
    ap.add_argument("--out", default="", help="write the final parameters here (rank 0)")
    a = ap.parse_args()
    if a.steps < 1 or a.buckets < 1 or a.batch < 1 or a.context < 2:
        ap.error("--steps, --buckets, --batch must be positive and --context at least 2")

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    shards = a.shards or size
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)

    text = load_text()
    vocab = sorted(set(text))
    lut = np.zeros(256, dtype=np.uint8)
    lut[vocab] = np.arange(len(vocab), dtype=np.uint8)
    data = lut[np.frombuffer(text, dtype=np.uint8)]
    cut = len(data) * 9 // 10
    train, held = data[:cut], data[cut:]

    model = GPT(len(vocab), a.d_model, a.heads, a.layers, a.context)
    params = [p for p in model.parameters()]
    n = sum(p.numel() for p in params)
    n_pad = -(-n // a.buckets) * a.buckets
    # The parameters live in one flat buffer that the tensors view, so that
    # the start-up broadcast of it is the model itself (what an MPI library
    # that serves a joining job the run's state reads and writes); the
    # gradients are gathered into another.
    weights = np.zeros(n, dtype=np.float32)
    grads = np.zeros(n_pad, dtype=np.float32)
    with torch.no_grad():
        off = 0
        for p in params:
            k = p.numel()
            weights[off:off + k] = p.detach().numpy().reshape(-1)
            p.data = torch.from_numpy(weights[off:off + k]).view_as(p)
            off += k
    # Rank 0's initial parameters are everyone's.
    comm.Bcast(weights, root=0)
    opt = torch.optim.Adam(params, lr=a.lr)
    loss_fn = nn.CrossEntropyLoss()

    ev_starts = np.arange(a.eval_windows) * ((len(held) - a.context - 1) // a.eval_windows)
    ev_x, ev_y = windows(held, ev_starts, a.context)

    def evaluate():
        with torch.no_grad():
            out = model(ev_x)
            return loss_fn(out.reshape(-1, out.shape[-1]), ev_y.reshape(-1)).item()

    if rank == 0:
        print("config: %d parameters, vocabulary %d, %d training characters, %d ranks" %
              (n, len(vocab), len(train), size), flush=True)
    t0 = time.time()
    comm_s = 0.0
    bucket = n_pad // a.buckets
    for step in range(1, a.steps + 1):
        rng = np.random.default_rng([a.seed, a.shard_base + rank, step])
        starts = rng.integers(0, len(train) - a.context - 1, size=a.batch)
        x, y = windows(train, starts, a.context)
        opt.zero_grad(set_to_none=False)
        out = model(x)
        loss = loss_fn(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        off = 0
        for p in params:
            k = p.numel()
            grads[off:off + k] = p.grad.numpy().reshape(-1)
            off += k
        c0 = time.time()
        for b in range(a.buckets):
            comm.Allreduce(MPI.IN_PLACE, grads[b * bucket:(b + 1) * bucket], op=MPI.SUM)
        comm_s += time.time() - c0
        grads /= np.float32(size)
        off = 0
        for p in params:
            k = p.numel()
            p.grad.copy_(torch.from_numpy(grads[off:off + k]).view_as(p))
            off += k
        opt.step()
        if rank == 0 and (step % a.eval_every == 0 or step == a.steps):
            print("step %d train %.6f eval %.6f" % (step, loss.item(), evaluate()), flush=True)
    if rank == 0:
        print("elapsed %.1f s, exchange %.1f s" % (time.time() - t0, comm_s), flush=True)
        print("final loss %.6f checksum %08x" % (evaluate(), zlib.crc32(weights.tobytes())),
              flush=True)
        if a.out:
            weights.tofile(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
