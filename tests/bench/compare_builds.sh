#!/bin/bash
# compare_builds.sh — the allocation path of two builds, measured in one run: each source tree is
# built (Release) in its own folder, then their alloc_bench run in turn, ROUNDS times (base, head,
# head, base, ...), so that both see the same machine; per row, the median of each side's rounds
# and their ratio (head / base; above 1 is slower). Any change on the allocation path states this
# ratio in its commit body (CONTRIBUTING.md, "Benchmarks").
#
# BASE and HEAD are commits of this repository (HEAD defaults to the working tree) or folders that
# hold a source tree (what `git archive` of a commit gives, where no repository is at hand).
# With INSTR=1 (valgrind installed), each build's instructions per pair too, per mode: counted
# under callgrind at two iteration counts and differenced, so start-up drops out. Unlike the
# times, the count does not move with the machine's load: the measure to trust on a shared machine.
#   usage: [ROUNDS=3] [MODES=glibc,off,on] [ITERS=N] [INSTR=1] [RANKSNAP_BACKEND=sim] \
#          tests/bench/compare_builds.sh BASE [HEAD]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: tests/bench/compare_builds.sh BASE [HEAD]" >&2; exit 2; }
rounds=${ROUNDS:-3} modes=${MODES:-glibc,off,on}
case $rounds in ''|*[!0-9]*|0) echo "compare_builds: ROUNDS=$rounds: expected a positive integer" >&2; exit 2;; esac
case ${ITERS:-64} in ''|*[!0-9]*) echo "compare_builds: ITERS=$ITERS: expected an integer >= 64" >&2; exit 2;; esac
case ${INSTR:-0} in 0|1) ;; *) echo "compare_builds: INSTR=$INSTR: expected 0 or 1" >&2; exit 2;; esac
if [ "${INSTR:-0}" = 1 ] && ! command -v valgrind > /dev/null; then
  echo "compare_builds: INSTR=1 needs valgrind (apt-get install valgrind)" >&2; exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# tree NAME REF: a source tree of REF in $work/NAME-src (a folder is taken as it is)
tree() {
  local name=$1 ref=$2
  if [ -d "$ref" ]; then
    (cd "$ref" && pwd)
  elif [ "$ref" = . ]; then
    echo "$root"
  else
    mkdir -p "$work/$name-src"
    git -C "$root" archive "$ref" 2>/dev/null | tar -x -C "$work/$name-src" 2>/dev/null ||
      { echo "compare_builds: $ref is neither a folder nor a commit of $root" >&2; exit 2; }
    echo "$work/$name-src"
  fi
}
build() { # build NAME SRC: its alloc_bench
  local name=$1 src=$2
  cmake -S "$src" -B "$work/$name" -DCMAKE_BUILD_TYPE=Release > "$work/$name.log" 2>&1 &&
    cmake --build "$work/$name" -j "$(nproc)" --target alloc_bench >> "$work/$name.log" 2>&1 ||
    { tail -20 "$work/$name.log" >&2; echo "compare_builds: $name does not build" >&2; exit 1; }
  find "$work/$name" -name alloc_bench -type f -perm -u+x | head -1
}
base_src=$(tree base "$1")
head_src=$(tree head "${2:-.}")
base=$(build base "$base_src")
head=$(build head "$head_src")
args=(--json --modes "$modes")
[ -n "${ITERS:-}" ] && args+=(--iters "$ITERS")
# base first in odd rounds, head first in even ones: neither gains by running second (a clock
# that warms up, caches the other filled)
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then
    "$base" "${args[@]}" > "$work/base-$r.json"
    "$head" "${args[@]}" > "$work/head-$r.json"
  else
    "$head" "${args[@]}" > "$work/head-$r.json"
    "$base" "${args[@]}" > "$work/base-$r.json"
  fi
done
python3 - "$work" "$rounds" "$1" "${2:-the working tree}" <<'EOF'
import json, statistics, sys
work, rounds, bname, hname = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def rows(side):
    out = {}
    for r in range(1, rounds + 1):
        for x in json.load(open(f"{work}/{side}-{r}.json")):
            out.setdefault((x["mode"], x["size"], x["live"]), []).append(x["ns_per_pair"])
    return out
b, h = rows("base"), rows("head")
print(f"ns per malloc+free pair, median of {rounds} interleaved rounds; base {bname}, head {hname}")
print(f"{'mode':<10} {'size':>10} {'live':>5} {'base':>9} {'head':>9} {'head/base':>10}")
for key in b:
    if key not in h:
        continue
    mb, mh = statistics.median(b[key]), statistics.median(h[key])
    print(f"{key[0]:<10} {key[1]:>10} {key[2]:>5} {mb:>9.1f} {mh:>9.1f} {mh / mb:>10.2f}")
EOF
[ "${INSTR:-0}" = 1 ] || exit 0
# instructions per pair: Ir at 2N pairs minus Ir at N, over N pairs and the 8 rows of a mode
n=2000
instr() { # instr BENCH MODE ITERS: callgrind's total
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" --modes "$2" --iters "$3" --reps 1 \
    2>&1 >/dev/null | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
echo
echo "instructions per malloc+free pair (callgrind, mean of the 8 rows of a mode)"
printf '%-10s %9s %9s %10s\n' mode base head head/base
for m in ${modes//,/ }; do
  [ "$m" = glibc ] && continue
  b=$(( ($(instr "$base" "$m" $((2 * n))) - $(instr "$base" "$m" $n)) / (8 * n) ))
  h=$(( ($(instr "$head" "$m" $((2 * n))) - $(instr "$head" "$m" $n)) / (8 * n) ))
  awk -v m="$m" -v b="$b" -v h="$h" 'BEGIN { printf "%-10s %9d %9d %10.2f\n", m, b, h, h / b }'
done
