#!/bin/bash
# Ranks compared by role on GPUs: tests/gpu/torch_pp_train.py (torch alone: a ("pp", "dp")
# DeviceMesh, two pipeline stages under GPipe, stage 0 the heaviest by design) under
#   torchrun --nproc-per-node $NGPU --no-python launch/ranksnap-run --steps 2:6 python3 ...
# with RANKSNAP_GROUPS=pp=2,dp=$((NGPU/2)) for the live report, and `ranksnap report --groups` of
# the files. NGPU is 2 (pp=2: two roles of one rank) or 4 (pp=2 x dp=2), the default: every GPU
# there is, up to 4.
#   pp       no outlier: no rank flagged, the role table names pp=0 nearest its limit
#   longer   (4 GPUs) rank 1's replica fed 1.5x longer sequences: rank 1 flagged within pp=0 with
#            a line of torch_pp_train.py, no rank of the other replica flagged
#   oom      (4 GPUs) rank 1 capped and fed 8x longer sequences at step 4: every rank's file kept,
#            the report names rank 1 with its role (pp=0) and the job ended by itself
# Everything goes under $OUT/roles; PASS/FAIL lines in its summary.txt; BUDGET seconds in all
# (default 500).
#
#   source .device-deps/setup.sh && bash tests/gpu/torch-roles.sh
set -uo pipefail
OUT=${OUT:-/tmp/ranksnap-out}
R=$OUT/roles
BUDGET=${BUDGET:-500}
mkdir -p "$R"
cd "$(dirname "$0")/../.."
left() { echo $((BUDGET - SECONDS)); }
for need in "python3 -c 'import torch; from torch.distributed.device_mesh import init_device_mesh'" \
            "command -v torchrun" \
            "python3 -c 'import torch; assert torch.cuda.device_count() >= 2'"; do
    sh -c "$need" > /dev/null 2>&1 || { echo "missing on this machine: $need" | tee "$R/summary.txt"; exit 1; }
done
NGPU=${NGPU:-$(python3 -c 'import torch; print(min(4, torch.cuda.device_count()))')}
[ "$NGPU" = 3 ] && NGPU=2
DP=$((NGPU / 2))
cmake -S . -B build -DRANKSNAP_WERROR=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$R/build.log" 2>&1 &&
  cmake --build build -j16 --target ranksnap ranksnap_reader ranksnap_cli >> "$R/build.log" 2>&1 ||
  { tail -30 "$R/build.log"; exit 1; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__)'; echo "NGPU=$NGPU"; } | tee "$R/machine.txt"
summary=$R/summary.txt
: > "$summary"
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK

# job CASE PORT SCRIPT-ARGS...: the job, bounded, then the reports; the checks follow by case
job() {
    c=$1 port=$2; shift 2
    d=$R/$c
    rm -rf "$d" && mkdir -p "$d"
    limit=$(left); [ "$limit" -gt 200 ] && limit=200
    if [ "$limit" -lt 30 ]; then echo "SKIP $c (no time left)" | tee -a "$summary"; return 1; fi
    set -- torchrun --nproc-per-node "$NGPU" --master-port "$port" --no-python \
        launch/ranksnap-run --steps 2:6 --dir "$d" python3 tests/gpu/torch_pp_train.py "$@"
    echo "+ RANKSNAP_GROUPS=pp=2,dp=$DP $*" | tee "$d.cmd"
    RANKSNAP_GROUPS=pp=2,dp=$DP timeout -s KILL "$limit" "$@" > "$d.stdout" 2> "$d.stderr"
    echo "exit status $?" > "$d.rc"
    build/ranksnap report --groups "pp=2,dp=$DP" "$d" > "$d.report.txt" 2> "$d.report.err"
    build/ranksnap report --groups "pp=2,dp=$DP" --json "$d" > "$d.report.json" 2>> "$d.report.err"
    build/ranksnap report --json "$d" > "$d.flat.json" 2>> "$d.report.err"
    cat "$d.rc" "$d.report.err" "$d.report.txt"
    return 0
}

# check CASE: the Python checks of that case on $R/CASE*; prints PASS/FAIL CASE: why
check() {
    python3 - "$R" "$1" "$NGPU" <<'PY' | tee -a "$summary"
import glob, json, os, sys
R, case, ngpu = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = os.path.join(R, case)
why = []
rc = open(d + ".rc").read().split()[-1]
files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(d, "rank-*")))
want = [f"rank-{r:05d}.pickle" for r in range(ngpu)]
if files != want:
    why.append(f"files {files} (want {want})")
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
live = os.path.join(d, "report.json")
if os.path.exists(live):
    lr = json.load(open(live))
    if not lr.get("grouping", "").startswith("RANKSNAP_GROUPS"):
        why.append(f"live report grouping {lr.get('grouping')!r}")
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
