#!/usr/bin/env python3
"""report_bench.py — `ranksnap report` over N synthetic ranks of M events, against Python.

For each N of --ranks and each format of --formats, writes N ranks of M events (once; kept in
--work for the next run) and times `ranksnap report DIR` and `ranksnap report --out OUT DIR`:
wall time (median of --reps, each report a child of this script alone), MB/s and events/s of
the files read, its CPU time (user + system), which on a machine shared with other work says
what the report cost when the wall time says what it waited, and its peak RSS (GNU time's %M,
in one more run under GNU time). For the pickles, Python's own pickle.load of the same files
runs in the same run (the time of the loads alone, measured inside the interpreter, and
its peak RSS), and the ratio. `ranksnap --version` is timed as well: the process's start-up,
which a report pays whatever it reads.

Formats:
  rsnap   rank-RRRRR.rsnap, written by report_bench_rank (one process per rank, the public API,
          sim backend, native stacks): the recorder's and the encoder's own files.
  ring    rank-RRRRR.ring: the same ranks killed with SIGKILL after their last event.
  pickle  snapshot_rankR.pickle: PyTorch-shaped snapshots pickled by Python
          (make_bench_pickles.py), given as files in rank order.
--single M1 also writes one rank of M1 events, reports it, exports it with `ranksnap export
--torch` and reports the export (the long-history case). --real DIR,... reports each folder of
real PyTorch pickles (tests/data's, the attribution fixtures' leak_all with stacks="all") against
Python's loads of them, against the same loads paired with reports run after run (the median
of the pairs' ratios), and against the whole Python process that loads them (start-up, reads,
loads and exit: its wall time, median of the same runs); with --after R, also the report
timed R times after each of four things, in turn: another report, Python's loads, a Python
that does nothing, 100 ms idle (the paired runs' reports follow Python's). --decode-bench runs decode_bench on one file of each kind and on the
real pickles: the decoders alone, one core.

  report_bench.py --build BUILD --work DIR [--ranks 4,32,256,1024] [--events 100000]
                  [--formats rsnap,ring,pickle] [--pickle-ranks 4,32,256] [--reps 3] [--py-reps R]
                  [--jobs N] [--single 1000000] [--real DIR,...] [--after R] [--decode-bench]
                  [--json]

The extrapolation line fits the two largest N of a format (time and RSS grow linearly with the
ranks read) and says what 16,384 ranks would take: an estimate, printed as one.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


TIME = "/usr/bin/time"


def run_timed(cmd, env=None, stdout=subprocess.DEVNULL):
    """Wall seconds, exit status, stderr and CPU seconds (user + system) of one process, a child
    of this script alone: under GNU time its own start and wait were timed with it (1.2 ms more
    for `ranksnap --version`, 3.5 to 4 ms more for a report of four PyTorch pickles)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    return wall, os.waitstatus_to_exitcode(status), err, ru.ru_utime + ru.ru_stime


def run_rss(cmd, stdout=subprocess.DEVNULL):
    """Peak RSS (KiB), exit status and stderr of one process, from GNU time, which starts the
    command from a small process of its own: a child forked from this script would count the
    script's own pages in its ru_maxrss."""
    if not os.path.exists(TIME):
        _, rc, err, _ = run_timed(cmd, stdout=stdout)
        return 0, rc, err
    rss_file = os.path.join(os.environ.get("TMPDIR", "/tmp"), "report_bench.%d.rss" % os.getpid())
    p = subprocess.Popen([TIME, "-f", "%M", "-o", rss_file] + cmd, stdout=stdout,
                         stderr=subprocess.PIPE)
    _, status, _ = os.wait4(p.pid, 0)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    with open(rss_file) as f:
        rss = int(f.read().split()[-1])
    os.unlink(rss_file)
    return rss, os.waitstatus_to_exitcode(status), err


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def dir_bytes(paths):
    return sum(os.path.getsize(p) for p in paths)


def make_ranks(args, fmt, n, out, extra=()):
    """Writes n ranks of args.events events in out (a .rsnap or a .ring per rank); `extra` are
    more arguments of report_bench_rank (--diverge-rank D)."""
    stamp = os.path.join(out, ".made")
    want = "%s %d %d %s" % (fmt, n, args.events, " ".join(extra))
    if os.path.exists(stamp) and open(stamp).read() == want:
        return
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    rank_bin = os.path.join(args.build, "tests", "bench", "report_bench_rank")
    env = dict(os.environ, RANKSNAP_DIR=out)
    procs = []
    for r in range(n):
        cmd = [rank_bin, "--rank", str(r), "--size", str(n), "--events", str(args.events)] + list(extra)
        if fmt == "ring":
            cmd.append("--ring")
        procs.append(subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE))
        # as many at a time as there are cores
        while len([p for p in procs if p.poll() is None]) >= os.cpu_count():
            time.sleep(0.01)
    for r, p in enumerate(procs):
        rc = p.wait()
        if rc != 0 and not (fmt == "ring" and rc == -9):
            sys.exit("report_bench: rank %d failed (%d): %s" % (r, rc, p.stderr.read().decode()))
    open(stamp, "w").write(want)


