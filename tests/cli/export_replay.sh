#!/bin/sh
# `ranksnap export --torch` and `ranksnap replay` on the demo's snapshot of `fixtures.sh torch`
# (DIR): the pickle as PyTorch's viewer reads it, the same bytes from a file or its rank, the
# replay's numbers, and the errors, each with its exit code.
# usage: export_replay.sh CASE RANKSNAP [DIR]
set -u
name=$1 ranksnap=$2 dir=${3-}

# python3 loads the export with the keys and types the viewer reads, one alloc entry per
# allocation the summary counts (77 without python3)
case_export_torch_pickle_loads_in_python_as_the_viewer_reads_it() {
    command -v python3 >/dev/null || exit 77
    "$ranksnap" export --torch --rank 0 "$dir/run" -o "$dir/r0.pickle" || exit 1
    n=$("$ranksnap" summary "$dir/run/rank-00000.rsnap" | sed -n 's/^ *calls *\([0-9]*\) allocs.*/\1/p')
    test -n "$n" || exit 1
    python3 -c 'import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
assert sorted(d) == ["allocator_settings", "device_traces", "external_annotations", "segments"], list(d)
assert isinstance(d["segments"], list) and d["segments"] and isinstance(d["device_traces"], list)
tr = d["device_traces"][0]
assert sum(e["action"] == "alloc" for e in tr) == int(sys.argv[2]), sys.argv[2]
for e in tr:
    assert all(isinstance(e[k], int) for k in ("addr", "size", "stream", "time_us")), e
    assert isinstance(e["frames"], list) and e["compile_context"] == "N/A", e
fr = [f for e in tr for f in e["frames"]]
assert fr and all(sorted(f) == ["filename", "line", "name"] for f in fr)
assert all(isinstance(f["name"], str) and isinstance(f["filename"], str) and isinstance(f["line"], int) for f in fr)
assert any(f["name"] == "block_activations" for f in fr)
for s in d["segments"]:
    assert s["segment_type"] in ("small", "large") and s["segment_pool_id"] == (0, 0), s
    assert sum(b["size"] for b in s["blocks"]) == s["total_size"], s
    assert all(b["state"] in ("active_allocated", "active_pending_free", "inactive") for b in s["blocks"])
a = d["external_annotations"]
assert any(x["name"] == "ProfilerStep#0" and x["stage"] == "START" for x in a), a
print(len(tr), "trace entries")' "$dir/r0.pickle" "$n"
}

# exporting the file and exporting its rank from the folder give the same bytes
case_export_of_a_file_and_of_its_rank_in_the_dir_agree() {
    "$ranksnap" export --torch "$dir/run/rank-00000.rsnap" -o "$dir/a.pickle" &&
        "$ranksnap" export --rank=0 --torch -o "$dir/b.pickle" "$dir/run" && cmp "$dir/a.pickle" "$dir/b.pickle"
}

# each misuse of export is 2 with a message saying what was expected, and writes nothing
case_export_usage_errors() {
    f="$dir/run/rank-00000.rsnap"; o="$dir/usage.pickle"
    err=$("$ranksnap" export "$f" -o "$o" 2>&1); test $? -eq 2 || exit 1
    case "$err" in *'expected --torch'*) ;; *) exit 1;; esac
    err=$("$ranksnap" export --torch --rank 0 "$f" -o "$o" 2>&1); test $? -eq 2 || exit 1
    case "$err" in *'is not a directory'*) ;; *) exit 1;; esac
    err=$("$ranksnap" export --torch "$dir/run" -o "$o" 2>&1); test $? -eq 2 || exit 1
    case "$err" in *'pass --rank R'*) ;; *) exit 1;; esac
    err=$("$ranksnap" export --torch --frobnicate "$f" -o "$o" 2>&1); test $? -eq 2 || exit 1
    case "$err" in *"unknown option '--frobnicate'"*) ;; *) exit 1;; esac
    err=$("$ranksnap" export --torch "$f" 2>&1); test $? -eq 2 || exit 1
    case "$err" in *'expected -o OUT.pickle'*) ;; *) exit 1;; esac
    err=$("$ranksnap" export --torch --rank x "$dir/run" -o "$o" 2>&1); test $? -eq 2 || exit 1
    case "$err" in *"--rank 'x'"*) ;; *) exit 1;; esac
    for bad in -1 100000 3x 99999999999999999999999; do
        err=$("$ranksnap" export --torch --rank "$bad" "$dir/run" -o "$o" 2>&1); test $? -eq 2 || exit 1
        case "$err" in *"--rank '$bad': expected a rank number from 0 to 99999"*) ;; *) echo "$err"; exit 1;; esac
    done
    "$ranksnap" export --torch "$f" "$f" -o "$o"; test $? -eq 2 || exit 1
    test ! -e "$o"
}

