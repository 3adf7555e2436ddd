#!/usr/bin/env python3
"""record_alloc_conf.py OUTDIR [--lib build/libranksnap.so] — real PyTorch traces under each
allocator setting, with PyTorch's own numbers next to them, for tests/data/alloc_conf/.

Run on the GPU machine (tests/gpu/record-alloc-conf.sh does, in one call). Each case is one fresh
process (PYTORCH_CUDA_ALLOC_CONF is read when CUDA starts) that trains a randomly initialised
transformers GPT-2 (nothing downloaded) for 6 steps with a batch that changes every step (16, 20,
24, ...: the pattern that leaves slivers in cudaMalloc'ed segments), under
torch.cuda.memory._record_memory_history with room for every event (the replay needs the whole
history), and writes:

  NAME.pickle   torch.cuda.memory._dump_snapshot()
  NAME.json     {"conf", "fraction", "total_memory", "max_memory_reserved" (torch.cuda.
                max_memory_reserved()), "max_memory_allocated", "num_alloc_retries", "num_ooms",
                "num_device_alloc", "num_device_free", "oom", "oom_message", "entries", "torch"}

The cases:
  defaults                        PyTorch's defaults
  expandable_segments             expandable_segments:True
  roundup_power2_divisions        roundup_power2_divisions:4
  max_split_size_mb               max_split_size_mb:128 (the logits are larger)
  garbage_collection_threshold    garbage_collection_threshold:0.6 under a memory fraction that
                                  caps reserved at 1.3x what the defaults reserved
  oom_defaults                    a fraction that caps reserved at 69% of what the defaults
                                  reserved, to run out of memory (on the H100, 2026-11-23: a cap
                                  of 4.40 GiB, above the 4.25 GiB expandable segments reserve;
                                  the defaults ran out there; at 97% of their peak, PyTorch freed
                                  its cache, retried, and did not)
  oom_expandable_segments         the same fraction with expandable_segments:True: does it?
                                  (what `ranksnap replay oom_defaults.pickle --suggest` must say)

The fraction is given in the settings (per_process_memory_fraction, so that the pickle's
PYTORCH_CUDA_ALLOC_CONF string carries it) and through set_per_process_memory_fraction as well.

With --lib, the defaults and expandable_segments cases also run with ranksnap as PyTorch's
pluggable allocator (RANKSNAP_ALLOC_CONF = the same settings, cuda backend) and NAME.ranksnap.json
holds ranksnap's reserved peak for the same requests, to compare with PyTorch's.
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys

STEPS = 6
SEQ = 256
CASES = [
    ("defaults", "", None),
    ("expandable_segments", "expandable_segments:True", None),
    ("roundup_power2_divisions", "roundup_power2_divisions:4", None),
    ("max_split_size_mb", "max_split_size_mb:128", None),
    ("garbage_collection_threshold", "garbage_collection_threshold:0.6", 1.3),
    ("oom_defaults", "", 0.69),
    ("oom_expandable_segments", "expandable_segments:True", 0.69),
]


def train(torch, step_hook=None):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=6, n_head=8, n_embd=512, vocab_size=16384, n_positions=SEQ)
    model = GPT2LMHeadModel(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    for step in range(STEPS):
        if step_hook:
            step_hook(step)
        ids = torch.randint(0, cfg.vocab_size, (16 + 4 * (step % 4), SEQ), device="cuda",
                            generator=gen)
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


def child(args):
    """One case, in its own process: PYTORCH_CUDA_ALLOC_CONF is already in the environment."""
    import torch
    if args.lib:
        # before anything starts CUDA: PyTorch refuses to swap an allocator it has initialised
        alloc = torch.cuda.memory.CUDAPluggableAllocator(args.lib, "ranksnap_torch_malloc",
                                                         "ranksnap_torch_free")
        torch.cuda.memory.change_current_allocator(alloc)
    out = {"conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "fraction": args.fraction,
           "total_memory": torch.cuda.get_device_properties(0).total_memory,
           "torch": torch.__version__, "oom": False, "oom_message": ""}
    if args.fraction is not None:
        torch.cuda.set_per_process_memory_fraction(args.fraction)
    if args.lib:
        lib = ctypes.CDLL(args.lib)
        lib.ranksnap_step.argtypes = [ctypes.c_int64]
        try:
            train(torch, step_hook=lib.ranksnap_step)
        except torch.OutOfMemoryError as e:
            out["oom"], out["oom_message"] = True, str(e).splitlines()[0]
        buf = (ctypes.c_uint64 * 32)()  # ranksnap_stats: reserved_bytes_peak is the 6th field
        if lib.ranksnap_get_stats(buf) != 0:
            print("ranksnap_get_stats failed", file=sys.stderr)
            return 1
        out["ranksnap_reserved_peak"] = buf[5]
        out["ranksnap_allocated_peak"] = buf[1]
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
        return 0
    torch.cuda.memory._record_memory_history(max_entries=2000000, context=None, stacks="python")
    try:
        train(torch)
    except torch.OutOfMemoryError as e:
        out["oom"], out["oom_message"] = True, str(e).splitlines()[0]
    snap = torch.cuda.memory._snapshot()
    out["entries"] = sum(len(t) for t in snap["device_traces"])
    torch.cuda.memory._dump_snapshot(args.pickle)
    s = torch.cuda.memory_stats()
    out["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    out["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    for k in ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free"):
        out[k] = s.get(k, 0)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    print(os.path.basename(args.pickle), json.dumps({k: out[k] for k in (
        "conf", "max_memory_reserved", "oom", "entries")}), flush=True)
    return 0


def start_case(outdir, name, conf, fraction, lib=None):
    """The case's process, started."""
    env = dict(os.environ)
    if fraction is not None:
        conf = ",".join(x for x in (conf, "per_process_memory_fraction:%.10f" % fraction) if x)
    env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    cmd = [sys.executable, os.path.abspath(__file__), outdir, "--child",
           "--pickle", os.path.join(outdir, name + ".pickle"),
           "--json", os.path.join(outdir, name + (".ranksnap.json" if lib else ".json"))]
    if fraction is not None:
        cmd += ["--fraction", repr(fraction)]
    if lib:
        env["RANKSNAP_ALLOC_CONF"] = conf
        env["RANKSNAP_BACKEND"] = "cuda"
        env["RANKSNAP_REPORT"] = "0"
        env["RANKSNAP_DIR"] = os.path.join(outdir, "ranksnap-" + name)
        cmd += ["--lib", lib]
    return subprocess.Popen(cmd, env=env)


