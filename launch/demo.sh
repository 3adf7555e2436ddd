#!/bin/sh
# demo.sh — build ranksnap and run its demo the way a user would run a job:
#   mpirun -np 4 launch/ranksnap-run --steps 2:6 ranksnap-demo --diverge 2:1.5
# on the sim backend where there is no GPU (cuda where there is one). Rank 0 prints the report
# at the end of the recorded range; the files are in ranksnap-out/ (`ranksnap report ranksnap-out`).
# Extra arguments go to the demo (e.g. --oom 3, --leak 1:16777216).
set -eu
cd "$(dirname "$0")/.."
tests/setup-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
flags="--oversubscribe"
[ "$(id -u)" -eq 0 ] && flags="$flags --allow-run-as-root"
rm -rf ranksnap-out
[ $# -gt 0 ] || set -- --diverge 2:1.5
echo "+ mpirun -np 4 $flags launch/ranksnap-run --steps 2:6 --dir ranksnap-out build/tests/workloads/ranksnap-demo $*"
mpirun -np 4 $flags launch/ranksnap-run --steps 2:6 --dir ranksnap-out \
  build/tests/workloads/ranksnap-demo --iters 8 --quiet "$@"
echo "+ build/ranksnap report ranksnap-out   (the same report, from the files)"
