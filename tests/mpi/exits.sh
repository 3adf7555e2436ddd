#!/bin/sh
# A rank of a program that calls MPI_Init itself ends before MPI_Finalize, each way a real
# program does (the demo's --end R:STEP:HOW), and mpirun ends the job: what each rank left in
# RANKSNAP_DIR, and what `ranksnap report DIR` says of how each ended. Every sentence must be what
# the files recorded: the status of an exit, the signal, MPI_Abort's code, or that the cause was
# not recorded; never a guessed SIGKILL. Ranks 2:6 are recorded, rank 1 ends at step 3 unless
# the case says otherwise.
# usage: exits.sh CASE DEMO RANKSNAP MPIEXEC PYTHON WORKDIR
set -u
name=$1 demo=$2 ranksnap=$3 mpiexec=$4 py=$5 dir=$6/$1
rm -rf "$dir" && mkdir -p "$dir"
export RANKSNAP_BACKEND=sim RANKSNAP_DIR="$dir" RANKSNAP_DIVERGENCE= RANKSNAP_STEPS=2:6
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# job EXIT ARGS...: the demo under mpirun -np 4; mpirun must exit with EXIT, and never run until
# the timeout (a rank that waited for gone peers)
job() {
    want=$1; shift
    timeout 100 "$mpiexec" -np 4 --oversubscribe --allow-run-as-root --mca btl self,vader \
        "$demo" --iters 8 "$@" > "$dir.stdout" 2> "$dir.stderr"
    rc=$?
    echo "mpirun exit code $rc"
    [ $rc -ne 124 ] || { echo "the job ran until timeout ended it"; tail -20 "$dir.stderr"; exit 1; }
    [ $rc -eq "$want" ] || { echo "mpirun should have exited $want"; tail -20 "$dir.stderr"; exit 1; }
    ls "$dir"
    "$ranksnap" report "$dir" --json > "$dir.json" 2> "$dir.report.stderr" ||
        { echo "ranksnap report failed"; cat "$dir.report.stderr"; exit 1; }
}

# check EXPR...: Python expressions over `r` (the report), `k` (rank 1 in it), `note` (the note
# that names rank 1, "" when none), `snap` (rank 1's .rsnap as a map, None when there is none)
# and `notes` (all of them); each must hold. Whatever the case, no note guesses a cause the files
# do not show.
check() {
    "$py" - "$dir" "$dir.json" "$@" <<'EOF'
import json, os, re, sys
d, report, exprs = sys.argv[1], sys.argv[2], sys.argv[3:]
r = json.load(open(report))
k = [x for x in r['ranks'] if x['rank'] == 1]
k = k[0] if k else {}
notes = r['notes']
def ranks_of(n):
    m = re.match(r'ranks? ([0-9, .]+?) [a-z]', n)
    return [int(x) for x in m.group(1).split(', ') if x.isdigit()] if m else []
note = ([n for n in notes if 1 in ranks_of(n)] or [''])[0]
snap = None
p = os.path.join(d, 'rank-00001.rsnap')
if os.path.exists(p):
    import msgpack
    snap = msgpack.unpackb(open(p, 'rb').read(), strict_map_key=False, raw=False)
exprs.append("not [n for n in notes if 'out of host memory' in n or 'killed at start-up' in n]")
failed = 0
for e in exprs:
    if not eval(e):
        failed += 1
        print('FAILED:', e)
if failed:
    print('rank 1:', json.dumps(k)[:1500])
    print('notes:', json.dumps(notes, indent=1))
    print('snapshot end:', snap and snap.get('end'), 'complete:', snap and snap.get('complete'))
    sys.exit(1)
print('rank 1 ended:', k.get('ended'), '| note:', note)
EOF
}

# rank 1's own snapshot, written as it left, says how: and the report says it of rank 1; of the
# ranks mpirun then ended, that they got its SIGTERM, or, those a loaded machine let it SIGKILL
# before their handler ran, that the cause was not recorded
written_as_it_left() { # WORDS END_MAP_EXPR
    check "snap is not None and snap['complete'] and snap.get('end') == $2" \
          "k.get('ended') == '$1'" "note == 'rank 1 $1; its snapshot was written as it left'" \
          "k.get('steps_from') == 'ranksnap_step'" \
          "all('got signal 15 (SIGTERM)' in n or 'the cause was not recorded' in n for n in notes if 1 not in ranks_of(n))" || exit 1
}

