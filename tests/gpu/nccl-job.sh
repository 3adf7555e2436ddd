#!/bin/bash
# The real job (issue 6, item 5): mpirun -np N of the demo on the cuda backend, one rank per GPU,
# gradients all-reduced with NCCL — once with one rank diverging, once with one rank running out
# of memory and MPI_Abort'ing the job. Both reports go to $OUT. N defaults to the GPU count.
set -uo pipefail
OUT=${OUT:-/tmp/ranksnap-out}
n=${1:-$(nvidia-smi -L | wc -l)}
last=$((n - 1))
cmake -S . -B build -G Ninja -DRANKSNAP_WERROR=OFF > /dev/null && cmake --build build -j16 > /dev/null || exit 1
export RANKSNAP_BACKEND=cuda
run() {
  local name=$1; shift
  rm -rf "/tmp/$name"
  echo "+ mpirun -np $n launch/ranksnap-run --dir /tmp/$name $*" | tee "$OUT/$name.txt"
  mpirun -np "$n" --bind-to none -x RANKSNAP_BACKEND -x NCCL_NVLS_ENABLE -x PATH \
    launch/ranksnap-run --dir "/tmp/$name" "$@" 2>&1 | grep -v '^\[' | tee -a "$OUT/$name.txt"
}
run diverge --steps 2:6 -- build/tests/workloads/ranksnap-demo --comm nccl --iters 8 --layers 8 --hidden 4096 --batch 4096 --diverge "$last:1.5" --quiet
run oom -- build/tests/workloads/ranksnap-demo --comm nccl --iters 10 --layers 8 --hidden 4096 --batch 4096 --oom "$last" --quiet
echo "+ build/ranksnap report /tmp/oom   (after the abort)" | tee -a "$OUT/oom.txt"
ls -la /tmp/oom | tee -a "$OUT/oom.txt"
build/ranksnap report /tmp/oom 2>&1 | tee -a "$OUT/oom.txt"
build/ranksnap report /tmp/oom --json > "$OUT/oom.json" 2>/dev/null
build/ranksnap report /tmp/diverge --json > "$OUT/diverge.json" 2>/dev/null
