#!/usr/bin/python3
"""trainer.py: examples/trainer.c for mpi4py and numpy.

An ordinary data-parallel trainer that knows nothing about dedmpi: rank 0
initialises a float32 2-layer MLP from --seed and broadcasts it with
comm.Bcast; every step each rank computes the mean gradient of its own
minibatch, all-reduces it in --buckets equal pieces (comm.Allreduce with
MPI.IN_PLACE, or with --nonblocking comm.Iallreduce per bucket and
MPI.Request.Waitall), divides by the world size and takes an SGD step.

Flags, data, initial parameters, parameter layout (--out files) and output
lines are those of the C trainer; read its header comment for the design.
Data and initial parameters are bit-identical to the C trainer's (integer
arithmetic and single float32 roundings only); the training itself is
not, because numpy's matrix products sum in another order, so expect the
two to agree to a few decimals, not bit for bit.

Run it with Debian's interpreter, which has python3-mpi4py:
  mpirun -np 4 /usr/bin/python3 examples/trainer.py --steps 100
"""
import math
import os
import sys
import zlib

# One BLAS thread per rank: ranks already fill the cores, and a threaded
# BLAS may split sums differently from run to run.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
             "BLIS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

EVAL_SAMPLES = 512

U64 = np.uint64
M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
C1 = 0xBF58476D1CE4E5B9
C2 = 0x94D049BB133111EB
STREAM_W1, STREAM_W2, STREAM_TEACHER, STREAM_EVAL = 1, 2, 3, 4


def stream_shard(k):
    return (1 << 32) | k


USAGE = """\
usage: trainer.py [--steps N] [--buckets B] [--dim D] [--hidden H]
         [--classes C] [--batch N] [--lr X] [--seed S]
         [--shard-base K] [--shards S] [--log-every K]
         [--nonblocking] [--out FILE] [--quiet]
Rank r trains on data shard K+r of S (default K=0, S=world size).
Defaults: 100 steps, 4 buckets, dim 256, hidden 256, 10 classes,
batch 32 per rank, lr 0.5, seed 1, a line every step.
"""

# ------------------------------------------------------------------ random
# Every random number is mix(key(seed, stream) + (index + 1) * GOLDEN), as
# in the C trainer. Keys are Python ints masked to 64 bits; the per-index
# part runs on uint64 arrays, whose arithmetic wraps like C's.


def mix64_int(z):
    z = ((z ^ (z >> 30)) * C1) & M64
    z = ((z ^ (z >> 27)) * C2) & M64
    return z ^ (z >> 31)


def stream_key(seed, stream):
    return mix64_int(mix64_int((seed + GOLDEN) & M64) ^ stream)


def stream_at(key, index):
    """index: a uint64 array."""
    z = U64(key) + (index + U64(1)) * U64(GOLDEN)
    z = (z ^ (z >> U64(30))) * U64(C1)
    z = (z ^ (z >> U64(27))) * U64(C2)
    return z ^ (z >> U64(31))


def stream_int24(key, first, n):
    """Integers in [-2^23, 2^23) at indices first .. first+n-1."""
    index = U64(first) + np.arange(n, dtype=U64)
    return (stream_at(key, index) >> U64(40)).astype(np.int64) - (1 << 23)


def to_unit(k):
    """k * 2^-23 as float32: exact, so it matches the C trainer bit for bit."""
    return k.astype(np.float32) * np.float32(2.0 ** -23)


# ------------------------------------------------------------------ data


def teacher_init(dim, classes, seed):
    key = stream_key(seed, STREAM_TEACHER)
    t = stream_at(key, np.arange(dim * classes, dtype=U64)) >> U64(32)
    return ((t % U64(3)).astype(np.int64) - 1).reshape(dim, classes)


def data_fill(teacher, seed, stream, first, n):
    """Samples first .. first+n-1 of a stream. Labels are argmaxes of exact
    integer logits (ties to the lowest class, as in C)."""
    dim = teacher.shape[0]
    k = stream_int24(stream_key(seed, stream), first * dim, n * dim).reshape(n, dim)
    return to_unit(k), np.argmax(k @ teacher, axis=1)


# ------------------------------------------------------------------ model


