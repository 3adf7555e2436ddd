"""torch_names_cost.py — what naming the backward pass costs a host-bound training step, in one
process (docs/BENCHMARKS.md). PyTorch's recorder runs throughout (stacks "python", context
"alloc", as in ranksnap's range) and is the anchor; blocks of steps then alternate, round by
round:

  recorder      the recorder alone
  names         plus ranksnap's names (python/ranksnap/_names.py) as a range installs them: the
                first step finds the model, the steps after it are timed
  every-module  plus the first design's cost: a global forward hook on every module call that
                puts a pre-hook on the output's autograd node (what a name per module costs)

The host-bound GPT-2 of torch_overhead.py (6 layers, 768 wide, AdamW, batch 1 x 32 tokens) on
one GPU; each step is timed alone (torch.cuda.synchronize before and after), the first and last step of every block
are left out, and each variant's figure is the median over the rounds of its block's median
divided by the same round's recorder block's.

    PYTHONPATH=python python3 tests/bench/torch_names_cost.py [--rounds 12] [--block 10]
Needs torch, transformers and a GPU (exit 77 without).
"""
import argparse
import functools
import importlib
import statistics
import sys

from torch_overhead import gpt2, missing


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--block", type=int, default=10)
    a = p.parse_args()
    why = missing()
    if why:
        print(f"skipped: {why}")
        return 77
    import torch
    from ranksnap._names import Names, _grad_fn

    model, one = gpt2("host-bound")
    names = Names(torch)

    def names_on():
        names.begin(1, None)
        one()  # the range's first step: the model is found, its parts hooked
        names.stepped()

    set_md = torch._C._cuda_setMemoryMetadata

    def every_call(module, args, output):
        node = _grad_fn(output)
        if node is not None:
            node.register_prehook(functools.partial(lambda key, g: set_md(key), "rs:0"))

    mod = importlib.import_module("torch.nn.modules.module")
    handles = []
    variants = {
        "recorder": (lambda: None, lambda: None),
        "names": (names_on, names.end),
        "every-module": (lambda: handles.append(mod.register_module_forward_hook(every_call)),
                         lambda: handles.pop().remove()),
    }
    torch.cuda.memory._record_memory_history(context="alloc", stacks="python", max_entries=100000)
    for _ in range(8):
        one()
    blocks = {v: [] for v in variants}
    for _ in range(a.rounds):
        for v, (on, off) in variants.items():
            on()
            t = [one() for _ in range(a.block)]
            off()
            blocks[v].append(statistics.median(t[1:-1]))
    names_on()
    hooked = sorted(n for n, m in model.named_modules() if m._forward_hooks)
    names.end()
    torch.cuda.memory._record_memory_history(enabled=None)

    base = blocks["recorder"]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {a.rounds} rounds of "
          f"{a.block} steps; {len(list(model.modules()))} modules, named: {', '.join(hooked)}")
    for v in variants:
        rs = [x / b for x, b in zip(blocks[v], base)]
        print(f"{v:<14} median step {statistics.median(blocks[v]) * 1e3:7.3f} ms   "
              f"/ recorder {statistics.median(rs):.3f} (rounds {min(rs):.3f}..{max(rs):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