def make_pickles(args, n, out):
    stamp = os.path.join(out, ".made")
    want = "pickle %d %d" % (n, args.events)
    if os.path.exists(stamp) and open(stamp).read() == want:
        return
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([sys.executable, os.path.join(HERE, "make_bench_pickles.py"), out,
                    "--ranks", str(n), "--events", str(args.events)], check=True,
                   stdout=subprocess.DEVNULL)
    open(stamp, "w").write(want)


def files_of(fmt, d, n):
    if fmt == "pickle":
        return [os.path.join(d, "snapshot_rank%d.pickle" % r) for r in range(n)]
    ext = ".ring" if fmt == "ring" else ".rsnap"
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(ext))


PY_LOAD = r"""
import pickle, sys, time
t = time.perf_counter()
for f in sys.argv[1:]:
    with open(f, 'rb') as fh:
        pickle.load(fh)
print(time.perf_counter() - t)
"""


def python_load(files, reps):
    times, rss = [], 0
    out_file = os.path.join(os.environ.get("TMPDIR", "/tmp"), "report_bench.%d.out" % os.getpid())
    for _ in range(reps):
        with open(out_file, "w") as out:
            kib, rc, err = run_rss([sys.executable, "-c", PY_LOAD] + files, stdout=out)
        if rc != 0:
            sys.exit("report_bench: python's pickle.load failed: " + err)
        with open(out_file) as f:
            times.append(float(f.read()))
        rss = max(rss, kib)
    os.unlink(out_file)
    return median(times), rss


def report_cmd(args, target, extra):
    """`ranksnap report` of target (files, or a folder), with --jobs when the bench was given it."""
    jobs = ["--jobs", str(args.jobs)] if args.jobs else []
    return [os.path.join(args.build, "ranksnap"), "report"] + extra + jobs + target


def paired(args, files, reps):
    """The issue's own measure: a report and Python's loads of the same files run one after the
    other, reps times, and the median of each pair's ratio. The medians of the two runs apart
    (above) take a second or more between them, in which the machine's speed can change (its two
    CPUs share a host: docs/BENCHMARKS.md); a pair's two runs are tens of milliseconds apart."""
    cmd = report_cmd(args, files, [])
    ratios = []
    for _ in range(reps):
        wall, rc, err, _ = run_timed(cmd)
        if rc != 0:
            sys.exit("report_bench: %s failed (%d): %s" % (" ".join(cmd), rc, err))
        py_s, _ = python_load(files, 1)
        ratios.append(wall / py_s)
    return median(ratios)


def after(args, files, rounds):
    """What ran just before a report changes its time: the report of the files timed right
    after another report, after a Python process that loads them (as in the paired runs), after
    one that does nothing (`python3 -c pass`) and after 100 ms of nothing, the four in turn,
    `rounds` times; the medians in ms. A report's two threads need both CPUs, and in some
    minutes a CPU that was idle (the other one, while Python ran on one) comes back slower."""
    cmd = report_cmd(args, files, [])
    before = {
        "report": lambda: run_timed(cmd),
        "python load": lambda: python_load(files, 1),
        "python -c pass": lambda: run_timed([sys.executable, "-c", "pass"]),
        "100 ms idle": lambda: time.sleep(0.1),
    }
    walls = {k: [] for k in before}
    for _ in range(rounds):
        for k, first in before.items():
            first()
            wall, rc, err, _ = run_timed(cmd)
            if rc != 0:
                sys.exit("report_bench: %s failed (%d): %s" % (" ".join(cmd), rc, err))
            walls[k].append(wall * 1e3)
    return {k: median(v) for k, v in walls.items()}


def python_process(files, reps):
    """The wall time of a whole Python process that loads the files: what someone who unpickles
    them waits for (its start-up, the reads, the loads and the exit), the median of reps."""
    code = "import pickle, sys\nfor f in sys.argv[1:]:\n    with open(f, 'rb') as fh: pickle.load(fh)"
    walls = []
    for _ in range(reps):
        wall, rc, err, _ = run_timed([sys.executable, "-c", code] + files)
        if rc != 0:
            sys.exit("report_bench: python's pickle.load failed: " + err)
        walls.append(wall)
    return median(walls)


