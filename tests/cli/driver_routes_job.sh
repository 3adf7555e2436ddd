#!/bin/sh
# Four ranks of PROGRAM (tests/gpu/test_driver_routes.c) under mpirun (MPIEXEC), each with
# libranksnap.so (PRELOAD) in front of the fake CUDA driver found in FAKE_DIR: every route to the
# driver reached ranksnap's wrappers, and each rank's snapshots hold its allocations once, on its
# device, with their stacks, then their frees and the OOM (tests/cli/check_driver_snapshot.py).
# MPIEXEC "none": the routes and the snapshots of one process started on its own, and no more.
# usage: driver_routes_job.sh PROGRAM DIR MPIEXEC PRELOAD FAKE_DIR PYTHON (one with msgpack)
set -u
program=$1 dir=$2 mpiexec=$3 preload=$4 fake=$5 python=$6
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir" && mkdir -p "$dir" || exit 1
# with tests/gpu's fake NCCL, a communicator whose memory comes from the driver, part of it on
# NCCL's own thread
nccl=""; nccl_flag=""
if [ -f "$fake/libnccl.so.2" ]; then nccl="$fake/libnccl.so.2"; nccl_flag=--nccl; fi
if [ "$mpiexec" = none ]; then
  out=$(RANKSNAP_DIR="$dir" FAKE_NCCL_LIB="$nccl" LD_PRELOAD="$preload" LD_LIBRARY_PATH="$fake" \
        "$program" "$dir" 2>&1); rc=$?
  echo "$out"
  test $rc -eq 0 || { echo "FAIL: the program exited $rc"; exit 1; }
  echo "$out" | grep -q '^rank 0: routes ok$' || { echo "FAIL: not every route was ranksnap's"; exit 1; }
  "$python" "$here/check_driver_snapshot.py" "$dir/live-0.rsnap" "$dir/end-0.rsnap" 0 $nccl_flag || exit 1
  echo "driver_routes_job: ok (one process)"
  exit 0
fi
out=$(RANKSNAP_DIR="$dir" FAKE_NCCL_LIB="$nccl" "$mpiexec" -np 4 --oversubscribe --allow-run-as-root \
      --mca btl self,vader -x LD_PRELOAD="$preload" -x LD_LIBRARY_PATH="$fake" -x RANKSNAP_DIR \
      -x FAKE_NCCL_LIB "$program" "$dir" 2>&1); rc=$?
echo "$out"
test $rc -eq 0 || { echo "FAIL: mpirun exited $rc"; exit 1; }
test "$(echo "$out" | grep -c 'routes ok')" -eq 4 || { echo "FAIL: not every rank's routes were ranksnap's"; exit 1; }
for r in 0 1 2 3; do
  "$python" "$here/check_driver_snapshot.py" "$dir/live-$r.rsnap" "$dir/end-$r.rsnap" $((r % 2)) $nccl_flag || exit 1
done
# the report: what each rank took outside the allocator, by site, and the OOM the driver refused
# the communicator's memory is the user's ncclCommInitRank's, on NCCL's thread too
if [ -n "$nccl" ]; then peak="172.00 MiB taken outside the allocator at its peak: 48.00 MiB by NCCL"; else peak="124.00 MiB taken outside the allocator at its peak: 21.00 MiB"; fi
grep -q "rank 3: $peak at main (test_driver_routes.c:" "$dir/report.txt" ||
  { cat "$dir/report.txt"; echo "FAIL: the report does not name rank 3's outside memory by site"; exit 1; }
grep -q "rank 2: CUDA memory pools (reserved, unused) holds 20.00 MiB" "$dir/report.txt" ||
  { echo "FAIL: the report does not say what the pool keeps cached"; exit 1; }
grep -q "rank 1 ran out of memory: tried to allocate 1048576.00 GiB" "$dir/report.txt" ||
  { echo "FAIL: the report does not name rank 1's refused request"; exit 1; }
# RANKSNAP_MEMORY_LIMIT at the driver: rank 1 capped at 40 MiB gets two 16 MiB allocations, the
# others all eight, and the report names rank 1's refused request with its cap
rm -rf "$dir/cap" && mkdir -p "$dir/cap" || exit 1
out=$(RANKSNAP_DIR="$dir/cap" RANKSNAP_MEMORY_LIMIT=1:40MiB "$mpiexec" -np 4 --oversubscribe --allow-run-as-root \
      --mca btl self,vader -x LD_PRELOAD="$preload" -x LD_LIBRARY_PATH="$fake" -x RANKSNAP_DIR \
      -x RANKSNAP_MEMORY_LIMIT "$program" "$dir/cap" --cap 2>&1); rc=$?
echo "$out"
test $rc -eq 0 || { echo "FAIL: mpirun exited $rc (cap)"; exit 1; }
echo "$out" | grep -q '^rank 1: 2 under the cap$' || { echo "FAIL: rank 1 was not held to its 40 MiB"; exit 1; }
test "$(echo "$out" | grep -c ': 8 under the cap$')" -eq 3 || { echo "FAIL: the other ranks were capped"; exit 1; }
grep -q "rank 1 ran out of memory: tried to allocate 16.00 MiB (allocated 32.00 MiB, reserved 32.00 MiB, limit 40.00 MiB) at main (test_driver_routes.c:" "$dir/cap/report.txt" ||
  { cat "$dir/cap/report.txt"; echo "FAIL: the report does not name rank 1's refused request"; exit 1; }
