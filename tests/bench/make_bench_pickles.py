#!/usr/bin/env python3
"""make_bench_pickles.py OUTDIR --ranks N --events M — PyTorch-shaped snapshots for report_bench.

Each file is the dict torch.cuda.memory._dump_snapshot() pickles (torch 2.11, docs/PYTORCH.md),
written with Python's own pickle module at the protocol PyTorch uses (4), so that the opcodes
are the ones PyTorch's files hold: memoized strings, frame dicts shared between entries (PyTorch
2.11 caches them: the 2,500 entries of tests/data/snapshot_rank0.pickle name 83 distinct frame
dicts), a fresh `frames` list and entry dict per event, ints as BININT/LONG1.

The trace is report_bench_rank's workload, as PyTorch would record it with stacks="python": a
window of 48 live tensors replaced one at a time from four call sites (sizes log-uniform from
512 B to 8 MiB, one seed for all ranks), ten steps; rank --diverge-rank holds 16 MiB more in
every step. Blocks get segments as PyTorch's allocator gives them (a 2 MiB segment for up to
1 MiB, a 20 MiB one up to 10 MiB; free segments cached and reused by size), and the trace is the
last M entries, as a recording with max_entries=M keeps. Ranks other than the divergent one do
the same thing, so their files are the same bytes: one is pickled, the others are copies.

Prints one line per distinct file made; exit status 0.
"""
import argparse
import os
import pickle
import shutil

MIB = 1 << 20
SITE_PKG = "/opt/torch/.venv/lib/python3.12/site-packages/"
USER = "/home/user/project/"


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
    x = seed
    mask = (1 << 64) - 1
    while True:
        x ^= (x << 13) & mask
        x ^= x >> 7
        x ^= (x << 17) & mask
        yield x


def segment_size(rounded):
    if rounded <= MIB:
        return 2 * MIB
    if rounded < 10 * MIB:
        return 20 * MIB
    return (rounded + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)


def snapshot(events, steps, divergent):
    sites, div_stack = frame_dicts()
    trace = []
    segments = {}  # address -> [size, block or None, stack]
    cached = {}    # segment size -> [address]
    next_addr = [0x7F0000000000]
    now = [1_795_366_562_000_000]

    def record(action, addr, size, stack):
        now[0] += 3
        trace.append({"action": action, "addr": addr, "size": size, "stream": 0,
                      "time_us": now[0], "compile_context": "N/A", "user_metadata": "",
                      "frames": list(stack)})

    def malloc(size, stack):
        rounded = 512 if size < 512 else (size + 511) // 512 * 512
        seg = segment_size(rounded)
        if cached.get(seg):
            addr = cached[seg].pop()
        else:
            addr = next_addr[0]
            next_addr[0] += seg
            segments[addr] = [seg, None, stack]
            record("segment_alloc", addr, seg, stack)
        segments[addr][1] = (rounded, size, stack)
        record("alloc", addr, size, stack)
        return addr

    def free(addr):
        rounded, size, stack = segments[addr][1]
        record("free_requested", addr, size, stack)
        record("free_completed", addr, size, stack)
        segments[addr][1] = None
        cached.setdefault(segments[addr][0], []).append(addr)

    r = rng(0x9E3779B97F4A7C15)
    window = [None] * 48
    slot = 0
    for step in range(steps):
        extra = malloc(16 * MIB, div_stack) if divergent else None
        target = events * (step + 1) // steps
        while len(trace) < target:
            i = slot
            slot = (slot + 1) % len(window)
            if window[i] is not None:
                free(window[i])
            site = sites[next(r) % 4]
            base = 1 << (9 + next(r) % 14)
            window[i] = malloc(base + next(r) % base, site)
        if extra is not None:
            free(extra)
    trace = trace[-events:]

    out = []
    for addr in sorted(segments):
        seg, block, stack = segments[addr]
        blocks = []
        allocated = requested = 0
        if block:
            rounded, req, bstack = block
            blocks.append({"address": addr, "size": rounded, "requested_size": req,
                           "state": "active_allocated", "frames": list(bstack)})
            allocated, requested = rounded, req
            if seg > rounded:
                blocks.append({"address": addr + rounded, "size": seg - rounded,
                               "requested_size": 0, "state": "inactive", "frames": []})
        else:
            blocks.append({"address": addr, "size": seg, "requested_size": 0,
                           "state": "inactive", "frames": []})
        out.append({"device": 0, "address": addr, "total_size": seg,
                    "allocated_size": allocated, "active_size": allocated,
                    "requested_size": requested, "stream": 0,
                    "segment_type": "small" if seg <= 2 * MIB else "large",
                    "segment_pool_id": (0, 0), "is_expandable": False,
                    "frames": [], "blocks": blocks})
    return {
        "segments": out,
        "device_traces": [trace],
        "allocator_settings": {
            "PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
            "garbage_collection_threshold": 0.0, "expandable_segments": False,
            "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False, "graph_capture_record_stream_reuse": False,
            "roundup_power2_divisions": {},
        },
        "external_annotations": [],
    }


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
