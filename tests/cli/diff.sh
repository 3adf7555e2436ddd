#!/bin/sh
# `ranksnap diff BEFORE AFTER`: two runs of the demo (before as is; after, pipeline stage 2's
# activations 1.2 times larger and rank 5 leaking 16 MiB a step), the same 16-rank job against
# an 8-rank one (paired by role and replica index), files of an older format, real PyTorch
# pickles of two runs, the gate's exit status, and input refused with exit 2.
# usage: diff.sh CASE RANKSNAP DIR PYTHON [MPIEXEC DEMO]
#   DIR: the demo's runs (the fixture writes them), or a scratch folder for the other cases
set -u
name=$1 ranksnap=$2 dir=$3 py=${4-python3} mpiexec=${5-} demo=${6-}

# expect TEXT WHAT...: every WHAT is in TEXT
expect() {
    text=$1; shift
    for s in "$@"; do
        case "$text" in *"$s"*) ;; *) echo "FAILED: missing: $s"; exit 1;; esac
    done
}

# the demo's runs, recorded from step 2 to 5 on the sim backend: b16 and a16 (16 ranks, --pp 4),
# b8 (8 ranks, --pp 4), each with roles found from its MPI communicators
case_fixture() {
    rm -rf "$dir" && mkdir -p "$dir"
    export RANKSNAP_BACKEND=sim RANKSNAP_STEPS=2:6 RANKSNAP_REPORT=0 OMPI_MCA_rmaps_base_oversubscribe=1
    run() {
        out=$1 np=$2; shift 2
        "$mpiexec" -np "$np" --oversubscribe --allow-run-as-root --mca btl self,vader \
            env RANKSNAP_DIR="$dir/$out" "$demo" --iters 8 --quiet --pp 4 "$@" \
            > "$dir/$out.stdout" 2> "$dir/$out.stderr" || { echo "mpirun of $out failed"; cat "$dir/$out.stderr"; exit 1; }
    }
    run b16 16
    run a16 16 --stage-activations 2:1.2 --leak 5:16MiB
    run b8 8
}

# the stage whose activations grew, the leaking replica, their sites and the step they part at
case_demo_names_the_stage_the_replica_and_the_sites() {
    out=$("$ranksnap" diff "$dir/b16" "$dir/a16"); rc=$?; echo "$out"; test $rc -eq 0 || exit 1
    expect "$out" "ranks paired by rank: both runs have the same 16 ranks in the same 4 roles" \
        "role group 2 grew: median peak +32.00 MiB (+9.8%" "from step 2, a constant offset: " \
        "at block_activations (demo.c:" "4 of its ranks changed alike" \
        "rank 5 (group 1, replica 1) peaks higher: +80.00 MiB (+19%" \
        "growing +16.00 MiB per step since step 2 (a leak?)" "at leaky_cache (demo.c:" "(added)" \
        "the runs part at step 2"
    "$ranksnap" diff --json "$dir/b16" "$dir/a16" > "$dir/demo.json" || exit 1
    "$py" - "$dir/demo.json" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["paired_by"] == "rank" and d["changed_ranks"] == 5, (d["paired_by"], d["changed_ranks"])
changed = sorted(p["after_rank"] for p in d["pairs"] if p["changed"])
assert changed == [5, 8, 9, 10, 11], changed
roles = {g["role"]: g for g in d["roles"]}
g2 = roles["group 2"]
assert g2["changed"] and g2["why"]["sites"][0]["function"] == "block_activations", g2
assert g2["why"]["first_step"] == 2 and g2["why"]["pattern"] == "offset", g2["why"]
assert not roles["group 0"]["changed"] and not roles["group 3"]["changed"]
p5 = [p for p in d["pairs"] if p["after_rank"] == 5][0]
assert p5["role"] == "group 1" and p5["replica"] == 1 and p5["why"]["pattern"] == "growth", p5
assert any(s["function"] == "leaky_cache" and s["change"] == "added" for s in p5["why"]["sites"]), p5
assert all(p["as_its_role"] for p in d["pairs"] if p["after_rank"] in (8, 9, 10, 11))
assert d["parting_step"] == 2 and d["gate"] is None
assert len(d["runs"]["before"]) == 16 and d["runs"]["after"][5]["step_peaks"], d["runs"]["after"][5]
PY
    echo "demo: PASS"
}

