#!/bin/bash
# A stock MPI+NCCL program on two GPUs, one rank per GPU: NVIDIA's multi-gpu-programming-models
# Jacobi solver (its nccl/ folder, given as SRC), which calls cudaSetDevice(local_rank) after
# MPI_Init. Built as its Makefile builds it (the shared CUDA runtime, -lcudart) and a second time
# on the static runtime linked with ranksnap's link-time route (pkg-config ranksnap-wrap, from an
# install of this build), then each run under `mpirun -np 2 launch/ranksnap-run`: both ranks must
# be recorded on their own device. A third build, on the static runtime and not relinked, is seen
# by the driver's interposers alone: its memory is reported outside the allocator, by site. Then rank 1 is capped (RANKSNAP_MEMORY_LIMIT=1:...) below what
# the solver allocates, runs out of memory, and `ranksnap report` must name it. Everything it
# prints and writes goes to OUT. Last, steps with no flag: the solver never calls ranksnap_step,
# so its steps must be found from its collectives (an MPI_Allreduce of the norm each iteration):
# --steps 10:15 must record iterations 10..14 on both ranks, the report saying the steps were
# detected, and the last step must be NITER (the final check's MPI_Allreduce, off the period,
# begins none). Prints PASS or FAIL for each and exits 1 on a FAIL.
# NP ranks (default 2), one per GPU; ONLY_STEPS=1 runs the steps checks alone (NP=1 on one GPU).
# usage: [NP=2] [ONLY_STEPS=1] tests/gpu/stock-jacobi.sh SRC OUT [NITER]
set -uo pipefail
src=$(cd "$1" && pwd) out=$2 niter=${3:-500} np=${NP:-2}
root=$(cd "$(dirname "$0")/../.." && pwd)
cli=$root/build/ranksnap
mkdir -p "$out" && out=$(cd "$out" && pwd)
prefix=$out/install
cmake --install "$root/build" --prefix "$prefix" > /dev/null || exit 1
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig:$prefix/lib64/pkgconfig:${PKG_CONFIG_PATH:-}
work=$(mktemp -d) && cp "$src"/jacobi.cpp "$src"/jacobi_kernels.cu "$work"/ && cd "$work" || exit 1
cuda=${CUDA_HOME:-/usr/local/cuda}
# the Makefile's flags; C++17 because CUDA 13's CUB needs it
nvcc -DHAVE_CUB -lineinfo -gencode arch=compute_90,code=sm_90 -std=c++17 -c jacobi_kernels.cu || exit 1
cxx="mpicxx -DUSE_NVTX -I$cuda/include -std=c++17 jacobi.cpp jacobi_kernels.o"
$cxx -L"$cuda"/lib64 -lcudart -ldl -lnccl -o jacobi_shared || exit 1
$cxx $(pkg-config --libs ranksnap-wrap) -L"$cuda"/lib64 -lcudart_static -ldl -lrt -lpthread -lnccl \
  -o jacobi_wrap || exit 1
# and on the static runtime, not relinked: only the driver's interposers see it
$cxx -L"$cuda"/lib64 -lcudart_static -ldl -lrt -lpthread -lnccl -o jacobi_static || exit 1
# the same with -g, as a user debugging it builds it: sites get their lines
$cxx -g -L"$cuda"/lib64 -lcudart_static -ldl -lrt -lpthread -lnccl -o jacobi_static_g || exit 1
echo "== ldd: jacobi_shared $(ldd jacobi_shared | grep -c libcudart) shared cudart, jacobi_wrap $(ldd jacobi_wrap | grep -c libcudart)"
run() { # run NAME ENV... -- PROGRAM ARGS
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=(-x "$1"); shift; done
  shift
  rm -rf "${out:?}/$name"
  echo "== $name: mpirun -np $np ${envs[*]} launch/ranksnap-run --dir $name $*"
  local t0=$SECONDS
  timeout 300 mpirun -np "$np" --bind-to none "${envs[@]}" "$root/launch/ranksnap-run" --dir "$out/$name" "$@" \
    > "$out/$name.log" 2>&1
  echo "   exit $?, $((SECONDS - t0)) s; last lines:"; tail -n 25 "$out/$name.log" | sed 's/^/   /'
  for f in "$out/$name"/rank-*.rsnap; do
    [ -f "$f" ] || continue
    echo "   $(basename "$f"): $("$cli" summary "$f" 2>&1 | grep -E '^  (device|devices|allocated|limit) ' | tr -s ' ' | paste -sd';')"
  done
}
if [ "${ONLY_STEPS:-0}" != 1 ]; then # ONLY_STEPS=1: the steps checks alone
echo "== without ranksnap: mpirun -np 2 ./jacobi_shared -niter $niter"
timeout 300 mpirun -np 2 --bind-to none ./jacobi_shared -niter "$niter" 2>&1 | tail -n 1 | sed 's/^/   /'
run shared -- ./jacobi_shared -niter "$niter"
run wrap -- ./jacobi_wrap -niter "$niter"
run static -- ./jacobi_static -niter "$niter"
"$cli" report "$out/static" > "$out/static-report.txt" 2>&1; sed 's/^/   /' "$out/static-report.txt"
# a rank with a bigger problem, on the static build that was not relinked (with -g): rank 1
# solves 1.5x the rows (its own -ny; the halo rows both exchange stay nx long), so it allocates
# 1.5x the memory, and the report must flag it with the line
rm -rf "${out:?}/static-diverge"
echo "== static-diverge: mpirun -np 1 ranksnap-run ./jacobi_static_g -niter $niter : -np 1 ranksnap-run ./jacobi_static_g -niter $niter -ny 24576"
t0=$SECONDS
timeout 300 mpirun --bind-to none -np 1 "$root/launch/ranksnap-run" --dir "$out/static-diverge" \
  ./jacobi_static_g -niter "$niter" : -np 1 "$root/launch/ranksnap-run" --dir "$out/static-diverge" \
  ./jacobi_static_g -niter "$niter" -ny 24576 > "$out/static-diverge.log" 2>&1