# a missing file, a garbage file or a missing rank: 1, naming the file, and nothing written
case_export_names_the_file_it_cannot_read() {
    o="$dir/bad.pickle"
    err=$("$ranksnap" export --torch "$dir/no-such.rsnap" -o "$o" 2>&1); test $? -eq 1 || exit 1
    case "$err" in 'ranksnap export: '*'no-such.rsnap'*) ;; *) exit 1;; esac
    err=$("$ranksnap" export --torch "$dir/garbage.rsnap" -o "$o" 2>&1); test $? -eq 1 || exit 1
    case "$err" in 'ranksnap export: '*'garbage.rsnap'*) ;; *) exit 1;; esac
    err=$("$ranksnap" export --torch --rank 7 "$dir/run" -o "$o" 2>&1); test $? -eq 1 || exit 1
    case "$err" in *'rank-00007.rsnap'*) ;; *) exit 1;; esac
    test ! -e "$o"
}

# a folder two jobs shared (the second's files job-qualified, docs/POSTMORTEM.md): --rank R
# refuses to guess between them, naming both files (1, nothing written); a folder where only the
# second job has rank R exports that job's file
case_export_rank_of_a_folder_two_jobs_shared() {
    two="$dir/two-jobs"; o="$dir/two.pickle"
    rm -rf "$two" && mkdir -p "$two" || exit 1
    cp "$dir/run/rank-00000.rsnap" "$two/rank-00000.rsnap" &&
        cp "$dir/run/rank-00000.rsnap" "$two/rank-00000.job-other.rsnap" || exit 1
    err=$("$ranksnap" export --torch --rank 0 "$two" -o "$o" 2>&1); test $? -eq 1 || { echo "$err"; exit 1; }
    case "$err" in *'more than one job'*'rank-00000.job-other.rsnap'*|*'more than one job'*'rank-00000.rsnap, rank-00000.job-other'*) ;; *) echo "$err"; exit 1;; esac
    test ! -e "$o" || exit 1
    rm "$two/rank-00000.rsnap"
    "$ranksnap" export --torch --rank 0 "$two" -o "$o" || exit 1
    "$ranksnap" export --torch "$two/rank-00000.job-other.rsnap" -o "$dir/qualified.pickle" &&
        cmp "$o" "$dir/qualified.pickle"
}

# the replay's peak allocated is the original's, and its JSON says the history was whole
# (77 without python3)
case_replay_reproduces_the_original_peak_allocated() {
    command -v python3 >/dev/null || exit 77
    "$ranksnap" replay --json "$dir/run/rank-00000.rsnap" | python3 -c 'import json, sys
r = json.load(sys.stdin)
o, s = r["original"], r["ranksnap"]
assert o["peak_allocated"] == s["peak_allocated"] > 0, r
assert s["peak_reserved"] >= s["peak_allocated"] and o["peak_reserved"] >= o["peak_allocated"], r
assert r["events"] > 0 and r["incomplete"] is False and r["inconsistent_events"] == 0, r'
}

# the text shows both sides, their peaks and the reserved / allocated ratio
case_replay_prints_both_sides_with_ratios() {
    out=$("$ranksnap" replay "$dir/run/rank-00000.rsnap") || exit 1; echo "$out"
    for s in original ranksnap 'peak allocated' 'peak reserved' 'reserved / allocated'; do
        case "$out" in *"$s"*) ;; *) echo "missing: $s"; exit 1;; esac; done
}

