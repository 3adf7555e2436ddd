#!/usr/bin/env python3
"""torch_pluggable.py — ranksnap as PyTorch's allocator, checked on a real model (label gpu).

The snippet a PyTorch user needs (docs/GPU.md, "PyTorch's pluggable allocator"):

    import torch
    alloc = torch.cuda.memory.CUDAPluggableAllocator(
        "/path/to/libranksnap.so", "ranksnap_torch_malloc", "ranksnap_torch_free")
    torch.cuda.memory.change_current_allocator(alloc)   # before the first CUDA tensor

What this script checks, on the GPU machine (ctest -L gpu runs it; it exits 77, skipped, where
torch, transformers or a GPU is missing):

1. One process trains a randomly initialised transformers GPT-2 (no download) for a few steps
   with PyTorch's own caching allocator and records PyTorch's numbers for those steps:
   memory_stats()["requested_bytes.all.peak"] (the peak of the bytes PyTorch asked for) and
   ["allocated_bytes.all.peak"].
2. A second process trains the same model on the same inputs with ranksnap as the pluggable
   allocator. PyTorch's memory_stats() do not work with a pluggable allocator, so the reference
   comes from step 1: the requests are the same (same model, shapes and seed; a pluggable
   allocator receives exactly the sizes PyTorch's own would), so ranksnap's peak of requested
   bytes must equal PyTorch's, and since ranksnap follows PyTorch's policy (512-byte rounding,
   the same pools, splitting and segment sizes), the snapshot's peak allocated must equal
   PyTorch's allocated peak. The snapshot is read back through `ranksnap report --json`. With
   RANKSNAP_ALLOC_CONF set, step 1 runs with the same string in PYTORCH_CUDA_ALLOC_CONF: both
   allocators then follow the same settings.
3. Two ranks on the one GPU (mpirun -np 2 when mpirun is there, so that ranksnap joins MPI and
   gathers; else two processes with RANK/WORLD_SIZE and `ranksnap report` on their files), rank 1
   with a 1.5x batch: the report must flag rank 1, and only it.

Usage: torch_pluggable.py --lib build/libranksnap.so --cli build/ranksnap --out DIR
       [--launcher auto|mpirun|spawn] [--steps N]
"""
import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys

SKIP = 77


class Stats(ctypes.Structure):
    """ranksnap_stats of include/ranksnap.h, field for field."""
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "allocated_bytes", "allocated_bytes_peak", "requested_bytes", "requested_bytes_peak",
        "reserved_bytes", "reserved_bytes_peak", "active_bytes", "active_bytes_peak",
        "inactive_split_bytes", "num_allocs", "num_frees", "num_alloc_retries", "num_ooms",
        "num_segment_allocs", "num_segment_frees", "num_sync_all_streams", "peak_time_us")] + [
        ("peak_step", ctypes.c_int64)] + [(n, ctypes.c_uint64) for n in (
            "events_recorded", "events_dropped", "device_total_bytes", "memory_limit_bytes")]


def rank_from_env():
    for v in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "RANK"):
        if os.environ.get(v):
            return int(os.environ[v])
    return 0


