#!/bin/sh
# What ranks leave in RANKSNAP_DIR when the world is not kind: a full disk, two jobs sharing the
# directory (at once, and one after the other, the first killed), a directory anyone may write,
# temporaries a SIGKILL left mid-write, a step range the run never reaches (docs/POSTMORTEM.md).
# usage: rank_files.sh CASE DEMO RANKSNAP MPIEXEC PYTHON WORKDIR
set -u
name=$1 demo=$2 ranksnap=$3 mpiexec=$4 python=$5 w=$6
mpirun="$mpiexec --oversubscribe --allow-run-as-root --mca btl self,vader"
export RANKSNAP_BACKEND=sim OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset RANKSNAP_JOB RANKSNAP_STEPS RANKSNAP_RING RANKSNAP_DISABLE
fail() { echo "FAIL: $*"; exit 1; }
fresh() { rm -rf "$w" && mkdir -p "$w" || exit 1; }

# the job of each snapshot or ring in DIR, one "NAME JOB" line each, by `ranksnap summary`
jobs_of() {
    for f in "$1"/rank-*.rsnap "$1"/rank-*.ring; do
        [ -e "$f" ] || continue
        printf '%s %s\n' "$(basename "$f")" "$("$ranksnap" summary "$f" | sed -n 's/.*, job \(.*\)$/\1/p')"
    done
}

# ---- a full disk -----------------------------------------------------------------------------
# Four ranks, RANKSNAP_DIR on a 200 KiB tmpfs, the default RANKSNAP_RING=mmap: the ring files
# (3.4 MB each) cannot be reserved, so every rank says so once and keeps its ring in memory; the
# job ends with exit status 0 and its report, and no ring or temporary is left half made. Before
# the ring file was reserved (posix_fallocate), a rank died of SIGBUS at its first event. The
# tmpfs is mounted in a mount namespace of its own (unshare -m as root, -rm as a user); where no
# namespace can be had, the shell's file size limit makes the disk look full to the writer the
# same way (the case says which one ran).
case_full_disk_keeps_the_job_running_with_its_ring_in_memory() {
    fresh
    mkdir "$w/full" || exit 1
    for u in "unshare -m" "unshare -rm"; do
        if $u sh -c "mount -t tmpfs -o size=200k tmpfs '$w/full'" 2>/dev/null; then
            echo "a 200 KiB tmpfs ($u)"
            exec $u sh "$0" full_disk_inner "$demo" "$ranksnap" "$mpiexec" "$python" "$w" tmpfs
        fi
    done
    echo "no mount namespace here: the file size limit (ulimit -f) stands for a full disk"
    exec sh "$0" full_disk_inner "$demo" "$ranksnap" "$mpiexec" "$python" "$w" ulimit
}

case_full_disk_inner() {
    how=$6
    d="$w/full/out"
    if [ "$how" = tmpfs ]; then
        mount -t tmpfs -o size=200k tmpfs "$w/full" || fail "mount"
    else
        trap '' XFSZ
        ulimit -f 1024
    fi
    RANKSNAP_DIR="$d" RANKSNAP_STEPS=1:3 $mpirun -np 4 "$demo" --iters 4 --quiet > "$w/out" 2> "$w/err"
    rc=$?
    cat "$w/out" "$w/err"
    ls -la "$d"
    [ "$how" = tmpfs ] && df -k "$w/full"
    left=$(ls "$d" | grep -c '\.ring$\|\.tmp\.')
    [ "$how" = tmpfs ] && umount "$w/full"
    test $rc -eq 0 || fail "the job ended with exit status $rc"
    test "$(grep -c 'ring.*cannot reserve .* bytes on disk.*keeping the event ring in memory' "$w/err")" -eq 4 ||
        fail "not one warning per rank about the ring"
    test "$left" -eq 0 || fail "$left ring or temporary files left"
    grep -q '4 of 4 ranks' "$w/out" || fail "no report"
}

