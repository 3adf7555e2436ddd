#!/bin/sh
# The folders the `ranksnap` tests read, written once per ctest run (FIXTURES_SETUP); any step
# that fails fails the fixture, and with it the tests that need it.
# usage: fixtures.sh CASE WRITER DIR
set -eu
name=$1 writer=$2 dir=$3

# test_report --write (WRITER), one process per rank: job-a (rank 2's activations 1.5 times
# larger), job-b (ranks 2 and 3 of another job), missing (rank 2 of 4 absent), a garbage file
case_report() {
    rm -rf "$dir"
    mkdir -p "$dir"
    "$writer" --write "$dir/job-a" --job job-A
    "$writer" --write "$dir/job-b" --job job-B --ranks 2,3
    "$writer" --write "$dir/missing" --job job-A --ranks 0,1,3 --world 4
    printf 'not a snapshot' > "$dir/garbage.rsnap"
}

# the demo (WRITER), one rank on the sim backend, into run/; and a garbage file
case_torch() {
    rm -rf "$dir"
    mkdir -p "$dir"
    RANKSNAP_DIR="$dir/run" "$writer" --iters 3 --quiet
    printf 'not a snapshot' > "$dir/garbage.rsnap"
}

# PyTorch-like snapshots from make_torch_like_pickle.py (WRITER); one/ holds only the OOM rank's
# file, named as OOM observers name it; global.pickle is
# pickle.dumps(collections.OrderedDict(), protocol=2), which needs code to load. Nothing without
# python3: the tests that read it skip then.
case_pickle() {
    command -v python3 >/dev/null || exit 0
    rm -rf "$dir"
    mkdir -p "$dir/one"
    python3 "$writer" "$dir"
    python3 "$writer" "$dir/one" --only-rank 3 --oom-name 'oom_rank-{rank}_gpt2.pickle'
    printf '\200\002ccollections\nOrderedDict\nq\000)Rq\001.' > "$dir/global.pickle"
}

# twelve ranks of one job (test_report --write, WRITER): enough for a progress line
case_progress() {
    rm -rf "$dir"
    mkdir -p "$dir"
    "$writer" --write "$dir/run" --job job-P --ranks 0,1,2,3,4,5,6,7,8,9,10,11 --world 12
}

command -v "case_$name" >/dev/null || { echo "fixtures.sh: no case '$name'" >&2; exit 2; }
"case_$name"