def report(args, target, extra, reps):
    cmd = report_cmd(args, target, extra)
    walls, cpus = [], []
    for _ in range(reps):
        wall, rc, err, cpu = run_timed(cmd)
        if rc != 0:
            sys.exit("report_bench: %s failed (%d): %s" % (" ".join(cmd), rc, err))
        walls.append(wall)
        cpus.append(cpu)
    rss, rc, err = run_rss(cmd)
    if rc != 0:
        sys.exit("report_bench: %s failed (%d): %s" % (" ".join(cmd), rc, err))
    return median(walls), rss, median(cpus)


def row(fmt, n, events, files, args, start_s, reps=None, name=None):
    nbytes = dir_bytes(files)
    target = files if fmt in ("pickle", "real") else [os.path.dirname(files[0])]
    out = os.path.join(args.work, "out-%s-%s" % (fmt, name or n))
    reps = reps or args.reps
    t_plain, rss_plain, cpu_plain = report(args, target, [], reps)
    t_out, rss_out, _ = report(args, target, ["--out", out], reps)
    r = {"format": fmt, "ranks": n, "events_per_rank": events, "bytes": nbytes,
         "report_s": t_plain, "report_cpu_s": cpu_plain, "report_rss_kib": rss_plain,
         "report_out_s": t_out, "report_out_rss_kib": rss_out, "startup_s": start_s,
         "load": os.getloadavg()[0],
         "mb_per_s": nbytes / 1e6 / t_plain, "events_per_s": n * events / t_plain}
    if fmt in ("pickle", "real"):
        py_s, py_rss = python_load(files, reps if fmt == "real" else args.py_reps or args.reps)
        r.update({"python_load_s": py_s, "python_rss_kib": py_rss, "ratio": t_plain / py_s,
                  "ratio_without_startup": max(t_plain - start_s, 0) / py_s})
    if fmt == "real":
        proc_s = python_process(files, reps)
        r.update({"python_process_s": proc_s, "ratio_process": t_plain / proc_s,
                  "ratio_paired": paired(args, files, reps)})
    return r


