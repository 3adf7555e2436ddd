"""lightning_fake.py — a Lightning training script on the stand-in torch, with a stand-in of the
part of Lightning that starts its ranks, as `Trainer(devices=2, strategy="ddp")` does:

- the process the user started (the main one) starts devices - 1 copies of the same command
  (lightning/fabric/strategies/launchers/subprocess_script.py, _call_children_scripts): each
  with the main one's environment plus MASTER_ADDR, MASTER_PORT (a free port), NODE_RANK,
  WORLD_SIZE and its LOCAL_RANK; no RANK. The main process sets the same variables in its own
  environment (LOCAL_RANK=0) and goes on as rank 0.
- each process then computes its global rank (NODE_RANK * devices + LOCAL_RANK), sets its device
  and calls torch.distributed.init_process_group(backend, rank=..., world_size=...) itself
  (lightning/fabric/utilities/distributed.py, _init_dist_connection), and destroys the group at
  exit (an atexit hook registered after the group is made).
Then the training loop of train_fake.py: activations in proportion to the batch, an optimizer
step, and a barrier per step as DDP's all-reduce would.

    python lightning_fake.py --devices 2 [--steps 8] [--batch 8] [--diverge R:F] [--early]

--early: the script puts a tensor on the GPU before Trainer.fit, i.e. before the main process
knows it will be rank 0 of 2 (ranksnap starts there as a process of its own, rank 0 of 1).
--mpi4py: each process initialises MPI as a singleton, as `import mpi4py.MPI` does (Lightning
looks for it when it chooses its cluster environment): through the global MPI_Init_thread, which
no MPI plugin wraps here (ranksnap-run preloads one only for a program linked with MPI), so
ranksnap finds MPI up, a world of one, when it starts.
--oom R: rank R runs out of memory in its first forward pass, before any optimizer step; the
OutOfMemoryError ends its script, and the other rank's collective times out (5 s).
"""
import datetime
import argparse
import atexit
import os
import random
import subprocess
import sys

import torch

from train_fake import MIB, forward, pair


class Trainer:
    def __init__(self, devices, strategy="ddp", num_nodes=1):
        self.devices, self.strategy, self.num_nodes = devices, strategy, num_nodes
        self.children = []

    def _call_children_scripts(self):
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(random.randint(20000, 60000))
        os.environ["NODE_RANK"] = "0"
        os.environ["LOCAL_RANK"] = "0"
        os.environ["WORLD_SIZE"] = str(self.devices * self.num_nodes)
        for local_rank in range(1, self.devices):
            env = os.environ.copy()
            env["LOCAL_RANK"] = str(local_rank)
            cmd = [sys.executable, os.path.abspath(sys.argv[0])] + sys.argv[1:]
            self.children.append(subprocess.Popen(cmd, env=env))

    def fit(self, train):
        # LightningEnvironment: the processes exist already when LOCAL_RANK is set
        if "LOCAL_RANK" not in os.environ:
            self._call_children_scripts()
        local_rank = int(os.environ["LOCAL_RANK"])
        rank = int(os.environ.get("NODE_RANK", 0)) * self.devices + local_rank
        torch.cuda.set_device(local_rank)
        torch.distributed.init_process_group("gloo", rank=rank, world_size=self.devices * self.num_nodes,
                                             timeout=datetime.timedelta(seconds=5))
        atexit.register(torch.distributed.destroy_process_group)
        train(rank)
        for c in self.children:
            c.wait()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--devices", type=int, default=2)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--diverge", type=pair)
    p.add_argument("--early", action="store_true")
    p.add_argument("--oom", type=int, default=-1)
    p.add_argument("--mpi4py", action="store_true")
    a = p.parse_args()
    if a.mpi4py:
        import ctypes
        import ctypes.util
        ctypes.CDLL(ctypes.util.find_library("mpi"), mode=ctypes.RTLD_GLOBAL)
        provided = ctypes.c_int(0)
        # the global scope's MPI_Init_thread, as mpi4py's extension calls it
        ctypes.CDLL(None).MPI_Init_thread(None, None, 3, ctypes.byref(provided))
    early = torch.empty(MIB, device="cuda") if a.early else None  # noqa: F841

    def train(rank):
        params = [torch.empty(8 * MIB, device="cuda") for _ in range(4)]
        opt = torch.optim.SGD(params, lr=0.1)
        batch = a.batch
        if a.diverge and int(a.diverge[0]) == rank:
            batch = int(batch * a.diverge[1])  # rank 1 fed longer sequences
        if rank == a.oom:
            torch.cuda.set_per_process_memory_fraction(0.001)
        for _ in range(a.steps):
            acts = forward(batch)
            del acts
            opt.step()
            torch.distributed.barrier()

    Trainer(devices=a.devices, strategy="ddp").fit(train)


if __name__ == "__main__":
    main()
