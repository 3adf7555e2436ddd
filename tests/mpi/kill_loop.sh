#!/bin/sh
# kill_loop.sh MPIRUN... -- RUNS DEMO RANKSNAP_CLI PYTHON CHECK_PY DIR
# Runs the demo under mpirun RUNS times; each time SIGKILLs a random rank at a random moment
# (10..900 ms in), lets mpirun take the rest down, and then checks that every file left in the
# run's directory is valid (a .rsnap decodes, a .ring is recovered) or absent: never corrupt.
# Open MPI's session directory of a job whose ranks were SIGKILLed stays behind (8 MB of shared
# memory each, 400 MB a test run): each run's goes in a folder of the test's own, removed after
# it (a short path in the temporary folder: PMIx puts its Unix sockets there).
set -u
mpirun=""
while [ "$1" != "--" ]; do mpirun="$mpirun $1"; shift; done
shift
runs=$1 demo=$2 cli=$3 dir=$4
if ! sessions=$(mktemp -d "${TMPDIR:-/tmp}/rs-kill.XXXXXX"); then
  echo "kill_loop.sh: cannot make a folder for Open MPI's session files in ${TMPDIR:-/tmp}" >&2
  exit 1
fi
trap 'rm -rf "$sessions"' EXIT
bad=0
checked=0
i=0
while [ "$i" -lt "$runs" ]; do
  i=$((i + 1))
  d="$dir/run-$i"
  rm -rf "$d"
  mkdir -p "$sessions/$i"
  OMPI_MCA_orte_tmpdir_base="$sessions/$i" RANKSNAP_BACKEND=sim RANKSNAP_DIR="$d" RANKSNAP_STEPS="$((i % 3)):" \
    $mpirun "$demo" --iters 100001 --quiet >/dev/null 2>&1 &
  mp=$!
  # a moment from 10 to 900 ms, and a rank from 0 to 3, from the run number and the clock
  ms=$(( ( $(date +%N | sed 's/^0*//;s/^$/0/') / 1000000 + i * 37 ) % 890 + 10 ))
  sleep "$(printf '0.%03d' "$ms")"
  victim=$(( (ms + i) % 4 ))
  pid=""
  for p in $(pgrep -f "ranksnap-demo --iters 100001"); do
    if tr '\0' '\n' < /proc/"$p"/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$victim"; then pid=$p; fi
  done
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  # the job may also have been too young to find the rank: then it is killed whole
  sleep 0.2
  pkill -9 -f "ranksnap-demo --iters 100001" 2>/dev/null
  wait "$mp" 2>/dev/null
  for f in "$d"/rank-*.rsnap; do
    [ -e "$f" ] || continue
    checked=$((checked + 1))
    if ! "$cli" summary "$f" >/dev/null 2>"$d.err"; then echo "run $i: corrupt snapshot $f: $(cat "$d.err")"; bad=$((bad + 1)); fi
  done
  for f in "$d"/rank-*.ring; do
    [ -e "$f" ] || continue
    checked=$((checked + 1))
    if ! "$cli" report "$f" >/dev/null 2>"$d.err"; then echo "run $i: unreadable ring $f: $(cat "$d.err")"; bad=$((bad + 1)); fi
  done
  ls "$d" 2>/dev/null | grep -v -E '^rank-[0-9]{5}\.(rsnap|ring)$|^report\.(txt|json)$' | sed "s|^|run $i: unexpected file left: |"
  rm -rf "$d" "$d.err" "$sessions/$i"
done
echo "$runs runs: $checked files checked, $bad corrupt or unreadable"
# a loop that found nothing to check tested nothing
[ "$bad" -eq 0 ] && [ "$checked" -gt 0 ]
