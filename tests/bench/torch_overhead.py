"""torch_overhead.py — what ranksnap costs a PyTorch training step (issue 11, docs/BENCHMARKS.md).

One GPU, a transformers GPT-2 (random init) trained with AdamW; every step timed on its own
(torch.cuda.synchronize before and after), medians over PHASE steps. Two workloads:

  gpu-bound   batch 16 x 512 tokens, 6 layers 768 wide: kernels dominate the step
  host-bound  batch 1 x 32 tokens, the same model: Python, dispatch and allocator calls do

and, for each, three processes run the same phases in the same order, side by side in this run:

  plain         python3 torch_overhead.py --child ...              (no ranksnap at all)
  ranksnap      ranksnap-run --steps A:B python3 torch_overhead.py --child ...
                (PyTorch's own allocator; ranksnap records steps A..B-1, which are phase "recorded";
                RANKSNAP_STACKS=python, the default)
  ranksnap-all  the same with RANKSNAP_STACKS=all (Python, C++ and native frames), and the by-hand
                phase with stacks="all": what the other setting costs

phases: warmup (left out), outside (steps before the range: ranksnap loaded but not recording),
recorded (ranksnap's range: torch.cuda.memory._record_memory_history with ranksnap's settings),
by-hand (the script itself calls _record_memory_history with the same stacks, context "alloc",
max_entries 100000, as a user would), after (nothing again).

    python3 tests/bench/torch_overhead.py --run launch/ranksnap-run --lib build/libranksnap.so --out DIR
Prints a table and writes DIR/overhead.json. Needs torch, transformers and a GPU (exit 77 without).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PHASES = ("warmup", "outside", "recorded", "by-hand", "after")
WORKLOADS = {"gpu-bound": (16, 512), "host-bound": (1, 32)}


def child(a):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    batch, seq = WORKLOADS[a.workload]
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=6, n_head=12, n_embd=768, vocab_size=16384, n_positions=512)
    model = GPT2LMHeadModel(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
    times = {p: [] for p in PHASES}
    for phase in PHASES:
        if phase == "by-hand":
            torch.cuda.memory._record_memory_history(context="alloc", stacks=a.stacks, max_entries=100000)
        if phase == "after":
            torch.cuda.memory._record_memory_history(enabled=None)
        for _ in range(a.phase):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model(input_ids=ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            times[phase].append(time.perf_counter() - t0)
    print(json.dumps(times))


SIDES = {"plain": "python", "ranksnap": "python", "ranksnap-all": "all"}


def run(a, workload, side):
    stacks = SIDES[side]
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--workload", workload,
           "--phase", str(a.phase), "--stacks", stacks]
    env = dict(os.environ, RANKSNAP_DIR=os.path.join(a.out, f"{workload}-{side}-dir"), RANKSNAP_REPORT="0",
               RANKSNAP_STACKS=stacks)
    if side != "plain":
        # ranksnap_step(n) comes after the n-th optimizer step: iterations 2P..3P-1 are "recorded"
        first = 2 * a.phase
        cmd = [a.run, "--lib", a.lib, "--steps", f"{first}:{first + a.phase}"] + cmd
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--child", action="store_true")
    p.add_argument("--workload", choices=sorted(WORKLOADS))
    p.add_argument("--phase", type=int, default=15, help="steps per phase (medians of these)")
    p.add_argument("--stacks", choices=("python", "all"), default="python", help="(child) the by-hand phase's stacks")
    p.add_argument("--run", default="launch/ranksnap-run")
    p.add_argument("--lib", default="build/libranksnap.so")
    p.add_argument("--out", default="torch-overhead")
    a = p.parse_args()
    if a.child:
        return child(a)
    try:
        import torch
        import transformers  # noqa: F401
        if not torch.cuda.is_available():
            raise ImportError("no GPU")
    except ImportError as e:
        print(f"skipped: {e}")
        return 77
    os.makedirs(a.out, exist_ok=True)
    results = {}
    for workload in WORKLOADS:
        for side in SIDES:
            t = run(a, workload, side)
            results[f"{workload}/{side}"] = {ph: statistics.median(v) * 1e3 for ph, v in t.items()}
            results[f"{workload}/{side}/all"] = {ph: [x * 1e3 for x in v] for ph, v in t.items()}
    with open(os.path.join(a.out, "overhead.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"median step time, ms ({a.phase} steps per phase; {torch.cuda.get_device_name()}, torch {torch.__version__})")
    print(f"{'workload':<12}{'process':<14}" + "".join(f"{ph:>11}" for ph in PHASES[1:]))
    for workload in WORKLOADS:
        for side in SIDES:
            m = results[f"{workload}/{side}"]
            print(f"{workload:<12}{side:<14}" + "".join(f"{m[ph]:>11.3f}" for ph in PHASES[1:]))
        pl = results[f"{workload}/plain"]
        for side in ("ranksnap", "ranksnap-all"):
            r = results[f"{workload}/{side}"]
            print(f"  {workload} {side} (stacks {SIDES[side]}): recorded / plain outside {r['recorded'] / pl['outside']:.3f}, "
                  f"recorded / by hand (same process) {r['recorded'] / r['by-hand']:.3f}, "
                  f"outside the range / plain {r['outside'] / pl['outside']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
