"""accelerate_fake.py — a stand-in for `accelerate launch --multi_gpu --num_processes N` on the
stand-in torch: accelerate's launcher checks the GPUs (torch.cuda.is_available, device_count:
the CUDA driver loaded, no context), puts its settings into its own environment
(accelerate/utils/launch.py, prepare_multi_gpu_env, under patch_environment) and runs torch's
elastic launch in its own process (torch.distributed.run), which starts the workers.

    python accelerate_fake.py launch --multi_gpu --num_processes 2 SCRIPT [ARGS...]
"""
import argparse
import os
import sys

import torch

import torchrun_fake


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["launch"])
    p.add_argument("--multi_gpu", action="store_true")
    p.add_argument("--num_processes", type=int, default=1)
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args()
    if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
        sys.exit("accelerate: no GPU")
    os.environ.update({"ACCELERATE_MIXED_PRECISION": "no", "ACCELERATE_DYNAMO_BACKEND": "NO",
                       "ACCELERATE_USE_CPU": "False", "OMP_NUM_THREADS": "1"})
    sys.exit(torchrun_fake.launch(a.num_processes, [sys.executable, "-u", a.script] + a.args))


if __name__ == "__main__":
    main()
