#!/usr/bin/env python3
"""diff_bench.py — `ranksnap diff` of two jobs of N ranks against `ranksnap report` of one of
them, in the same run: the anchor.

Writes two jobs of N synthetic ranks of M events (report_bench_rank: one process per rank,
.rsnap files through the public API; kept in --work for the next run): before/, in which no rank
diverges, and after/, the same job with rank 1 holding 16 MiB more in every step. Then, --reps
rounds, each timing `ranksnap report before/` and `ranksnap diff before/ after/` one after the
other (each a child of this script alone): the medians of their wall and CPU times (user +
system) and the ratios diff / report. The diff must name rank 1 and exit 1 under
--fail-on 'peak>5%', or the bench fails.

  diff_bench.py --build BUILD --work DIR [--ranks 1024] [--events 20000] [--reps 3] [--jobs N]
                [--json]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_bench import make_ranks, median, run_timed  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--jobs", type=int)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.ranks < 2 or a.events < 100 or a.reps < 1:
        sys.exit("diff_bench: --ranks 2 or more, --events 100 or more, --reps 1 or more")
    before, after = os.path.join(a.work, "before"), os.path.join(a.work, "after")
    os.makedirs(a.work, exist_ok=True)
    # no rank of before diverges: the rank asked to is past the job's last
    make_ranks(a, "rsnap", a.ranks, before, ("--diverge-rank", str(a.ranks)))
    make_ranks(a, "rsnap", a.ranks, after, ("--diverge-rank", "1"))
    cli = os.path.join(a.build, "ranksnap")
    jobs = ["--jobs", str(a.jobs)] if a.jobs else []
    report = [cli, "report"] + jobs + [before]
    diff = [cli, "diff", "--fail-on", "peak>5%"] + jobs + [before, after]
    out = subprocess.run(diff, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out.returncode != 1 or "rank 1 peaks higher" not in out.stdout:
        sys.exit("diff_bench: the diff did not name rank 1 and exit 1 (exit %d):\n%s%s"
                 % (out.returncode, out.stdout[-3000:], out.stderr[-2000:]))
    walls = {"report": [], "diff": []}
    cpus = {"report": [], "diff": []}
    for _ in range(a.reps):
        for name, cmd, ok in (("report", report, 0), ("diff", diff, 1)):
            wall, rc, err, cpu = run_timed(cmd)
            if rc != ok:
                sys.exit("diff_bench: %s exited %d: %s" % (" ".join(cmd), rc, err))
            walls[name].append(wall)
            cpus[name].append(cpu)
    nbytes = sum(os.path.getsize(os.path.join(d, f)) for d in (before, after)
                 for f in os.listdir(d) if f.endswith(".rsnap"))
    r = {"ranks": a.ranks, "events_per_rank": a.events, "bytes_both_jobs": nbytes,
         "report_s": median(walls["report"]), "diff_s": median(walls["diff"]),
         "report_cpu_s": median(cpus["report"]), "diff_cpu_s": median(cpus["diff"]),
         "load": os.getloadavg()[0]}
    r["ratio"] = r["diff_s"] / r["report_s"]
    r["ratio_cpu"] = r["diff_cpu_s"] / r["report_cpu_s"]
    if a.json:
        print(json.dumps(r))
        return 0
    print("two jobs of %d ranks x %d events (%.0f MB): report of one %.3f s (CPU %.3f s), "
          "diff of both %.3f s (CPU %.3f s): diff / report %.2f (CPU %.2f), load %.1f"
          % (a.ranks, a.events, nbytes / 1e6, r["report_s"], r["report_cpu_s"], r["diff_s"],
             r["diff_cpu_s"], r["ratio"], r["ratio_cpu"], r["load"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
