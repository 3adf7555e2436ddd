#!/usr/bin/env python3
"""Writes PyTorch-like memory snapshots, one pickle per rank, without PyTorch.

The dicts have the shape torch.cuda.memory._dump_snapshot() writes (torch 2.11, as
docs/PYTORCH.md describes it): `segments` with `blocks`, `device_traces` (one list per device),
`allocator_settings`, `external_annotations`; trace entries with `action`, `addr`, `size`,
`stream`, `time_us`, `compile_context`, `user_metadata`, `frames`; frames innermost first, C++
frames (`??`, line 0) interleaved with Python frames of torch and of the user's code. Strings are
shared objects, so pickle memoizes them as PyTorch's are.

The trace is a small training loop run through a toy caching allocator (one block per segment,
cached segments reused by size): parameters first, then per step zero_grad, a forward pass over
the layers, a backward pass, and an optimizer step whose state is created in the first step.
Knobs make one rank's activations larger (--big-rank) and one rank run out of memory in the
forward pass of a given step (--oom-rank), leaving the snapshot its except handler would dump.

    make_torch_like_pickle.py OUTDIR [--ranks 4] [--steps 5] [--layers 4] ...
Prints nothing; exit status 0. The tests run it with /usr/bin/python3 (no torch needed).
"""
import argparse
import os
import pickle

MIB = 1 << 20
TORCH = "/usr/local/lib/python3.11/site-packages/torch/"
LINEAR = TORCH + "nn/modules/linear.py"
FUNCTIONAL = TORCH + "nn/functional.py"
AUTOGRAD = TORCH + "autograd/graph.py"
ADAM = TORCH + "optim/adam.py"
MODULE = TORCH + "nn/modules/module.py"
MODEL = "/home/user/project/model.py"
TRAIN = "/home/user/project/train.py"
RUNPY = "/usr/lib/python3.11/runpy.py"
CPP = "??"


def frame(name, filename, line):
    return (name, filename, line)


# C++ frames as PyTorch symbolizes them without debug info.
CPP_MALLOC = [frame("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", CPP, 0),
              frame("at::native::empty_cuda", CPP, 0),
              frame("at::_ops::empty_memory_format::call", CPP, 0)]
OUTER = [frame("train_step", TRAIN, 41), frame("main", TRAIN, 77), frame("<module>", TRAIN, 90),
         frame("_run_code", RUNPY, 88)]


def stack(*user):
    """Innermost first: C++ allocator frames, then the given frames, then the training loop."""
    return CPP_MALLOC + list(user) + OUTER


FORWARD = {
    "qkv": stack(frame("forward", LINEAR, 125), frame("_call_impl", MODULE, 1747),
                 frame("forward", MODEL, 31)),
    "attn": stack(frame("scaled_dot_product_attention", FUNCTIONAL, 5400), frame("forward", MODEL, 33)),
    "mlp": stack(frame("forward", LINEAR, 125), frame("_call_impl", MODULE, 1747),
                 frame("forward", MODEL, 36)),
}
INPUT = CPP_MALLOC + [frame("train_step", TRAIN, 38)] + OUTER[1:]
LOSS = stack(frame("cross_entropy", FUNCTIONAL, 3462), frame("train_step", TRAIN, 40))
PARAM = CPP_MALLOC + [frame("__init__", MODEL, 20), frame("main", TRAIN, 70), frame("<module>", TRAIN, 90)]
GRAD = CPP_MALLOC + [frame("_engine_run_backward", AUTOGRAD, 823), frame("train_step", TRAIN, 42)] + OUTER[1:]
BWD_TMP = GRAD
OPT_STATE = CPP_MALLOC + [frame("_init_group", ADAM, 180), frame("train_step", TRAIN, 43)] + OUTER[1:]
OPT_TMP = CPP_MALLOC + [frame("_multi_tensor_adam", ADAM, 520), frame("train_step", TRAIN, 43)] + OUTER[1:]


def frames_of(st):
    # A fresh dict per frame and list per entry, as PyTorch builds them; the strings are shared.
    return [{"name": n, "filename": f, "line": l} for (n, f, l) in st]


def round_block(size):
    return 512 if size < 512 else (size + 511) // 512 * 512


def segment_size(rounded):
    if rounded <= MIB:
        return 2 * MIB
    return (rounded + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)


