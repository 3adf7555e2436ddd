"""torch_sigterm_timing.py — how long a rank of a PyTorch job needs, after SIGTERM, to write its
pickle (issue 11; docs/POSTMORTEM.md says why it matters: mpirun sends SIGKILL 1 s after
SIGTERM, torchelastic 30 s after).

Two ranks of tests/gpu/torch_ddp_train.py under ranksnap-run (recording from step 2 on, PyTorch's
own recorder), rank 1 stuck at step 6: rank 0 waits in the all-reduce (the GIL released), as
the survivors of a dead rank do. This script sends rank 0 SIGTERM and measures the time until
its pickle is on disk (the file's mtime) and until it has exited, for several history sizes
(RANKSNAP_MAX_ENTRIES) and both stacks (python, all). RANKSNAP_DUMP_TIMEOUT_MS is raised to 60 s
so that the dump is measured, not cut.

    python3 tests/gpu/torch_sigterm_timing.py --run launch/ranksnap-run --lib build/libranksnap.so --out DIR
Needs torch, transformers and a GPU.
"""
import argparse
import os
import pickle
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def one(a, max_entries, stacks, steps, port):
    d = os.path.join(a.out, f"e{max_entries}-{stacks}-s{steps}")
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANKSNAP_DIR=d,
                   RANKSNAP_MAX_ENTRIES=str(max_entries), RANKSNAP_STACKS=stacks,
                   RANKSNAP_DUMP_TIMEOUT_MS="60000", RANKSNAP_REPORT="0")
        cmd = [a.run, "--lib", a.lib, "--steps", "2:", sys.executable,
               os.path.join(HERE, "torch_ddp_train.py"), "--steps", "1000", "--hang", f"1:{steps}"]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    # whatever happens (a rank that never prints, a time limit), no rank is left on the GPU
    try:
        # rank 0 prints "step N" after each step; after step steps-1 it enters the one that waits
        for line in procs[0].stdout:
            if line.startswith(f"step {steps - 1} "):
                break
        time.sleep(5)
        path = os.path.join(d, "rank-00000.pickle")
        t0 = time.time()
        os.kill(procs[0].pid, signal.SIGTERM)
        procs[0].wait(timeout=120)
        t_exit = time.time() - t0
        t_file = os.stat(path).st_mtime - t0 if os.path.exists(path) else float("nan")
        size = os.path.getsize(path) if os.path.exists(path) else 0
        entries = 0
        if size:
            snap = pickle.load(open(path, "rb"))
            entries = sum(len(t) for t in snap["device_traces"])
            reason = snap["ranksnap"]["reason"]
        else:
            reason = "none"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    return t_file, t_exit, size, entries, reason


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--run", default="launch/ranksnap-run")
    p.add_argument("--lib", default="build/libranksnap.so")
    p.add_argument("--out", default="sigterm-timing")
    a = p.parse_args()
    # the caller's time limit (timeout sends SIGTERM) still runs the finally that stops the ranks
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    import torch
    os.makedirs(a.out, exist_ok=True)
    print(f"SIGTERM to rank 0 waiting in an all-reduce; {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'max_entries':>12}{'stacks':>8}{'steps':>7}{'entries':>9}{'pickle MB':>11}{'file s':>9}{'exit s':>9}  reason")
    port = 29700
    for max_entries, stacks, steps in ((10000, "python", 6), (100000, "python", 30), (100000, "all", 30)):
        port += 1
        t_file, t_exit, size, entries, reason = one(a, max_entries, stacks, steps, port)
        print(f"{max_entries:>12}{stacks:>8}{steps:>7}{entries:>9}{size / 1e6:>11.2f}{t_file:>9.3f}{t_exit:>9.3f}  {reason}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
