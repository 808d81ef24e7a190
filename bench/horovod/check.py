"""A small Horovod trainer whose end state can be compared across jobs.

Run under dedmpi as several mpirun jobs of one swarm (bench/horovod/run.sh)
and as one plain job: rank 0 prints `CHECKSUM final size=<n> sha256=<hex>`
over the model's parameters. A convolutional classifier on synthetic images,
trained with hvd.DistributedOptimizer (Horovod's default tensor fusion) and
hvd.broadcast_parameters at the start; each rank's data is seeded by its
global rank (RANK_OFFSET + hvd.rank()), so jobs of 2+2 ranks see the data
one plain 4-rank job sees. The model is left unseeded unless SEED is set:
a swarm must then start every job from one job's initial state.

Environment: STEPS (20), LR (0.04), RANK_OFFSET (0), SEED (unset).
"""
import hashlib
import os

import torch
import torch.nn.functional as F
import horovod.torch as hvd

hvd.init()
torch.set_num_threads(1)
if "SEED" in os.environ:
    torch.manual_seed(int(os.environ["SEED"]))
model = torch.nn.Sequential(
    torch.nn.Conv2d(1, 8, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(8, 16, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Flatten(), torch.nn.Linear(16 * 5 * 5, 64), torch.nn.ReLU(),
    torch.nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=float(os.environ.get("LR", "0.04")), momentum=0.5)
opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(opt, root_rank=0)

steps = int(os.environ.get("STEPS", "20"))
gen = torch.Generator().manual_seed(1000 + int(os.environ.get("RANK_OFFSET", "0")) + hvd.rank())
xs = torch.randn(steps, 16, 1, 28, 28, generator=gen)
ys = torch.randint(0, 10, (steps, 16), generator=gen)
for s in range(steps):
    opt.zero_grad()
    loss = F.cross_entropy(model(xs[s]), ys[s])
    loss.backward()
    opt.step()
if hvd.rank() == 0:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    print("CHECKSUM final size=%d sha256=%s" % (hvd.size(), h.hexdigest()), flush=True)
