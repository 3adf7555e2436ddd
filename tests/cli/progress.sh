#!/bin/sh
# `ranksnap report` on the twelve rank files of `fixtures.sh progress` (DIR): a progress line on a
# terminal only (script(1) gives the command a pty; 77 without it), --no-progress, and --html.
# usage: progress.sh CASE RANKSNAP DIR
set -u
name=$1 ranksnap=$2 dir=$3

# with stderr on a terminal, a progress line counts the files read
case_shows_progress_when_stderr_is_a_terminal() {
    command -v script >/dev/null || { echo 'SKIPPED: no script(1) to give the command a terminal'; exit 77; }
    out=$(script -qec "'$ranksnap' report '$dir/run' >/dev/null" /dev/null) || exit 1
    printf '%s' "$out" | od -c | head -12
    case "$out" in *'ranksnap report: reading 12/12 files'*) ;; *) echo 'no progress line'; exit 1;; esac
}

# with stderr not a terminal, nothing on it; the report and its page are still written
case_is_quiet_when_stderr_is_not_a_terminal() {
    "$ranksnap" report --out "$dir/out" "$dir/run" > "$dir/quiet.out" 2> "$dir/quiet.err" || exit 1
    test -s "$dir/quiet.out" && test ! -s "$dir/quiet.err" || { cat "$dir/quiet.err"; exit 1; }
    test -s "$dir/out/report.html"
}

# --no-progress keeps a terminal quiet
case_no_progress_keeps_a_terminal_quiet() {
    command -v script >/dev/null || { echo 'SKIPPED: no script(1) to give the command a terminal'; exit 77; }
    out=$(script -qec "'$ranksnap' report --no-progress '$dir/run' >/dev/null" /dev/null) || exit 1
    case "$out" in *reading*) echo "progress despite --no-progress: $out"; exit 1;; esac
}

# --html PATH writes one page with the ranks' data; --html without a path is 2
case_html_writes_one_page_and_needs_a_path() {
    rm -f "$dir/page.html"; "$ranksnap" report --html "$dir/page.html" "$dir/run" >/dev/null || exit 1
    grep -q 'id="ranksnap-data"' "$dir/page.html" || exit 1
    test "$(grep -c '"rank":[0-9]*,"complete"' "$dir/page.html")" -ge 1 || exit 1
    "$ranksnap" report "$dir/run" --html; test $? -eq 2 || exit 1
    "$ranksnap" report --html= "$dir/run"; test $? -eq 2
}

command -v "case_$name" >/dev/null || { echo "progress.sh: no case '$name'" >&2; exit 2; }
"case_$name"