# --fail-on 'peak>5%' exits 1 naming what grew; 'peak>50%' exits 0; several conditions at once
case_demo_gate_exits_1_past_5_percent_and_0_under_50() {
    out=$("$ranksnap" diff --fail-on 'peak>5%' "$dir/b16" "$dir/a16"); rc=$?; echo "$out"
    test $rc -eq 1 || { echo "FAILED: peak>5%: exit $rc, expected 1"; exit 1; }
    expect "$out" "gate: FAILED" "peak>5%: exceeded by rank 5 (+19%)" "role group 2 (+9.8%)"
    out=$("$ranksnap" diff --fail-on 'peak>50%' "$dir/b16" "$dir/a16"); rc=$?; echo "$out" | tail -3
    test $rc -eq 0 || { echo "FAILED: peak>50%: exit $rc, expected 0"; exit 1; }
    expect "$out" "gate: passed" "peak>50%: passed (largest: rank 5, +19%)"
    out=$("$ranksnap" diff --fail-on 'reserved>1GiB,headroom<4GiB' --fail-on 'outside>1MiB' --fail-on oom \
        "$dir/b16" "$dir/a16"); rc=$?; echo "$out" | tail -5
    test $rc -eq 0 || { echo "FAILED: exit $rc where no condition holds"; exit 1; }
    out=$("$ranksnap" diff --fail-on 'headroom<79.6GiB' "$dir/b16" "$dir/a16"); rc=$?; echo "$out" | tail -2
    test $rc -eq 1 || { echo "FAILED: headroom<79.6GiB: exit $rc, expected 1"; exit 1; }
    # the same run against itself: nothing changed, and the gate passes
    out=$("$ranksnap" diff --fail-on 'peak>0.1%' "$dir/b16" "$dir/b16"); rc=$?; echo "$out" | tail -4
    test $rc -eq 0 || exit 1
    expect "$out" "no rank or role changed beyond 5%"
    "$ranksnap" diff --json --fail-on 'peak>5%' "$dir/b16" "$dir/a16" | "$py" -c '
import json, sys
g = json.load(sys.stdin)["gate"]
assert g["failed"] and g["conditions"][0]["exceeded"], g
assert {h["name"] for h in g["conditions"][0]["hits"]} >= {"rank 5", "role group 2"}, g'
    test $? -eq 0 || exit 1
    echo "gate: PASS"
}

# 8 ranks before, 16 after: paired by role and replica index, the new replicas unpaired, the
# same stage and replica found
case_sixteen_ranks_against_eight_pair_by_role() {
    out=$("$ranksnap" diff --fail-on 'peak>5%' "$dir/b8" "$dir/a16"); rc=$?; echo "$out"
    test $rc -eq 1 || exit 1
    expect "$out" "ranks paired by role and replica index: 8 ranks before, 16 after, in the same 4 roles" \
        "8 ranks of after have no counterpart: replicas 2-3 of their roles" \
        "rank 5 (group 1, replica 1; rank 3 before) peaks higher" "role group 2 grew" \
        "after: ranks 2-3, 6-7, 10-11, 14-15 without a counterpart in before"
    "$ranksnap" diff --json "$dir/b8" "$dir/a16" | "$py" -c '
import json, sys
d = json.load(sys.stdin)
assert d["paired_by"] == "role" and len(d["pairs"]) == 8, d["paired_by"]
assert d["after"]["unpaired_ranks"] == [2, 3, 6, 7, 10, 11, 14, 15], d["after"]["unpaired_ranks"]
pairs = {(p["before_rank"], p["after_rank"]) for p in d["pairs"]}
assert pairs == {(0, 0), (1, 1), (2, 4), (3, 5), (4, 8), (5, 9), (6, 12), (7, 13)}, pairs
assert [(g["role"], g["ranks_before"], g["ranks_after"]) for g in d["roles"]] == [("group %d" % k, 2, 4) for k in range(4)]'
    test $? -eq 0 || exit 1
    # declared: the same stages whatever the rank order (after's replicas outermost, strided)
    "$ranksnap" diff --json --before-groups pp=4,dp=2 --after-groups dp=4,pp=4 "$dir/b8" "$dir/a16" | "$py" -c '
import json, sys
d = json.load(sys.stdin)
assert d["paired_by"] == "role", d["pairing"]
pairs = {(p["before_rank"], p["after_rank"]) for p in d["pairs"]}
assert pairs == {(0, 0), (1, 4), (2, 1), (3, 5), (4, 2), (5, 6), (6, 3), (7, 7)}, pairs'
    test $? -eq 0 || exit 1
    # roles found in one run and declared otherwise in the other: they differ, and the sizes too
    out=$("$ranksnap" diff --after-groups pp=2,dp=8 "$dir/b8" "$dir/a16"); rc=$?; echo "$out" | head -3
    test $rc -eq 0 || exit 1
    expect "$out" "ranks not paired: 8 ranks before and 16 after, and their roles do not match" \
        "--before-groups and --after-groups declare the roles"
    echo "16 against 8: PASS"
}

