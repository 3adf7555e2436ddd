#!/bin/sh
# Every byte named in real PyTorch jobs, recorded on two GPUs with the default settings by
# tests/gpu/torch-names.sh (tests/data/torch_names/CASE: rank-00000.pickle, rank-00001.pickle):
# `ranksnap report` over them must name every byte of the OOM rank's report and of the
# divergence (tests/python/check_named_report.py). Skips (77), saying why, while the fixture is
# not in tests/data.
# usage: torch_names_fixtures.sh CASE RANKSNAP DATA PYTHON TESTS_PYTHON_DIR WORK
set -u
name=$1 ranksnap=$2 data=$3 py=$4 src=$5 work=$6
dir=$data/torch_names/$name
if ! ls "$dir"/rank-*.pickle > /dev/null 2>&1; then
    echo "skipped: no fixture in $dir (record it with tests/gpu/torch-names.sh on two GPUs)"
    exit 77
fi
mkdir -p "$work"
"$ranksnap" report --json "$dir" > "$work/$name.json" || exit 1
"$ranksnap" report "$dir" > "$work/$name.txt" || exit 1
"$py" "$src/check_named_report.py" "$name" "$work/$name.json" "$work/$name.txt" "$dir"/rank-*.pickle