class Layout:
    """Offsets of each tensor in the flat vector, as in the C trainer."""

    def __init__(self, dim, hidden, classes, buckets):
        self.dim, self.hidden, self.classes = dim, hidden, classes
        self.w1 = 0
        self.b1 = self.w1 + dim * hidden
        self.w2 = self.b1 + hidden
        self.b2 = self.w2 + hidden * classes
        self.n_params = self.b2 + classes
        self.bucket = -(-self.n_params // buckets)
        self.n_flat = self.bucket * buckets

    def views(self, flat):
        """(W1, b1, W2, b2) as views into a flat float32 vector."""
        return (flat[self.w1:self.b1].reshape(self.dim, self.hidden),
                flat[self.b1:self.w2],
                flat[self.w2:self.b2].reshape(self.hidden, self.classes),
                flat[self.b2:self.n_params])


def params_init(lay, p, seed):
    """Uniform in +-1/sqrt(fan_in), biases zero; same bits as C."""
    p[:] = 0
    w1, _, w2, _ = lay.views(p)
    bound1 = np.float32(1.0 / math.sqrt(lay.dim))
    bound2 = np.float32(1.0 / math.sqrt(lay.hidden))
    k1 = stream_int24(stream_key(seed, STREAM_W1), 0, w1.size)
    k2 = stream_int24(stream_key(seed, STREAM_W2), 0, w2.size)
    w1[:] = (to_unit(k1) * bound1).reshape(w1.shape)
    w2[:] = (to_unit(k2) * bound2).reshape(w2.shape)


def model_forward(lay, p, x, y):
    """Returns (summed cross-entropy, hidden activations, probabilities)."""
    w1, b1, w2, b2 = lay.views(p)
    h = np.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    m = z.max(axis=1, keepdims=True)
    rows = np.arange(len(y))
    zy = (z[rows, y] - m[:, 0]).astype(np.float64)
    e = np.exp(z - m)
    s = e.sum(axis=1, keepdims=True)
    loss = float(np.sum(np.log(s[:, 0]).astype(np.float64) - zy))
    return loss, h, e / s


def model_backward(lay, p, x, y, h, prob, g):
    """Gradient of the mean loss over the batch into g (padding zeroed)."""
    n = len(y)
    _, _, w2, _ = lay.views(p)
    gw1, gb1, gw2, gb2 = lay.views(g)
    dz = prob
    dz[np.arange(n), y] -= np.float32(1)
    dz /= np.float32(n)
    gb2[:] = dz.sum(axis=0)
    np.matmul(h.T, dz, out=gw2)
    dh = (dz @ w2.T) * (np.float32(1) - h * h)
    gb1[:] = dh.sum(axis=0)
    np.matmul(x.T, dh, out=gw1)
    g[lay.n_params:] = 0


def checksum(lay, p):
    """CRC-32 (zlib) of the parameter bytes, as the C trainer prints it."""
    return zlib.crc32(p[:lay.n_params].tobytes())


def eval_loss(lay, p, teacher, seed, chunk):
    total = 0.0
    for first in range(0, EVAL_SAMPLES, chunk):
        n = min(chunk, EVAL_SAMPLES - first)
        x, y = data_fill(teacher, seed, STREAM_EVAL, first, n)
        total += model_forward(lay, p, x, y)[0]
    return total / EVAL_SAMPLES


# ------------------------------------------------------------------ flags

INT_FLAGS = {  # name: (attribute, lowest, highest)
    "steps": ("steps", 0, 100000000), "buckets": ("buckets", 1, 4096),
    "dim": ("dim", 1, 65536), "hidden": ("hidden", 1, 65536),
    "classes": ("classes", 2, 4096), "batch": ("batch", 1, 65536),
    "log-every": ("log_every", 1, 100000000),
    "shard-base": ("shard_base", 0, 1 << 30), "shards": ("shards", 1, 1 << 30),
}


class Opts:
    steps, buckets, dim, hidden, classes, batch, log_every = 100, 4, 256, 256, 10, 32, 1
    shard_base, shards, seed, lr = 0, 0, 1, np.float32(0.5)
    nonblocking, quiet, out = False, False, None


def opts_set(o, name, v):
    """One flag that takes a value; False on a bad value."""
    try:
        if name in INT_FLAGS:
            attr, lo, hi = INT_FLAGS[name]
            iv = int(v, 10)
            setattr(o, attr, iv)
            return lo <= iv <= hi
        if name == "seed":
            # Decimal, or hex with 0x, as in C.
            o.seed = int(v, 16 if v[:2].lower() == "0x" else 10)
            return 0 <= o.seed <= M64
        if name == "lr":
            o.lr = np.float32(v)
            return bool(np.isfinite(o.lr)) and o.lr > 0
        if name == "out":
            o.out = v
            return v != ""
    except ValueError:
        pass
    return False


def opts_parse(argv, loud):
    """(opts, 0) to run, (None, 1) for --help, (None, -1) on a bad command
    line, parsed like the C trainer (no abbreviations, --name=value too)."""
    o, i = Opts(), 0
    while i < len(argv):
        a = argv[i]
        i += 1
        if a in ("--help", "-h"):
            return None, 1
        if a in ("--nonblocking", "--quiet"):
            setattr(o, a[2:], True)
            continue
        name, eq, v = a[2:].partition("=")
        if not eq and i < len(argv):
            v, i = argv[i], i + 1
        if a.startswith("--") and (eq or v) and opts_set(o, name, v):
            continue
        if loud:
            sys.stderr.write("trainer: bad or incomplete argument '%s'\n" % a)
            sys.stderr.write(USAGE)
        return None, -1
    return o, 0


# ------------------------------------------------------------------ training


class Trainer:
    def __init__(self, o, comm):
        self.o, self.comm = o, comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.shards = o.shards if o.shards > 0 else self.size
        self.lay = Layout(o.dim, o.hidden, o.classes, o.buckets)
        self.p = np.zeros(self.lay.n_flat, dtype=np.float32)
        self.g = np.zeros(self.lay.n_flat, dtype=np.float32)
        self.teacher = teacher_init(o.dim, o.classes, o.seed)

    def grad_allreduce(self):
        """One collective per bucket, in bucket order on every rank."""
        bs = self.lay.bucket
        bufs = [self.g[b * bs:(b + 1) * bs] for b in range(self.o.buckets)]
        if self.o.nonblocking:
            reqs = [self.comm.Iallreduce(MPI.IN_PLACE, buf, op=MPI.SUM) for buf in bufs]
            MPI.Request.Waitall(reqs)
        else:
            for buf in bufs:
                self.comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)

    def step(self, step):
        """One SGD step (1-based); returns (mean minibatch loss, comm seconds)."""
        o, lay = self.o, self.lay
        shard = o.shard_base + self.rank
        x, y = data_fill(self.teacher, o.seed, stream_shard(shard), (step - 1) * o.batch,
                         o.batch)
        loss, h, prob = model_forward(lay, self.p, x, y)
        model_backward(lay, self.p, x, y, h, prob, self.g)
        t0 = MPI.Wtime()
        self.grad_allreduce()
        comm_s = MPI.Wtime() - t0
        self.g /= np.float32(self.size)
        self.p -= o.lr * self.g
        return loss / o.batch, comm_s

    def logged(self, step):
        o = self.o
        return not o.quiet and (step == 1 or step % o.log_every == 0 or step == o.steps)

    def train(self):
        comm_s, t0 = 0.0, MPI.Wtime()
        for step in range(1, self.o.steps + 1):
            loss, c = self.step(step)
            comm_s += c
            if not self.logged(step):
                continue
            # One value: a metric, which dedmpi leaves with the job.
            buf = np.array([loss], dtype=np.float64)
            self.comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
            if self.rank == 0:
                print("step %d loss %.6f checksum 0x%08x"
                      % (step, buf[0] / self.size, checksum(self.lay, self.p)), flush=True)
        elapsed = MPI.Wtime() - t0
        if self.rank == 0 and not self.o.quiet and self.o.steps > 0:
            n = self.o.steps
            print("elapsed %.3f s step_ms %.3f comm_ms %.3f"
                  % (elapsed, 1e3 * elapsed / n, 1e3 * comm_s / n))

    def config_line(self):
        o, lay = self.o, self.lay
        return ("config ranks %d shards %d..%d of %d params %d buckets %d x %d floats"
                " (%d B) batch %d steps %d lr %g seed %d mode %s"
                % (self.size, o.shard_base, o.shard_base + self.size - 1, self.shards,
                   lay.n_params, o.buckets, lay.bucket, lay.bucket * 4, o.batch, o.steps,
                   float(o.lr), o.seed, "nonblocking" if o.nonblocking else "blocking"))

    def run(self):
        """Returns the exit code; every rank takes the same early exits."""
        o, lay = self.o, self.lay
        if o.shard_base + self.size > self.shards or lay.bucket > (1 << 31) // 2:
            if self.rank == 0:
                sys.stderr.write("trainer: shards %d..%d do not fit in %d, or the model "
                                 "is too big\n" % (o.shard_base, o.shard_base + self.size - 1,
                                                   self.shards))
            return 2
        if self.rank == 0:
            params_init(lay, self.p, o.seed)
        # One broadcast of the whole flat vector, as trainers sync their model.
        self.comm.Bcast(self.p, root=0)
        if self.rank == 0 and not o.quiet:
            print(self.config_line())
            print("init checksum 0x%08x" % checksum(lay, self.p), flush=True)
        self.train()
        if self.rank != 0:
            return 0
        loss = eval_loss(lay, self.p, self.teacher, o.seed, o.batch)
        print("final loss %.6f checksum 0x%08x" % (loss, checksum(lay, self.p)), flush=True)
        if o.out:
            try:
                self.p[:lay.n_params].tofile(o.out)
            except OSError as e:
                sys.stderr.write("trainer: %s: %s\n" % (o.out, e.strerror))
                return 1
        return 0


def main():
    comm = MPI.COMM_WORLD
    o, parsed = opts_parse(sys.argv[1:], comm.Get_rank() == 0)
    if parsed == 1:
        if comm.Get_rank() == 0:
            sys.stdout.write(USAGE)
        return 0
    if parsed < 0:
        return 2
    return Trainer(o, comm).run()


if __name__ == "__main__":
    sys.exit(main())