def print_row(r):
    line = "%-7s %6d %9d %9.1f %9.3f %7.3f %8.1f %12.0f %8.0f %8.3f %8.0f %5.1f" % (
        r["format"], r["ranks"], r["events_per_rank"], r["bytes"] / 1e6, r["report_s"],
        r["report_cpu_s"], r["mb_per_s"], r["events_per_s"], r["report_rss_kib"] / 1024,
        r["report_out_s"], r["report_out_rss_kib"] / 1024, r["load"])
    if "python_load_s" in r:
        line += " %9.3f %8.0f %7.3f %7.3f" % (r["python_load_s"], r["python_rss_kib"] / 1024,
                                              r["ratio"], r["ratio_without_startup"])
    print(line, flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", required=True, help="the build folder (ranksnap, tests/bench/...)")
    p.add_argument("--work", required=True, help="where the ranks' files are written and kept")
    p.add_argument("--ranks", default="4,32,256,1024")
    p.add_argument("--pickle-ranks", default="4,32,256")
    p.add_argument("--events", type=int, default=100000)
    p.add_argument("--formats", default="rsnap,ring,pickle")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--py-reps", type=int, default=0,
                   help="runs of Python's pickle.load (0: --reps); the 256-rank load takes minutes")
    p.add_argument("--jobs", type=int, default=0, help="report --jobs (0: its default)")
    p.add_argument("--single", type=lambda v: int(float(v)), default=0, help="events of the one-rank case (0: none)")
    p.add_argument("--real", default="",
                   help="folders of real PyTorch pickles (comma-separated), each reported whole "
                        "against Python's loads of its pickles (median of 9 runs)")
    p.add_argument("--after", type=int, default=0, metavar="R",
                   help="with --real: R rounds of the report timed after each of four things "
                        "(another report, Python's loads, a Python that does nothing, 100 ms idle)")
    p.add_argument("--decode-bench", action="store_true")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    real = [x for x in args.real.split(",") if x]
    if args.after < 0:
        sys.exit("report_bench: --after %d: expected a number of rounds, 0 or more" % args.after)
    if args.after and not real:
        sys.exit("report_bench: --after times the reports of --real folders: give --real DIR,...")
    for d in real:  # before anything is written or timed
        if not os.path.isdir(d):
            sys.exit("report_bench: --real %s: not a folder (of real PyTorch pickles)" % d)
        if not any(f.endswith(".pickle") for f in os.listdir(d)):
            sys.exit("report_bench: --real %s: no .pickle file in it" % d)
    os.makedirs(args.work, exist_ok=True)

    starts = [run_timed([os.path.join(args.build, "ranksnap"), "--version"])[0] for _ in range(9)]
    start_s = median(starts)
    rows = []
    if not args.json:
        print("ranksnap --version (start-up): %.4f s; nproc %d; load average %.2f %.2f %.2f"
              % ((start_s, os.cpu_count()) + os.getloadavg()))
        print("%-7s %6s %9s %9s %9s %7s %8s %12s %8s %8s %8s %5s %9s %8s %7s %7s" % (
            "format", "ranks", "events", "MB", "report s", "CPU s", "MB/s", "events/s",
            "RSS MiB", "--out s", "RSS MiB", "load", "py load s", "py MiB", "ratio", "-start"))
    for fmt in args.formats.split(","):
        ns = args.pickle_ranks if fmt == "pickle" else args.ranks
        for n in [int(x) for x in ns.split(",") if x]:
            d = os.path.join(args.work, "%s-%d" % (fmt, n))
            if fmt == "pickle":
                make_pickles(args, n, d)
            else:
                make_ranks(args, fmt, n, d)
            r = row(fmt, n, args.events, files_of(fmt, d, n), args, start_s)
            rows.append(r)
            if args.json:
                print(json.dumps(r), flush=True)
            else:
                print_row(r)
        big = [r for r in rows if r["format"] == fmt]
        if len(big) >= 2 and not args.json:
            a, b = big[-2], big[-1]
            slope = (b["report_s"] - a["report_s"]) / (b["ranks"] - a["ranks"])
            rss_slope = (b["report_rss_kib"] - a["report_rss_kib"]) / (b["ranks"] - a["ranks"])
            est = b["report_s"] + slope * (16384 - b["ranks"])
            est_rss = (b["report_rss_kib"] + rss_slope * (16384 - b["ranks"])) / 1024
            print("%-7s  16384 ranks, extrapolated from %d and %d: ~%.0f s, ~%.0f MiB (an "
                  "estimate, not a measurement)" % (fmt, a["ranks"], b["ranks"], est, est_rss))

    for d in real:
        files = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".pickle"))
        r = row("real", len(files), 0, files, args, start_s, reps=max(args.reps, 9),
                name=os.path.basename(os.path.normpath(d)))
        r["folder"] = d
        rows.append(r)
        if args.json:
            print(json.dumps(r), flush=True)
        else:
            print_row(r)
            print("        (real: %s; paired with Python's loads, run after run: ratio %.3f; "
                  "the whole Python process that loads them: %.3f s, the report %.3f of it)"
                  % (d, r["ratio_paired"], r["python_process_s"], r["ratio_process"]))
        if args.after:
            r["report_ms_after"] = after(args, files, args.after)
            if args.json:
                print(json.dumps({"folder": d, "report_ms_after": r["report_ms_after"]}), flush=True)
            else:
                print("        (the report after %s)" % "; ".join(
                    "%s: %.2f ms" % kv for kv in r["report_ms_after"].items()))

    if args.single:
        d = os.path.join(args.work, "single-%d" % args.single)
        saved = args.events
        args.events = args.single
        make_ranks(args, "rsnap", 1, d)
        files = files_of("rsnap", d, 1)
        exported = os.path.join(d, "export.pickle")
        if not os.path.exists(exported):
            subprocess.run([os.path.join(args.build, "ranksnap"), "export", "--torch", files[0],
                            "-o", exported], check=True, stdout=subprocess.DEVNULL)
        for fmt, target in (("rsnap", files), ("pickle", [exported])):
            r = row(fmt, 1, args.single, target, args, start_s)
            if fmt == "pickle":
                r["format"] = "export"
            rows.append(r)
            if args.json:
                print(json.dumps(r), flush=True)
            else:
                print_row(r)
        args.events = saved

    if args.decode_bench:
        bench = os.path.join(args.build, "tests", "bench", "decode_bench")
        picks = []
        for fmt in ("rsnap", "ring", "pickle"):
            cand = [r for r in rows if r["format"] == fmt]
            if cand:
                n = cand[0]["ranks"]
                picks.append(files_of(fmt, os.path.join(args.work, "%s-%d" % (fmt, n)), n)[0])
        if args.single:
            d = os.path.join(args.work, "single-%d" % args.single)
            picks += [files_of("rsnap", d, 1)[0], os.path.join(d, "export.pickle")]
        here = os.path.join(HERE, "..", "data")
        picks += sorted(os.path.join(here, f) for f in os.listdir(here) if f.endswith(".pickle"))
        for d in [x for x in args.real.split(",") if x and os.path.abspath(x) != os.path.abspath(here)]:
            picks += sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".pickle"))[:1]
        cmd = [bench, "--reps", str(max(args.reps, 5))] + (["--json"] if args.json else []) + picks
        sys.stdout.flush()
        subprocess.run(cmd, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
