"""torch_overhead.py — what ranksnap costs a PyTorch training step (docs/BENCHMARKS.md).

One GPU, a transformers GPT-2 (random init) trained with AdamW; every step timed on its own
(torch.cuda.synchronize before and after). Two workloads:

  gpu-bound   batch 16 x 512 tokens, 6 layers 768 wide: kernels dominate the step
  host-bound  batch 1 x 32 tokens, the same model: Python, dispatch and allocator calls do

Each process runs, after a warm-up, ROUNDS rounds of three blocks of BLOCK steps:

  outside    nothing recorded (under ranksnap-run: ranksnap loaded, counting steps, not recording)
  recorded   under ranksnap-run, ranksnap's range (--steps lists one range per round):
             torch.cuda.memory._record_memory_history with ranksnap's settings
  by-hand    the script itself calls _record_memory_history with the same stacks, context
             "alloc", max_entries 100000, as a user would, and stops it at the block's end
  state      PyTorch's state-only recording (enabled="state", context="state", stacks python):
             no history, the stack of every live block, what an always-on mode keeping the site
             of every byte from the start of the job would cost

The blocks alternate, in an order shuffled round by round (seeded), so that what drifts during a
run (clocks, the host's other work: a host-bound step's median moves by 10-20% between minutes
of one process on a VM, and by up to 7% between a round's neighbouring blocks that do the same)
weighs on all four alike; the first two steps and the last of every block are left out (the
recorder's start, the names' search for the model in a range's first step, and ranksnap's dump at
the end of its range are per range, not per step). A ratio of two
blocks of one process is the median over the rounds of each round's ratio of the two blocks'
medians (blocks minutes apart are not compared); of two processes, the ratio of their medians.
Three processes, side by side in this run:

  plain         python3 torch_overhead.py --child ...   (no ranksnap; its "recorded" blocks record
                nothing, so recorded/outside there is the noise floor)
  ranksnap      ranksnap-run --steps R1,R2,... python3 torch_overhead.py --child ...
                (RANKSNAP_STACKS=python, the default)
  ranksnap-all  the same with RANKSNAP_STACKS=all (Python, C++ and native frames), and the by-hand
                blocks with stacks="all": what the other setting costs

    python3 tests/bench/torch_overhead.py --run launch/ranksnap-run --lib build/libranksnap.so --out DIR
Prints a table and writes DIR/overhead.json (`--summarize DIR/overhead.json` prints it again). Needs torch, transformers and a GPU (exit 77 without).
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

BLOCKS = ("outside", "recorded", "by-hand", "state")
WORKLOADS = {"gpu-bound": (16, 512), "host-bound": (1, 32)}
SKIP = 2  # steps left out at a block's start
SIDES = {"plain": "python", "ranksnap": "python", "ranksnap-all": "all"}


def layout(a):
    """[(first iteration, block name)] for every block after the warm-up."""
    out = []
    for r in range(a.rounds):
        order = list(BLOCKS)
        random.Random(r).shuffle(order)
        for i, b in enumerate(order):
            out.append((a.warmup + (r * len(BLOCKS) + i) * a.block, b))
    return out


def ranges(a):
    # ranksnap_step(n) comes after the n-th optimizer step, and --steps b:e records iterations
    # b..e-1 (0-based): one range per "recorded" block, started in its first step (left out of
    # the figures), after the block before has stopped its own recorder (a by-hand block
    # stopping PyTorch's recorder would stop the range's too), ended in its last
    return ",".join(f"{s + 1}:{s + a.block}" for s, b in layout(a) if b == "recorded")


def missing():
    """Why this machine cannot run the benchmark (torch, transformers, a GPU), or None."""
    try:
        import torch
        import transformers  # noqa: F401
        if not torch.cuda.is_available():
            return "no GPU"
    except ImportError as e:
        return str(e)
    return None


def gpt2(workload):
    """The GPT-2 of the workload on the GPU and one training step of it, timed alone (seconds)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    batch, seq = WORKLOADS[workload]
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=6, n_head=12, n_embd=768, vocab_size=16384, n_positions=512)
    model = GPT2LMHeadModel(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")

    def one():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    return model, one


def child(a):
    import torch
    _, one = gpt2(a.workload)
    for _ in range(a.warmup):
        one()
    times = {b: [] for b in BLOCKS + ("range-end",)}
    for _, block in layout(a):
        if block == "by-hand":
            torch.cuda.memory._record_memory_history(context="alloc", stacks=a.stacks, max_entries=100000)
        if block == "state":
            torch.cuda.memory._record_memory_history(enabled="state", context="state", stacks="python")
        t = [one() for _ in range(a.block)]
        if block in ("by-hand", "state"):
            torch.cuda.memory._record_memory_history(enabled=None)
        times[block] += t[SKIP:-1]
        if block == "recorded":
            # the step whose optimizer step ends the range carries ranksnap's dump
            times["range-end"].append(t[-1])
    print(json.dumps(times))


def run(a, workload, side):
    stacks = SIDES[side]
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--workload", workload, "--stacks", stacks,
           "--block", str(a.block), "--rounds", str(a.rounds), "--warmup", str(a.warmup)]
    env = dict(os.environ, RANKSNAP_DIR=os.path.join(a.out, f"{workload}-{side}-dir"), RANKSNAP_REPORT="0",
               RANKSNAP_STACKS=stacks)
    if side != "plain":
        cmd = [a.run, "--lib", a.lib, "--steps", ranges(a)] + cmd
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    t = json.loads(out.strip().splitlines()[-1])
    t["entries"] = dump_entries(env["RANKSNAP_DIR"])
    return t