class Allocator:
    """One block per segment; a freed segment is cached and reused for the same segment size."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.segments = {}  # address -> dict(size, block: None or (size, requested, stack), stack)
        self.cached = {}    # segment size -> [address]
        self.next_addr = 0x7F0000000000
        self.trace = []
        self.time_us = 1_700_000_000_000_000
        self.live = {}      # address -> requested size

    def record(self, action, addr, size, st, **extra):
        self.time_us += 7
        entry = {"action": action, "addr": addr, "size": size, "stream": 0,
                 "time_us": self.time_us, "compile_context": "N/A", "user_metadata": "",
                 "frames": frames_of(st) if st else []}
        if action == "oom":
            del entry["addr"]
            entry["device_free"] = extra["device_free"]
        self.trace.append(entry)

    def reserved(self):
        return sum(s["size"] for s in self.segments.values())

    def malloc(self, size, st):
        rounded = round_block(size)
        seg = segment_size(rounded)
        if self.cached.get(seg):
            addr = self.cached[seg].pop()
        else:
            if self.reserved() + seg > self.capacity:
                # PyTorch frees every cached segment and retries before it gives up.
                for s, addrs in list(self.cached.items()):
                    for a in addrs:
                        self.record("segment_free", a, s, self.segments[a]["stack"])
                        del self.segments[a]
                    self.cached[s] = []
                if self.reserved() + seg > self.capacity:
                    self.record("oom", 0, size, st,
                                device_free=self.capacity - self.reserved())
                    raise MemoryError(size)
            addr = self.next_addr
            self.next_addr += seg + 2 * MIB
            self.segments[addr] = {"size": seg, "block": None, "stack": st}
            self.record("segment_alloc", addr, seg, st)
        self.segments[addr]["block"] = (rounded, size, st)
        self.live[addr] = size
        self.record("alloc", addr, size, st)
        return addr

    def free(self, addr):
        size = self.live.pop(addr)
        st = self.segments[addr]["block"][2]
        self.record("free_requested", addr, size, st)
        self.record("free_completed", addr, size, st)
        self.segments[addr]["block"] = None
        self.cached.setdefault(self.segments[addr]["size"], []).append(addr)

    def state(self):
        out = []
        for addr in sorted(self.segments):
            s = self.segments[addr]
            blocks = []
            allocated = requested = 0
            if s["block"]:
                rounded, req, st = s["block"]
                blocks.append({"address": addr, "size": rounded, "requested_size": req,
                               "state": "active_allocated", "frames": frames_of(st)})
                allocated, requested = rounded, req
                if s["size"] > rounded:
                    blocks.append({"address": addr + rounded, "size": s["size"] - rounded,
                                   "requested_size": 0, "state": "inactive", "frames": []})
            else:
                blocks.append({"address": addr, "size": s["size"], "requested_size": 0,
                               "state": "inactive", "frames": []})
            out.append({"device": 0, "address": addr, "total_size": s["size"],
                        "allocated_size": allocated, "active_size": allocated,
                        "requested_size": requested, "stream": 0,
                        "segment_type": "small" if s["size"] <= 2 * MIB else "large",
                        "segment_pool_id": (0, 0), "is_expandable": False,
                        "frames": frames_of(s["stack"]), "blocks": blocks})
        return out


def train(args, rank):
    a = Allocator(args.capacity_mib * MIB)
    act = args.act_kib * 1024
    factor = args.big_factor if rank == args.big_rank else 1.0
    params = [a.malloc(args.param_kib * 1024 + 4096 * i, PARAM) for i in range(2 * args.layers)]
    grads, opt_state = [], []
    try:
        for step in range(args.steps):
            for g in grads:  # zero_grad(set_to_none=True)
                a.free(g)
            grads = []
            x = a.malloc(act, INPUT)
            acts = []
            for layer in range(args.layers):
                if rank == args.oom_rank and step == args.oom_step and layer == args.layers // 2:
                    a.malloc(args.capacity_mib * MIB * 4, FORWARD["mlp"])
                acts.append(a.malloc(int(3 * act * factor), FORWARD["qkv"]))
                acts.append(a.malloc(int(act * factor), FORWARD["attn"]))
                acts.append(a.malloc(int(4 * act * factor), FORWARD["mlp"]))
            loss = a.malloc(4, LOSS)
            for layer in reversed(range(args.layers)):
                tmp = a.malloc(int(4 * act * factor), BWD_TMP)
                grads.append(a.malloc(args.param_kib * 1024 + 4096 * (2 * layer), GRAD))
                grads.append(a.malloc(args.param_kib * 1024 + 4096 * (2 * layer + 1), GRAD))
                a.free(tmp)
                for _ in range(3):
                    a.free(acts.pop())
            a.free(loss)
            a.free(x)
            if step == 0:  # Adam's exp_avg and exp_avg_sq, created lazily
                for i in range(len(params)):
                    opt_state.append(a.malloc(args.param_kib * 1024 + 4096 * i, OPT_STATE))
                    opt_state.append(a.malloc(args.param_kib * 1024 + 4096 * i, OPT_STATE))
            tmp = a.malloc(args.param_kib * 1024, OPT_TMP)
            a.free(tmp)
    except MemoryError:
        pass  # the except handler dumps: what is alive at the OOM stays in the state
    a.record("snapshot", 0, 0, None)
    return {
        "segments": a.state(),
        "device_traces": [a.trace, []],
        "allocator_settings": {
            "PYTORCH_CUDA_ALLOC_CONF": "",
            "max_split_size": (1 << 64) - 1,  # SIZE_MAX: a LONG1 of 9 bytes
            "garbage_collection_threshold": 0.0,
            "expandable_segments": False,
            "pinned_num_register_threads": 1,
            "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {},
        },
        "external_annotations": [],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("outdir")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--act-kib", type=int, default=1536, help="activation unit, KiB")
    p.add_argument("--param-kib", type=int, default=512)
    p.add_argument("--big-rank", type=int, default=2, help="-1: none")
    p.add_argument("--big-factor", type=float, default=1.5)
    p.add_argument("--oom-rank", type=int, default=3, help="-1: none")
    p.add_argument("--oom-step", type=int, default=3)
    p.add_argument("--capacity-mib", type=int, default=4096)
    p.add_argument("--protocol", type=int, default=4)
    p.add_argument("--name", default="snapshot_rank{rank}.pickle")
    p.add_argument("--oom-name", default=None, help="file name of the OOM rank (default --name)")
    p.add_argument("--only-rank", type=int, default=-1, help="write this rank only")
    args = p.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    for rank in range(args.ranks):
        if args.only_rank >= 0 and rank != args.only_rank:
            continue
        snap = train(args, rank)
        name = args.oom_name if (rank == args.oom_rank and args.oom_name) else args.name
        with open(os.path.join(args.outdir, name.format(rank=rank)), "wb") as f:
            pickle.dump(snap, f, protocol=args.protocol)


if __name__ == "__main__":
    main()
