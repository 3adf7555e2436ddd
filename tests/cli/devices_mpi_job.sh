#!/bin/sh
# Four ranks of an mpirun job (MPIEXEC) of PROGRAM (tests/gpu/test_devices_mpi.c), each choosing
# device rank % 2 after MPI_Init, run with ENV (the route: LD_PRELOAD=..., or LD_LIBRARY_PATH for
# a program linked with ranksnap::wrap). Rank 1 runs under a 20 MiB cap, which its 32 MiB request
# exceeds. Checks that every other call succeeded; that the memory was taken from each rank's own
# device, as the fake runtime counts it per device (rank 2's 4 MiB named for device 1 while on
# device 0 included, and rank 2 left on device 0); and, with the ranksnap command (CLI), that each
# rank's snapshot names its own device and holds its allocation there; rank 3 names both devices;
# rank 1's snapshot has the OOM on device 1 and the report names it.
# usage: devices_mpi_job.sh PROGRAM DIR MPIEXEC CLI ENV...
set -u
program=$1 dir=$2 mpiexec=$3 cli=$4
shift 4
rm -rf "$dir" && mkdir -p "$dir" || exit 1
# ENV goes to the ranks only (-x NAME=VALUE), never to mpirun itself
for kv in "$@"; do set -- "$@" -x "$kv"; shift; done
out=$(RANKSNAP_DIR="$dir" RANKSNAP_MEMORY_LIMIT=1:20MiB RANKSNAP_ON_OOM=dump \
      "$mpiexec" -np 4 --oversubscribe --allow-run-as-root --mca btl self,vader "$@" \
      -x RANKSNAP_DIR -x RANKSNAP_MEMORY_LIMIT -x RANKSNAP_ON_OOM "$program" 2>&1); rc=$?
echo "$out"
test $rc -eq 0 || { echo "FAIL: mpirun exited $rc"; exit 1; }
fail() { echo "FAIL: $*"; exit 1; }
# cudaErrorMemoryAllocation is 2: rank 1's 32 MiB under its 20 MiB cap, and its free of NULL then
echo "$out" | grep -q '^rank 0: 0 0 0 0 0 0 0 0$' || fail "rank 0's calls"
echo "$out" | grep -q '^rank 1: 0 2 0 0 0 0 0 0$' || fail "rank 1: expected its 32 MiB to run out of memory"
echo "$out" | grep -q '^rank 2: 0 0 0 0 0 0 0 0$' || fail "rank 2's calls"
echo "$out" | grep -q '^rank 3: 0 0 0 0 0 0 0 0$' || fail "rank 3's calls"
# MiB each device holds for the rank, at least what it asked for there and nothing elsewhere
holds() {
  echo "$out" | awk -v r="$1" -v a="$2" -v b="$3" '$1 == "rank" && $2 == r && $3 == "holds:" {
      seen = 1; ok = (a == 0 ? $4 == 0 : $4 >= a) && (b == 0 ? $5 == 0 : $5 >= b) }
    END { exit !(seen && ok) }' || fail "rank $1 should hold >= $2 MiB on device 0 and >= $3 on device 1 (0: none)"
}
holds 0 16 0
holds 1 0 1
holds 2 48 4
holds 3 8 64
echo "$out" | grep -q '^rank 2 named device 1: ok, current device after it 0$' ||
  fail "rank 2's allocation named for device 1, or its current device after it"
for r in 0 1 2 3; do
  f="$dir/rank-0000$r.rsnap"
  test -f "$f" || fail "no $f"
  "$cli" summary "$f" > "$dir/summary-$r.txt" 2>&1 || { cat "$dir/summary-$r.txt"; fail "summary of rank $r"; }
done
grep -q "device      0: ranksnap fake device 0" "$dir/summary-0.txt" || fail "rank 0 not on device 0"
grep -q "device      1: ranksnap fake device 1" "$dir/summary-1.txt" || fail "rank 1 not on device 1"
grep -q "device      0: ranksnap fake device 0" "$dir/summary-2.txt" || fail "rank 2 not on device 0"
grep -q "device      1: ranksnap fake device 1" "$dir/summary-3.txt" || fail "rank 3 not on device 1"
grep -q "devices     1 (66.00 MiB peak reserved), 0 (20.00 MiB peak reserved)" "$dir/summary-3.txt" || fail "rank 3 does not name both devices"
grep -q "OUT OF MEMORY at step -1: tried to allocate 32.00 MiB (rounded to 32.00 MiB)" "$dir/summary-1.txt" || { cat "$dir/summary-1.txt"; fail "rank 1 recorded no OOM of its 32 MiB request"; }
grep -q "rank 1 ran out of memory" "$dir/report.txt" || { cat "$dir/report.txt"; fail "the report does not name rank 1's OOM"; }
echo "devices_mpi_job: ok"