def dump_entries(d):
    """Trace entries in the last range's pickle (each range writes the rank's file anew)."""
    import pickle
    try:
        with open(os.path.join(d, "rank-00000.pickle"), "rb") as f:
            return sum(len(t) for t in pickle.load(f).get("device_traces", []))
    except (OSError, EOFError, pickle.UnpicklingError):
        return 0


def ratio(results, num, den):
    """Two columns of one process: the median of the rounds' ratios of the two blocks' medians;
    of two processes: the ratio of the columns' medians. With a 95% bootstrap interval (2,000
    resamples, seeded: the same overhead.json always prints the same numbers)."""
    (wa, ba), (wb, bb) = num, den
    a, b = results[wa + "/all"][ba], results[wb + "/all"][bb]
    rng = random.Random(0)
    if wa == wb:
        n = results["about"].get("timed", results["about"]["block"] - 2)
        rs = [statistics.median(a[i:i + n]) / statistics.median(b[i:i + n]) for i in range(0, len(a), n)]
        boot = sorted(statistics.median(rng.choices(rs, k=len(rs))) for _ in range(2000))
        return f"{statistics.median(rs):.3f} [{boot[50]:.3f}, {boot[1949]:.3f}]"
    rs = sorted(statistics.median(rng.choices(a, k=len(a))) / statistics.median(rng.choices(b, k=len(b)))
                for _ in range(2000))
    return f"{statistics.median(a) / statistics.median(b):.3f} [{rs[50]:.3f}, {rs[1949]:.3f}]"


def summarize(results):
    about = results["about"]
    print(f"median step time, ms ({about['rounds']} rounds of blocks of {about['block']} steps, "
          f"{about['rounds'] * about.get('timed', about['block'] - 2)} steps per column; {about['device']}, torch {about['torch']})")
    print(f"{'workload':<12}{'process':<14}" + "".join(f"{b:>11}" for b in BLOCKS))
    for workload in WORKLOADS:
        for side in SIDES:
            m = results[f"{workload}/{side}"]
            print(f"{workload:<12}{side:<14}" + "".join(f"{m[b]:>11.3f}" for b in BLOCKS))
    print("ratios of medians [95% bootstrap interval]")
    for workload in WORKLOADS:
        pl = f"{workload}/plain"
        print(f"  {workload} plain: recorded (nothing) / outside {ratio(results, (pl, 'recorded'), (pl, 'outside'))}"
              f" (the noise floor), by-hand / outside {ratio(results, (pl, 'by-hand'), (pl, 'outside'))}")
        for side in ("ranksnap", "ranksnap-all"):
            r = f"{workload}/{side}"
            print(f"  {workload} {side} (stacks {SIDES[side]}): "
                  f"recorded / by-hand {ratio(results, (r, 'recorded'), (r, 'by-hand'))}, "
                  f"recorded / outside {ratio(results, (r, 'recorded'), (r, 'outside'))}, "
                  f"outside / plain outside {ratio(results, (r, 'outside'), (pl, 'outside'))}")
            d = results.get(f"{r}/dump")
            if d:
                print(f"  {workload} {side}: the range's end (snapshot, names, pickle) "
                      f"{d['ms']:.1f} ms for {d['entries']} entries, "
                      f"{d['s_per_100k']:.3f} s per 100k entries")
        print(f"  {workload} plain: state-only recording / outside "
              f"{ratio(results, (pl, 'state'), (pl, 'outside'))} (an always-on mode's cost)")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--summarize", metavar="OVERHEAD_JSON", help="print the table of an earlier run again")
    p.add_argument("--child", action="store_true")
    p.add_argument("--workload", choices=sorted(WORKLOADS))
    p.add_argument("--block", type=int, default=10, help="steps per block (the first and last left out)")
    p.add_argument("--rounds", type=int, default=8, help="rounds of the three blocks (at most 64)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--stacks", choices=("python", "all"), default="python", help="(child) the by-hand blocks' stacks")
    p.add_argument("--run", default="launch/ranksnap-run")
    p.add_argument("--lib", default="build/libranksnap.so")
    p.add_argument("--out", default="torch-overhead")
    a = p.parse_args()
    if a.block < SKIP + 2 or not 1 <= a.rounds <= 64:
        p.error("--block must be at least 4 and --rounds 1..64 (ranksnap takes at most 64 ranges)")
    if a.summarize:
        with open(a.summarize) as f:
            summarize(json.load(f))
        return 0
    if a.child:
        return child(a)
    why = missing()
    if why:
        print(f"skipped: {why}")
        return 77
    import torch
    os.makedirs(a.out, exist_ok=True)
    results = {}
    for workload in WORKLOADS:
        for side in SIDES:
            t = run(a, workload, side)
            entries, ends = t.pop("entries"), t.pop("range-end")
            results[f"{workload}/{side}"] = {b: statistics.median(v) * 1e3 for b, v in t.items()}
            results[f"{workload}/{side}/all"] = {b: [x * 1e3 for x in v] for b, v in t.items()}
            if side != "plain" and ends and entries:
                # each range's end against the steps of its own block (the step drifts by more
                # than a dump takes between minutes of one process)
                n = a.block - SKIP - 1
                rec = t["recorded"]
                ms = statistics.median(e - statistics.median(rec[i * n:(i + 1) * n])
                                       for i, e in enumerate(ends)) * 1e3
                results[f"{workload}/{side}/dump"] = {"ms": ms, "entries": entries,
                                                      "s_per_100k": ms / 1e3 * 1e5 / entries}
    results["about"] = {"rounds": a.rounds, "block": a.block, "timed": a.block - SKIP - 1,
                        "device": torch.cuda.get_device_name(),
                        "torch": torch.__version__}
    with open(os.path.join(a.out, "overhead.json"), "w") as f:
        json.dump(results, f, indent=1)
    summarize(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
