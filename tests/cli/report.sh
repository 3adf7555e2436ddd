#!/bin/sh
# `ranksnap report` on the folders of `fixtures.sh report` (DIR): the verdict in text and JSON,
# --out, missing ranks, snapshots of another job or of one rank twice, unreadable files, usage
# errors, the divergence threshold, and its --help.
# usage: report.sh CASE RANKSNAP [DIR]
set -u
name=$1 ranksnap=$2 dir=${3-}

# the text names rank 2 as above the median, from step 0, at its site, and the reference rank
case_flags_the_rank_above_the_median() {
    out=$("$ranksnap" report "$dir/job-a"); rc=$?; echo "$out"; test $rc -eq 0 || exit 1
    for s in 'rank 2 peaks 25% above the median' 'from step 0, a constant offset' 'layer_activation (test_report.c:' 'reference'; do
        case "$out" in *"$s"*) ;; *) echo "missing: $s"; exit 1;; esac; done
}

# --json parses and has every key of the schema, with rank 2 divergent by an offset (77 without
# python3)
case_json_parses_with_the_schema_keys() {
    command -v python3 >/dev/null || exit 77
    "$ranksnap" report --json "$dir/job-a" | python3 -c 'import json, sys
r = json.load(sys.stdin)
for k in ("world_size", "reference_rank", "median_peak_allocated", "ranks", "missing_ranks", "oom_ranks", "divergent_ranks", "notes"):
    assert k in r, k
for k in ("rank", "host", "peak_allocated", "peak_reserved", "reserved_at_peak", "fragmentation", "outside_peak", "peak_step", "peak_time_us", "oom", "complete", "events", "dropped", "step_peaks"):
    assert all(k in x for x in r["ranks"]), k
assert [x["rank"] for x in r["ranks"]] == [0, 1, 2, 3]
d = r["divergent_ranks"]
assert len(d) == 1 and d[0]["rank"] == 2 and d[0]["pattern"] == "offset", d
assert d[0]["first_divergent_step"] == 0 and d[0]["sites"][0]["function"] == "layer_activation", d
assert set(d[0]["sites"][0]) == {"function", "file", "line", "path", "bytes_delta"}
assert d[0]["sites"][0]["path"] == [{"function": "layer_activation", "file": d[0]["sites"][0]["file"], "line": d[0]["sites"][0]["line"]}], d
for k in ("growth_bytes_per_step", "growth_t", "capacity", "exhaust_step", "delta_bytes", "unattributed_bytes"):
    assert k in d[0], k
assert r["missing_ranks"] == [] and r["no_data_ranks"] == [] and r["oom_ranks"] == [] and r["reference_rank"] != 2'
}

# --out DIR writes report.txt and report.json (valid JSON where python3 can tell)
case_out_writes_report_txt_and_json() {
    rm -rf "$dir/out"; "$ranksnap" report --out "$dir/out" "$dir/job-a" >/dev/null || exit 1
    grep -q 'above the median' "$dir/out/report.txt" && grep -q '"divergent_ranks"' "$dir/out/report.json" || exit 1
    if command -v python3 >/dev/null; then python3 -m json.tool "$dir/out/report.json" >/dev/null || exit 1; fi
}

# a rank absent from the folder is named missing, in the text and the JSON
case_names_the_missing_rank() {
    out=$("$ranksnap" report "$dir/missing"); test $? -eq 0 || exit 1; echo "$out"
    case "$out" in *'missing: rank 2 ('*) ;; *) exit 1;; esac
    "$ranksnap" report --json "$dir/missing" | grep -q '"missing_ranks": \[2\]'
}

# snapshots of another job are left out, with a message naming both jobs, the files and
# --allow-mixed-jobs; with that flag they are read, and noted
case_leaves_out_snapshots_of_another_job() {
    a="$dir/job-a"; b="$dir/job-b"
    out=$("$ranksnap" report "$a/rank-00000.rsnap" "$a/rank-00001.rsnap" "$b" 2>"$dir/err-jobs"); rc=$?; err=$(cat "$dir/err-jobs"); echo "$err"; echo "$out"
    test $rc -eq 0 || exit 1
    for s in job-A job-B rank-00000.rsnap rank-00002.rsnap --allow-mixed-jobs; do
        case "$err" in *"$s"*) ;; *) echo "missing: $s"; exit 1;; esac; done
    case "$out" in *'rank-00002.rsnap could not be read'*) ;; *) exit 1;; esac
    out=$("$ranksnap" report --allow-mixed-jobs "$a/rank-00000.rsnap" "$a/rank-00001.rsnap" "$b") || exit 1
    case "$out" in *'rank 2 belongs to job job-B, rank 0 to job job-A'*) ;; *) exit 1;; esac
}

