#!/bin/sh
# `ranksnap report --jobs N` on the folders of `fixtures.sh report` (DIR): the same report, the
# same messages in the same order and the same files whatever the number of threads; --jobs
# needs a number of threads.
# usage: report_jobs.sh CASE RANKSNAP DIR
set -u
name=$1 ranksnap=$2 dir=$3

# files of two jobs (job B's left out), an unreadable one and a missing one, read by 1, 2, 3
# and 8 threads
case_same_report_whatever_the_number_of_threads() {
    a="$dir/job-a"
    for j in 1 2 3 8; do
        rm -rf "$dir/jobs-$j"
        "$ranksnap" report --jobs $j --out "$dir/jobs-$j" "$a/rank-00000.rsnap" "$dir/garbage.rsnap" \
            "$a/rank-00001.rsnap" "$dir/job-b" "$dir/no-such-file.rsnap" \
            > "$dir/jobs-$j.out" 2> "$dir/jobs-$j.err"
        rc=$?; echo "--jobs $j: exit $rc"; test $rc -eq 0 || exit 1
    done
    cat "$dir/jobs-1.err"
    for s in garbage.rsnap no-such-file.rsnap job-B; do grep -q "$s" "$dir/jobs-1.err" || exit 1; done
    for j in 2 3 8; do
        for f in out err; do cmp "$dir/jobs-1.$f" "$dir/jobs-$j.$f" || exit 1; done
        for f in report.txt report.json report.html; do cmp "$dir/jobs-1/$f" "$dir/jobs-$j/$f" || exit 1; done
    done
}

# --jobs 0, a word, nothing: usage errors (2)
case_jobs_needs_a_number_of_threads() {
    err=$("$ranksnap" report --jobs 0 "$dir/job-a" 2>&1); test $? -eq 2 || exit 1; echo "$err"
    case "$err" in *'--jobs expects a number of threads, 1 to 1024'*) ;; *) exit 1;; esac
    "$ranksnap" report --jobs many "$dir/job-a"; test $? -eq 2 || exit 1
    # trailing characters, more than a long holds, above the limit, empty (cli.c's rs_cli_number)
    for bad in 2x 99999999999999999999999 1025 ''; do
        "$ranksnap" report --jobs "$bad" "$dir/job-a"; test $? -eq 2 || { echo "--jobs '$bad' taken"; exit 1; }
    done
    "$ranksnap" report "$dir/job-a" --jobs; test $? -eq 2 || exit 1
    "$ranksnap" report --jobs=2 "$dir/job-a" > /dev/null
}

command -v "case_$name" >/dev/null || { echo "report_jobs.sh: no case '$name'" >&2; exit 2; }
"case_$name"
