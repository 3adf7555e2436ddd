#!/bin/sh
# `ranksnap report` on the attribution fixtures recorded on the GPU machine
# (tests/data/make_torch_fixtures.py --sites, kept in tests/data/sites.tar.gz): the report names
# the rank, the pattern and a Python line of the user's or of the model's code, never a frame of
# PyTorch's machinery or a mangled name. A case whose folder is not there yet is skipped (77), saying so.
# usage: site_fixtures.sh CASE RANKSNAP DATA PYTHON
set -u
name=$1 ranksnap=$2 data=$3 python=$4

# the folder of a case, from the fixtures' archive (tests/data/sites.tar.gz: the pickles compress
# twelvefold) into a folder of this case's own, or skip
need() {
    work="$name.d"
    rm -rf "$work" && mkdir -p "$work" || exit 1
    cd "$work" || exit 1
    d="$data/sites/$1"
    if ! ls "$d"/* >/dev/null 2>&1 && [ -f "$data/sites.tar.gz" ]; then
        tar xzf "$data/sites.tar.gz" "sites/$1" 2>/dev/null && d="sites/$1"
    fi
    ls "$d"/* >/dev/null 2>&1 || { echo "SKIPPED: $1 not recorded yet (tests/data/make_torch_fixtures.py --sites OUT $1 on a GPU machine, then into tests/data/sites.tar.gz)"; exit 77; }
}

# the report of folder $d as text (checked for machinery) and as JSON (site.json), then PY run on it
check() {
    "$ranksnap" report --rank-from-name "$d"/* > site.txt || exit 1
    cat site.txt
    if grep -n 'gather_with_cpp\|CUDACachingAllocator\|CUDAPluggableAllocator\|wrap_kernel_functor\|_ZN\|at::detail::\|/torch/nn/modules/' site.txt; then
        echo "PyTorch's machinery or a mangled name in the report"; exit 1
    fi
    "$ranksnap" report --rank-from-name --json "$d"/* > site.json || exit 1
    "$python" -c "import json, re, sys
r = json.load(open('site.json'))
# a line of Python that is not PyTorch's own (a virtual environment may sit in a folder named torch)
def py(s): return s['file'].endswith('.py') and not re.search('(site|dist)-packages/(torch|functorch|triton)/', s['file'])
$1
print('ok')" || exit 1
}

# rank 2's longer sequences: an offset from step 0 at a line of the model
case_longer_seq() {
    need "longer_seq_$1"
    check "d = r['divergent_ranks']
assert [x['rank'] for x in d] == [2], d
assert d[0]['pattern'] == 'offset' and d[0]['first_divergent_step'] in (0, 1), d[0]
assert py(d[0]['sites'][0]), d[0]['sites'][0]"
}
case_site_fixture_longer_seq_all() { case_longer_seq all; }
case_site_fixture_longer_seq_python() { case_longer_seq python; }

# rank 1 keeps its logits every step: growth of about their 16 MiB per step from the first steps,
# at the line that made them, under the training script's own line
case_leak() {
    need "leak_$1"
    check "d = r['divergent_ranks']
assert [x['rank'] for x in d] == [1], d
assert d[0]['pattern'] == 'growth' and d[0]['first_divergent_step'] in (0, 1), d[0]
assert 12 << 20 <= d[0]['growth_bytes_per_step'] <= 20 << 20, d[0]['growth_bytes_per_step']
s = d[0]['sites'][0]
assert py(s), s
assert any(f['file'].endswith('make_torch_fixtures.py') for f in s['path']), s['path']"
}
case_site_fixture_leak_all() { case_leak all; }
# the same leak over 24 steps with _record_memory_history()'s defaults (2.5 MB a rank)
case_site_fixture_leak_defaults() { case_leak defaults; }
case_site_fixture_leak_python() { case_leak python; }

# rank 3 ran out of memory in its first step: step 0, at a Python line
case_oom_first_step() {
    need "oom_first_step_$1"
    check "o = r['oom_ranks']
assert [x['rank'] for x in o] == [3], o
assert o[0]['step'] == 0, o[0]['step']
assert py(o[0]['stack']), o[0]['stack']
assert all(py(s) or not s['file'] for s in o[0]['live_sites']), o[0]['live_sites']"
}
case_site_fixture_oom_first_step_all() { case_oom_first_step all; }
case_site_fixture_oom_first_step_python() { case_oom_first_step python; }

# ranksnap as the pluggable allocator: native stacks that stay in libtorch are named by their
# operator or autograd node, demangled
case_site_fixture_pluggable() {
    need pluggable
    check "d = r['divergent_ranks']
assert [x['rank'] for x in d] == [2], d
for s in d[0]['sites']:
    for f in s['path'] + [s]:
        assert not f['function'].startswith('_Z') and 'Pluggable' not in f['function'], f
assert d[0]['sites'][0]['function'].startswith('aten::') or 'Backward' in d[0]['sites'][0]['function'] or d[0]['sites'][0]['function'] == 'AccumulateGrad', d[0]['sites'][0]"
}

command -v "case_$name" >/dev/null || { echo "site_fixtures.sh: no case '$name'" >&2; exit 2; }
"case_$name"