# rank 1 left only its ring, with nothing of its end: the cause is said to be unrecorded
nothing_recorded() {
    check "snap is None" "k.get('recovered') is True" "'ended' not in k" \
          "note.startswith('rank 1 ended without writing its snapshot')" \
          "'the cause was not recorded' in note" "k.get('steps_from') == 'ranksnap_step'" || exit 1
}

case $name in
exit_from_main_writes_its_snapshot_and_says_so)
    job 1 --end 1:3:exit
    written_as_it_left "exited with status 1 before MPI_Finalize" "{'exit_status': 1, 'before_mpi_finalize': True}"
    ;;
exit_0_before_mpi_finalize_is_said_as_such)
    job 1 --end 1:3:exit0
    written_as_it_left "exited with status 0 before MPI_Finalize" "{'exit_status': 0, 'before_mpi_finalize': True}"
    ;;
exit_from_a_thread_writes_its_snapshot_and_says_so)
    job 1 --end 1:3:thread
    written_as_it_left "exited with status 1 before MPI_Finalize (exit called on a thread other than the main one)" \
        "{'exit_status': 1, 'before_mpi_finalize': True, 'main_thread': False}"
    ;;
exit_from_a_signal_handler_writes_its_snapshot_and_says_so)
    job 1 --end 1:3:handler
    written_as_it_left "exited with status 1 before MPI_Finalize" "{'exit_status': 1, 'before_mpi_finalize': True}"
    ;;
mpi_abort_writes_its_snapshot_and_says_so)
    job 5 --end 1:3:mpi-abort
    written_as_it_left "called MPI_Abort with error code 5" "{'mpi_abort': 5}"
    ;;
abort_writes_on_sigabrt_and_says_so)
    job 134 --end 1:3:abort
    check "snap is not None and not snap['complete'] and snap.get('end') == {'signal': 6}" \
          "k.get('ended') == 'got signal 6 (SIGABRT)'" \
          "note.startswith('rank 1 got signal 6 (SIGABRT): its snapshot was written on that signal')" || exit 1
    ;;
underscore_exit_leaves_its_ring_and_no_cause)
    job 1 --end 1:3:_exit
    nothing_recorded
    ;;
exec_leaves_its_ring_and_no_cause)
    job 1 --end 1:3:exec
    nothing_recorded
    ;;
# the helper rank 1 forks exit(1)s in the range, then the rank is SIGKILLed: had the helper
# written the rank's snapshot, or noted its exit in the ring it shares, it would show
forked_child_writes_nothing_of_the_rank)
    job 137 --end 1:3:fork --kill 1:4
    nothing_recorded
    ;;
# rank 1 leaves after its range was written and gathered: its snapshot is the range's, and the
# exit its ring saw later is said as coming after it
exit_after_the_range_is_said_after_its_snapshot)
    export RANKSNAP_STEPS=2:5
    job 1 --end 1:6:exit
    check "snap is not None and 'end' not in snap" \
          "note == 'rank 1 exited with status 1 before MPI_Finalize after its snapshot was written (which its ring recorded)'" || exit 1
    ;;
# rank 1 leaves before its range: nothing recorded, but what it held then (allocated before the
# range, as most programs do) its ring's header kept, so it has data, said as such
exit_before_the_range_shows_what_it_held)
    export RANKSNAP_STEPS=4:6
    job 1 --end 1:2:exit
    check "1 not in r['no_data_ranks']" "k.get('peak_allocated', 0) > 0" "k.get('events') == 0" \
          "note.startswith('rank 1 exited with status 1 before MPI_Finalize without writing its snapshot (with no recorded range left to write); its ring held no events')" || exit 1
    ;;
*) echo "unknown case $name"; exit 2 ;;
esac
echo ok
