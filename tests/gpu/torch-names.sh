#!/bin/bash
# Every byte named, on two GPUs with ranksnap's default settings (RANKSNAP_STACKS=python): the
# backward pass, the OOM's own request, the bytes alive before the range (docs/PYTORCH.md, "Names
# for the backward pass and for what came before"). Unmodified scripts under
#   torchrun --nproc-per-node 2 --no-python launch/ranksnap-run --steps A:B python3 SCRIPT ...
#   oom-backward      torch_ddp_train.py (DDP GPT-2), rank 1 out of memory in the backward of step 3
#   leak-from-step-0  torch_ddp_train.py, rank 1 keeps every step's logits from step 0
#   fsdp2-oom-backward  torch_ddp_train.py --fsdp2 (fully_shard per block), as oom-backward
#   trainer-longer    hf_trainer_train.py (transformers.Trainer), rank 1's sequences 1.5x longer
# For each: PASS/FAIL lines from tests/python/check_named_report.py (nothing of the OOM rank's
# report or of the divergence is "(no stack)", the request is named by the backward pass, the
# leak's early bytes are "allocated before step 2"), and the pickles copied to
# $OUT/fixtures/CASE for tests/data/torch_names/CASE (the CTest torch_gpu_fixtures_are_named
# reads them there). Then tests/bench/torch_overhead.py: ranksnap's range against no ranksnap and
# against PyTorch's own recorder (stacks "python"), GPU-bound and host-bound steps, the
# state-only recorder, and the range end's time per 100k entries. About 6 minutes in all.
#
#   source .device-deps/setup.sh && bash tests/gpu/torch-names.sh
set -uo pipefail
OUT=${OUT:-/tmp/ranksnap-out}
R=$OUT/names
BUDGET=${BUDGET:-360}
mkdir -p "$R" "$OUT/fixtures"
cd "$(dirname "$0")/../.."
left() { echo $((BUDGET - SECONDS)); }
. tests/gpu/torch-prelude.sh
require_and_build "$R" "python3 -c 'import torch, transformers'" "command -v torchrun"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
  python3 -c 'import torch; print("_cuda_setMemoryMetadata:", hasattr(torch._C, "_cuda_setMemoryMetadata"), "_current_autograd_node:", hasattr(torch._C, "_current_autograd_node"))'
} | tee "$R/machine.txt"
summary=$R/summary.txt
: > "$summary"
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK

# job CASE STEPS SCRIPT ARGS...: the job under torchrun, bounded; files in $R/CASE, then checked
job() {
    c=$1 steps=$2; shift 2
    d=$R/$c
    torchrun_job "$d" 2 "$steps" "$@" || { echo "SKIP $c (no time left)" | tee -a "$summary"; return; }
    build/ranksnap report "$d" > "$d.report.txt" 2> "$d.report.err"
    build/ranksnap report --json "$d" > "$d.report.json" 2>> "$d.report.err"
    if python3 tests/python/check_named_report.py "$c" "$d.report.json" "$d.report.txt" "$d"/rank-*.pickle > "$d.checks" 2>&1; then
        echo "PASS $c" | tee -a "$summary"
    else
        echo "FAIL $c: $(grep -v '^ok ' "$d.checks" | tr '\n' ' ')" | tee -a "$summary"
    fi
    mkdir -p "$OUT/fixtures/$c" && cp "$d"/rank-*.pickle "$OUT/fixtures/$c/" 2>/dev/null
    cp "$d.report.txt" "$d.cmd" "$OUT/fixtures/$c/"
    du -sh "$OUT/fixtures/$c" | tee -a "$summary"
    sed -n '1,40p' "$d.report.txt"
}

small="--batch 4 --seq 128 --layers 2 --width 256"
job oom-backward 2:6 tests/gpu/torch_ddp_train.py $small --steps 6 --oom-backward 1:3
job fsdp2-oom-backward 2:6 tests/gpu/torch_ddp_train.py $small --fsdp2 --steps 6 --oom-backward 1:3
job leak-from-step-0 2:5 tests/gpu/torch_ddp_train.py $small --steps 6 --keep-logits 1
job trainer-longer 2:5 tests/gpu/hf_trainer_train.py $small --steps 6 --longer 1:1.5

limit=$(left)
if [ "${BENCH:-1}" = 0 ]; then
    echo "SKIP bench (BENCH=0)" | tee -a "$summary"
elif [ "$limit" -gt 60 ]; then
    timeout -k 5 "$limit" python3 tests/bench/torch_overhead.py --run launch/ranksnap-run \
        --lib build/libranksnap.so --out "$R/bench" --rounds 4 --block 8 --warmup 6 2>&1 | tee "$R/bench.txt"
else
    echo "SKIP bench (no time left)" | tee -a "$summary"
fi
cat "$summary"
# one file to bring back: the fixtures
tar czf "$OUT/fixtures.tar.gz" -C "$OUT" fixtures
