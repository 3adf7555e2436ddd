"""torch_infer.py — GPT-2 inference as its users write it: no optimizer, no ranksnap in it; a loop
of forward passes under torch.inference_mode(), optionally torch.compile'd (mode="reduce-overhead"
replays CUDA graphs), or of model.generate calls. Run unmodified under
`torchrun --nproc-per-node N --no-python ranksnap-run --steps A:B python3 torch_infer.py`
(tests/gpu/torch-compiled.sh): each rank runs its own copy (one GPU each when there are enough,
else all on GPU 0), meeting in a process group only to start together.

  --calls N        forward passes (or generate calls), 10 by default
  --compile MODE   none (default), default or reduce-overhead
  --generate T     each call is model.generate of T new tokens
  --longer R:F     rank R's sequences are F times longer
"""
import argparse
import os
import time

import torch
import torch.distributed as dist

from tiny_gpt import VOCAB, add_args, model as tiny_gpt, seq_of


def main():
    p = argparse.ArgumentParser()
    add_args(p)
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--compile", choices=("none", "default", "reduce-overhead"), default="none")
    p.add_argument("--generate", type=int, default=0)
    a = p.parse_args()
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local if torch.cuda.device_count() >= world else 0)
    torch.cuda.set_device(device)
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = tiny_gpt(a, extra=a.generate).to(device).eval()
    if a.compile != "none":
        model = torch.compile(model, mode=a.compile)
    seq = seq_of(a, rank)
    gen = torch.Generator(device=device)
    gen.manual_seed(1 + rank)
    t0 = time.time()
    with torch.inference_mode():
        for call in range(a.calls):
            ids = torch.randint(0, VOCAB, (a.batch, seq), device=device, generator=gen)
            if a.generate:
                out = model.generate(ids, max_new_tokens=a.generate, do_sample=False, pad_token_id=0)
                n = out.shape[1]
            else:
                n = model(input_ids=ids).logits.float().sum().item()
            if rank == 0:
                print(f"call {call}: {n} ({time.time() - t0:.1f} s)", flush=True)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
