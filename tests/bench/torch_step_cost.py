"""torch_step_cost.py — what ranksnap adds to an optimizer step outside a recorded range.

Outside its ranges ranksnap only counts steps: the glue's optimizer step hook and one
ranksnap_step call through ctypes (python/ranksnap/_torch.py). This times N steps of an
optimizer with no parameters (so that the step itself is almost nothing) in a plain process and
in one started by ranksnap-run (its range far away), medians of 5 rounds each. It runs with the
real torch, or with the stand-in of tests/python/fake_torch on PYTHONPATH (no GPU needed).

    python3 tests/bench/torch_step_cost.py --run launch/ranksnap-run --lib build/libranksnap.so [N]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time


def child(n):
    import torch
    opt = torch.optim.SGD([torch.empty(1024, device="cuda")], lr=0.1)
    opt.step()  # the first step creates the optimizer's state
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            opt.step()
        rounds.append((time.perf_counter() - t0) / n * 1e6)
    print(statistics.median(rounds))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("n", type=int, nargs="?", default=20000)
    p.add_argument("--child", action="store_true")
    p.add_argument("--run", default="launch/ranksnap-run")
    p.add_argument("--lib", default="build/libranksnap.so")
    a = p.parse_args()
    if a.child:
        return child(a.n)
    me = [sys.executable, os.path.abspath(__file__), "--child", str(a.n)]
    env = dict(os.environ, RANKSNAP_DIR=os.environ.get("RANKSNAP_DIR", "/tmp/torch-step-cost"))
    out = {}
    for side in ("plain", "ranksnap", "plain ", "ranksnap "):
        cmd = me if side.strip() == "plain" else [a.run, "--lib", a.lib, "--steps", "1000000000:1000000001"] + me
        out.setdefault(side.strip(), []).append(float(subprocess.run(cmd, env=env, capture_output=True,
                                                                       text=True, check=True).stdout.split()[-1]))
    plain, rs = min(out["plain"]), min(out["ranksnap"])
    print(f"optimizer step, {a.n} steps x 5 rounds, median round, best of 2 processes each:")
    print(f"  plain    {plain:8.2f} us/step")
    print(f"  ranksnap {rs:8.2f} us/step (outside its range)")
    print(f"  added    {rs - plain:8.2f} us/step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
