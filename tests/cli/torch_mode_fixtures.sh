#!/bin/sh
# `ranksnap report DIR` on the pickles that ranksnap wrote for a real PyTorch job on the GPU machine
# (tests/gpu/torch-issue11.sh copies them to $OUT/issue11/fixtures; committed as
# tests/data/torch_mode/mpirun-a and mpirun-c): the rank, world size and job come from each
# pickle's "ranksnap" key (no --rank-from-name), and the report names the rank and a Python line
# of the script or of the model, never PyTorch's machinery. A case whose folder is not there yet is
# skipped (77), saying so.
# usage: torch_mode_fixtures.sh CASE RANKSNAP DATA PYTHON
set -u
name=$1 ranksnap=$2 data=$3 python=$4

# check FOLDER PY: the report of DATA/torch_mode/FOLDER as text (checked for machinery) and as
# JSON, then the Python statements PY on it (r: the report; py(s): a site of user Python code)
check() {
    d="$data/torch_mode/$1"
    ls "$d"/rank-*.pickle > /dev/null 2>&1 ||
        { echo "SKIPPED: $d not recorded yet (tests/gpu/torch-issue11.sh on a GPU machine)"; exit 77; }
    # files of this case's own: ctest runs the cases side by side in one folder
    txt="$name.txt" json="$name.json"
    "$ranksnap" report "$d" > "$txt" || exit 1
    cat "$txt"
    if grep -n 'gather_with_cpp\|CUDACachingAllocator\|wrap_kernel_functor\|_ZN\|/torch/nn/modules/' "$txt"; then
        echo "PyTorch's machinery or a mangled name in the report"; exit 1
    fi
    "$ranksnap" report --json "$d" > "$json" || exit 1
    "$python" -c "import json, re
r = json.load(open('$json'))
def py(s): return s['file'].endswith('.py') and not re.search('(site|dist)-packages/(torch|functorch|triton)/', s['file']) and s['line'] > 0
assert len(r['ranks']) == 2 and r['missing_ranks'] == [], r['ranks']
$2
print('ok')" || exit 1
}

case $name in
torch_mode_fixture_divergent_rank_with_its_python_line)
    check mpirun-a "d = r['divergent_ranks']
assert [x['rank'] for x in d] == [1], d
assert py(d[0]['sites'][0]), d[0]['sites'][0]" ;;
torch_mode_fixture_oom_rank_with_its_request_step_and_line)
    check mpirun-c "o = r['oom_ranks']
assert [x['rank'] for x in o] == [1], o
assert o[0]['requested'] > 0 and o[0]['step'] == 4, o[0]
assert py(o[0]['stack']), o[0]['stack']" ;;
*) echo "unknown case $name"; exit 2 ;;
esac
