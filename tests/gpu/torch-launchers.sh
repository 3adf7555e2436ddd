#!/bin/bash
# The launchers PyTorch users type, on two GPUs, with ranksnap-run in front of each (docs/PYTORCH.md,
# "Launchers: in front or behind"), in one call of at most 9 minutes:
#   lightning   launch/ranksnap-run ... python3 tests/gpu/lightning_train.py   (Trainer(devices=2, strategy="ddp"))
#   accelerate  launch/ranksnap-run ... accelerate launch --multi_gpu --num_processes 2 tests/gpu/hf_trainer_train.py
#   torchrun    launch/ranksnap-run ... torchrun --nproc-per-node 2 tests/gpu/torch_ddp_train.py --longer 1:1.5
#   expandable  the same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
# Unmodified scripts, small GPT-2s with random weights (no download), rank 1 fed 1.5x longer
# sequences in each. A case passes when RANKSNAP_DIR holds rank-00000.pickle and rank-00001.pickle
# of one job and nothing else of a rank, `ranksnap report DIR` flags rank 1 and names its line, and
# no process printed the static-runtime hint, another job's file or a file left out. Everything
# goes under $OUT/launchers; PASS/FAIL lines in its summary.txt. Each job is bounded by what is
# left of BUDGET seconds (default 500).
#
#   source .device-deps/setup.sh && bash tests/gpu/torch-launchers.sh
set -uo pipefail
OUT=${OUT:-/tmp/ranksnap-out}
R=$OUT/launchers
BUDGET=${BUDGET:-500}
mkdir -p "$R"
cd "$(dirname "$0")/../.."
left() { echo $((BUDGET - SECONDS)); }
. tests/gpu/torch-prelude.sh
require_and_build "$R" "python3 -c 'import torch, transformers, accelerate'" \
    "python3 -c 'import lightning' || python3 -c 'import pytorch_lightning'" \
    "command -v torchrun" "command -v accelerate"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers, accelerate; print("torch", torch.__version__, "transformers", transformers.__version__, "accelerate", accelerate.__version__)'
  python3 -c 'import lightning as L; print("lightning", L.__version__)' 2>/dev/null ||
    python3 -c 'import pytorch_lightning as L; print("pytorch_lightning", L.__version__)'; } | tee "$R/machine.txt"
summary=$R/summary.txt
: > "$summary"
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK

# job CASE COMMAND...: ranksnap-run in front of COMMAND, bounded; files in $R/CASE, output beside
job() {
    c=$1; shift
    d=$R/$c
    rm -rf "$d" && mkdir -p "$d"
    limit=$(left); [ "$limit" -gt 200 ] && limit=200
    if [ "$limit" -lt 30 ]; then echo "SKIP $c (no time left)" | tee -a "$summary"; return; fi
    echo "+ launch/ranksnap-run --steps 2:6 --dir $d $*" | tee "$d.cmd"
    timeout -s KILL "$limit" launch/ranksnap-run --steps 2:6 --dir "$d" "$@" > "$d.stdout" 2> "$d.stderr"
    rc=$?
    build/ranksnap report "$d" > "$d.report.txt" 2> "$d.report.err"
    build/ranksnap report --json "$d" > "$d.report.json" 2>> "$d.report.err"
    { echo "exit status $rc"; ls -la "$d"; cat "$d.report.err" "$d.report.txt"; } > "$d.summary"
    why=""
    [ $rc -eq 0 ] || why="$why exit-status-$rc"
    names=$(cd "$d" && ls rank-* 2>/dev/null | tr '\n' ' ')
    [ "$names" = "rank-00000.pickle rank-00001.pickle " ] || why="$why files:[$names]"
    python3 - "$d" <<'PY' || why="$why jobs-or-ranks"
import glob, os, pickle, sys
m = [pickle.load(open(p, "rb"))["ranksnap"] for p in sorted(glob.glob(os.path.join(sys.argv[1], "rank-*.pickle")))]
print([(x["rank"], x["world_size"], x["job"]) for x in m])
assert [x["rank"] for x in m] == [0, 1] and len({x["job"] for x in m}) == 1
PY
    grep -q "^rank 1 peaks" "$d.report.txt" || why="$why rank-1-not-flagged"
    for bad in "none of its allocation calls reached" "another job's" "left out" "could not be read" "not recording"; do
        ! grep -q "$bad" "$d.stderr" "$d.report.err" || why="$why said:'$bad'"
    done
    if [ -z "$why" ]; then echo "PASS $c" | tee -a "$summary"; else echo "FAIL $c:$why" | tee -a "$summary"; fi
    grep "^rank 1 peaks" "$d.report.txt" | tee -a "$summary"
}

# CASES="torchrun expandable" runs only those (all by default)
on() { [ -z "${CASES:-}" ] || [[ " $CASES " == *" $1 "* ]]; }
on lightning && job lightning python3 tests/gpu/lightning_train.py --longer 1:1.5
on accelerate && job accelerate accelerate launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no \
    --dynamo_backend no --main_process_port 29710 tests/gpu/hf_trainer_train.py --longer 1:1.5
on torchrun && job torchrun torchrun --nproc-per-node 2 --master-port 29720 tests/gpu/torch_ddp_train.py --longer 1:1.5
# PyTorch's expandable segments map their pages with the driver's virtual memory API, under the
# driver's wrappers: PyTorch's recorder still sees them, once
on expandable && PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True job expandable torchrun \
    --nproc-per-node 2 --master-port 29730 tests/gpu/torch_ddp_train.py --longer 1:1.5
cat "$summary"
