#!/bin/bash
# NVIDIA's nccl-tests (its source folder given as SRC), built as its README says (`make MPI=1`,
# the shared CUDA runtime), on two GPUs, one rank per GPU: all_reduce_perf without ranksnap and
# under `mpirun -np 2 launch/ranksnap-run`, with its bus bandwidth from both runs, then what each
# rank's snapshot holds (`ranksnap summary`: the device, the memory outside the allocator and who
# holds it) and the report. Then steps with no flag: all_reduce_perf never calls ranksnap_step, so
# its steps must be found from its ncclAllReduce calls: one size (-b = -e), --steps 10:15 must
# record steps 10..14 on every rank with the report saying the steps were detected, and the last
# step must be the number of ncclAllReduce calls, counted by RANKSNAP_STEP_ON=ncclAllReduce:1 in
# a third run (its steps are numbered from the first call: one less). Prints PASS or FAIL for
# each. Everything it prints and writes goes to OUT.
# NP ranks (default 2), one per GPU.
# usage: [NP=4] tests/gpu/stock-nccl-tests.sh SRC OUT
set -uo pipefail
src=$(cd "$1" && pwd) out=$2 np=${NP:-2}
root=$(cd "$(dirname "$0")/../.." && pwd)
cli=$root/build/ranksnap
mkdir -p "$out" && out=$(cd "$out" && pwd)
work=$(mktemp -d) && cp -r "$src"/. "$work"/ && cd "$work" || exit 1
mpi_home=$(dirname "$(dirname "$(mpicc -showme:incdirs | tr ' ' '\n' | grep -m1 openmpi)")" 2>/dev/null)
[ -d "$mpi_home/include" ] || mpi_home=/usr/lib/x86_64-linux-gnu/openmpi
make -j16 MPI=1 MPI_HOME="$mpi_home" CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" NCCL_HOME=/usr \
  NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" > "$out/nccl-tests-build.log" 2>&1 ||
  { tail -20 "$out/nccl-tests-build.log"; exit 1; }
perf=$work/build/all_reduce_perf
echo "== ldd all_reduce_perf: $(ldd "$perf" | grep -oE 'lib(cudart|nccl)[^ ]*' | paste -sd' ')"
args="-b 8 -e 512M -f 8 -g 1 -n 20"
echo "== without ranksnap: mpirun -np $np all_reduce_perf $args"
timeout 240 mpirun -np "$np" --bind-to none "$perf" $args > "$out/bare.log" 2>&1
grep -E "^ +[0-9]+ |Avg bus" "$out/bare.log" | tail -4 | sed 's/^/   /'
rm -rf "$out/ranksnap"
echo "== mpirun -np $np launch/ranksnap-run --dir ranksnap all_reduce_perf $args"
timeout 240 mpirun -np "$np" --bind-to none "$root/launch/ranksnap-run" --dir "$out/ranksnap" "$perf" $args \
  > "$out/ranksnap.log" 2>&1
echo "   exit $?"
grep -E "^ +[0-9]+ |Avg bus" "$out/ranksnap.log" | tail -4 | sed 's/^/   /'
grep -E "^ranksnap" "$out/ranksnap.log" | grep -v "^ranksnap: [0-9]* of" | sed 's/^/   /'
for f in "$out"/ranksnap/rank-*.rsnap; do
  [ -f "$f" ] || continue
  echo "== ranksnap summary $(basename "$f")"
  "$cli" summary "$f" 2>&1 | grep -E '^  (device|devices|allocated|reserved|outside|held by)' | sed 's/^/   /'
done
echo "== ranksnap report"
"$cli" report "$out/ranksnap" 2>&1 | tee "$out/report.txt"
source "$root/tests/gpu/steps-check.sh"
# every rank's buffers on its own GPU, named as NCCL's at the test's lines
why=""
for r in $(seq 0 $((np - 1))); do
  f=$(printf '%s/ranksnap/rank-%05d.rsnap' "$out" "$r")
  "$cli" summary "$f" 2>/dev/null | grep -Eq "^  device +$r:" || why="$why rank-$r-not-on-GPU-$r"
  grep -Eq "^rank $r: .* taken outside the allocator at its peak: [0-9.]+ [MG]iB by NCCL at AllocateBuffs" \
    "$out/report.txt" || why="$why rank-$r-buffers-not-named"
done
ok=0; [ -z "$why" ] && ok=1
verdict $ok "every rank's buffers on its own GPU, named NCCL's at the test's lines ($np GPUs)${why:+:$why}"

# ---- steps found with no flag ----------------------------------------------------------------
one="-b 64M -e 64M -g 1 -w 5 -n 20"
steps_run() { # steps_run NAME STEPS ENV...: all_reduce_perf $one under ranksnap-run --steps STEPS
  local name=$1 steps=$2; shift 2
  local envs=()
  for e in "$@"; do envs+=(-x "$e"); done
  rm -rf "${out:?}/$name"
  echo "== $name: mpirun -np $np ${envs[*]} launch/ranksnap-run --steps $steps all_reduce_perf $one"
  timeout 240 mpirun -np "$np" --bind-to none "${envs[@]}" "$root/launch/ranksnap-run" --dir "$out/$name" \
    --steps "$steps" "$perf" $one > "$out/$name.log" 2>&1
  echo "   exit $?"
}
steps_run steps-range 10:15
steps_range_checks steps-range "ncclAllReduce x1 per step"
# an early range: 25 ncclAllReduce calls are too few to confirm a pattern (128), so the steps stay
# guessed to the end and the range is kept; the test's buffers, made before its loop, are named
# by their lines as held since before step 3
steps_run steps-early 3:6
steps_range_checks steps-early "ncclAllReduce x1 per step" 3 6
held_checks steps-early 3
# the last step, which finalize names when the range is never reached
steps_run steps-count 1000000:1000001
steps_run steps-count-on 1000000:1000001 RANKSNAP_STEP_ON=ncclAllReduce:1
found=$(last_step "$out/steps-count.log") counted=$(last_step "$out/steps-count-on.log")
read -r w n a v < <(sed -n 's/.*warmup iters: \([0-9]*\) iters: \([0-9]*\) agg iters: \([0-9]*\) validation: \([0-9]*\).*/\1 \2 \3 \4/p' \
  "$out/steps-count.log" | head -1)
echo "   last step found: ${found:-none}; ncclAllReduce calls: ${counted:+$((counted + 1))} (RANKSNAP_STEP_ON; header: W=$w N=$n A=$a V=$v)"
ok=0; [ -n "$found" ] && [ -n "$counted" ] && [ "$found" -eq $((counted + 1)) ] && ok=1
verdict $ok "the steps found are the program's ncclAllReduce calls, as RANKSNAP_STEP_ON counts them"
rm -rf "$work"
echo "== steps: $fails failed"
exit $((fails > 0))
