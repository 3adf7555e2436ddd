#!/bin/sh
# `ranksnap` refuses what it cannot do with the exit code that says why: 2 for a usage error
# (naming the verb or flag), 1 for a file that cannot be read (naming the file).
# usage: usage_errors.sh CASE RANKSNAP [FILE]
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

# `collect` without both directories, or with a misspelt flag: 2, naming what is wrong
case_collect_usage_errors() {
    err=$("$ranksnap" collect --from /tmp 2>&1); test $? -eq 2 || exit 1
    case "$err" in *'--from DIR and --to DIR are both needed'*) ;; *) exit 1;; esac
    err=$("$ranksnap" collect --frm x --to y 2>&1); test $? -eq 2 || exit 1
    case "$err" in *"unexpected '--frm'"*) ;; *) exit 1;; esac
}

shift 2
command -v "case_$name" >/dev/null || { echo "usage_errors.sh: no case '$name'" >&2; exit 2; }
"case_$name" "$@"
