#!/bin/sh
# `ranksnap report` on the PyTorch-like snapshots of `fixtures.sh pickle` (DIR): the divergent and
# the OOM rank named as in a .rsnap report, one OOM file alone, --all-frames, and the pickles it
# refuses. Each case skips (77) without python3, which wrote the fixtures.
# usage: report_pickles.sh CASE RANKSNAP DIR
set -u
name=$1 ranksnap=$2 dir=$3

# rank 2's larger activations and rank 3's OOM, in the text and the JSON
case_pickles_names_the_divergent_and_the_oom_rank() {
    command -v python3 >/dev/null || exit 77
    out=$("$ranksnap" report "$dir"/snapshot_rank*.pickle); rc=$?; echo "$out"; test $rc -eq 0 || exit 1
    for s in 'rank 3 ran out of memory at step 3: tried to allocate 16.00 GiB' 'rank 2 peaks 39% above the median' 'from step 0, a constant offset' 'at forward (model.py:36) → aten::linear' '4 of 4 ranks'; do
        case "$out" in *"$s"*) ;; *) echo "missing: $s"; exit 1;; esac; done
    "$ranksnap" report --json "$dir"/snapshot_rank*.pickle | python3 -c 'import json, sys
r = json.load(sys.stdin)
assert [x["rank"] for x in r["oom_ranks"]] == [3], r["oom_ranks"]
assert [x["rank"] for x in r["divergent_ranks"]] == [2], r["divergent_ranks"]
assert all(len(x["step_peaks"]) >= 4 for x in r["ranks"]), r["ranks"]'
}

# a folder of pickles named with their ranks and no rank-* file: read, each rank from its name (a
# line says so), with the verdicts of the files given one by one; global.pickle, named with no
# rank, is not read
case_folder_of_pickles_named_with_their_ranks() {
    command -v python3 >/dev/null || exit 77
    out=$("$ranksnap" report "$dir" 2>"$dir.folder.err"); rc=$?; err=$(cat "$dir.folder.err"); echo "$err"; echo "$out"
    test $rc -eq 0 || exit 1
    case "$err" in *"reading its 4 PyTorch pickles, each one's rank from the number in its name"*) ;; *) exit 1;; esac
    for s in 'rank 3 ran out of memory at step 3' 'rank 2 peaks 39% above the median' '4 of 4 ranks'; do
        case "$out" in *"$s"*) ;; *) echo "missing: $s"; exit 1;; esac; done
    out=$("$ranksnap" report "$dir/one" 2>/dev/null) || exit 1
    case "$out" in *'rank 3 ran out of memory'*) ;; *) echo "one/: not rank 3's verdict"; exit 1;; esac
}

# the OOM rank's file alone, its rank from its name: the OOM verdict, what was live, the others
# missing
case_one_oom_pickle_gives_its_verdict() {
    command -v python3 >/dev/null || exit 77
    out=$("$ranksnap" report --rank-from-name "$dir/one/oom_rank-3_gpt2.pickle"); rc=$?; echo "$out"; test $rc -eq 0 || exit 1
    for s in 'rank 3 ran out of memory' 'live at that moment' 'forward (model.py:31)' 'missing: ranks 0-2'; do
        case "$out" in *"$s"*) ;; *) echo "missing: $s"; exit 1;; esac; done
}

# --all-frames keeps PyTorch's own frames as the sites: the innermost, its stack capture
case_all_frames_keeps_torch_frames_as_sites() {
    command -v python3 >/dev/null || exit 77
    out=$("$ranksnap" report --all-frames "$dir"/snapshot_rank*.pickle) || exit 1; echo "$out"
    case "$out" in *'torch::unwind::unwind()'*) ;; *) exit 1;; esac
    case "$out" in *'model.py'*) exit 1;; esac
}

# --site-skip looks past the user's own frames too (the model's lines here, to their caller's);
# RANKSNAP_SITE_SKIP gives the same report
case_site_skip_looks_past_the_frames_it_names() {
    command -v python3 >/dev/null || exit 77
    out=$("$ranksnap" report --site-skip '*/model.py' "$dir"/snapshot_rank*.pickle) || exit 1; echo "$out"
    case "$out" in *'model.py'*) exit 1;; esac
    case "$out" in *'rank 2 peaks 39% above the median'*'at train_step (train.py:41)'*) ;; *) exit 1;; esac
    env_out=$(RANKSNAP_SITE_SKIP='*/model.py' "$ranksnap" report "$dir"/snapshot_rank*.pickle) || exit 1
    test "$env_out" = "$out" || { echo "RANKSNAP_SITE_SKIP gave another report: $env_out"; exit 1; }
}

# --rank-from-name on a name without a number: 1, saying so
case_pickle_rank_from_name_needs_a_number() {
    command -v python3 >/dev/null || exit 77
    err=$("$ranksnap" report --rank-from-name "$dir/global.pickle" 2>&1); rc=$?; echo "$err"; test $rc -eq 1 || exit 1
    case "$err" in *'global.pickle: --rank-from-name: no rank number in the file name'*) ;; *) exit 1;; esac
}

# a pickle that needs code to load: 1, naming the opcode and its offset
case_refuses_a_pickle_that_needs_code() {
    command -v python3 >/dev/null || exit 77
    err=$("$ranksnap" report "$dir/global.pickle" 2>&1); rc=$?; echo "$err"; test $rc -eq 1 || exit 1
    case "$err" in *'global.pickle: offset 2: opcode GLOBAL (0x63) is refused: a snapshot never needs code execution'*) ;; *) exit 1;; esac
}

command -v "case_$name" >/dev/null || { echo "report_pickles.sh: no case '$name'" >&2; exit 2; }
"case_$name"
