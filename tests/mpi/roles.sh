#!/bin/sh
# roles.sh — a pipeline x data-parallel job (the demo's --pp 4 under 16 ranks, pp=4 x dp=4): each
# rank is compared with the ranks of its own stage. Stage s keeps 4 - s microbatches in flight, so
# the stages differ by design and none of that may be flagged; rank 10 (stage 2) is given a 1.5x
# batch and rank 5 (stage 1) leaks 16 MiB a step: both must be flagged within their stage, with
# their lines, and the role table must name stage 0 as nearest its limit. Checked in the live
# report (RANKSNAP_GROUPS) and in `ranksnap report --groups` of the files; without a grouping the
# same files hide rank 10 behind the spread between the stages (what the grouping is for).
# usage: roles.sh MPIEXEC DEMO CLI PYTHON DIR
set -u
mpiexec=$1 demo=$2 cli=$3 py=$4 dir=$5
rm -rf "$dir" && mkdir -p "$dir"
export RANKSNAP_BACKEND=sim RANKSNAP_DIR="$dir/run" RANKSNAP_STEPS=2:6 RANKSNAP_GROUPS=pp=4,dp=4
export OMPI_MCA_rmaps_base_oversubscribe=1
"$mpiexec" -np 16 --oversubscribe --allow-run-as-root --mca btl self,vader \
  "$demo" --iters 8 --quiet --pp 4 --diverge 10:1.5 --leak 5:16777216 \
  > "$dir/stdout" 2> "$dir/stderr" || { echo "mpirun failed"; cat "$dir/stderr"; exit 1; }
unset RANKSNAP_GROUPS
"$cli" report --groups pp=4,dp=4 --json "$dir/run" > "$dir/grouped.json" || exit 1
"$cli" report --groups pp=4,dp=4 "$dir/run" > "$dir/grouped.txt" || exit 1
"$cli" report --json "$dir/run" > "$dir/flat.json" || exit 1
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
for name, src in (("run/report.json", "RANKSNAP_GROUPS pp=4,dp=4"), ("grouped.json", "--groups pp=4,dp=4")):
    r = json.load(open(f"{d}/{name}"))
    div = {x["rank"]: x for x in r["divergent_ranks"]}
    check(sorted(div) == [5, 10], f"{name}: only ranks 5 and 10 flagged, got {sorted(div)}", r)
    check(r.get("grouping") == src, f"{name}: grouping {r.get('grouping')!r}")
    if 10 in div:
        x = div[10]
        check(x["role"] == "pp=2" and x["pattern"] == "offset", f"{name}: rank 10 an offset in pp=2", x)
        check(x["sites"] and x["sites"][0]["function"] == "block_activations" and x["sites"][0]["line"] > 0,
              f"{name}: rank 10's first site block_activations with its line", x)
        # 1.5x of stage 2's activations (2 microbatches): 428 MiB against the stage's 328 MiB
        check(35 > x["divergence_pct"] > 25, f"{name}: rank 10 about +30% of its stage's median", x)
    if 5 in div:
        x = div[5]
        check(x["role"] == "pp=1" and x["pattern"] == "growth", f"{name}: rank 5 grows in pp=1", x)
        check(any(s["function"] == "leaky_cache" for s in x["sites"]), f"{name}: rank 5 at leaky_cache", x)
    roles = r.get("roles", [])
    check([x["role"] for x in roles] == ["pp=0", "pp=1", "pp=2", "pp=3"], f"{name}: four stages", roles)
    check(r.get("nearest_role") == "pp=0", f"{name}: pp=0 nearest its limit", r.get("nearest_role"))
    if len(roles) == 4:
        check(roles[0]["max_peak"] > roles[1]["median_peak"] > roles[2]["median_peak"] > roles[3]["median_peak"],
              f"{name}: stage peaks in 1F1B order", roles)
        check(all(x["ranks"] == 4 for x in roles), f"{name}: four ranks a stage", roles)
flat = json.load(open(f"{d}/flat.json"))
flagged = {x["rank"] for x in flat["divergent_ranks"]}
check(10 not in flagged, f"ungrouped: rank 10 hidden behind the stages' spread, got {sorted(flagged)}", flat)
check("roles" not in flat and "grouping" not in flat, "ungrouped: no roles in the JSON", flat)
sys.exit(1 if fails else 0)
PY
echo "roles: PASS"
