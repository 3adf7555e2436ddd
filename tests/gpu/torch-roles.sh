#!/bin/bash
# Ranks compared by role on GPUs, the grouping found with no flag: tests/gpu/torch_pp_train.py
# (torch alone: a ("pp", "dp") DeviceMesh from init_device_mesh, two pipeline stages under GPipe,
# stage 0 the heaviest by design) under
#   torchrun --nproc-per-node $NGPU --no-python launch/ranksnap-run --steps 2:6 python3 ...
# with neither RANKSNAP_GROUPS nor `ranksnap report --groups`: the glue writes the mesh's groups
# into every rank's pickle and the report groups the ranks by them, saying so. NGPU is 2 (pp=2:
# two roles of one rank) or 4 (pp=2 x dp=2), the default: every GPU there is, up to 4.
#   pp       no outlier: no rank flagged, the role table names pp=0 nearest its limit, the
#            grouping found from the DeviceMesh (live report and `ranksnap report`); and the same
#            files reported with --groups pp=2,dp=N (no second job) give the same roles
#   longer   (4 GPUs) rank 1's replica fed 1.5x longer sequences: rank 1 flagged within pp=0 with
#            a line of torch_pp_train.py, no rank of the other replica flagged
#   oom      (4 GPUs) rank 1 capped and fed 8x longer sequences at step 4: every rank's file kept,
#            the report names rank 1 with its role (pp=0) and the job ended by itself
# Everything goes under $OUT/roles-${NGPU}gpu; PASS/FAIL lines in its summary.txt; BUDGET
# seconds in all (default 300; each job at most 150).
#
#   source .device-deps/setup.sh && bash tests/gpu/torch-roles.sh            # 4 GPUs (or 2)
#   source .device-deps/setup.sh && NGPU=2 bash tests/gpu/torch-roles.sh     # 2 of them
set -uo pipefail
OUT=${OUT:-/tmp/ranksnap-out}
BUDGET=${BUDGET:-300}
cd "$(dirname "$0")/../.."
left() { echo $((BUDGET - SECONDS)); }
for need in "python3 -c 'import torch; from torch.distributed.device_mesh import init_device_mesh'" \
            "command -v torchrun" \
            "python3 -c 'import torch; assert torch.cuda.device_count() >= 2'"; do
    sh -c "$need" > /dev/null 2>&1 || { mkdir -p "$OUT/roles"; echo "missing on this machine: $need" | tee "$OUT/roles/summary.txt"; exit 1; }
done
NGPU=${NGPU:-$(python3 -c 'import torch; print(min(4, torch.cuda.device_count()))')}
[ "$NGPU" = 3 ] && NGPU=2
DP=$((NGPU / 2))
R=$OUT/roles-${NGPU}gpu
mkdir -p "$R"
cmake -S . -B build -DRANKSNAP_WERROR=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$R/build.log" 2>&1 &&
  cmake --build build -j16 --target ranksnap ranksnap_reader ranksnap_cli >> "$R/build.log" 2>&1 ||
  { tail -30 "$R/build.log"; exit 1; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__)'; echo "NGPU=$NGPU"; } | tee "$R/machine.txt"
summary=$R/summary.txt
: > "$summary"
# found with no flag: nothing declares the grouping
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK RANKSNAP_GROUPS

# job CASE PORT SCRIPT-ARGS...: the job, bounded, then the reports; the checks follow by case
job() {
    c=$1 port=$2; shift 2
    d=$R/$c
    rm -rf "$d" && mkdir -p "$d"
    limit=$(left); [ "$limit" -gt 150 ] && limit=150
    if [ "$limit" -lt 30 ]; then echo "SKIP $c (no time left)" | tee -a "$summary"; return 1; fi
    set -- torchrun --nproc-per-node "$NGPU" --master-port "$port" --no-python \
        launch/ranksnap-run --steps 2:6 --dir "$d" python3 tests/gpu/torch_pp_train.py "$@"
    echo "+ $*" | tee "$d.cmd"
    timeout -s KILL "$limit" "$@" > "$d.stdout" 2> "$d.stderr"
    echo "exit status $?" > "$d.rc"
    build/ranksnap report "$d" > "$d.report.txt" 2> "$d.report.err"
    build/ranksnap report --json "$d" > "$d.report.json" 2>> "$d.report.err"
    # declared: the same files, the grouping given (no second job)
    build/ranksnap report --groups "pp=2,dp=$DP" --json "$d" > "$d.declared.json" 2>> "$d.report.err"
    cat "$d.rc" "$d.report.err" "$d.report.txt"
    return 0
}

