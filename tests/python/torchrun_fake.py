"""torchrun_fake.py — a stand-in for torchrun (torch.distributed.run) on the stand-in torch: an
agent process that imports torch, starts --nproc-per-node copies of the script with the
environment torchrun's elastic agent gives its workers (torch/distributed/elastic/agent/server/
local_elastic_agent.py: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK,
MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT, ...) and waits for
them. The agent loads the CUDA driver, as torchrun's did on the H100 (asking for the device
count), and never allocates device memory.

    python torchrun_fake.py --nproc-per-node 2 [--no-python] SCRIPT [ARGS...]
"""
import argparse
import os
import random
import subprocess
import sys

import torch


def launch(nproc, cmd, run_id="none"):
    """Starts the workers, waits for them; the exit status of the first that failed, else 0."""
    torch.cuda.device_count()
    port = str(random.randint(20000, 60000))
    procs = []
    for local_rank in range(nproc):
        env = dict(os.environ)
        env.update({"LOCAL_RANK": str(local_rank), "RANK": str(local_rank), "GROUP_RANK": "0",
                    "ROLE_RANK": str(local_rank), "ROLE_NAME": "default",
                    "LOCAL_WORLD_SIZE": str(nproc), "WORLD_SIZE": str(nproc),
                    "GROUP_WORLD_SIZE": "1", "ROLE_WORLD_SIZE": str(nproc),
                    "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                    "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
                    "TORCHELASTIC_RUN_ID": run_id, "TORCHELASTIC_USE_AGENT_STORE": "True",
                    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"})
        procs.append(subprocess.Popen(cmd, env=env))
    codes = [p.wait() for p in procs]
    return next((c for c in codes if c), 0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1)
    p.add_argument("--no-python", "--no_python", action="store_true")
    p.add_argument("--rdzv-id", "--rdzv_id", default="none")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = ([] if a.no_python else [sys.executable, "-u"]) + [a.script] + a.args
    sys.exit(launch(a.nproc_per_node, cmd, a.rdzv_id))


if __name__ == "__main__":
    main()
