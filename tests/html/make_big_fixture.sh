#!/bin/sh
# make_big_fixture.sh — the page for 32 ranks x 100,000 events (docs/BENCHMARKS.md, report.html):
# gather_bench under mpirun -np 32 writes the snapshots (rank 1 holds 16 MiB more in every step),
# then `ranksnap report --html` makes the page.
#
#   make_big_fixture.sh OUT GATHER_BENCH RANKSNAP MPIRUN [MPIRUN ARGS...]
set -u
out=$1 bench=$2 cli=$3
shift 3
rm -rf "$out" && mkdir -p "$out" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
RANKSNAP_GATHER=flagged RANKSNAP_DIR="$out/run" "$@" -np 32 "$bench" --events 100000 --reps 1 \
    > "$out/bench.log" 2>&1 || { tail -20 "$out/bench.log"; echo "gather_bench failed"; exit 1; }
start=$(date +%s.%N)
"$cli" report --html "$out/report.html" "$out/run" > "$out/report.txt" || exit 1
end=$(date +%s.%N)
echo "ranksnap report --html over 32 files: $(awk "BEGIN { print $end - $start }") s, $(wc -c < "$out/report.html") bytes"