echo "   exit $?, $((SECONDS - t0)) s; last lines:"; tail -n 8 "$out/static-diverge.log" | sed 's/^/   /'
"$cli" report "$out/static-diverge" > "$out/static-diverge-report.txt" 2>&1
sed 's/^/   /' "$out/static-diverge-report.txt"
if grep -q "^rank 1 peaks .*jacobi.cpp:[0-9]" "$out/static-diverge-report.txt"; then
  echo "PASS static-diverge: rank 1 flagged with its line"
else
  echo "FAIL static-diverge: rank 1 not flagged with a line of jacobi.cpp"
fi
# the solver takes 2 x 1 GiB for its single-GPU reference on each rank: a 1.5 GiB cap on rank 1
run wrap-oom RANKSNAP_MEMORY_LIMIT=1:1536MiB RANKSNAP_GATHER_TIMEOUT=10 -- ./jacobi_wrap -niter "$niter"
echo "== ranksnap report $out/wrap-oom"
"$cli" report "$out/wrap-oom" 2>&1 | tee "$out/wrap-oom-report.txt"
# the same cap on the static build that was not relinked: applied at the driver
run static-oom RANKSNAP_MEMORY_LIMIT=1:1536MiB RANKSNAP_GATHER_TIMEOUT=10 -- ./jacobi_static -niter "$niter"
echo "== ranksnap report $out/static-oom"
"$cli" report "$out/static-oom" 2>&1 | tee "$out/static-oom-report.txt"

fi

# ---- steps found with no flag ----------------------------------------------------------------
source "$root/tests/gpu/steps-check.sh"
run steps-range -- --steps 10:15 ./jacobi_shared -niter "$niter"
steps_range_checks steps-range "MPI_Allreduce x1 per step"
# the static build, not relinked: its MPI calls still reach ranksnap's MPI wrappers
run steps-range-static -- --steps 10:15 ./jacobi_static -niter "$niter"
steps_range_checks steps-range-static "MPI_Allreduce x1 per step"
# an early range (the fourth iteration on: guessed steps, confirmed at the 128th), with -g so that
# the solver's arrays, all allocated before its loop, are named by their lines as held before it
run steps-early-static -- --steps 3:6 ./jacobi_static_g -niter "$niter"
steps_range_checks steps-early-static "MPI_Allreduce x1 per step" 3 6
held_checks steps-early-static 3
run steps-early-shared -- --steps 3:6 ./jacobi_shared -niter "$niter"
steps_range_checks steps-early-shared "MPI_Allreduce x1 per step" 3 6
held_checks steps-early-shared 3
# the last step, which finalize names when the range is never reached
run steps-count -- --steps 1000000:1000001 ./jacobi_shared -niter "$niter"
found=$(last_step "$out/steps-count.log")
echo "   last step found: ${found:-none}; iterations: $niter"
ok=0; [ "${found:-x}" = "$niter" ] && ok=1
verdict $ok "the steps found are the solver's $niter iterations"
rm -rf "$work"
echo "== steps: $fails failed"
exit $((fails > 0))
