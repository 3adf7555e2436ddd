#!/usr/bin/env python3
"""check.py — assertions on what an MPI test run left in its RANKSNAP_DIR.

    check.py DIR report   EXPR...   every EXPR (Python, with `r` = report.json) must hold
    check.py DIR snapshots EXPR...  every EXPR must hold for each rank-*.rsnap (`s` = the map)
    check.py DIR cli RANKSNAP EXPR...  `RANKSNAP report DIR --json` reads every snapshot after the
                                    job, and every EXPR holds for its report (`r`)

Prints each failed expression with the values involved and exits 1; exits 0 when all hold.
"""
import glob
import json
import os
import subprocess
import sys


def load_snapshots(d):
    import msgpack  # Debian: python3-msgpack
    out = []
    for p in sorted(glob.glob(os.path.join(d, "rank-*.rsnap"))):
        with open(p, "rb") as f:
            out.append((p, msgpack.unpackb(f.read(), strict_map_key=False, raw=False)))
    return out


def main():
    if len(sys.argv) < 4 or sys.argv[2] not in ("report", "snapshots", "cli"):
        print(__doc__)
        return 2
    d, what, exprs = sys.argv[1], sys.argv[2], sys.argv[3:]
    failed = 0
    if what in ("report", "cli"):
        if what == "cli":
            p = subprocess.run([exprs[0], "report", d, "--json"], capture_output=True, text=True)
            if p.returncode != 0:
                print("FAILED: ranksnap report %s: exit %d\n%s" % (d, p.returncode, p.stderr[-2000:]))
                return 1
            r, exprs = json.loads(p.stdout), exprs[1:]
        else:
            with open(os.path.join(d, "report.json")) as f:
                r = json.load(f)
        for e in exprs:
            if not eval(e, {"r": r}):
                failed += 1
                print("FAILED: %s\n  report: %s" % (e, json.dumps(r, indent=1)[:4000]))
    else:
        snaps = load_snapshots(d)
        if not snaps:
            print("FAILED: no rank-*.rsnap in %s" % d)
            return 1
        for p, s in snaps:
            for e in exprs:
                if not eval(e, {"s": s}):
                    failed += 1
                    print("FAILED: %s for %s\n  ranges %s, steps %s" % (
                        e, p, s.get("time", {}).get("ranges"),
                        [sz for a, sz in zip(s["history"]["action"], s["history"]["size"]) if a == 6]))
    print("%d passed, %d failed" % (len(exprs) - failed if what == "report" else 1, failed) if failed
          else "checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
