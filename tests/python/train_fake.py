"""train_fake.py — a training loop as its users write it, with no ranksnap in it, on the stand-in
torch of tests/python/fake_torch (CI has neither a GPU nor torch).

Per step: a forward pass that allocates activations in proportion to the batch, an optimizer
step (whose first call creates its state), the activations freed. Knobs make ranks differ the
ways the tests need:

  --diverge R:F     rank R's batch is F times larger (a constant offset)
  --leak R          rank R keeps one output per step in a list (growth)
  --oom R:S         rank R caps its memory at step S, where its batch grows 8 times, and runs
                    out in the forward pass; the OutOfMemoryError propagates (the script
                    fails, as an unmodified one would)
  --fraction R:F    rank R caps its memory with torch.cuda.set_per_process_memory_fraction(F)
                    before it allocates (PyTorch's own limit: under backend:cudaMallocAsync a
                    request over it is refused before cudaMallocAsync is called)
  --on-oom HOW      the loop catches torch.OutOfMemoryError: skip (goes on with the next step,
                    as loops that skip a batch do) or exit (prints it and calls sys.exit(1));
                    without it the error propagates
  --thread          the training runs in a thread of its own, the main thread waiting for it
  --own-hook        the script installs its own sys.excepthook (as rich.traceback.install()
                    does), which prints the error's type and message only
  --block-at S:T    every rank but the OOM one sleeps T seconds at step S, as ranks blocked in a
                    collective with a dead peer do (the GIL released)
  --killed R:S      rank R is SIGKILLed at step S (the kernel's OOM killer, a node lost)
  --raise-at R:S    rank R raises at step S a RuntimeError the script does not catch, as gloo's
                    collective does when a peer (one that ran out of memory) closed its connection;
                    with --dist, all ranks meet in a barrier at step S first
  --dist DIR        torch.distributed.init_process_group over DIR (file://), as a torchrun
                    script initialises its process group; `--dist env` as most scripts do
                    (env://: MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE from the launcher)
  --mesh SPEC       the ranks as a DeviceMesh, "pp=2,dp=2" (names and sizes, outermost first):
                    init_device_mesh("cuda", (2, 2), mesh_dim_names=("pp", "dp")), which makes
                    the process group itself (env://), as pipeline x data-parallel scripts do
  --group RANKS     every rank makes torch.distributed.new_group(ranks=[RANKS]) ("0,1,2")
  --sync            with --dist, a barrier after every step, as the gradients' all-reduce
                    keeps the ranks of a real job in step
  --pg-timeout S    with --dist, the process group's timeout in seconds (the stand-in's default
                    is 60): a case that bounds the job's time below it sets it above, so that a
                    rank left waiting is ended by the bound, never rescued by the group's timeout
  --manual          calls ranksnap.step(n) itself instead of letting optimizer steps count
  --fail-at R:S:HOW rank R fails at step S, as scripts end when they fail: HOW is exit (the
                    script catches the error, logs it and calls sys.exit(1)), hook (the script
                    installed its own sys.excepthook, as rich.traceback.install() does, and the
                    error is not caught), os_exit (caught, then os._exit(1)), raise (caught,
                    then `raise SystemExit(1)`), exit_builtin and quit_builtin (exit(1), quit(1))
                    or early_exit (a `from sys import exit` made before `import torch`, called)
  --end-at S:HOW    every rank leaves at step S with status 0, each its own way by rank: HOW
                    picks the first (exit: sys.exit(0), raise: raise SystemExit, exit_builtin:
                    exit(0), return: main returns), the next rank the next
  --fork-at S       every rank forks two helpers at step S, which allocate and print their pid
                    ("forked helper PID"): one with os.fork() that ends with sys.exit(0), one a
                    multiprocessing worker (fork context), which leaves by os._exit; the rank
                    waits for each and fails if one did not end with 0
Ranks come from the launcher's variables (OMPI_COMM_WORLD_RANK, torchrun's RANK, or srun's
SLURM_PROCID, which scripts started by srun read themselves).
"""
import argparse
import datetime
from sys import exit as exit_bound_early  # before torch's import: the glue cannot replace it
import multiprocessing
import os
import signal
import sys
import threading
import time

import torch

MIB = 1 << 20


def launcher_rank():
    for v in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK", "SLURM_PROCID"):
        if os.environ.get(v):
            return int(os.environ[v])
    return 0


def launcher_size():
    for v in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE", "SLURM_NTASKS"):
        if os.environ.get(v):
            return int(os.environ[v])
    return 1


def pair(text):
    a, b = text.split(":")
    return int(a), float(b)


def forward(batch):
    hidden = torch.empty(batch * 2 * MIB, device="cuda")
    scores = torch.empty(batch * MIB, device="cuda")
    return [hidden, scores]


def leave(how, code):
    """Ends the program with `code` the way `how` names (see --fail-at and --end-at)."""
    if how == "exit":
        sys.exit(code)
    if how == "raise":
        raise SystemExit(code)
    if how == "exit_builtin":
        exit(code)
    if how == "quit_builtin":
        quit(code)
    if how == "early_exit":
        exit_bound_early(code)
    os._exit(code)


