"""infer_fake.py — inference as its users write it, with no optimizer and no ranksnap in it, on the
stand-in torch of tests/python/fake_torch: the model of train_model_fake.py called under
torch.no_grad() in a loop, or through a generate that calls it once per token, or compiled.

  --calls N         calls of the model (or of generate), 8 by default
  --generate T      each iteration is model.generate(T tokens) instead of one call
  --compile         the model is torch.compile'd before its first call
  --reduce-overhead the same with mode="reduce-overhead": recorded into a CUDA graph at its
                    second call, replayed after
  --graph-partition with --reduce-overhead: Inductor's graph partitions, whose generated code
                    calls the partitions, the capture under it
  --diverge R:F     rank R's batch is F times larger (a constant offset)
Ranks come from the launcher's variables (OMPI_COMM_WORLD_RANK or torchrun's RANK).
"""
import argparse

import torch
from train_fake import launcher_rank, pair
from train_model_fake import Model


class Generator(Model):
    @torch.no_grad()
    def generate(self, batch, tokens):
        out = None
        for _ in range(tokens):
            out = self(batch)
        return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=8)
    p.add_argument("--generate", type=int, default=0)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--reduce-overhead", action="store_true")
    p.add_argument("--graph-partition", action="store_true")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--diverge", type=pair)
    a = p.parse_args()
    rank = launcher_rank()
    model = Generator(3)
    batch = a.batch
    if a.diverge and int(a.diverge[0]) == rank:
        batch = int(batch * a.diverge[1])
    if a.compile:
        model = torch.compile(model)
    elif a.reduce_overhead:
        options = {"graph_partition": True} if a.graph_partition else None
        model = torch.compile(model, mode="reduce-overhead", options=options)
    for _ in range(a.calls):
        if a.generate:
            model.generate(batch, a.generate)
        else:
            with torch.no_grad():
                logits = model(batch)
            del logits


if __name__ == "__main__":
    main()
