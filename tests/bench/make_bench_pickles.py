#!/usr/bin/env python3
"""make_bench_pickles.py OUTDIR --ranks N --events M — PyTorch-shaped snapshots for report_bench.

Each file is the dict torch.cuda.memory._dump_snapshot() pickles (torch 2.11, docs/PYTORCH.md),
written with Python's own pickle module at the protocol PyTorch uses (4), so that the opcodes
are the ones PyTorch's files hold: memoized strings, frame dicts shared between entries (PyTorch
2.11 caches them: the 2,500 entries of tests/data/snapshot_rank0.pickle name 83 distinct frame
dicts), a fresh `frames` list and entry dict per event, ints as BININT/LONG1.

The trace is report_bench_rank's workload (bench_sites.h), as PyTorch would record it with
stacks="python": a window of 48 live tensors replaced one at a time from four call sites (sizes
log-uniform from 512 B to 8 MiB, one seed for all ranks), ten steps; rank --diverge-rank holds
16 MiB more in every step. The allocator and the entries' format are those of
tests/data/make_torch_like_pickle.py (a segment per block, freed segments reused by size), and the
trace is the last M entries, as a recording with max_entries=M keeps. Ranks other than the divergent one do
the same thing, so their files are the same bytes: one is pickled, the others are copies.

Prints one line per distinct file made; exit status 0.
"""
import argparse
import os
import pickle
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "data"))
import make_torch_like_pickle as torch_like  # noqa: E402  (its allocator and trace format)

MIB = 1 << 20
SITE_PKG = "/opt/torch/.venv/lib/python3.12/site-packages/"
USER = "/home/user/project/"

# PyTorch 2.11 shares one dict per distinct frame between the entries that name it: an entry's
# frames list is fresh, its dicts are not.
torch_like.frames_of = list


def frame_dicts():
    cache = {}

    def fr(name, filename, line):
        key = (name, filename, line)
        if key not in cache:
            cache[key] = {"name": name, "filename": filename, "line": line}
        return cache[key]

    outer = [fr("train_step", USER + "train.py", 41), fr("main", USER + "train.py", 77),
             fr("<module>", USER + "train.py", 90)]
    linear = [fr("forward", SITE_PKG + "torch/nn/modules/linear.py", 125),
              fr("_call_impl", SITE_PKG + "torch/nn/modules/module.py", 1762),
              fr("_wrapped_call_impl", SITE_PKG + "torch/nn/modules/module.py", 1751)]
    sites = [
        [fr("init_weights", USER + "model.py", 20)] + linear + outer,
        [fr("forward", USER + "model.py", 31)] + linear + [fr("forward", USER + "model.py", 58)] + outer,
        [fr("scaled_dot_product_attention", SITE_PKG + "torch/nn/functional.py", 5400),
         fr("forward", USER + "model.py", 33)] + linear[1:] + outer,
        [fr("_multi_tensor_adam", SITE_PKG + "torch/optim/adam.py", 791),
         fr("adam", SITE_PKG + "torch/optim/adam.py", 971),
         fr("step", SITE_PKG + "torch/optim/adam.py", 248)] + outer,
    ]
    divergent = [fr("divergent_buffer", USER + "model.py", 91)] + outer
    return sites, divergent


def rng(seed):
    """bench_sites.h's xorshift sequence."""
    x = seed
    mask = (1 << 64) - 1
    while True:
        x ^= (x << 13) & mask
        x ^= x >> 7
        x ^= (x << 17) & mask
        yield x


def snapshot(events, steps, divergent):
    sites, div_stack = frame_dicts()
    a = torch_like.Allocator(1 << 50)
    r = rng(0x9E3779B97F4A7C15)
    window = [None] * 48
    slot = 0
    for step in range(steps):
        extra = a.malloc(16 * MIB, div_stack) if divergent else None
        target = events * (step + 1) // steps
        while len(a.trace) < target:
            i = slot
            slot = (slot + 1) % len(window)
            if window[i] is not None:
                a.free(window[i])
            site = sites[next(r) % 4]
            base = 1 << (9 + next(r) % 14)
            window[i] = a.malloc(base + next(r) % base, site)
        if extra is not None:
            a.free(extra)
    return {
        "segments": a.state(),
        "device_traces": [a.trace[-events:]],
        "allocator_settings": real_settings(),
        "external_annotations": [],
    }


def real_settings():
    """The allocator_settings dict of a snapshot PyTorch 2.11 wrote (tests/data)."""
    with open(os.path.join(HERE, "..", "data", "snapshot_rank0.pickle"), "rb") as f:
        return pickle.load(f)["allocator_settings"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("outdir")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--events", type=int, default=100000)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--diverge-rank", type=int, default=1)
    p.add_argument("--name", default="snapshot_rank{rank}.pickle")
    args = p.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    made = {}
    for rank in range(args.ranks):
        kind = rank == args.diverge_rank
        path = os.path.join(args.outdir, args.name.format(rank=rank))
        if kind in made:
            shutil.copyfile(made[kind], path)
            continue
        with open(path, "wb") as f:
            pickle.dump(snapshot(args.events, args.steps, kind), f, protocol=4)
        made[kind] = path
        print("%s: %d bytes" % (path, os.path.getsize(path)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
