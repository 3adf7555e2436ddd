#!/bin/sh
# Four ranks of PROGRAM (tests/gpu/test_driver_routes.c) under mpirun (MPIEXEC), each with
# libranksnap.so (PRELOAD) in front of the fake CUDA driver found in FAKE_DIR: every route to the
# driver reached ranksnap's wrappers, and each rank's snapshots hold its allocations once, on its
# device, with their stacks, then their frees and the OOM (tests/cli/check_driver_snapshot.py).
# usage: driver_routes_job.sh PROGRAM DIR MPIEXEC PRELOAD FAKE_DIR PYTHON (one with msgpack)
set -u
program=$1 dir=$2 mpiexec=$3 preload=$4 fake=$5 python=$6
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir" && mkdir -p "$dir" || exit 1
out=$(RANKSNAP_DIR="$dir" "$mpiexec" -np 4 --oversubscribe --allow-run-as-root --mca btl self,vader \
      -x LD_PRELOAD="$preload" -x LD_LIBRARY_PATH="$fake" -x RANKSNAP_DIR "$program" "$dir" 2>&1); rc=$?
echo "$out"
test $rc -eq 0 || { echo "FAIL: mpirun exited $rc"; exit 1; }
test "$(echo "$out" | grep -c 'routes ok')" -eq 4 || { echo "FAIL: not every rank's routes were ranksnap's"; exit 1; }
for r in 0 1 2 3; do
  "$python" "$here/check_driver_snapshot.py" "$dir/live-$r.rsnap" "$dir/end-$r.rsnap" $((r % 2)) || exit 1
done
# the report: what each rank took outside the allocator, by site, and the OOM the driver refused
grep -q "rank 3: 67.00 MiB taken outside the allocator at its peak: 15.00 MiB at main (test_driver_routes.c:" "$dir/report.txt" ||
  { cat "$dir/report.txt"; echo "FAIL: the report does not name rank 3's outside memory by site"; exit 1; }
grep -q "rank 1 ran out of memory: tried to allocate 1048576.00 GiB" "$dir/report.txt" ||
  { echo "FAIL: the report does not name rank 1's refused request"; exit 1; }
echo "driver_routes_job: ok"