def finish_case(proc, name, lib):
    """One case failing leaves the others to record; the defaults are needed by the fractions."""
    rc = proc.wait()
    if rc != 0:
        print("FAIL: case %s%s exited with %d" % (name, " (ranksnap)" if lib else "", rc),
              flush=True)
        if name == "defaults" and not lib:
            raise SystemExit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--lib")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--pickle")
    ap.add_argument("--json")
    ap.add_argument("--fraction", type=float)
    args = ap.parse_args()
    if args.child:
        return child(args)
    os.makedirs(args.outdir, exist_ok=True)
    # PyTorch's defaults first (the fractions are scaled from what they reserved), then every
    # other case at once: each is its own process with its own caching allocator and cap on the
    # one GPU, and importing PyTorch is most of a case's time
    finish_case(start_case(args.outdir, "defaults", "", None), "defaults", None)
    with open(os.path.join(args.outdir, "defaults.json")) as f:
        d = json.load(f)
    base_reserved, total = d["max_memory_reserved"], d["total_memory"]
    running = []
    for name, conf, scale in CASES:
        fraction = None if scale is None else scale * base_reserved / total
        if name != "defaults":
            running.append((start_case(args.outdir, name, conf, fraction), name, None))
        if args.lib and name in ("defaults", "expandable_segments"):
            running.append((start_case(args.outdir, name, conf, fraction, lib=args.lib), name,
                            args.lib))
    for proc, name, lib in running:
        finish_case(proc, name, lib)
    return 0


if __name__ == "__main__":
    sys.exit(main())
