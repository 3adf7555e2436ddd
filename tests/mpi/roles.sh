#!/bin/sh
# roles.sh — a pipeline x data-parallel job (the demo's --pp 4 under 16 ranks, pp=4 x dp=4): each
# rank is compared with the ranks of its own stage. Stage s keeps 4 - s microbatches in flight, so
# the stages differ by design and none of that may be flagged; rank 10 (stage 2) is given a 1.5x
# batch and rank 5 (stage 1) leaks 16 MiB a step: both must be flagged within their stage, with
# their lines, and the role table must name stage 0 as nearest its limit. Checked in the live
# report (RANKSNAP_GROUPS) and in `ranksnap report --groups` of the files, and again with no
# grouping declared: found from the demo's MPI communicators (the stages' data-parallel splits,
# which carry the gradients' all-reduce, and the pipeline's splits), in the live report and in
# `ranksnap report` of the files, the report saying where the grouping came from.
# usage: roles.sh MPIEXEC DEMO CLI PYTHON DIR
set -u
mpiexec=$1 demo=$2 cli=$3 py=$4 dir=$5
rm -rf "$dir" && mkdir -p "$dir"
export RANKSNAP_BACKEND=sim RANKSNAP_DIR="$dir/run" RANKSNAP_STEPS=2:6 RANKSNAP_GROUPS=pp=4,dp=4
export OMPI_MCA_rmaps_base_oversubscribe=1
"$mpiexec" -np 16 --oversubscribe --allow-run-as-root --mca btl self,vader \
  "$demo" --iters 8 --quiet --pp 4 --diverge 10:1.5 --leak 5:16MiB \
  > "$dir/stdout" 2> "$dir/stderr" || { echo "mpirun failed"; cat "$dir/stderr"; exit 1; }
unset RANKSNAP_GROUPS
"$cli" report --groups pp=4,dp=4 --json "$dir/run" > "$dir/grouped.json" || exit 1
"$cli" report --groups pp=4,dp=4 "$dir/run" > "$dir/grouped.txt" || exit 1
# the page of ranks grouped the other way round (replicas outermost), for tests/html
"$cli" report --groups dp=4,pp=4 --html "$dir/strided.html" "$dir/run" > /dev/null || exit 1
# no grouping declared: found from the communicators
"$mpiexec" -np 16 --oversubscribe --allow-run-as-root --mca btl self,vader \
  env RANKSNAP_DIR="$dir/found" "$demo" --iters 8 --quiet --pp 4 --diverge 10:1.5 --leak 5:16MiB \
  > "$dir/stdout.found" 2> "$dir/stderr.found" || { echo "mpirun failed"; cat "$dir/stderr.found"; exit 1; }
"$cli" report --json "$dir/found" > "$dir/found.json" || exit 1
"$cli" report --html "$dir/found.html" "$dir/found" > "$dir/found.txt" || exit 1
cat "$dir/found.txt"
cat "$dir/grouped.txt"
"$py" - "$dir" <<'PY' || exit 1
import json, sys
d = sys.argv[1]
fails = 0
def check(cond, what, r=None):
    global fails
    if not cond:
        fails += 1
        print("FAILED:", what)
        if r is not None: print(json.dumps(r, indent=1)[:3000])
found = "the job's MPI communicators"
stage = ["group %d (ranks %d-%d)" % (k, 4 * k, 4 * k + 3) for k in range(4)]
for name, src in (("run/report.json", "RANKSNAP_GROUPS pp=4,dp=4"), ("grouped.json", "--groups pp=4,dp=4"),
                  ("found/report.json", found), ("found.json", found)):
    r = json.load(open(f"{d}/{name}"))
    label = (lambda k: stage[k]) if src == found else (lambda k: "pp=%d" % k)
    div = {x["rank"]: x for x in r["divergent_ranks"]}
    check(sorted(div) == [5, 10], f"{name}: only ranks 5 and 10 flagged, got {sorted(div)}", r)
    check(r.get("grouping") == src, f"{name}: grouping {r.get('grouping')!r}")
    if 10 in div:
        x = div[10]
        check(x["role"] == label(2) and x["pattern"] == "offset", f"{name}: rank 10 an offset in pp=2", x)
        check(x["sites"] and x["sites"][0]["function"] == "block_activations" and x["sites"][0]["line"] > 0,
              f"{name}: rank 10's first site block_activations with its line", x)
        # 1.5x of stage 2's activations (2 microbatches): 428 MiB against the stage's 328 MiB
        check(35 > x["divergence_pct"] > 25, f"{name}: rank 10 about +30% of its stage's median", x)
    if 5 in div:
        x = div[5]
        check(x["role"] == label(1) and x["pattern"] == "growth", f"{name}: rank 5 grows in pp=1", x)
        check(any(s["function"] == "leaky_cache" for s in x["sites"]), f"{name}: rank 5 at leaky_cache", x)
    roles = r.get("roles", [])
    check([x["role"] for x in roles] == [label(k) for k in range(4)], f"{name}: four stages", roles)
    check(r.get("nearest_role") == label(0), f"{name}: pp=0 nearest its limit", r.get("nearest_role"))
    if len(roles) == 4:
        check(roles[0]["max_peak"] > roles[1]["median_peak"] > roles[2]["median_peak"] > roles[3]["median_peak"],
              f"{name}: stage peaks in 1F1B order", roles)
        check(all(x["ranks"] == 4 for x in roles), f"{name}: four ranks a stage", roles)
    # what makes stage 0 heavier than stage 3: its microbatches' activations, by line
    g = r.get("role_gap") or {}
    check(g.get("heavy") == label(0) and g.get("light") == label(3), f"{name}: stage 0 against stage 3", g)
    check(g.get("sites") and g["sites"][0]["function"] == "block_activations" and g["sites"][0]["line"] > 0,
          f"{name}: the gap's first site block_activations with its line", g)
check("roles (from the job's MPI communicators)" in open(f"{d}/found.txt").read(),
      "found: the text report says where the grouping came from")
sys.exit(1 if fails else 0)
PY
# one rank's communicators spoiled (not a list): the rank is still read and compared, only its
# role is lost, and the report says so instead of refusing the file
rm -rf "$dir/spoiled" && cp -r "$dir/found" "$dir/spoiled" && rm -f "$dir/spoiled"/report.*
"$py" - "$dir/spoiled/rank-00006.rsnap" <<'PY' || exit 1
import msgpack, sys
d = msgpack.unpackb(open(sys.argv[1], "rb").read(), strict_map_key=False, raw=False)
d["communicators"] = 3
open(sys.argv[1], "wb").write(msgpack.packb(d))
PY
"$cli" report "$dir/spoiled" > "$dir/spoiled.txt" 2>&1 || { echo "FAILED: report of a rank with spoiled communicators"; cat "$dir/spoiled.txt"; exit 1; }
grep -q "^ranksnap: 16 of 16 ranks" "$dir/spoiled.txt" || { echo "FAILED: not every rank read"; cat "$dir/spoiled.txt"; exit 1; }
grep -q "rank 6: the communicators in its file are malformed and were left out" "$dir/spoiled.txt" ||
  { echo "FAILED: the spoiled communicators are not said"; cat "$dir/spoiled.txt"; exit 1; }
echo "roles: PASS"
