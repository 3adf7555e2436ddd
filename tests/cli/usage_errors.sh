#!/bin/sh
# `ranksnap` refuses what it cannot do with the exit code that says why: 2 for a usage error
# (naming the verb or flag), 1 for a file that cannot be read (naming the file).
# usage: usage_errors.sh CASE RANKSNAP [FILE or CONFIG]
set -u
name=$1 ranksnap=$2

# an unknown verb: 2, and the message names it
case_unknown_verb() {
    out=$("$ranksnap" frobnicate 2>&1); rc=$?; echo "$out"
    test $rc -eq 2 && case "$out" in *"unknown verb 'frobnicate'"*) ;; *) exit 1;; esac
}

# an unknown flag, before the verb or after it: 2
case_unknown_flag() {
    "$ranksnap" --frobnicate; test $? -eq 2 && { "$ranksnap" summary --frobnicate x.rsnap; test $? -eq 2; }
}

# `summary` without a file: 2
case_summary_without_files_is_a_usage_error() {
    "$ranksnap" summary; test $? -eq 2
}

# `summary` of a file that is not there (FILE): 1, and the message names the file
case_summary_missing_file() {
    file=$1
    out=$("$ranksnap" summary "$file" 2>&1); rc=$?; echo "$out"
    test $rc -eq 1 && case "$out" in "ranksnap: "*"$file"*) ;; *) exit 1;; esac
}

# `report --groups` (DIR: a job's files, two ranks) that does not parse, or that describes a job of
# another size: 2, naming the flag and what was expected; RANKSNAP_GROUPS named as itself
case_report_groups_usage_errors() {
    dir=$1
    err=$("$ranksnap" report --groups pp=3,dp=x "$dir" 2>&1); test $? -eq 2 || exit 1
    case "$err" in *"--groups pp=3,dp=x: expected NAME=SIZE pairs such as pp=4,dp=8"*) ;; *) echo "$err"; exit 1;; esac
    err=$("$ranksnap" report --groups pp=3,dp=2 "$dir" 2>&1); test $? -eq 2 || exit 1
    case "$err" in *"--groups pp=3,dp=2 describes 6 ranks, but the job has 2"*) ;; *) echo "$err"; exit 1;; esac
    err=$(RANKSNAP_GROUPS=pp=2,DP=2 "$ranksnap" report "$dir" 2>&1); test $? -eq 2 || exit 1
    case "$err" in *"RANKSNAP_GROUPS pp=2,DP=2 describes 4 ranks, but the job has 2"*) ;; *) echo "$err"; exit 1;; esac
    # a grouping in which no rank has a peer: refused with the fix, never "no rank diverges"
    err=$("$ranksnap" report --groups pp=1,data4=2 "$dir" 2>&1); test $? -eq 2 || exit 1
    case "$err" in *"no dimension holds the replicas"*"e.g. pp=1,dp=2"*) ;; *) echo "$err"; exit 1;; esac
    err=$("$ranksnap" report --groups pp=2,dp=1 "$dir" 2>&1); test $? -eq 2 || exit 1
    case "$err" in *"the replicas' dimension has size 1"*) ;; *) echo "$err"; exit 1;; esac
}

# `collect` without both directories, or with a misspelt flag: 2, naming what is wrong
case_collect_usage_errors() {
    err=$("$ranksnap" collect --from /tmp 2>&1); test $? -eq 2 || exit 1
    case "$err" in *'--from DIR and --to DIR are both needed'*) ;; *) exit 1;; esac
    err=$("$ranksnap" collect --frm x --to y 2>&1); test $? -eq 2 || exit 1
    case "$err" in *"unexpected '--frm'"*) ;; *) exit 1;; esac
}

# `ranksnap` starts without Open MPI's libraries (only ranksnap-collect links them), and
# `collect` where ranksnap-collect is not beside it: 1, naming the program it looked for
case_collect_runs_its_own_program() {
    if command -v readelf >/dev/null; then
        readelf -d "$ranksnap" | grep -q 'NEEDED.*libmpi' && { echo "ranksnap needs libmpi"; exit 1; }
    fi
    dir=$(mktemp -d) || exit 1
    cp "$ranksnap" "$dir/ranksnap"
    err=$("$dir/ranksnap" collect --from "$dir" --to "$dir/out" 2>&1); rc=$?
    rm -rf "$dir"
    echo "$err"
    case "$err" in *'built without MPI'*) exit 77;; esac
    test $rc -eq 1 || exit 1
    case "$err" in *"cannot run $dir/ranksnap-collect"*) ;; *) exit 1;; esac
}

# `ranksnap` loads no library it does not call (CMakeLists.txt, --as-needed): not msgpack-c, whose
# inline code is all the command uses, nor libm where sqrt is an instruction (every
# configuration but Debug, whose -O0 calls it; CONFIG, the argument after RANKSNAP)
case_loads_no_unused_library() {
    command -v readelf >/dev/null || { echo "no readelf to read the program's libraries"; exit 77; }
    needed=$(readelf -d "$ranksnap" | grep NEEDED); echo "$needed"
    case "$needed" in *libmsgpackc*) echo "ranksnap loads msgpack-c"; exit 1;; esac
    test "$1" = Debug && exit 0
    case "$needed" in *'[libm.so'*) echo "ranksnap loads libm"; exit 1;; esac
}

# tests/bench/compare_builds.sh (the script, given as RANKSNAP's place): no base, a base that is
# neither a folder nor a commit, a bad ROUNDS: 2, each named, before anything is built
case_compare_builds_usage_errors() {
    out=$(bash "$ranksnap" 2>&1); test $? -eq 2 || exit 1
    case "$out" in *"usage: tests/bench/compare_builds.sh BASE [HEAD]"*) ;; *) echo "$out"; exit 1;; esac
    out=$(bash "$ranksnap" no-such-commit 2>&1); test $? -eq 2 || exit 1
    case "$out" in *"no-such-commit is neither a folder nor a commit"*) ;; *) echo "$out"; exit 1;; esac
    out=$(ROUNDS=x bash "$ranksnap" HEAD 2>&1); test $? -eq 2 || exit 1
    case "$out" in *"ROUNDS=x: expected a positive integer"*) ;; *) echo "$out"; exit 1;; esac
    out=$(INSTR=yes bash "$ranksnap" HEAD 2>&1); test $? -eq 2 || exit 1
    case "$out" in *"INSTR=yes: expected 0 or 1"*) ;; *) echo "$out"; exit 1;; esac
}

shift 2
command -v "case_$name" >/dev/null || { echo "usage_errors.sh: no case '$name'" >&2; exit 2; }
"case_$name" "$@"
