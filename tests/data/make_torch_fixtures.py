#!/usr/bin/env python3
"""make_torch_fixtures.py OUTDIR — real PyTorch memory snapshots for ranksnap's tests.
   make_torch_fixtures.py --sites OUTDIR [--lib build/libranksnap.so] [FOLDER...] — the attribution
   fixtures (all of them, or only the folders named).

Run on a machine with a GPU and PyTorch (the fixtures in tests/data/ were made with PyTorch
2.11.0+cu130 on an NVIDIA H100). Four "ranks", one process each, run in turn on the one GPU: a
small GPT-2 style transformer (transformers' GPT2LMHeadModel, random init, nothing downloaded)
trains a few steps with AdamW under torch.cuda.memory._record_memory_history, and each writes
snapshot_rank<R>.pickle with torch.cuda.memory._dump_snapshot:

- ranks 0 and 1: the same batch;
- rank 2: a 1.5x larger batch (the rank that diverges);
- rank 3: a batch that grows each step under torch.cuda.set_per_process_memory_fraction, so it
  runs out of memory; its except handler dumps the snapshot, as training frameworks' OOM
  observers do (written as oom_rank-3_gpt2.pickle).

max_entries keeps each file under 1 MB.

--sites writes the fixtures of the site attribution (issue 12) into OUTDIR (tests/data/sites/),
each recorded twice, with _record_memory_history's default stacks="all" (C++ and Python frames)
and with stacks="python", one folder per case and kind of stack:

- longer_seq_{all,python}/snapshot_rank<R>.pickle: rank 2 trains on sequences twice as long;
- leak_{all,python}/snapshot_rank<R>.pickle: 12 steps, rank 1 appends its logits to a list every
  step (a leak of one output a step);
- leak_defaults/snapshot_rank<R>.pickle: the same leak over 24 steps, recorded with
  _record_memory_history()'s defaults (stacks="all", no bound on the entries): about 2.4 MB a
  rank, the size of the issue 15 benchmark's real pickles;
- oom_first_step_{all,python}/: rank 3 runs out of memory in the forward pass of its first step
  (a memory cap below one step's need) and dumps oom_rank-3_gpt2.pickle in its except handler,
  ranks 0-2 train normally;
- pluggable/rank-0000<R>.rsnap: the longer_seq case with ranksnap as PyTorch's pluggable
  allocator (--lib: libranksnap.so), whose native stacks never leave libtorch and the
  interpreter.

tests/cli/site_fixtures.sh checks each folder when it exists (ctest -R site_fixture).
"""
import os
import subprocess
import sys

STEPS = 4
BASE_BATCH = 8
SEQ = 128


def run_rank(rank, out):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(rank)
    cfg = GPT2Config(n_layer=4, n_head=4, n_embd=256, vocab_size=8192, n_positions=SEQ)
    torch.cuda.memory._record_memory_history(max_entries=2500, stacks="python")
    model = GPT2LMHeadModel(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if rank == 3:
        # a cap a few steps of growth will cross: the model, the optimizer state and step 0 fit
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(1.2e9 / total)
    name = "snapshot_rank%d.pickle" % rank
    try:
        for step in range(STEPS + (4 if rank == 3 else 0)):
            batch = BASE_BATCH
            if rank == 2:
                batch = BASE_BATCH * 3 // 2
            if rank == 3:
                batch = BASE_BATCH * (1 + 2 * step) ** 2
            ids = torch.randint(0, cfg.vocab_size, (batch, SEQ), device="cuda")
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
    except torch.OutOfMemoryError as e:
        print("rank %d: %s" % (rank, str(e).splitlines()[0]), flush=True)
        name = "oom_rank-3_gpt2.pickle"
    torch.cuda.memory._dump_snapshot(os.path.join(out, name))
    torch.cuda.memory._record_memory_history(enabled=None)
    print("rank %d: wrote %s (%d bytes)" % (rank, name, os.path.getsize(os.path.join(out, name))), flush=True)


# ---- the attribution fixtures (--sites) ------------------------------------------------------

SITE_SEQ = 128


def site_model(torch):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=8192, n_positions=2 * SITE_SEQ)
    return cfg, GPT2LMHeadModel(cfg).cuda()


