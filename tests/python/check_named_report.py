"""check_named_report.py — every byte of a PyTorch job's report has a name (docs/PYTORCH.md,
"Names for the backward pass and for what came before"): `ranksnap report --json` of a job whose
rank 1 ran out of memory in the backward pass (oom-backward, under DDP or FSDP2) or kept its logits from step 0
(leak-from-step-0), or whose rank 1 had longer sequences (trainer-longer). Used by
tests/gpu/torch-names.sh on the GPU and by the CTest over the fixtures it recorded.

    python3 check_named_report.py CASE REPORT.json REPORT.txt RANK_PICKLE...
Prints one line per check ("ok ..." or "FAILED ..."); exit status 1 when one failed.
"""
import json
import pickle
import sys


def main():
    case, rj, rt = sys.argv[1:4]
    r = json.load(open(rj))
    text = open(rt).read()
    snaps = [pickle.load(open(p, "rb")) for p in sys.argv[4:]]
    checks = [
        ("no '(no stack)' in the OOM ranks' part", "(no stack)" not in json.dumps(r.get("oom_ranks"))),
        ("no '(no stack)' in the divergence", "(no stack)" not in json.dumps(r.get("divergent_ranks"))),
        ("no '(no stack)' in the text report", "(no stack)" not in text),
        # a name cut as if it were a C++ signature says nothing either
        ("no site named '(...)' in the OOM ranks' part", '"function": "(...)"' not in json.dumps(r.get("oom_ranks"))),
        ("a backward allocation named by its module or node in the pickles",
         any(f.get("name", "").startswith("backward of ") for s in snaps
             for t in s.get("device_traces", []) for e in t for f in e.get("frames") or [])),
    ]
    if case.endswith("oom-backward"):
        oom = r.get("oom_ranks") or [{}]
        fn = (oom[0].get("stack") or {}).get("function", "")
        checks += [("rank 1 ran out of memory", [o.get("rank") for o in r.get("oom_ranks", [])] == [1]),
                   (f"its request is named by the backward pass ({fn!r})", "backward" in fn.lower())]
    if case == "leak-from-step-0":
        div = r.get("divergent_ranks") or [{}]
        checks += [("rank 1 diverges", [d.get("rank") for d in r.get("divergent_ranks", [])] == [1]),
                   ("its bytes of before the range are labelled",
                    "allocated before step" in json.dumps(div))]
    if case == "trainer-longer":
        checks += [("rank 1 diverges", [d.get("rank") for d in r.get("divergent_ranks", [])] == [1])]
    return print_checks(checks)


def print_checks(checks):
    """One line per (what, ok): "ok WHAT" or "FAILED WHAT"; 1 when one failed, else 0."""
    bad = 0
    for what, ok in checks:
        print(("ok " if ok else "FAILED ") + what)
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
