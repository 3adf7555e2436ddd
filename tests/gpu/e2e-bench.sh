#!/bin/bash
# End-to-end (issue 6 targets): the demo's median step time on one GPU with ranksnap recording
# (native stacks) against recording off, and the same program with plain cudaMalloc/cudaFree and
# with cudaMallocAsync/cudaFreeAsync (default pool) instead of ranksnap. Three runs each.
set -uo pipefail
OUT=${OUT:-/tmp/ranksnap-out}
mkdir -p "$OUT"
cmake -S . -B build -G Ninja -DRANKSNAP_WERROR=OFF > /dev/null && cmake --build build -j16 > /dev/null || exit 1
demo="build/tests/workloads/ranksnap-demo --iters 30 --layers 8 --hidden 4096 --batch 4096 --timing --quiet"
export RANKSNAP_BACKEND=cuda RANKSNAP_REPORT=0 RANKSNAP_WRITE=none RANKSNAP_DIR=/tmp/e2e
for i in 1 2 3; do
  echo "run $i"
  echo -n "ranksnap, recording with native stacks: "; RANKSNAP_STACKS=native $demo | grep median
  echo -n "ranksnap, recording off:                "; RANKSNAP_RECORD=0 $demo | grep median
  echo -n "plain cudaMalloc/cudaFree:              "; $demo --alloc cudaMalloc | grep median
  echo -n "cudaMallocAsync/cudaFreeAsync:          "; $demo --alloc cudaMallocAsync | grep median
done 2>&1 | tee "$OUT/e2e.txt"
RANKSNAP_STACKS=native build/tests/workloads/ranksnap-demo --iters 30 --layers 8 --hidden 4096 --batch 4096 2>&1 | grep "peak allocated" | tee -a "$OUT/e2e.txt"
