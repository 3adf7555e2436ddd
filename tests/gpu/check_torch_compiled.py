"""check_torch_compiled.py — what tests/gpu/torch-compiled.sh checks of each job's report: the
steps found with no optimizer, a compiled model's sites in the model's own lines (never a file
Inductor generated), CUDA graph pools apart from fragmentation, and no frame of ranksnap's in a
failing rank's traceback.

    python3 check_torch_compiled.py CASE DIR
DIR holds the job's rank-*.pickle; beside it DIR.report.json and DIR.report.txt from `ranksnap
report`, and DIR.stderr, what the job wrote there. One line per check ("ok ..." or "FAILED ..."); exit status
1 when one failed.
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from check_named_report import print_checks  # noqa: E402


def sites(r):
    """Every site of the report's verdicts."""
    out = [s for d in r.get("divergent_ranks", []) for s in d.get("sites", [])]
    for o in r.get("oom_ranks", []):
        out.append(o.get("stack") or {})
        out += o.get("live_sites", [])
    return out


def model_line(site):
    """Whether a site and the Python frames of its path (not the operator under it) are the
    model's (transformers') or the script's lines: none a file Inductor generated."""
    ours = lambda f: "transformers/" in f or f.endswith("torch_ddp_train.py")  # noqa: E731
    files = [f.get("file") or "" for f in site.get("path", [])]
    return ours(site.get("file") or "") and all(ours(f) for f in files if f.endswith(".py"))


def main():
    case, d = sys.argv[1:3]
    r = json.load(open(d + ".report.json"))
    text = open(d + ".report.txt").read()
    err = open(d + ".stderr", errors="replace").read()
    files = sorted(glob.glob(os.path.join(d, "rank-*.pickle")) + glob.glob(os.path.join(d, "rank-*.rsnap")))
    world = 1 if case.endswith("-1") else 2
    ranks = {x["rank"]: x for x in r.get("ranks", [])}
    div = [x.get("rank") for x in r.get("divergent_ranks", [])]
    checks = [(f"a file per rank ({len(files)})", len(files) == world),
              ("no site in a file torch.compile generated",
               not [s for s in sites(r) if "torchinductor" in (s.get("file") or "")]),
              ("no frame of ranksnap's in what the job printed", "ranksnap/_" not in err),
              ("no hint a Python user cannot follow", "RANKSNAP_STEP_ON" not in err + text)]
    how = {x.get("steps_from", "") for x in ranks.values()}
    if case == "compiled-longer":
        checks += [("rank 1 diverges", div == [1]),
                   ("its first site is the model's or the script's line, and so is its path",
                    bool(div) and model_line(r["divergent_ranks"][0]["sites"][0])),
                   (f"steps are the optimizer's ({how})", how == {"optimizer steps (AdamW)"})]
    if case.startswith("reduce-overhead"):
        checks += [(f"steps are the compiled model's calls ({how})",
                    how == {"calls of GPT2LMHeadModel (compiled), the outermost module: no optimizer, gradients off"}),
                   ("CUDA graph pools said apart", "in private pools" in text and "CUDA graph pool of" in text),
                   ("fragmentation leaves the pools' free bytes out",
                    all(x["fragmentation"] == max(0, x["reserved_at_peak"] - x["peak_allocated"] - x.get("pools_free_at_peak", 0))
                        for x in ranks.values())),
                   ("every rank has a pool at its peak", all(x.get("pools_at_peak", 0) > 0 for x in ranks.values()))]
    if case == "reduce-overhead-2":
        checks += [("rank 1 diverges", div == [1])]
    if case == "eval-longer":
        checks += [(f"steps are the model's calls ({how})",
                    how == {"calls of GPT2LMHeadModel, the outermost module: no optimizer, gradients off"}),
                   ("rank 1 diverges", div == [1]),
                   ("its first site is the model's line",
                    bool(div) and r["divergent_ranks"][0]["sites"][0].get("file", "").endswith(
                        ("modeling_gpt2.py", "torch_infer.py")))]
    if case == "generate":
        checks += [(f"steps are generate's calls ({how})", how == {"generate calls of GPT2LMHeadModel: no optimizer"}),
                   ("the range was recorded on every rank", all(x.get("events", 0) > 0 for x in ranks.values()))]
    if case.startswith("async"):
        checks += [("recorded at the CUDA runtime, and said so", "recorded at the CUDA runtime" in text),
                   ("the columns are the cudaMallocAsync pool's",
                    all(x.get("reserved_from") == "async_pool" for x in ranks.values()))]
    if case == "async-longer":
        checks += [("rank 1 diverges", div == [1]),
                   ("its first site is the model's or the script's line, and so is its path",
                    bool(div) and model_line(r["divergent_ranks"][0]["sites"][0]))]
    if case == "async-oom":
        oom = r.get("oom_ranks", [])
        checks += [("rank 1 ran out of memory", [o.get("rank") for o in oom] == [1]),
                   ("the script got PyTorch's error", "OutOfMemoryError" in err),
                   ("its request is named by the model's or the script's line",
                    bool(oom) and model_line(oom[0].get("stack") or {}))]
    if case == "checkpointing-oom":
        checks += [("rank 1 ran out of memory", [o.get("rank") for o in r.get("oom_ranks", [])] == [1]),
                   ("the script got PyTorch's error", "OutOfMemoryError" in err)]
    return print_checks(checks)


if __name__ == "__main__":
    sys.exit(main())
