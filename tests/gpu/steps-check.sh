# steps-check.sh — sourced by the stock-program scripts (stock-nccl-tests.sh, stock-jacobi.sh):
# the checks that a program which never calls ranksnap_step got its steps found from its
# collectives. Each check prints PASS or FAIL and counts the failures in $fails.
# Needs: $cli (the ranksnap command), $out (the results folder).
fails=0

verdict() { # verdict OK WHAT
  if [ "$1" = 1 ]; then echo "PASS: $2"; else echo "FAIL: $2"; fails=$((fails + 1)); fi
}

# steps_range_checks NAME HOW [A B]: the run in $out/NAME, made with --steps A:B (10:15) on $np
# ranks, says in its report that its steps were found as HOW ("MPI_Allreduce x1 per step") on
# every rank, and recorded steps A..B-1 on each rank
steps_range_checks() {
  local name=$1 how=$2 a=${3:-10} b=${4:-15} ok=0 line r
  "$cli" report "$out/$name" > "$out/$name.txt" 2>&1
  grep -E "^steps" "$out/$name.txt" | sed 's/^/   /'
  grep -q "^steps: detected: $how" "$out/$name.txt" && ! grep -q "^steps: .*(rank" "$out/$name.txt" && ok=1
  verdict $ok "steps found with no flag, the same on every rank (report.txt)"
  ok=1
  for r in $(seq 0 $((${np:-2} - 1))); do
    line=$("$cli" summary "$out/$name/rank-0000$r.rsnap" 2>&1 | grep '^  steps ')
    echo "   rank $r: $(echo "$line" | sed "s/^ *steps *//")"
    case $line in *"; recorded $a..$((b - 1)); step now "*) ;; *) ok=0 ;; esac
  done
  verdict $ok "--steps $a:$b recorded steps $a..$((b - 1)) on every rank (ranksnap summary)"
}

# held_checks NAME A: the report of $out/NAME (steps_range_checks wrote it) names the memory the
# program allocated before its loop by site, as held since before step A, and calls no rank
# "no data"
held_checks() {
  local name=$1 a=$2 ok=0
  grep -E "held since before step $a" "$out/$name.txt" | head -4 | sed 's/^/   /'
  grep -q "held since before step $a" "$out/$name.txt" && ! grep -q "no data" "$out/$name.txt" && ok=1
  verdict $ok "the memory allocated before the loop is named by site, held since before step $a; no rank is 'no data'"
}

# last_step LOG: the last step of a run whose range was never reached, as finalize names it
last_step() {
  sed -n 's/.*never reached: .*(the last step was \([0-9]*\)[;)].*/\1/p' "$1" | head -1
}
