#!/bin/sh
# Four ranks of PROGRAM (tests/gpu/test_held_job.c) under mpirun (MPIEXEC) with
# RANKSNAP_STEPS=5:10: they allocate everything before their loop, so every byte they hold in
# the range was taken before it. Checks that the report flags rank 1 and names its extra
# activations by their line as held since before step 5, that no rank is "no data", that the OOM
# inside the range lists the memory held since before it by site, and that report.json and the
# HTML page carry the same. Modes: through the driver (the fake driver, LD_PRELOAD), on one device
# and on two, and through ranksnap's own allocator (the sim backend), with an OOM.
# usage: held_job.sh PROGRAM DIR MPIEXEC PRELOAD FAKE_DIR
set -u
program=$1 dir=$2 mpiexec=$3 preload=$4 fake=$5
src=$(cd "$(dirname "$0")/../gpu" && pwd)/test_held_job.c
fail() { echo "FAIL: $*"; exit 1; }
line_of() { grep -n "$1" "$src" | head -1 | cut -d: -f1; }
acts=$(line_of "void \*acts = TAKE")
more=$(line_of "rank 1's second half")
# run MODE SUBDIR ENV...: the job, with ENV for the ranks
run() {
  mode=$1 sub=$2; shift 2
  rm -rf "$dir/$sub" && mkdir -p "$dir/$sub" || exit 1
  for kv in "$@"; do set -- "$@" -x "$kv"; shift; done
  out=$(RANKSNAP_DIR="$dir/$sub" RANKSNAP_STEPS=5:10 "$mpiexec" -np 4 --oversubscribe --allow-run-as-root \
        --mca btl self,vader -x RANKSNAP_DIR -x RANKSNAP_STEPS -x LD_PRELOAD="$preload" "$@" \
        "$program" "$mode" 2>&1); rc=$?
  echo "$out"
  test $rc -eq 0 || fail "mpirun exited $rc ($mode)"
  test "$(echo "$out" | grep -c 'held ok')" -eq 4 || fail "not every rank ran ($mode)"
  r="$dir/$sub/report.txt"
  test -f "$r" || fail "no report ($mode)"
  cat "$r"
  ! grep -q "no data" "$r" || fail "a rank holding memory is 'no data' ($mode)"
}

# through the driver, steps from the all-reduce
run driver driver "LD_LIBRARY_PATH=$fake" RANKSNAP_STEP_ON=MPI_Allreduce:1
grep -q "^rank 1 peaks .*+64.00 MiB at main (test_held_job.c:$more), held since before step 5" "$dir/driver/report.txt" ||
  fail "rank 1 not flagged with its line $more, held since before step 5 (driver)"
grep -q "\"line\": $more, \"held_since_before_step\": 5" "$dir/driver/report.json" ||
  fail "report.json does not carry the held site (driver)"
grep -q "held_since_before_step" "$dir/driver/report.html" || fail "the HTML page does not carry the held site (driver)"

# through the driver on two devices: what each device holds is held, by site, on its device
run devices devices "LD_LIBRARY_PATH=$fake" RANKSNAP_STEP_ON=MPI_Allreduce:1
grep -q "^rank 1 peaks .*+64.00 MiB at main (test_held_job.c:$more), held since before step 5" "$dir/devices/report.txt" ||
  fail "rank 1 not flagged with its line $more, held since before step 5 (two devices)"
# both devices' bytes count: 32 MiB on device 0, 136 MiB on device 1
grep -q "^rank 1: the program (at the driver) holds 168.00 MiB" "$dir/devices/report.txt" ||
  fail "rank 1's two devices do not add up to 168.00 MiB held"
grep -q "64.00 MiB at main (test_held_job.c:$acts), held since before step 5" "$dir/devices/report.txt" ||
  fail "the activations on device 1 are not named as held since before step 5"

# through ranksnap's allocator on the sim backend, steps numbered by the program
run alloc alloc RANKSNAP_BACKEND=sim
grep -q "^rank 1 peaks .*+64.00 MiB at main (test_held_job.c:$more), held since before step 5" "$dir/alloc/report.txt" ||
  fail "rank 1 not flagged with its line $more, held since before step 5 (allocator)"
! grep -q "(no stack)" "$dir/alloc/report.txt" || fail "memory from before the range has no stack (allocator)"
grep -q "\"line\": $more, \"held_since_before_step\": 5" "$dir/alloc/report.json" ||
  fail "report.json does not carry the held site (allocator)"

# an OOM inside the range: what was live then includes what was held since before it
run oom oom RANKSNAP_BACKEND=sim RANKSNAP_MEMORY_LIMIT=3:256MiB
grep -q "rank 3 ran out of memory at step 7:" "$dir/oom/report.txt" ||
  fail "rank 3's OOM is not named at step 7, the step of its request (not the range end's)"
grep -q "64.00 MiB  main (test_held_job.c:$acts), held since before step 5" "$dir/oom/report.txt" ||
  fail "the OOM's live memory does not name the activations held since before step 5"
# RANKSNAP_DRIVER=0: the driver's allocations are the user's to leave unrecorded, so every rank
# has no data, and the report says why from the files (the setting they ran under, the steps
# they marked), never that they were killed at start-up
sub=driver-off
rm -rf "$dir/$sub" && mkdir -p "$dir/$sub" || exit 1
out=$(RANKSNAP_DIR="$dir/$sub" RANKSNAP_STEPS=5:10 RANKSNAP_DRIVER=0 RANKSNAP_STEP_ON=MPI_Allreduce:1 \
      "$mpiexec" -np 4 --oversubscribe --allow-run-as-root --mca btl self,vader -x RANKSNAP_DIR \
      -x RANKSNAP_STEPS -x RANKSNAP_DRIVER -x RANKSNAP_STEP_ON -x LD_PRELOAD="$preload" \
      -x LD_LIBRARY_PATH="$fake" "$program" driver 2>&1); rc=$?
test $rc -eq 0 || { echo "$out"; fail "mpirun exited $rc (driver off)"; }
r="$dir/$sub/report.txt"
cat "$r"
grep -q "^no data: ranks 0, 1, 2, 3 recorded nothing" "$r" || fail "the ranks are not no data (driver off)"
test "$(grep -c "^  rank [0-3]: it marked steps 5 to 9, so it ran through its range; RANKSNAP_DRIVER=0 was set for this run" "$r")" -eq 4 ||
  fail "the setting is not said as why there is no data (driver off)"
! grep -q "start-up" "$r" || fail "a rank that ran through its range is said to have died at start-up"
echo "held_job: ok"