# version-1 files written before the optional keys existed (no devices, alloc_conf,
# outside_labels, communicators, steps_from, held) are read; a newer version is refused
case_older_format_files_are_read_and_a_newer_one_refused() {
    rm -rf "$dir/old" "$dir/newer" && cp -r "$dir/b16" "$dir/old" && cp -r "$dir/b16" "$dir/newer"
    "$py" - "$dir/old" "$dir/newer" <<'PY' || exit 1
import glob, msgpack, os, sys
for f in glob.glob(os.path.join(sys.argv[1], "*.rsnap")):
    d = msgpack.unpackb(open(f, "rb").read(), strict_map_key=False, raw=False)
    for k in ("devices", "communicators"):
        d.pop(k, None)
    d["allocator_settings"].pop("alloc_conf", None)
    d["allocator_settings"].pop("alloc_conf_given", None)
    d["totals"].pop("outside_labels", None)
    d["time"].pop("steps_from", None)
    d["history"].pop("held", None)
    open(f, "wb").write(msgpack.packb(d))
f = os.path.join(sys.argv[2], "rank-00003.rsnap")
d = msgpack.unpackb(open(f, "rb").read(), strict_map_key=False, raw=False)
d["version"] = 2
open(f, "wb").write(msgpack.packb(d))
PY
    out=$("$ranksnap" diff --fail-on 'peak>5%' "$dir/old" "$dir/a16"); rc=$?; echo "$out"
    test $rc -eq 1 || exit 1
    expect "$out" "ranks paired by rank number (16 ranks each): the roles differ (before: no roles; after: 4 roles" \
        "rank 5 peaks higher: +80.00 MiB" "rank 8 peaks higher: +32.00 MiB"
    out=$("$ranksnap" diff "$dir/newer" "$dir/a16" 2>&1); rc=$?; echo "$out"
    test $rc -eq 2 || { echo "FAILED: a newer version: exit $rc, expected 2"; exit 1; }
    expect "$out" "rank-00003.rsnap" "version 2 is newer than this reader" "before: 1 file of"
    echo "formats: PASS"
}

# --out DIR: diff.txt, diff.json and diff.html, the page self-contained
case_out_writes_text_json_and_page() {
    rm -rf "$dir/out"
    "$ranksnap" diff --out "$dir/out" --fail-on 'peak>5%' "$dir/b16" "$dir/a16" > /dev/null
    test $? -eq 1 || exit 1
    grep -q "gate: FAILED" "$dir/out/diff.txt" || exit 1
    "$py" -m json.tool "$dir/out/diff.json" > /dev/null || exit 1
    grep -q 'id="ranksnap-data"' "$dir/out/diff.html" || exit 1
    if grep -qi 'https\?://' "$dir/out/diff.html"; then echo "FAILED: the page names a URL"; exit 1; fi
    echo "out: PASS"
}