def site_rank(case, stacks, rank, out, lib):
    """One rank of one case, in its own process (a fresh allocator, as under mpirun)."""
    import torch
    torch.manual_seed(rank)
    if case == "pluggable":
        import ctypes
        alloc = torch.cuda.memory.CUDAPluggableAllocator(lib, "ranksnap_torch_malloc",
                                                         "ranksnap_torch_free")
        torch.cuda.memory.change_current_allocator(alloc)
        ranksnap = ctypes.CDLL(lib)
        ranksnap.ranksnap_step.argtypes = [ctypes.c_int64]
        ranksnap.ranksnap_dump.argtypes = [ctypes.c_char_p]
    elif stacks == "defaults":
        # PyTorch's defaults, as a user who calls it without arguments records: stacks="all",
        # context="all", no bound on the entries
        torch.cuda.memory._record_memory_history()
    else:
        # max_entries bounds the files; a step of this model records a few hundred entries
        torch.cuda.memory._record_memory_history(max_entries=6000, stacks=stacks)
    cfg, model = site_model(torch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    steps = (24 if stacks == "defaults" else 12) if case == "leak" else 4
    seq = SITE_SEQ * 2 if case in ("longer_seq", "pluggable") and rank == 2 else SITE_SEQ
    if case == "oom_first_step" and rank == 3:
        # the model, its gradients and AdamW's state fit; one forward pass of 64 sequences does not
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(
            (torch.cuda.memory_allocated() + 96 * 2 ** 20) / total)
    kept = []
    name = "snapshot_rank%d.pickle" % rank
    batch = 64 if case == "oom_first_step" and rank == 3 else 4
    try:
        for step in range(steps):
            if case == "pluggable":
                ranksnap.ranksnap_step(step)
            ids = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
            out_ = model(input_ids=ids, labels=ids)
            out_.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if case == "leak" and rank == 1:
                kept.append(out_.logits.detach())  # the leak: one output kept every step
        torch.cuda.synchronize()
    except torch.OutOfMemoryError as e:
        print("rank %d: %s" % (rank, str(e).splitlines()[0]), flush=True)
        name = "oom_rank-3_gpt2.pickle"
    if case == "pluggable":
        path = os.path.join(out, "rank-%05d.rsnap" % rank)
        if ranksnap.ranksnap_dump(path.encode()) != 0:
            raise SystemExit("ranksnap_dump failed")
    else:
        path = os.path.join(out, name)
        torch.cuda.memory._dump_snapshot(path)
        torch.cuda.memory._record_memory_history(enabled=None)
    print("%s rank %d: wrote %s (%d bytes)" % (case, rank, path, os.path.getsize(path)), flush=True)


def make_sites(out, lib, only):
    cases = [(c, s) for c in ("longer_seq", "leak", "oom_first_step") for s in ("all", "python")]
    cases.append(("leak", "defaults"))
    if lib:
        cases.append(("pluggable", "native"))
    for case, stacks in cases:
        folder = case if case == "pluggable" else "%s_%s" % (case, stacks)
        if only and folder not in only:
            continue
        d = os.path.join(out, folder)
        os.makedirs(d, exist_ok=True)
        # the four ranks at once, each its own process on the one GPU (each its own allocator and
        # memory cap, as under mpirun); importing PyTorch is most of a rank's time
        procs = []
        for r in range(4):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE="4", RANKSNAP_DIR=d,
                       RANKSNAP_BACKEND="cuda", RANKSNAP_REPORT="0",
                       RANKSNAP_JOB="sites-" + case)
            procs.append(subprocess.Popen([sys.executable, __file__, "--site-rank", case, stacks,
                                           str(r), d, lib or ""], env=env))
        if any(p.wait() != 0 for p in procs):
            raise SystemExit("%s: a rank failed" % folder)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--sites":
        args = sys.argv[3:]
        lib = None
        if args[:1] == ["--lib"] and len(args) >= 2:
            lib, args = os.path.abspath(args[1]), args[2:]
        make_sites(sys.argv[2], lib, set(args))  # further arguments: only these folders
        return 0
    if len(sys.argv) == 7 and sys.argv[1] == "--site-rank":
        site_rank(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6])
        return 0
    if len(sys.argv) == 3:
        run_rank(int(sys.argv[2]), sys.argv[1])
        return 0
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for r in range(4):
        # one process per rank, as under mpirun: each gets a fresh allocator
        subprocess.run([sys.executable, __file__, out, str(r)], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
