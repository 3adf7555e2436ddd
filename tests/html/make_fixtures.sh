#!/bin/sh
# make_fixtures.sh — the runs the browser tests look at (tests/html/CMakeLists.txt):
#   OUT/divergent/   the demo's divergent case as demo.sh runs it (rank 2's activations 1.5 times
#                    larger, steps 2:6 recorded); report.html is rank 0's live report
#   OUT/divergent-out/  `ranksnap report --out` over those files
#   OUT/flagged/     the same with RANKSNAP_GATHER=flagged: rank 0 gets only the snapshots of the
#                    divergent rank and the reference, so only they have a timeline
#   OUT/oom/         the demo's OOM case (--oom 3: rank 3 runs out of memory, the job aborts);
#   OUT/oom.html     `ranksnap report --html` over the files it left
#
#   make_fixtures.sh OUT DEMO RANKSNAP MPIRUN [MPIRUN ARGS...]
set -u
out=$1 demo=$2 cli=$3
shift 3
rm -rf "$out" && mkdir -p "$out" || exit 1
export RANKSNAP_BACKEND=sim RANKSNAP_STEPS=2:6 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

RANKSNAP_DIR="$out/divergent" "$@" "$demo" --iters 8 --quiet --diverge 2:1.5 \
    > "$out/divergent.log" 2>&1 || { cat "$out/divergent.log"; echo "the divergent run failed"; exit 1; }
test -s "$out/divergent/report.html" || { cat "$out/divergent.log"; echo "rank 0 wrote no report.html"; exit 1; }
"$cli" report --out "$out/divergent-out" "$out/divergent" > /dev/null || exit 1
RANKSNAP_GATHER=flagged RANKSNAP_DIR="$out/flagged" "$@" "$demo" --iters 8 --quiet --diverge 2:1.5 \
    > "$out/flagged.log" 2>&1 || { cat "$out/flagged.log"; echo "the flagged run failed"; exit 1; }

# the job aborts when rank 3 runs out of memory: mpirun's exit status is not 0, by design
RANKSNAP_DIR="$out/oom" "$@" "$demo" --iters 8 --quiet --oom 3 > "$out/oom.log" 2>&1
"$cli" report --html "$out/oom.html" "$out/oom" > "$out/oom.txt" || { cat "$out/oom.log" "$out/oom.txt"; exit 1; }
grep -q 'rank 3 ran out of memory' "$out/oom.txt" || { cat "$out/oom.txt"; echo "no OOM verdict"; exit 1; }
echo "fixtures in $out"