# check CASE: the Python checks of that case on $R/CASE*; prints PASS/FAIL CASE: why
check() {
    python3 - "$R" "$1" "$NGPU" <<'PY' | tee -a "$summary"
import glob, json, os, pickle, sys
R, case, ngpu = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = os.path.join(R, case)
why = []
rc = open(d + ".rc").read().split()[-1]
files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(d, "rank-*")))
want = [f"rank-{r:05d}.pickle" for r in range(ngpu)]
if files != want:
    why.append(f"files {files} (want {want})")
# what the glue read of the mesh: rank r is stage r // dp, replica r % dp
dp = ngpu // 2
for f in files:
    r = int(f[5:10])
    try:
        got = {c["name"]: (c["size"], c["rank"]) for c in
               pickle.load(open(os.path.join(d, f), "rb"))["ranksnap"].get("communicators", [])}
    except Exception as e:
        got = {"?": str(e)}
    if got.get("pp") != (2, r // dp) or got.get("dp") != (dp, r % dp):
        why.append(f"{f}: communicators {got}")
try:
    r = json.load(open(d + ".report.json"))
except Exception as e:
    print(f"FAIL {case}: no grouped report ({e})")
    sys.exit(0)
roles = [x["role"] for x in r.get("roles", [])]
if roles != ["pp=0", "pp=1"]:
    why.append(f"roles {roles}")
if case != "oom" and r.get("nearest_role") != "pp=0":
    why.append(f"nearest_role {r.get('nearest_role')} (stage 0 keeps every microbatch)")
for x in r.get("roles", []):
    if x["ranks"] != ngpu // 2:
        why.append(f"role {x['role']} has {x['ranks']} ranks")
div = {x["rank"]: x for x in r["divergent_ranks"]}
def found(g):
    """The grouping was found from the job's DeviceMesh, not declared."""
    g = (g or "").lower()
    return bool(g) and not g.startswith(("ranksnap_groups", "--groups")) and ("mesh" in g or "torch" in g)
print(f"  {case}: grouping {r.get('grouping')!r}")
if not found(r.get("grouping")):
    why.append(f"grouping {r.get('grouping')!r} (want it found from the DeviceMesh)")
live = os.path.join(d, "report.json")
if case != "oom":
    if not os.path.exists(live):
        why.append("no live report")
    else:
        lr = json.load(open(live))
        if not found(lr.get("grouping")) or [x["role"] for x in lr.get("roles", [])] != ["pp=0", "pp=1"]:
            why.append(f"live report: grouping {lr.get('grouping')!r}, roles "
                       f"{[x['role'] for x in lr.get('roles', [])]}")
if case == "pp":
    try:
        dr = json.load(open(d + ".declared.json"))
        if not str(dr.get("grouping", "")).startswith("--groups") or \
                [(x["role"], x["ranks"]) for x in dr.get("roles", [])] != \
                [(x["role"], x["ranks"]) for x in r.get("roles", [])]:
            why.append(f"declared: grouping {dr.get('grouping')!r}, roles {dr.get('roles')}")
    except Exception as e:
        why.append(f"no declared report ({e})")
if case == "pp":
    if rc != "0": why.append(f"exit {rc}")
    if div: why.append(f"flagged {sorted(div)} with no outlier")
elif case == "longer":
    if rc != "0": why.append(f"exit {rc}")
    x = div.get(1)
    if not x or x.get("role") != "pp=0":
        why.append(f"rank 1 not flagged within pp=0: {sorted(div)}")
    elif not any(s["file"].endswith("torch_pp_train.py") and s["line"] > 0 for s in x["sites"]) and \
            not any(p["file"].endswith("torch_pp_train.py") for s in x["sites"] for p in s["path"]):
        why.append("rank 1's sites name no line of torch_pp_train.py")
    if 0 in div or 2 in div:
        why.append(f"the other replica flagged: {sorted(div)}")
elif case == "oom":
    if rc == "0": why.append("the job did not fail")
    ooms = {x["rank"]: x for x in r["oom_ranks"]}
    if 1 not in ooms or ooms[1].get("role") != "pp=0":
        why.append(f"oom ranks {[(k, v.get('role')) for k, v in ooms.items()]}")
    txt = open(d + ".report.txt").read()
    if "rank 1 (pp=0) ran out of memory" not in txt:
        why.append("text report does not name rank 1 (pp=0) as OOM")
print(("PASS " + case) if not why else ("FAIL " + case + ": " + "; ".join(why)))
PY
}

job pp 29730 && check pp
if [ "$NGPU" -ge 4 ]; then
    job longer 29740 --longer 1:1.5 && check longer
    job oom 29750 --oom 1:4 && check oom
    grep "^rank 1" "$R/longer.report.txt" "$R/oom.report.txt" | tee -a "$summary"
fi
cat "$summary"