# a missing or garbage file: 1, naming it; no file, an unknown flag or two files: 2
case_replay_bad_input() {
    err=$("$ranksnap" replay "$dir/no-such.rsnap" 2>&1); test $? -eq 1 || exit 1
    case "$err" in 'ranksnap replay: '*'no-such.rsnap'*) ;; *) exit 1;; esac
    err=$("$ranksnap" replay "$dir/garbage.rsnap" 2>&1); test $? -eq 1 || exit 1
    case "$err" in 'ranksnap replay: '*'garbage.rsnap'*) ;; *) exit 1;; esac
    "$ranksnap" replay; test $? -eq 2 || exit 1
    "$ranksnap" replay --frobnicate "$dir/garbage.rsnap"; test $? -eq 2 || exit 1
    "$ranksnap" replay "$dir/garbage.rsnap" "$dir/garbage.rsnap"; test $? -eq 2
}

# A what-if that runs out of memory (a device smaller than one of the trace's requests; segments
# larger than the device) says so first and is never called a saving; a device below the
# smallest segment is a usage error naming the flag.
case_replay_whatif_that_runs_out_of_memory_is_no_saving() {
    f="$dir/run/rank-00000.rsnap"
    for what in "--device-memory 2MiB" "--alloc-conf large_segment_size_mb:18446744073709551615"; do
        out=$("$ranksnap" replay $what "$f") || { echo "$what: exit status $?"; exit 1; }
        echo "$out"
        said=$(echo "$out" | grep -n "^the what-if runs out of memory at event " | cut -d: -f1)
        table=$(echo "$out" | grep -n "original  *replayed  *what-if" | cut -d: -f1)
        test -n "$said" && test "$said" -lt "$table" || { echo "$what: not said first"; exit 1; }
        echo "$out" | grep -q "so it is no saving" || { echo "$what: no saving not said"; exit 1; }
        ! echo "$out" | grep -q "less than the replay's" || { echo "$what: called a saving"; exit 1; }
    done
    "$ranksnap" replay --alloc-conf large_segment_size_mb:18446744073709551615 "$f" |
        grep -q "^absurd: large_segment_size_mb:17592186044415 asks for segments larger than the device (80.00 GiB)" ||
        { echo "the absurd segment size not named"; exit 1; }
    "$ranksnap" replay --json --device-memory 2MiB "$f" | grep -q '"failed": true' || { echo "JSON: not failed"; exit 1; }
    "$ranksnap" replay --json --device-memory 80GiB "$f" | grep -q '"failed": false' || { echo "JSON: failed"; exit 1; }
    err=$("$ranksnap" replay --device-memory 1 "$f" 2>&1); rc=$?; echo "$err"
    test $rc -eq 2 || { echo "--device-memory 1: exit status $rc"; exit 1; }
    case "$err" in *"--device-memory '1': expected a size from 2MiB"*) ;; *) exit 1;; esac
    err=$("$ranksnap" replay --device-memory 18446744073709551615 "$f" 2>&1); rc=$?; echo "$err"
    test $rc -eq 2 || { echo "--device-memory 2^64-1: exit status $rc"; exit 1; }
    case "$err" in *"expected a size from 2MiB (the allocator's smallest segment) to 1PiB"*) ;; *) exit 1;; esac
}

# export, then the pickle decoder, then replay: the same numbers as from the .rsnap
case_replay_of_the_exported_pickle_matches_the_rsnap() {
    "$ranksnap" export --torch "$dir/run/rank-00000.rsnap" -o "$dir/rt.pickle" >/dev/null || exit 1
    a=$("$ranksnap" replay --json "$dir/run/rank-00000.rsnap" | grep -E '"(original|ranksnap|allocs|frees)"') || exit 1
    b=$("$ranksnap" replay --json "$dir/rt.pickle" | grep -E '"(original|ranksnap|allocs|frees)"') || exit 1
    echo "$a"; echo "$b"; test "$a" = "$b"
}

# --help lists both verbs, and each verb's --help its options
case_help_lists_export_and_replay() {
    "$ranksnap" --help | grep -q '^  export ' && "$ranksnap" --help | grep -q '^  replay ' &&
        "$ranksnap" export --help | grep -q -- '--rank R DIR' && "$ranksnap" replay --help | grep -q -- '--json'
}

command -v "case_$name" >/dev/null || { echo "export_replay.sh: no case '$name'" >&2; exit 2; }
"case_$name"