# ---- two jobs in one directory ---------------------------------------------------------------
# Job A (two ranks) runs; while its ring files are live, job B (two ranks) starts in the same
# directory, runs and finishes; then A finishes. Neither removes nor replaces the other's files:
# A keeps the plain names, B warns at its start and writes rank-RRRRR.job-job-B.rsnap and
# report.job-job-B.txt; each job's two snapshots carry its own job; `ranksnap report DIR` reports
# one job and names each of the other's files as left out.
case_two_jobs_at_once_keep_their_own_files() {
    fresh
    d="$w/dir"
    RANKSNAP_JOB=job-A RANKSNAP_DIR="$d" $mpirun -np 2 "$demo" --iters 3 --quiet --hang 0:1:4 \
        > "$w/a.out" 2> "$w/a.err" &
    a=$!
    i=0
    until [ -e "$d/rank-00000.ring" ] && [ -e "$d/rank-00001.ring" ]; do
        i=$((i + 1)); [ $i -lt 100 ] || fail "job A made no ring files"; sleep 0.1
    done
    RANKSNAP_JOB=job-B RANKSNAP_DIR="$d" $mpirun -np 2 "$demo" --iters 3 --quiet > "$w/b.out" 2> "$w/b.err"
    rb=$?
    wait $a
    ra=$?
    cat "$w/a.err" "$w/b.err"
    ls -la "$d"
    test $ra -eq 0 && test $rb -eq 0 || fail "exit status A $ra, B $rb"
    jobs_of "$d" | tee "$w/jobs"
    test "$(grep -c ' job-A$' "$w/jobs")" -eq 2 || fail "job A's two snapshots"
    test "$(grep -c ' job-B$' "$w/jobs")" -eq 2 || fail "job B's two snapshots"
    grep -q '^rank-00000.rsnap job-A$' "$w/jobs" && grep -q '^rank-00001.rsnap job-A$' "$w/jobs" || fail "A's plain names"
    grep -q '^rank-00000.job-job-B.rsnap job-B$' "$w/jobs" && grep -q '^rank-00001.job-job-B.rsnap job-B$' "$w/jobs" ||
        fail "B's qualified names"
    ! ls "$d" | grep -q '\.ring$' || fail "a ring file left by jobs that finished"
    test "$(grep -c "RANKSNAP_DIR=.* holds another job's file, .*rank-0000[01].ring (job job-A, pid [0-9]* on .*, running)" "$w/b.err")" -eq 2 ||
        fail "B did not say, on each rank, that the directory holds A's live files"
    test -s "$d/report.txt" && test -s "$d/report.job-job-B.txt" || fail "each job's report"
    grep -q "job-A" "$d/report.json" && grep -q "job-B" "$d/report.job-job-B.json" || fail "the reports' jobs"
    "$ranksnap" report "$d" > "$w/r.out" 2> "$w/r.err"; rc=$?; cat "$w/r.out" "$w/r.err"
    test $rc -eq 0 && grep -q '2 of 2 ranks' "$w/r.out" || fail "ranksnap report DIR"
    test "$(grep -c 'is from job .* left out' "$w/r.err")" -eq 2 || fail "the other job's files named"
}

# Job A (two ranks) is killed (rank 1 SIGKILLs itself, mpirun ends rank 0), leaving its rings and
# a crash-path snapshot. Job B runs in the same directory afterwards: A's files are left exactly
# as they were (same bytes), B warns and writes under its qualified names, and B's clean finish
# removes only its own ring. A rerun of job A (same RANKSNAP_JOB) then takes its plain names
# again, replacing its own old files and none of B's.
case_a_job_after_a_killed_job_leaves_its_files_alone() {
    fresh
    d="$w/dir"
    RANKSNAP_JOB=job-A RANKSNAP_DIR="$d" $mpirun -np 2 "$demo" --iters 100000 --kill 1:50 --quiet \
        > "$w/a.out" 2> "$w/a.err"
    echo "job A: exit status $? (killed)"
    test -e "$d/rank-00001.ring" || fail "the killed rank left no ring"
    (cd "$d" && ls rank-* | sort | xargs cksum) > "$w/a.before"
    cat "$w/a.before"
    RANKSNAP_JOB=job-B RANKSNAP_DIR="$d" $mpirun -np 2 "$demo" --iters 3 --quiet > "$w/b.out" 2> "$w/b.err"
    rb=$?
    cat "$w/b.err"
    ls -la "$d"
    test $rb -eq 0 || fail "job B: exit status $rb"
    (cd "$d" && ls rank-* | grep -v 'job-job-B' | sort | xargs cksum) > "$w/a.after"
    cmp "$w/a.before" "$w/a.after" || fail "job A's files changed"
    grep -q "holds another job's file, .*rank-00001.ring (job job-A, pid [0-9]* on .*, dead: its history)" "$w/b.err" ||
        fail "B did not name A's dead rank's ring"
    jobs_of "$d" | tee "$w/jobs"
    test "$(grep -c '^rank-0000[01].job-job-B.rsnap job-B$' "$w/jobs")" -eq 2 || fail "B's snapshots"
    ! ls "$d" | grep -q 'job-job-B.ring' || fail "B left its ring"
    "$ranksnap" report "$d" > "$w/r.out" 2> "$w/r.err"; rc=$?; cat "$w/r.out" "$w/r.err"
    test $rc -eq 0 && grep -q 'is from job .* left out' "$w/r.err" || fail "ranksnap report DIR"
    # job A again: its own files, and only those, are replaced
    (cd "$d" && ls rank-*job-job-B* | sort | xargs cksum) > "$w/b.before"
    RANKSNAP_JOB=job-A RANKSNAP_DIR="$d" $mpirun -np 2 "$demo" --iters 3 --quiet > "$w/a2.out" 2> "$w/a2.err"
    test $? -eq 0 || fail "job A's rerun"
    cat "$w/a2.err"
    ! grep -q "another job" "$w/a2.err" || fail "A's rerun took its own files for another job's"
    (cd "$d" && ls rank-*job-job-B* | sort | xargs cksum) > "$w/b.after"
    cmp "$w/b.before" "$w/b.after" || fail "B's files changed"
    jobs_of "$d" | tee "$w/jobs2"
    grep -q '^rank-00000.rsnap job-A$' "$w/jobs2" && grep -q '^rank-00001.rsnap job-A$' "$w/jobs2" || fail "A's rerun"
    ! ls "$d" | grep -q '^rank-0000[01].ring$' || fail "A's rerun left (or kept) a plain ring"
}

