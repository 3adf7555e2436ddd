#!/bin/sh
# A C rank that never calls MPI (ranksnap joined the job) leaves in the middle of a recorded
# range by exit() (exit_mid_range.c). Failing (exit(1)): it writes its own snapshot and leaves
# without the gather, so mpirun ends the job as without ranksnap; it used to wait in the gather
# for its peer, which waits for it elsewhere, until RANKSNAP_GATHER_TIMEOUT. Ending well
# (exit(0), a return from main): the range is gathered and reported as before.
# RANKSNAP_GATHER_TIMEOUT is an hour here: a rank that enters the gather keeps the job running
# until this script's own `timeout` ends it, which fails the case.
# usage: exit_mid_range.sh CASE PROGRAM MPIEXEC PYTHON WORKDIR
set -u
name=$1 prog=$2 mpiexec=$3 py=$4 dir=$5/$1
rm -rf "$dir" && mkdir -p "$dir"
export RANKSNAP_BACKEND=sim RANKSNAP_DIR="$dir" RANKSNAP_GATHER_TIMEOUT=3600 RANKSNAP_DIVERGENCE=
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

job() { # STEPS ARGS...
    steps=$1; shift
    timeout 100 "$mpiexec" -np 2 --oversubscribe --allow-run-as-root --mca btl self,vader \
        -x RANKSNAP_BACKEND -x RANKSNAP_DIR -x RANKSNAP_GATHER_TIMEOUT -x RANKSNAP_DIVERGENCE \
        -x RANKSNAP_STEPS="$steps" "$prog" "$@" > "$dir.stdout" 2> "$dir.stderr"
    rc=$?
    echo "mpirun exit code $rc"
    [ $rc -ne 124 ] || { echo "the job ran until timeout ended it: a rank waited in ranksnap's gather"; tail -20 "$dir.stderr"; exit 1; }
}

ranks_reported() { # the live report has both ranks, each range-end
    test -f "$dir/report.json" || { echo "no live report"; ls -la "$dir"; tail -20 "$dir.stderr"; exit 1; }
    "$py" -c "import json, sys; r = json.load(open(sys.argv[1])); sys.exit(0 if len(r['ranks']) == 2 else 1)" \
        "$dir/report.json" || { echo "report.json has not both ranks"; head -c 2000 "$dir/report.json"; exit 1; }
}

case $name in
failing_rank_leaves_without_the_gather)
    job 2:6 8 1 3 1
    [ "$rc" -ne 0 ] || { echo "mpirun said 0 for a job whose rank 1 failed"; exit 1; }
    test -f "$dir/rank-00001.rsnap" || { echo "rank 1 left no snapshot"; ls -la "$dir"; tail -20 "$dir.stderr"; exit 1; }
    ! test -f "$dir/report.json" || { echo "a report was gathered"; exit 1; }
    ;;
every_rank_exiting_0_is_gathered)
    job 2:6 8 -1 3 0
    [ "$rc" -eq 0 ] || { tail -20 "$dir.stderr"; exit 1; }
    ranks_reported
    ;;
return_from_main_is_gathered)
    job 2: 5 -1 -1 0
    [ "$rc" -eq 0 ] || { tail -20 "$dir.stderr"; exit 1; }
    ranks_reported
    ;;
*) echo "unknown case $name"; exit 2 ;;
esac
echo ok
