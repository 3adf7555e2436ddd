#!/bin/bash
# PyTorch jobs with no optimizer, compiled models and CUDA graphs, on one GPU or more (docs/
# EXAMPLES.md, "Compiled models, CUDA graphs and inference"). Unmodified scripts under
#   torchrun --standalone --nproc-per-node N --no-python launch/ranksnap-run --steps A:B python3 SCRIPT ...
# with two ranks on one GPU when there is one (gloo), one each when there are two (NCCL):
#   compiled-longer      torch_ddp_train.py --compile: a torch.compile'd DDP GPT-2, rank 1's
#                        sequences 1.5x longer: flagged with the model's lines, none generated
#   reduce-overhead-1    torch_infer.py --compile reduce-overhead, one rank, --steps 2:8: the
#                        steps are the compiled model's calls, the CUDA graph pool said apart
#   reduce-overhead-2    the same on two ranks, rank 1's sequences 1.5x longer: flagged
#   eval-longer          torch_infer.py, eager under inference_mode, rank 1 1.5x longer
#   generate             torch_infer.py --generate 16: each generate call a step
#   checkpointing-oom    torch_ddp_train.py --checkpointing --oom-backward 1:3: rank 1 runs out
#                        of memory in the backward pass; no frame of ranksnap's in what it prints
#   async-longer         torch_ddp_train.py under PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync,
#                        rank 1's sequences 1.5x longer: recorded at the CUDA runtime, flagged
#                        with the model's lines
#   async-oom            the same backend, rank 1 capped by torch.cuda.set_per_process_memory_fraction
#                        (--oom 1:4): its OOM named with the request and the script's line
# Each job's files go to $OUT/compiled/CASE, beside them what it printed (CASE.stdout, CASE.stderr)
# and `ranksnap report`'s CASE.report.txt, CASE.report.json and CASE.report/ (report.html);
# tests/gpu/check_torch_compiled.py prints PASS or FAIL for each, and
# the summary is in $OUT/compiled/summary.txt. About 6 minutes. Without a GPU, torch or
# transformers it says which and exits 77.
#
# CASES="compiled-longer reduce-overhead-2" runs only the jobs named (all eight by default).
#
#   source .device-deps/setup.sh && bash tests/gpu/torch-compiled.sh
set -uo pipefail
OUT=${OUT:-/tmp/ranksnap-out}
R=$OUT/compiled
BUDGET=${BUDGET:-420}
ALL="compiled-longer reduce-overhead-1 reduce-overhead-2 eval-longer generate checkpointing-oom async-longer async-oom"
for c in ${CASES:-}; do
    case " $ALL " in *" $c "*) ;; *) echo "unknown case $c (the cases: $ALL)" >&2; exit 2 ;; esac
done
mkdir -p "$R"
cd "$(dirname "$0")/../.."
left() { echo $((BUDGET - SECONDS)); }
for need in "python3 -c 'import torch, transformers'" "command -v torchrun" \
            "python3 -c 'import torch; assert torch.cuda.is_available()'"; do
    sh -c "$need" > /dev/null 2>&1 || { echo "SKIPPED: missing on this machine: $need"; exit 77; }
done
RS_GPUS=1
. tests/gpu/torch-prelude.sh
require_and_build "$R"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} | tee "$R/machine.txt"
summary=$R/summary.txt
: > "$summary"
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK

# job CASE RANKS STEPS SCRIPT ARGS...: the job under torchrun, bounded; files in $R/CASE, checked
job() {
    c=$1 n=$2 steps=$3; shift 3
    case " ${CASES:-$ALL} " in *" $c "*) ;; *) return ;; esac
    d=$R/$c
    JOB_LIMIT=150 torchrun_job "$d" "$n" "$steps" "$@" || { echo "SKIP $c (no time left)" | tee -a "$summary"; return; }
    build/ranksnap report --out "$d.report" "$d" > /dev/null 2> "$d.report.err"
    build/ranksnap report "$d" > "$d.report.txt" 2>> "$d.report.err"
    build/ranksnap report --json "$d" > "$d.report.json" 2>> "$d.report.err"
    if python3 tests/gpu/check_torch_compiled.py "$c" "$d" > "$d.checks" 2>&1; then
        echo "PASS $c" | tee -a "$summary"
    else
        echo "FAIL $c: $(grep -v '^ok ' "$d.checks" | tr '\n' ' ')" | tee -a "$summary"
    fi
    sed -n '1,30p' "$d.report.txt"
    grep -h "ranksnap" "$d.stderr" | head -8
}

small="--batch 4 --seq 128 --layers 2 --width 256"
job compiled-longer 2 2:5 tests/gpu/torch_ddp_train.py $small --steps 6 --compile --longer 1:1.5
job reduce-overhead-1 1 2:8 tests/gpu/torch_infer.py $small --calls 10 --compile reduce-overhead
job reduce-overhead-2 2 2:8 tests/gpu/torch_infer.py $small --calls 10 --compile reduce-overhead --longer 1:1.5
job eval-longer 2 2:6 tests/gpu/torch_infer.py $small --calls 8 --longer 1:1.5
job generate 2 1:4 tests/gpu/torch_infer.py $small --calls 6 --generate 16
job checkpointing-oom 2 2:6 tests/gpu/torch_ddp_train.py $small --steps 6 --checkpointing --oom-backward 1:3
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync job async-longer 2 2:5 tests/gpu/torch_ddp_train.py $small --steps 6 --longer 1:1.5
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync job async-oom 2 2:6 tests/gpu/torch_ddp_train.py $small --steps 6 --oom 1:4
cat "$summary"