def train(torch, steps, batch, step_hook=None):
    """A small GPT-2, random init, AdamW; the same requests on every run with the same batch."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=4, n_head=8, n_embd=512, vocab_size=8192, n_positions=256)
    model = GPT2LMHeadModel(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    for step in range(steps):
        if step_hook:
            step_hook(step)
        ids = torch.randint(0, cfg.vocab_size, (batch, 256), device="cuda", generator=gen)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


def worker(args):
    import torch
    batch = args.batch
    if args.big_rank is not None and rank_from_env() == args.big_rank:
        batch = batch * 3 // 2
    if args.worker == "native":
        train(torch, args.steps, batch)
        s = torch.cuda.memory_stats()
        out = {"requested_peak": s["requested_bytes.all.peak"],
               "allocated_peak": s["allocated_bytes.all.peak"],
               "reserved_peak": s["reserved_bytes.all.peak"]}
    else:
        alloc = torch.cuda.memory.CUDAPluggableAllocator(
            args.lib, "ranksnap_torch_malloc", "ranksnap_torch_free")
        torch.cuda.memory.change_current_allocator(alloc)
        lib = ctypes.CDLL(args.lib)  # the same library object PyTorch loaded
        lib.ranksnap_step.argtypes = [ctypes.c_int64]
        lib.ranksnap_dump.argtypes = [ctypes.c_char_p]
        train(torch, args.steps, batch, step_hook=lib.ranksnap_step)
        st = Stats()
        rc = lib.ranksnap_get_stats(ctypes.byref(st))
        if rc != 0:
            print("ranksnap_get_stats failed:", rc, file=sys.stderr)
            return 1
        out = {"requested_peak": st.requested_bytes_peak, "allocated_peak": st.allocated_bytes_peak,
               "reserved_peak": st.reserved_bytes_peak, "allocs": st.num_allocs, "batch": batch}
        if args.dump:
            rc = lib.ranksnap_dump(args.dump.encode())
            if rc != 0:
                print("ranksnap_dump failed:", rc, file=sys.stderr)
                return 1
    if args.result:
        with open(args.result, "w") as f:
            json.dump(out, f)
    print(args.worker, "rank", rank_from_env(), json.dumps(out), flush=True)
    return 0


def run(cmd, env=None, check=True):
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(p.stdout, end="", flush=True)
    if check and p.returncode != 0:
        raise SystemExit("FAIL: %s exited with %d" % (cmd[0], p.returncode))
    return p


def report_json(cli, path):
    p = subprocess.run([cli, "report", "--json", path], stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit("FAIL: ranksnap report --json %s exited with %d" % (path, p.returncode))
    return json.loads(p.stdout)


def driver(args):
    try:
        import torch
        import transformers
    except ImportError as e:
        print("SKIPPED: %s (needs torch and transformers)" % e)
        return SKIP
    if not torch.cuda.is_available():
        print("SKIPPED: torch sees no CUDA device")
        return SKIP
    print("torch", torch.__version__, "transformers", transformers.__version__,
          torch.cuda.get_device_name(0), flush=True)
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    me = [sys.executable, os.path.abspath(__file__), "--lib", args.lib, "--steps", str(args.steps),
          "--batch", str(args.batch)]
    env = dict(os.environ, RANKSNAP_BACKEND="cuda", RANKSNAP_REPORT="0")
    for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "RANKSNAP_STEPS", "RANKSNAP_MEMORY_LIMIT"):
        env.pop(v, None)
    failures = []

    # 1 and 2: PyTorch's allocator, then ranksnap's, on the same training
    native, mine = os.path.join(args.out, "native.json"), os.path.join(args.out, "ranksnap.json")
    snap = os.path.join(args.out, "single", "gpt2.rsnap")
    os.makedirs(os.path.dirname(snap))
    # the reference runs under the settings ranksnap's allocator is given (RANKSNAP_ALLOC_CONF,
    # e.g. expandable_segments:True in docs/GPU.md's second pass), else the two policies differ
    nenv = dict(env)
    if env.get("RANKSNAP_ALLOC_CONF"):
        nenv["PYTORCH_CUDA_ALLOC_CONF"] = env["RANKSNAP_ALLOC_CONF"]
    run(me + ["--worker", "native", "--result", native], nenv)
    run(me + ["--worker", "ranksnap", "--result", mine, "--dump", snap],
        dict(env, RANKSNAP_DIR=os.path.join(args.out, "single")))
    n, m = json.load(open(native)), json.load(open(mine))
    r = report_json(args.cli, snap)
    peak_in_snapshot = r["ranks"][0]["peak_allocated"]
    print("PyTorch's allocator: requested peak %d, allocated peak %d, reserved peak %d" %
          (n["requested_peak"], n["allocated_peak"], n["reserved_peak"]))
    print("ranksnap:            requested peak %d, allocated peak %d (snapshot: %d), reserved peak %d,"
          " %d allocations" % (m["requested_peak"], m["allocated_peak"], peak_in_snapshot,
                               m["reserved_peak"], m["allocs"]))
    if m["allocs"] == 0:
        failures.append("ranksnap served no allocation: the pluggable allocator was not used")
    if m["requested_peak"] != n["requested_peak"]:
        failures.append("peak of requested bytes: ranksnap %d, PyTorch %d (difference %+d)" %
                        (m["requested_peak"], n["requested_peak"],
                         m["requested_peak"] - n["requested_peak"]))
    if peak_in_snapshot != m["allocated_peak"]:
        failures.append("the snapshot's peak allocated %d differs from ranksnap_get_stats' %d" %
                        (peak_in_snapshot, m["allocated_peak"]))
    if peak_in_snapshot != n["allocated_peak"]:
        failures.append("peak allocated: snapshot %d, PyTorch %d (difference %+d)" %
                        (peak_in_snapshot, n["allocated_peak"], peak_in_snapshot - n["allocated_peak"]))

    # 3: two ranks, rank 1 with a 1.5x batch
    two = os.path.join(args.out, "two")
    launcher = args.launcher
    if launcher == "auto":
        launcher = "mpirun" if shutil.which("mpirun") else "spawn"
    wenv = dict(env, RANKSNAP_DIR=two, RANKSNAP_JOB="torch-pluggable-two")
    wcmd = me + ["--worker", "ranksnap", "--big-rank", "1"]
    if launcher == "mpirun":
        # ranksnap joins MPI from the first allocation and gathers to rank 0 at exit
        wenv["RANKSNAP_REPORT"] = "1"
        mpi = ["mpirun", "-np", "2", "--oversubscribe"]
        if os.geteuid() == 0:
            mpi.append("--allow-run-as-root")
        for k in ("RANKSNAP_DIR", "RANKSNAP_JOB", "RANKSNAP_BACKEND", "RANKSNAP_REPORT"):
            mpi += ["-x", k]
        run(mpi + wcmd, wenv)
    else:
        procs = []
        for rank in (0, 1):
            penv = dict(wenv, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK="0")
            procs.append(subprocess.Popen(wcmd, env=penv))
        if any(p.wait() != 0 for p in procs):
            raise SystemExit("FAIL: a rank of the two-rank run failed")
    files = sorted(os.listdir(two))
    print("two-rank run (%s): %s" % (launcher, " ".join(files)))
    r2 = report_json(args.cli, two)
    run([args.cli, "report", two])
    flagged = [d["rank"] for d in r2["divergent_ranks"]]
    if flagged != [1]:
        failures.append("two ranks: the report flags %s, expected [1]" % flagged)
    if launcher == "mpirun" and not os.path.exists(os.path.join(two, "report.json")):
        failures.append("two ranks under mpirun: rank 0 wrote no report.json (no gather at exit)")

    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("PASS: ranksnap as PyTorch's pluggable allocator: peaks equal PyTorch's, rank 1 flagged")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="path to libranksnap.so")
    ap.add_argument("--cli", help="path to the ranksnap command")
    ap.add_argument("--out", help="output folder (emptied first)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--launcher", choices=("auto", "mpirun", "spawn"), default="auto")
    ap.add_argument("--worker", choices=("native", "ranksnap"), help=argparse.SUPPRESS)
    ap.add_argument("--big-rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--dump", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.lib = os.path.abspath(args.lib)
    if args.worker:
        return worker(args)
    if not args.cli or not args.out:
        ap.error("--cli and --out are needed")
    return driver(args)


if __name__ == "__main__":
    sys.exit(main())
