"""torch_pp_train.py — a pipeline x data-parallel training script as its users write it, with
torch alone: a 2-D DeviceMesh ("pp", "dp") over the ranks in launcher order, two pipeline stages
(stage 0 the embedding and the first blocks, stage 1 the last blocks, the LM head and the loss),
a GPipe-like schedule (stage 0 runs every microbatch's forward, then every backward; stage 1 each
microbatch's forward and backward in turn; activations and their gradients sent with
dist.send/recv between the stages of one replica) and the gradients all-reduced over each stage's
"dp" group. Stage 0 keeps every microbatch's activations until its backward: it is the heaviest
stage by design. Nothing of ranksnap in it (tests/gpu/torch-roles.sh runs it under ranksnap-run).

  --pp N           pipeline stages (2); the "dp" size is the world size / N
  --longer R:F     rank R's replica (both of its stages) is fed F times longer sequences
  --oom R:S        rank R caps its memory after step S-1 (its peak so far plus 30%) and then
                   feeds 8 times longer sequences: it runs out of memory, which ends the job
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh

VOCAB = 32000


def pair(s):
    r, f = s.split(":")
    return int(r), float(f)


class Block(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.norm = nn.LayerNorm(h)
        self.up = nn.Linear(h, 4 * h)
        self.down = nn.Linear(4 * h, h)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Stage0(nn.Module):
    def __init__(self, h, layers):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, h)
        self.blocks = nn.ModuleList(Block(h) for _ in range(layers))

    def forward(self, ids):
        x = self.embed(ids)
        for b in self.blocks:
            x = b(x)
        return x


class Stage1(nn.Module):
    def __init__(self, h, layers):
        super().__init__()
        self.blocks = nn.ModuleList(Block(h) for _ in range(layers))
        self.head = nn.Linear(h, VOCAB)

    def forward(self, x, ids):
        for b in self.blocks:
            x = b(x)
        logits = self.head(x)
        return nn.functional.cross_entropy(logits.view(-1, VOCAB), ids.view(-1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pp", type=int, default=2)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--micro", type=int, default=8, help="microbatches per step")
    p.add_argument("--batch", type=int, default=4, help="sequences per microbatch")
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=4, help="blocks per stage")
    p.add_argument("--longer", type=pair)
    p.add_argument("--oom", type=pair)
    a = p.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    dp = world // a.pp
    assert a.pp * dp == world, f"--pp {a.pp} does not divide {world} ranks"
    mesh = init_device_mesh("cuda", (a.pp, dp), mesh_dim_names=("pp", "dp"))
    stage, replica = mesh.get_local_rank("pp"), mesh.get_local_rank("dp")
    assert a.pp == 2, "two stages"
    dp_group = mesh["dp"].get_group()
    # the other stage of this replica, as a global rank (the mesh is in launcher order)
    peer = int(mesh.mesh[1 - stage, replica])

    torch.manual_seed(0)
    model = (Stage0 if stage == 0 else Stage1)(a.hidden, a.layers).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=device)
    gen.manual_seed(1 + replica)

    seq = a.seq
    # the replica of rank R: both of its stages see the longer sequences
    if a.longer and a.longer[0] % dp == replica:
        seq = int(seq * a.longer[1])
    t0 = time.time()
    for step in range(a.steps):
        if a.oom and a.oom[0] % dp == replica and step == int(a.oom[1]):
            if rank == a.oom[0]:
                cap = torch.cuda.max_memory_reserved(device) * 1.3
                total = torch.cuda.get_device_properties(device).total_memory
                torch.cuda.set_per_process_memory_fraction(cap / total, device)
            seq *= 8
        ids = [torch.randint(0, VOCAB, (a.batch, seq), device=device, generator=gen)
               for _ in range(a.micro)]
        shape = (a.batch, seq, a.hidden)
        if stage == 0:
            outs = []
            for m in range(a.micro):
                y = model(ids[m])
                dist.send(y.detach(), dst=peer)
                outs.append(y)  # kept until its backward: GPipe's activations in flight
            for m in range(a.micro):
                g = torch.empty(shape, device=device)
                dist.recv(g, src=peer)
                outs[m].backward(g)
            del outs
        else:
            # every microbatch's input first, every input gradient last: the same order as
            # stage 0's sends and receives, so that the pair's NCCL stream never waits on itself
            xs = []
            for m in range(a.micro):
                x = torch.empty(shape, device=device)
                dist.recv(x, src=peer)
                xs.append(x.requires_grad_(True))
            loss_sum = 0.0
            for m in range(a.micro):
                loss = model(xs[m], ids[m]) / a.micro
                loss.backward()  # one microbatch of activations at a time
                loss_sum += loss.item()
            for m in range(a.micro):
                dist.send(xs[m].grad, dst=peer)
            del xs
        for prm in model.parameters():
            if prm.grad is not None:
                dist.all_reduce(prm.grad, group=dp_group)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if stage == 1 and replica == 0:
            print(f"step {step} loss {loss_sum:.3f} ({time.time() - t0:.1f} s)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
