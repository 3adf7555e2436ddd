#!/usr/bin/env python3
"""make_torch_fixtures.py OUTDIR — real PyTorch memory snapshots for ranksnap's tests.

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


def main():
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