# two snapshots of one rank: 1, naming both files
case_refuses_two_snapshots_of_one_rank() {
    err=$("$ranksnap" report "$dir/job-a" "$dir/missing/rank-00001.rsnap" 2>&1 >/dev/null); rc=$?; echo "$err"
    test $rc -eq 1 && case "$err" in *'job-a/rank-00001.rsnap and '*'missing/rank-00001.rsnap are both rank 1'*) ;; *) exit 1;; esac
}

# an unreadable file is an error on stderr and a line in the report, which goes on with the rest
case_goes_on_past_an_unreadable_file() {
    out=$("$ranksnap" report "$dir/job-a" "$dir/garbage.rsnap" 2>"$dir/err"); rc=$?; echo "$out"; cat "$dir/err"
    test $rc -eq 0 && grep -q '^ranksnap: .*garbage.rsnap' "$dir/err" || exit 1
    case "$out" in *'garbage.rsnap could not be read'*'') ;; *) exit 1;; esac
    case "$out" in *'rank 2 peaks'*) ;; *) exit 1;; esac
}

# nothing readable at all: 1
case_fails_when_nothing_can_be_read() {
    "$ranksnap" report "$dir/garbage.rsnap" "$dir/no-such-dir/"; test $? -eq 1
}

# no input, an unknown flag, --out without its folder, a bad --divergence or RANKSNAP_DIVERGENCE,
# a bad --attempt, a --site-skip pattern too long: 2, naming the bad value; an attempt with no file: 1
case_usage_errors() {
    "$ranksnap" report; test $? -eq 2 || exit 1
    "$ranksnap" report --frobnicate "$dir/job-a"; test $? -eq 2 || exit 1
    "$ranksnap" report "$dir/job-a" --out; test $? -eq 2 || exit 1
    err=$("$ranksnap" report --divergence lots "$dir/job-a" 2>&1); test $? -eq 2 || exit 1
    case "$err" in *"--divergence 'lots'"*) ;; *) exit 1;; esac
    err=$(RANKSNAP_DIVERGENCE=lots "$ranksnap" report "$dir/job-a" 2>&1); test $? -eq 2 || exit 1
    case "$err" in *'RANKSNAP_DIVERGENCE=lots'*) ;; *) exit 1;; esac
    err=$("$ranksnap" report --attempt x "$dir/job-a" 2>&1); test $? -eq 2 || exit 1
    case "$err" in *'--attempt expects an attempt number'*) ;; *) echo "$err"; exit 1;; esac
    for bad in -1 1x 1000001; do
        "$ranksnap" report --attempt "$bad" "$dir/job-a" 2>/dev/null; test $? -eq 2 || { echo "--attempt '$bad' taken"; exit 1; }
    done
    long=$(printf '%0300d' 0)
    err=$("$ranksnap" report --site-skip "$long" "$dir/job-a" 2>&1); test $? -eq 2 || exit 1
    case "$err" in *"--site-skip '0"*'expected at most'*) ;; *) echo "$err"; exit 1;; esac
    # an attempt the folder has no file of: 1, saying which attempts it has
    err=$("$ranksnap" report --attempt 5 "$dir/job-a" 2>&1); test $? -eq 1 || exit 1
    case "$err" in *'--attempt 5: no file of that attempt (the files are of attempt 0)'*) ;; *) echo "$err"; exit 1;; esac
}

# the threshold comes from RANKSNAP_DIVERGENCE, and --divergence wins over it
case_divergence_from_the_flag_or_the_environment() {
    out=$(RANKSNAP_DIVERGENCE=30 "$ranksnap" report "$dir/job-a") || exit 1
    case "$out" in *'no rank diverges beyond 30% of the median'*) ;; *) exit 1;; esac
    out=$(RANKSNAP_DIVERGENCE=1 "$ranksnap" report --divergence 30% "$dir/job-a") || exit 1
    case "$out" in *'no rank diverges beyond 30% of the median'*) ;; *) exit 1;; esac
    out=$(RANKSNAP_DIVERGENCE=20 "$ranksnap" report --divergence=1 "$dir/job-a") || exit 1
    case "$out" in *'rank 2 peaks 25% above'*) ;; *) exit 1;; esac
}

# --help lists the verb, and `report --help` its --allow-mixed-jobs
case_help_lists_report() {
    "$ranksnap" --help | grep -q '^  report   DIR|FILE...' && "$ranksnap" report --help | grep -q -- '--allow-mixed-jobs'
}

command -v "case_$name" >/dev/null || { echo "report.sh: no case '$name'" >&2; exit 2; }
"case_$name"
