"""train_model_fake.py — a model trained as its users write it (modules, a loss computed in the
script, loss.backward(), an optimizer), with no ranksnap in it, on the stand-in torch of
tests/python/fake_torch: what the backward pass allocates is made on the stand-in's autograd
thread with no Python frame, as PyTorch makes it.

  --leak R          rank R keeps each step's logits in a list, from step 0 (growth)
  --diverge R:F     rank R's batch is F times larger (a constant offset)
  --oom-backward R:S  rank R runs out of memory at step S in the backward pass, in the loss's
                    node (NllLossBackward0), which asks for 16 times its usual gradient; the
                    OutOfMemoryError propagates (the script fails, as an unmodified one would)
  --fsdp WHERE      each block and the model are fully_shard'ed (FSDP2: the model's own
                    parameters, wte, are all-gathered from the forward to the backward while the
                    optimizer holds the shards) and the model computes
                    the loss (as a Hugging Face model given labels does); --oom-backward's rank
                    then runs out of memory in FSDP's all-gather, in the hook on the output of
                    the last block (WHERE "block") or of the model, the loss ("root")
Ranks come from the launcher's variables (OMPI_COMM_WORLD_RANK or torchrun's RANK).
"""
import argparse

import torch
from torch import nn
from torch.distributed.fsdp import fully_shard
from train_fake import launcher_rank, pair

MIB = 1 << 20


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Parameter(2 * MIB)

    def forward(self, x):
        return torch.stand_in_op("Addmm", 4 * x.nbytes, (x, self.fc), grad_nbytes=2 * x.nbytes)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = MLP()

    def forward(self, x):
        h = self.mlp(x)
        return torch.stand_in_op("Add", x.nbytes, (x, h))


class Model(nn.Module):
    def __init__(self, layers, with_loss=False):
        super().__init__()
        self.with_loss = with_loss
        self.wte = nn.Parameter(4 * MIB)
        self.h = nn.Module()
        for i in range(layers):
            setattr(self.h, str(i), Block())

    def forward(self, batch):
        x = torch.stand_in_op("Embedding", batch * MIB, (self.wte,))
        for _, block in self.h._modules.items():
            x = block(x)
        logits = torch.stand_in_op("Mm", 4 * x.nbytes, (x, self.wte))
        if not self.with_loss:
            return logits
        return torch.stand_in_op("NllLoss", 512, (logits,), grad_nbytes=logits.nbytes)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--leak", type=int, default=-1)
    p.add_argument("--diverge", type=pair)
    p.add_argument("--oom-backward", type=pair)
    p.add_argument("--fsdp", choices=("block", "root"))
    a = p.parse_args()
    rank = launcher_rank()
    model = Model(a.layers, with_loss=a.fsdp is not None)
    blocks = list(model.h.children())
    if a.fsdp:
        for block in blocks:
            fully_shard(block)
        fully_shard(model, reshard_after_forward=False)  # as FSDP2 leaves the root
    opt = torch.optim.SGD(list(model.parameters()), lr=0.1)
    batch = a.batch
    if a.diverge and int(a.diverge[0]) == rank:
        batch = int(batch * a.diverge[1])
    kept = []
    for step in range(a.steps):
        out = model(batch)
        grow = 1
        if a.oom_backward and int(a.oom_backward[0]) == rank and step == int(a.oom_backward[1]):
            if a.fsdp:
                (blocks[-1] if a.fsdp == "block" else model).fsdp_gather_scale = 64
            else:
                grow = 16
            torch.cuda.set_per_process_memory_fraction(
                (torch.cuda.memory_reserved() + 64 * MIB) / torch.cuda.mem_get_info()[1])
        if a.fsdp:
            loss = out
        else:
            loss = torch.stand_in_op("NllLoss", 512, (out,), grad_nbytes=grow * out.nbytes)
        loss.backward()
        if rank == a.leak:
            kept.append(out)
        del out, loss
        opt.step()
        opt.zero_grad()


if __name__ == "__main__":
    main()