def fail(how):
    try:
        raise RuntimeError("the loss is NaN")
    except Exception as e:
        if how == "hook":
            raise
        print(f"training failed: {e}", file=sys.stderr)
        leave(how, 1)


def helper_work():
    torch.empty(MIB, device="cuda")
    print(f"forked helper {os.getpid()}", flush=True)


def fork_helper():
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        helper_work()
        sys.exit(0)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"the forked helper ended with {os.waitstatus_to_exitcode(status)}")
    worker = multiprocessing.get_context("fork").Process(target=helper_work)
    worker.start()
    worker.join()
    if worker.exitcode != 0:
        raise RuntimeError(f"the multiprocessing worker ended with {worker.exitcode}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--diverge", type=pair)
    p.add_argument("--leak", type=int, default=-1)
    p.add_argument("--oom", type=pair)
    p.add_argument("--fraction", type=pair)
    p.add_argument("--on-oom", choices=("skip", "exit"))
    p.add_argument("--thread", action="store_true")
    p.add_argument("--own-hook", action="store_true")
    p.add_argument("--block-at", type=pair)
    p.add_argument("--killed", type=pair)
    p.add_argument("--raise-at", type=pair)
    p.add_argument("--dist")
    p.add_argument("--mesh")
    p.add_argument("--group")
    p.add_argument("--sync", action="store_true")
    p.add_argument("--pg-timeout", type=float)
    p.add_argument("--manual", action="store_true")
    p.add_argument("--fork-at", type=int, default=-1)
    p.add_argument("--fail-at")
    p.add_argument("--end-at")
    a = p.parse_args()
    rank = launcher_rank()
    fail_rank, fail_step, fail_how = (a.fail_at.split(":") if a.fail_at else (-1, -1, ""))
    if fail_how == "hook" or a.own_hook:
        sys.excepthook = lambda kind, value, tb: print(f"[own hook] {kind.__name__}: {value}",
                                                       file=sys.stderr)
    pg = {"timeout": datetime.timedelta(seconds=a.pg_timeout)} if a.pg_timeout else {}
    if a.dist == "env":
        torch.distributed.init_process_group("gloo", **pg)
    elif a.dist:
        torch.distributed.init_process_group("gloo", init_method="file://" + a.dist, rank=rank,
                                             world_size=launcher_size(), **pg)
    if a.mesh:
        from torch.distributed.device_mesh import init_device_mesh
        dims = [d.split("=") for d in a.mesh.split(",")]
        init_device_mesh("cuda", tuple(int(n) for _, n in dims),
                         mesh_dim_names=tuple(name for name, _ in dims))
    if a.group:
        torch.distributed.new_group(ranks=[int(r) for r in a.group.split(",")])
    if a.manual:
        import ranksnap
    if a.fraction and int(a.fraction[0]) == rank:
        torch.cuda.set_per_process_memory_fraction(a.fraction[1])
    params = [torch.empty(8 * MIB, device="cuda") for _ in range(4)]
    opt = torch.optim.SGD(params, lr=0.1)
    kept = []
    batch = a.batch
    if a.diverge and int(a.diverge[0]) == rank:
        batch = int(batch * a.diverge[1])
    for step in range(a.steps):
        if a.manual:
            ranksnap.step(step)
        if a.oom and int(a.oom[0]) == rank and step == int(a.oom[1]):
            torch.cuda.set_per_process_memory_fraction(0.004)
            batch *= 8
        if a.killed and int(a.killed[0]) == rank and step == int(a.killed[1]):
            os.kill(os.getpid(), signal.SIGKILL)
        if a.raise_at and step == int(a.raise_at[1]):
            if a.dist:
                torch.distributed.barrier()  # every rank at the step before one of them dies
            if int(a.raise_at[0]) == rank:
                raise RuntimeError("Connection closed by peer (the collective's peer is gone)")
        if a.block_at and step == int(a.block_at[0]) and not (a.oom and int(a.oom[0]) == rank):
            time.sleep(a.block_at[1])
        if step == a.fork_at:
            fork_helper()
        if rank == int(fail_rank) and step == int(fail_step):
            fail(fail_how)
        if a.end_at and step == int(a.end_at.split(":")[0]):
            ways = ["exit", "raise", "exit_builtin", "return"]
            way = ways[(ways.index(a.end_at.split(":")[1]) + rank) % len(ways)]
            if way == "return":
                return
            leave(way, 0)
        try:
            acts = forward(batch)
            if rank == a.leak:
                kept.append(torch.empty(4 * MIB, device="cuda"))
        except torch.OutOfMemoryError as e:
            if a.on_oom is None:
                raise
            print(f"step {step}: out of memory: {str(e).splitlines()[0]}", file=sys.stderr)
            if a.on_oom == "exit":
                sys.exit(1)
            continue
        del acts
        opt.step()
        opt.zero_grad()
        if a.sync:
            torch.distributed.barrier()
    if a.dist or a.mesh:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    if "--thread" in sys.argv:
        t = threading.Thread(target=main, name="train")
        t.start()
        t.join()
    else:
        main()