# real PyTorch pickles of two runs (PyTorch's own _dump_snapshot, tests/data/sites): a longer
# sequence on rank 2 before, rank 1 keeping its logits every step after; and the glue's pickles
# of one GPT-2 job (gpt2_ddp4) against themselves. DIR: the unpacked tests/data.
case_real_pickles_of_two_runs_name_the_leaking_rank() {
    b="$dir/sites/longer_seq_python" a="$dir/sites/leak_python"
    out=$("$ranksnap" diff --fail-on 'peak>5%' "$b" "$a" 2>"$dir/diff-pickles.err"); rc=$?; echo "$out"; cat "$dir/diff-pickles.err"
    test $rc -eq 1 || { echo "FAILED: exit $rc, expected 1"; exit 1; }
    expect "$out" "ranks paired by rank: both runs have 4 ranks and neither has roles" \
        "rank 1 peaks higher: +176.00 MiB (+109%" \
        "within after it grows +16.00 MiB per step against its peers since step 0 (a leak?)" \
        "at site_rank (make_torch_fixtures.py:" "rank 2 peaks lower: -79.85 MiB" \
        "peak>5%: exceeded by rank 1 (+109%)"
    expect "$(cat "$dir/diff-pickles.err")" "reading its 4 PyTorch pickles, each one's rank from the number in its name"
    out=$("$ranksnap" diff --fail-on 'peak>200%' "$b" "$a" 2>/dev/null); test $? -eq 0 || exit 1
    out=$("$ranksnap" diff --fail-on 'peak>1%' "$dir/gpt2_ddp4" "$dir/gpt2_ddp4"); rc=$?; echo "$out" | tail -3
    test $rc -eq 0 || exit 1
    expect "$out" "no rank changed beyond 5%"
    # PyTorch's snapshots do not record the device's size: a headroom condition cannot be checked
    out=$("$ranksnap" diff --fail-on 'headroom<4GiB' "$b" "$a" 2>&1); rc=$?; echo "$out" | tail -1
    test $rc -eq 2 || { echo "FAILED: headroom on pickles: exit $rc, expected 2"; exit 1; }
    expect "$out" "--fail-on 'headroom<4GiB' cannot be checked: no rank of"
    echo "pickles: PASS"
}

# refused with exit 2, each with a message naming what and what was expected. DIR: a scratch
# folder; REPORT (the 7th argument): the folders of `fixtures.sh report`
case_refuses_bad_input_with_exit_2() {
    rep=${7-}
    rm -rf "$dir/bad" && mkdir -p "$dir/bad/empty" && cp -r "$rep/job-a" "$dir/bad/job-a"
    cp -r "$rep/job-a" "$dir/bad/garbage" && cp "$rep/garbage.rsnap" "$dir/bad/garbage/rank-00009.rsnap"
    refused() {
        want=$1; shift
        out=$("$ranksnap" diff "$@" 2>&1); rc=$?
        echo "$out" | grep -v '^ ' | head -3
        test $rc -eq 2 || { echo "FAILED: diff $*: exit $rc, expected 2"; exit 1; }
        expect "$out" "$want"
    }
    refused "before: $dir/bad/nope: No such file or directory (no run to compare)" "$dir/bad/nope" "$rep/job-a"
    refused "expected two runs: BEFORE and AFTER" "$rep/job-a"
    refused "expected two runs, BEFORE and AFTER, not more" "$rep/job-a" "$rep/job-a" "$rep/job-a"
    refused "no rank-*.rsnap files in this directory" "$dir/bad/empty" "$rep/job-a"
    refused "a gate over part of a run would pass what it did not see" "$rep/job-a" "$dir/bad/garbage"
    refused "rank-00009.rsnap" "$rep/job-a" "$dir/bad/garbage"
    refused "has no file for 1 of the job's 4 ranks (rank 2)" "$rep/job-a" "$rep/missing"
    refused "--allow-missing compares the ranks there are" "$rep/job-a" "$rep/missing"
    refused "--fail-on 'peek>5%': expected a measure: peak, reserved, outside, headroom or oom" \
        --fail-on 'peek>5%' "$rep/job-a" "$rep/job-a"
    refused "--fail-on 'peak<5%': expected > and a limit" --fail-on 'peak<5%' "$rep/job-a" "$rep/job-a"
    refused "--fail-on 'peak>lots': expected a percentage (5%) or a size" --fail-on 'peak>lots' "$rep/job-a" "$rep/job-a"
    refused "--fail-on expects a condition" "$rep/job-a" "$rep/job-a" --fail-on
    refused "--groups pp=3,dp=2 describes 6 ranks, but before has 4" --groups pp=3,dp=2 "$rep/job-a" "$rep/job-a"
    refused "--threshold '0': expected a percentage" --threshold 0 "$rep/job-a" "$rep/job-a"
    refused "unknown option '--frobnicate'" --frobnicate "$rep/job-a" "$rep/job-a"
    # what --allow-missing lets through: the ranks there are, compared
    out=$("$ranksnap" diff --allow-missing "$rep/job-a" "$rep/missing"); rc=$?; echo "$out" | head -2
    test $rc -eq 0 || exit 1
    expect "$out" "before: rank 2 without a counterpart in after"
    echo "refused: PASS"
}

