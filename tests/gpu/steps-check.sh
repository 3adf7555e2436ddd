# steps-check.sh — sourced by the stock-program scripts (stock-nccl-tests.sh, stock-jacobi.sh):
# the checks that a program which never calls ranksnap_step got its steps found from its
# collectives. Each check prints PASS or FAIL and counts the failures in $fails.
# Needs: $cli (the ranksnap command), $out (the results folder).
fails=0

verdict() { # verdict OK WHAT
  if [ "$1" = 1 ]; then echo "PASS: $2"; else echo "FAIL: $2"; fails=$((fails + 1)); fi
}

# steps_range_checks NAME HOW: the run in $out/NAME, made with --steps 10:15 on two ranks, says in
# its report that its steps were found as HOW ("MPI_Allreduce x1 per step") on every rank, and
# recorded steps 10..14 on each rank
steps_range_checks() {
  local name=$1 how=$2 ok=0 line r
  "$cli" report "$out/$name" > "$out/$name.txt" 2>&1
  grep -E "^steps" "$out/$name.txt" | sed 's/^/   /'
  grep -q "^steps: detected: $how (every rank)" "$out/$name.txt" && ok=1
  verdict $ok "steps found with no flag, the same on both ranks (report.txt)"
  ok=1
  for r in $(seq 0 $((${np:-2} - 1))); do
    line=$("$cli" summary "$out/$name/rank-0000$r.rsnap" 2>&1 | grep '^  steps ')
    echo "   rank $r: $(echo "$line" | sed "s/^ *steps *//")"
    case $line in *"; recorded 10..14; step now 15") ;; *) ok=0 ;; esac
  done
  verdict $ok "--steps 10:15 recorded steps 10..14 on both ranks (ranksnap summary)"
}

# last_step LOG: the last step of a run whose range was never reached, as finalize names it
last_step() {
  sed -n 's/.*never reached: .*(the last step was \([0-9]*\)).*/\1/p' "$1" | head -1
}
