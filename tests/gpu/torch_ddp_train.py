"""torch_ddp_train.py — a DistributedDataParallel GPT-2 training script as its users write it:
transformers, random init (no download), AdamW; nothing of ranksnap in it. The GPU session runs
it unmodified under `mpirun ... ranksnap-run ... python torch_ddp_train.py` and
`torchrun --no-python ranksnap-run ... python torch_ddp_train.py` (tests/gpu/torch-issue11.sh).

Ranks come from torchrun's RANK/WORLD_SIZE/LOCAL_RANK or Open MPI's OMPI_COMM_WORLD_*;
MASTER_ADDR/MASTER_PORT from the environment. One GPU per rank with NCCL when there are enough
GPUs, else every rank on GPU 0 with gloo (gloo all-reduces CUDA tensors too).

  --fsdp2          FSDP2 in place of DDP: fully_shard on each GPT-2 block, then on the model
                   (tests/gpu/torch-names.sh)
  --compile        the DDP model torch.compile'd (tests/gpu/torch-compiled.sh)
  --checkpointing  transformers' gradient checkpointing on (tests/gpu/torch-compiled.sh)

The knobs make one rank differ:
  --bigger R:F     rank R's batch is F times larger                         (case a)
  --longer R:F     rank R's sequences are F times longer (tests/gpu/torch-launchers.sh)
  --keep-logits R  rank R keeps every step's logits in a list                (case b)
  --oom R:S        rank R caps its memory after step S-1 (the peak so far plus 30%) and
                   trains step S with an 8 times larger batch: it runs out of memory, and the
                   OutOfMemoryError ends the script                          (case c)
  --oom-backward R:S  rank R runs out of memory in the backward pass of step S: after its
                   forward it empties PyTorch's cache and caps its memory at what it holds plus
                   2 MiB, so that the backward's first large gradient does not fit
                   (tests/gpu/torch-names.sh)
  --hang R:S       rank R stops at step S (sleeps), as a stuck rank does; the others wait in
                   the next all-reduce (tests/gpu/torch_sigterm_timing.py)
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from tiny_gpt import VOCAB, add_args, model as tiny_gpt, pair, seq_of


def env_int(*names, default=0):
    for n in names:
        if os.environ.get(n):
            return int(os.environ[n])
    return default


def main():
    p = argparse.ArgumentParser()
    add_args(p)
    p.add_argument("--bigger", type=pair)
    p.add_argument("--keep-logits", type=int, default=-1)
    p.add_argument("--oom", type=pair)
    p.add_argument("--oom-backward", type=pair)
    p.add_argument("--hang", type=pair)
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    p.add_argument("--fsdp2", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--checkpointing", action="store_true")
    a = p.parse_args()

    rank = env_int("RANK", "OMPI_COMM_WORLD_RANK")
    world = env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", default=1)
    local = env_int("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")
    own_gpu = torch.cuda.device_count() >= world
    backend = a.backend if a.backend != "auto" else ("nccl" if own_gpu else "gloo")
    device = torch.device("cuda", local if own_gpu else 0)
    torch.cuda.set_device(device)
    dist.init_process_group(backend, rank=rank, world_size=world)

    torch.manual_seed(0)
    seq = seq_of(a, rank)
    gpt = tiny_gpt(a)
    if a.checkpointing:
        gpt.gradient_checkpointing_enable()
    if a.fsdp2:
        from torch.distributed.fsdp import fully_shard
        model = gpt.to(device)
        for block in model.transformer.h:
            fully_shard(block)
        fully_shard(model)
    else:
        model = DDP(gpt.to(device), device_ids=[device.index])
    if a.compile:
        model = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=device)
    gen.manual_seed(1 + rank)

    batch = a.batch
    if a.bigger and a.bigger[0] == rank:
        batch = int(batch * a.bigger[1])
    kept = []
    t0 = time.time()
    for step in range(a.steps):
        if a.hang and a.hang[0] == rank and step == int(a.hang[1]):
            time.sleep(3600)
        if a.oom and a.oom[0] == rank and step == int(a.oom[1]):
            cap = torch.cuda.max_memory_reserved(device) * 1.3
            torch.cuda.set_per_process_memory_fraction(cap / torch.cuda.get_device_properties(device).total_memory, device)
            batch *= 8
        ids = torch.randint(0, VOCAB, (batch, seq), device=device, generator=gen)
        out = model(input_ids=ids, labels=ids)
        if rank == a.keep_logits:
            kept.append(out.logits.detach())
        if a.oom_backward and a.oom_backward[0] == rank and step == int(a.oom_backward[1]):
            torch.cuda.empty_cache()
            cap = torch.cuda.memory_reserved(device) + (2 << 20)
            torch.cuda.set_per_process_memory_fraction(cap / torch.cuda.get_device_properties(device).total_memory, device)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss = out.loss.item()  # the step's sync, as training loops log their loss
        if rank == 0:
            print(f"step {step} loss {loss:.3f} ({time.time() - t0:.1f} s)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