# one cuMemUnmap over four mappings (vectorAddMMAP), ten rounds under a 32 MiB cap: every byte
# is seen freed, so no round is refused and no OOM reported
rm -rf "$dir/vmm" && mkdir -p "$dir/vmm" || exit 1
out=$(RANKSNAP_DIR="$dir/vmm" RANKSNAP_MEMORY_LIMIT=32MiB "$mpiexec" -np 4 --oversubscribe --allow-run-as-root \
      --mca btl self,vader -x LD_PRELOAD="$preload" -x LD_LIBRARY_PATH="$fake" -x RANKSNAP_DIR \
      -x RANKSNAP_MEMORY_LIMIT "$program" "$dir/vmm" --vmm 2>&1); rc=$?
test $rc -eq 0 || { echo "$out"; echo "FAIL: mpirun exited $rc (vmm)"; exit 1; }
test "$(echo "$out" | grep -c ': vmm ok$')" -eq 4 || { echo "$out"; echo "FAIL: a round was refused (vmm)"; exit 1; }
test -f "$dir/vmm/report.txt" || { echo "FAIL: no report (vmm)"; exit 1; }
! grep -q "ran out of memory" "$dir/vmm/report.txt" ||
  { cat "$dir/vmm/report.txt"; echo "FAIL: an OOM that never happened (vmm)"; exit 1; }
# an allocation given the address of a free before the free call returned (another thread's):
# both frees are seen, so a 60 MiB request under a 64 MiB cap after them is granted
rm -rf "$dir/same" && mkdir -p "$dir/same" || exit 1
out=$(RANKSNAP_DIR="$dir/same" RANKSNAP_MEMORY_LIMIT=64MiB "$mpiexec" -np 4 --oversubscribe --allow-run-as-root \
      --mca btl self,vader -x LD_PRELOAD="$preload" -x LD_LIBRARY_PATH="$fake" -x RANKSNAP_DIR \
      -x RANKSNAP_MEMORY_LIMIT "$program" "$dir/same" --same-address 2>&1); rc=$?
test $rc -eq 0 || { echo "$out"; echo "FAIL: mpirun exited $rc (same address)"; exit 1; }
test "$(echo "$out" | grep -c ': same address ok$')" -eq 4 || { echo "$out"; echo "FAIL: memory still held after a free whose address was taken again at once"; exit 1; }
# settings, not the program's build, are why nothing was seen: a RANKSNAP_DRIVER that does not
# parse is named (no other option made ranksnap start in this process), RANKSNAP_DRIVER=0 is said
# as the reason, and neither is told to relink
for setting in maybe 0; do
  rm -rf "$dir/set-$setting" && mkdir -p "$dir/set-$setting" || exit 1
  err=$(RANKSNAP_DIR="$dir/set-$setting" RANKSNAP_DRIVER=$setting LD_PRELOAD="$preload" LD_LIBRARY_PATH="$fake" \
        "$program" "$dir/set-$setting" --cap 2>&1); rc=$?
  test $rc -eq 0 || { echo "$err"; echo "FAIL: the program failed (RANKSNAP_DRIVER=$setting)"; exit 1; }
  case "$err" in *"Link it with"*|*"static CUDA runtime"*)
    echo "$err"; echo "FAIL: RANKSNAP_DRIVER=$setting is taken for the program's build"; exit 1;; esac
done
case "$err" in *"RANKSNAP_DRIVER=0 leaves the CUDA driver's calls"*) ;; *)
  echo "$err"; echo "FAIL: RANKSNAP_DRIVER=0 is not said as the reason"; exit 1;; esac
err=$(RANKSNAP_DIR="$dir/set-maybe" RANKSNAP_DRIVER=maybe LD_PRELOAD="$preload" LD_LIBRARY_PATH="$fake" \
      "$program" "$dir/set-maybe" --cap 2>&1)
case "$err" in *"invalid RANKSNAP_* option: RANKSNAP_DRIVER=maybe: expected 0, 1"*) ;; *)
  echo "$err"; echo "FAIL: RANKSNAP_DRIVER=maybe is not named"; exit 1;; esac
# a rank with a bigger batch, seen only at the driver, is flagged with its line
rm -rf "$dir/diverge" && mkdir -p "$dir/diverge" || exit 1
out=$(RANKSNAP_DIR="$dir/diverge" "$mpiexec" -np 4 --oversubscribe --allow-run-as-root --mca btl self,vader \
      -x LD_PRELOAD="$preload" -x LD_LIBRARY_PATH="$fake" -x RANKSNAP_DIR "$program" "$dir/diverge" --diverge 2>&1); rc=$?
test $rc -eq 0 || { echo "$out"; echo "FAIL: mpirun exited $rc (diverge)"; exit 1; }
line=$(grep -n "the bigger batch" "$(dirname "$0")/../gpu/test_driver_routes.c" | cut -d: -f1)
grep -q "^rank 2 peaks 50% above the median (48.00 MiB vs 32.00 MiB).*+16.00 MiB at main (test_driver_routes.c:$line)" "$dir/diverge/report.txt" ||
  { cat "$dir/diverge/report.txt"; echo "FAIL: rank 2 not flagged with line $line"; exit 1; }
echo "driver_routes_job: ok"