# two jobs too large to keep in memory (3 ranks of 300,000 events each: 6 files, 3 times their
# bytes expected, above 64 MiB): their totals are read first, the rank that changed is read
# again whole, and its sites and step are those of a small job's diff; the same with one thread
# or two. DIR: a scratch folder; RANK_PROG (the 5th argument): report_bench_rank.
case_jobs_too_large_to_keep_read_their_totals_first() {
    rank_prog=$5
    rm -rf "$dir" && mkdir -p "$dir/before" "$dir/after" || exit 1
    for r in 0 1 2; do
        RANKSNAP_DIR="$dir/before" "$rank_prog" --rank $r --size 3 --events 300000 --diverge-rank 3 || exit 1
        RANKSNAP_DIR="$dir/after" "$rank_prog" --rank $r --size 3 --events 300000 --diverge-rank 1 || exit 1
    done
    total=$(cat "$dir"/before/rank-*.rsnap "$dir"/after/rank-*.rsnap | wc -c)
    echo "six ranks, $total bytes"
    test "$total" -gt $((64 * 1024 * 1024 / 3)) || { echo "the files are too small to be read in two passes"; exit 1; }
    for j in 1 2; do
        "$ranksnap" diff --jobs $j --fail-on 'peak>5%' "$dir/before" "$dir/after" > "$dir/jobs-$j.txt"
        test $? -eq 1 || { echo "FAILED: --jobs $j: not exit 1"; exit 1; }
    done
    cat "$dir/jobs-1.txt"
    cmp "$dir/jobs-1.txt" "$dir/jobs-2.txt" || exit 1
    expect "$(cat "$dir/jobs-1.txt")" "rank 1 peaks higher: +16.00 MiB" "from step 0, a constant offset"         "+16.00 MiB at site_divergent_buffer (bench_sites.h:" "(added)" "peak>5%: exceeded by rank 1"
    "$ranksnap" diff --json "$dir/before" "$dir/after" | "$py" -c '
import json, sys
d = json.load(sys.stdin)
p = {x["after_rank"]: x for x in d["pairs"]}
assert [r for r in p if p[r]["changed"]] == [1], d["pairs"]
w = p[1]["why"]
assert w["sites_in_full"] and w["pattern"] == "offset" and w["first_step"] == 0, w
# the rank read again has its whole summary; the others, their totals alone
assert p[1]["after"]["fragmentation"] is not None and p[0]["after"]["fragmentation"] is None, p
assert d["runs"]["after"][1]["step_peaks"] and not d["runs"]["after"][0]["step_peaks"]'
    test $? -eq 0 || exit 1
    echo "large jobs: PASS"
}

command -v "case_$name" >/dev/null || { echo "diff.sh: no case '$name'" >&2; exit 2; }
"case_$name" "$@"
