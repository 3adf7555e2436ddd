#!/bin/sh
# kill_loop.sh MPIRUN... -- RUNS DEMO RANKSNAP_CLI DIR [SEED]
# Runs the demo under mpirun RUNS times; each time SIGKILLs a random rank at a random moment
# (10..900 ms in), lets mpirun take the rest down, and then checks that every file left in the
# run's directory is valid (a .rsnap decodes, a .ring is recovered) or absent: never corrupt.
# The moments and the ranks come from a seed, printed first: SEED, else KILL_LOOP_SEED, else the
# clock. A failing loop is run again with the seed it printed (the kernel's scheduling still
# varies; the moments and victims do not). Only the processes this script started are signalled:
# the victim and what is left of its job are found among mpirun's descendants, by pid.
# Open MPI's session directory of a job whose ranks were SIGKILLed stays behind (8 MB of shared
# memory each, 400 MB a test run): each run's goes in a folder of the test's own, removed after
# it (a short path in the temporary folder: PMIx puts its Unix sockets there).
set -u
mpirun=""
while [ "$1" != "--" ]; do mpirun="$mpirun $1"; shift; done
shift
runs=$1 demo=$2 cli=$3 dir=$4
seed=${5:-${KILL_LOOP_SEED:-$(( $(date +%s) % 1000000 ))}}
case "$seed" in
  ''|*[!0-9]*) echo "kill_loop.sh: the seed must be a number, not '$seed'" >&2; exit 2 ;;
esac
echo "kill_loop: seed $seed (KILL_LOOP_SEED=$seed replays these kill moments and victims)"
rand=$seed
# next_rand: the next of a linear congruential sequence (glibc's rand constants), in 0..2^31-1
next_rand() { rand=$(( (rand * 1103515245 + 12345) % 2147483648 )); }
# descendants PID: every process under PID, children first
descendants() {
  for c in $(pgrep -P "$1"); do
    echo "$c"
    descendants "$c"
  done
}
# alive PID: the process runs (a zombie waiting for `wait` does not)
alive() {
  state=$(sed 's/.*) //' /proc/"$1"/stat 2>/dev/null | cut -c1)
  [ -n "$state" ] && [ "$state" != Z ]
}
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
  # a moment from 10 to 900 ms and a rank from 0 to 3, from the seed's sequence
  next_rand
  ms=$(( rand % 890 + 10 ))
  next_rand
  victim=$(( rand % 4 ))
  # the kill moment itself: a time, not a wait for something
  sleep "$(printf '0.%03d' "$ms")"
  pid=""
  for p in $(descendants "$mp"); do
    # (a process gone meanwhile has no environ: quietly not the victim)
    if { tr '\0' '\n' < /proc/"$p"/environ; } 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$victim"; then pid=$p; fi
  done
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  # mpirun takes the rest down (SIGTERM: their post-mortem dumps); what is still there after
  # 200 ms, or a job too young to have the rank, is killed whole, as a scheduler would
  t=0
  while [ "$t" -lt 10 ] && kill -0 "$mp" 2>/dev/null && [ -n "$(pgrep -P "$mp")" ]; do
    sleep 0.02
    t=$((t + 1))
  done
  # a job killed before mpirun started its ranks would start them afterwards and run its 100001
  # iterations (the test's timeout, under load): what mpirun starts is killed until it is gone
  t=0
  while [ "$t" -lt 100 ] && alive "$mp"; do
    for p in $(descendants "$mp"); do kill -9 "$p" 2>/dev/null; done
    [ "$t" -ge 50 ] && kill -9 "$mp" 2>/dev/null
    sleep 0.05
    t=$((t + 1))
  done
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
  ls "$d" 2>/dev/null | grep -v -E '^rank-[0-9]{5}\.(rsnap|ring)$|^report\.(txt|json|html)$' | sed "s|^|run $i: unexpected file left: |"
  rm -rf "$d" "$d.err" "$sessions/$i"
done
echo "$runs runs: $checked files checked, $bad corrupt or unreadable (seed $seed)"
# a loop that found nothing to check tested nothing
[ "$bad" -eq 0 ] && [ "$checked" -gt 0 ]