# ---- RANKSNAP_DIR's permissions --------------------------------------------------------------
# A directory every user may write without the sticky bit is refused (the job still runs, and
# nothing is written there); with the sticky bit it is used, with one warning; a parent that is a
# symbolic link is used, with one warning naming it.
case_world_writable_or_symlinked_parent_dir_is_refused_or_said() {
    fresh
    mkdir "$w/open" "$w/sticky" "$w/real" && chmod 0777 "$w/open" && chmod 1777 "$w/sticky" &&
        ln -s real "$w/link" || exit 1
    RANKSNAP_DIR="$w/open" "$demo" --iters 2 --quiet 2> "$w/open.err"; rc=$?; cat "$w/open.err"
    test $rc -eq 0 || fail "exit status $rc with a world-writable directory"
    grep -q "RANKSNAP_DIR=$w/open: writable by every user (mode 0777) without the sticky bit.*refusing" "$w/open.err" ||
        fail "not refused"
    test -z "$(ls "$w/open")" || fail "files written into the world-writable directory"
    RANKSNAP_DIR="$w/sticky" "$demo" --iters 2 --quiet 2> "$w/sticky.err"; rc=$?; cat "$w/sticky.err"
    test $rc -eq 0 && test -e "$w/sticky/rank-00000.rsnap" || fail "the sticky directory was not used"
    test "$(grep -c 'writable by every user (mode 1777; the sticky bit' "$w/sticky.err")" -eq 1 || fail "one warning"
    RANKSNAP_DIR="$w/link/out" "$demo" --iters 2 --quiet 2> "$w/link.err"; rc=$?; cat "$w/link.err"
    test $rc -eq 0 && test -e "$w/real/out/rank-00000.rsnap" || fail "the directory under the link was not used"
    test "$(grep -c "RANKSNAP_DIR=$w/link/out: its parent $w/link is a symbolic link (to real)" "$w/link.err")" -eq 1 ||
        fail "one warning naming the link"
}

# ---- temporaries a SIGKILL left --------------------------------------------------------------
# Planted like those of a rank killed mid-write: this job's and host's of a dead process is
# removed at the next start of the job; one of a live process, one of another job and one of
# another host are kept.
case_stale_temporaries_of_this_job_are_removed_and_no_others() {
    fresh
    d="$w/dir"
    mkdir -p "$d" || exit 1
    sh -c 'exit 0' & dead=$!
    wait $dead
    host=$("$python" -c "import socket, re; print(re.sub(rb'[^A-Za-z0-9-]', lambda m: b'_%02x' % m.group()[0], socket.gethostname().encode()).decode())")
    for t in "job-7@$host.$dead" "job-7@$host.$$" "job-8@$host.$dead" "job-7@elsewhere.$dead"; do
        echo partial > "$d/rank-00000.rsnap.tmp.$t.0" || exit 1
    done
    ls "$d"
    RANKSNAP_JOB=job-7 RANKSNAP_DIR="$d" "$demo" --iters 2 --quiet || fail "the demo"
    ls "$d"
    test ! -e "$d/rank-00000.rsnap.tmp.job-7@$host.$dead.0" || fail "this job's dead temporary kept"
    for t in "job-7@$host.$$" "job-8@$host.$dead" "job-7@elsewhere.$dead"; do
        test -e "$d/rank-00000.rsnap.tmp.$t.0" || fail "$t removed"
    done
}

# ---- a step range never reached --------------------------------------------------------------
# RANKSNAP_STEPS=100:105,200: in a run of four steps: finalize says both ranges were never
# reached and what the last step was, instead of ending with nothing written and nothing said.
case_step_ranges_never_reached_are_named_at_finalize() {
    fresh
    RANKSNAP_DIR="$w/dir" RANKSNAP_STEPS=100:105,200: "$demo" --iters 4 --quiet 2> "$w/err"; rc=$?; cat "$w/err"
    test $rc -eq 0 || fail "exit status $rc"
    grep -q 'RANKSNAP_STEPS=100:105,200:: never reached: 100:105,200: (the last step was 4); nothing was recorded for them, and no snapshot was written' "$w/err" ||
        fail "not said"
    RANKSNAP_DIR="$w/dir2" RANKSNAP_STEPS=1:3,100:105 "$demo" --iters 4 --quiet 2> "$w/err2"; rc=$?; cat "$w/err2"
    test $rc -eq 0 && grep -q 'never reached: 100:105 (the last step was 4); nothing was recorded for it$' "$w/err2" ||
        fail "the one range not reached"
}

command -v "case_$name" >/dev/null || { echo "rank_files.sh: no case '$name'" >&2; exit 2; }
shift
"case_$name" "$@"
