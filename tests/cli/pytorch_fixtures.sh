#!/bin/sh
# `ranksnap` on the real PyTorch 2.11 snapshots in tests/data (DATA; made by
# make_torch_fixtures.py on an H100): rank 2 trains a 1.5x batch, rank 3 runs out of memory.
# The JSON is written into the working folder and read by PYTHON (Debian's python3).
# usage: pytorch_fixtures.sh CASE RANKSNAP DATA PYTHON
set -u
name=$1 ranksnap=$2 data=$3 python=$4

# the report names rank 3 as OOM with its request, and rank 2 (not rank 0) as divergent
case_report_on_pytorch_fixtures_names_the_divergent_and_the_oom_rank() {
    "$ranksnap" report --rank-from-name --json "$data"/*.pickle > fixtures-report.json && "$python" -c "import json; r=json.load(open('fixtures-report.json')); assert [o['rank'] for o in r['oom_ranks']] == [3], r['oom_ranks']; assert 2 in [d['rank'] for d in r['divergent_ranks']], r['divergent_ranks']; assert 0 not in [d['rank'] for d in r['divergent_ranks']]; assert r['oom_ranks'][0]['requested'] == 37748736; print('ok')"
}

# the sites are the model's lines (transformers, installed in a virtual environment under
# /opt/torch) under the script's own line, never torch's Python; rank 3's request too
case_sites_of_pytorch_fixtures_are_model_lines_under_the_scripts_line() {
    "$ranksnap" report --rank-from-name --json "$data"/*.pickle > fixtures-sites.json && "$python" -c "
import json
r = json.load(open('fixtures-sites.json'))
def model_line(s):
    return s['file'].endswith('.py') and 'site-packages/transformers/' in s['file'] and s['line'] > 0
def under_script(s):
    return s['path'][0]['file'].endswith('make_torch_fixtures.py') and s['path'][-1]['file'] == s['file']
o = r['oom_ranks'][0]
assert model_line(o['stack']) and under_script(o['stack']), o['stack']
assert o['step'] == 0, o['step']
d = [x for x in r['divergent_ranks'] if x['rank'] == 2][0]
top = [s for s in d['sites'] if s['file']][0]
assert model_line(top) and under_script(top), top
for s in o['live_sites'] + d['sites']:
    assert 'site-packages/torch/' not in s['file'], s
print('ok')"
}

# the replay of rank 0 lands on the peak allocated PyTorch recorded
case_replay_of_a_pytorch_fixture_reproduces_its_peak_allocated() {
    "$ranksnap" replay --json "$data"/snapshot_rank0.pickle > fixture-replay.json && "$python" -c "import json; r=json.load(open('fixture-replay.json')); assert r['original']['peak_allocated'] == r['ranksnap']['peak_allocated'] == 362729472, r; print('ok')"
}

# rank 3 ran out of memory under a cap the pickle does not record: the replay derives it and ends
# in the same OOM at the same request
case_replay_of_the_oom_fixture_ends_in_the_same_oom() {
    "$ranksnap" replay --json "$data"/oom_rank-3_gpt2.pickle > oom-replay.json && "$python" -c "import json; r=json.load(open('oom-replay.json')); assert r['same_oom'] and r['device']['cap_derived'], r; assert r['ranksnap']['first_oom_request'] == 37748736, r; assert r['ranksnap']['peak_reserved'] == r['original']['peak_reserved'], r; print('ok')"
}

# --alloc-conf and --suggest: expandable segments would have served every request
case_replay_what_if_and_suggest_on_the_oom_fixture() {
    out=$("$ranksnap" replay "$data"/oom_rank-3_gpt2.pickle --alloc-conf expandable_segments:True) || exit 1
    echo "$out" | grep -q "the what-if serves every request, the original's failed one (event 1518) included" || exit 1
    out=$("$ranksnap" replay "$data"/oom_rank-3_gpt2.pickle --suggest) || exit 1
    echo "$out"
    echo "$out" | grep -q '^suggestion: expandable_segments:True would not have run out of memory' || exit 1
    "$ranksnap" replay --json --suggest "$data"/oom_rank-3_gpt2.pickle > oom-suggest.json &&
        "$python" -c "import json; r=json.load(open('oom-suggest.json')); assert r['suggestion'] == 'expandable_segments:True', r['suggestion']; print('ok')"
}

# the report's OOM verdict comes with the suggestion
case_report_notes_the_setting_that_would_have_avoided_the_oom() {
    "$ranksnap" report --rank-from-name "$data"/oom_rank-3_gpt2.pickle | tee oom-report.txt |
        grep -q '^note: rank 3: expandable_segments:True would not have run out of memory.*(ranksnap replay --suggest)$'
}

# each misuse of the replay's settings flags is 2, with what was expected
case_replay_settings_usage_errors() {
    f="$data"/oom_rank-3_gpt2.pickle
    err=$("$ranksnap" replay "$f" --alloc-conf max_split_size_mb:10 2>&1); test $? -eq 2 || exit 1
    case "$err" in *'max_split_size_mb too small, must be >= 20'*) ;; *) echo "$err"; exit 1;; esac
    err=$("$ranksnap" replay "$f" --alloc-conf expandable:True 2>&1); test $? -eq 2 || exit 1
    case "$err" in *"Unrecognized key 'expandable' in CUDA allocator config."*) ;; *) echo "$err"; exit 1;; esac
    err=$("$ranksnap" replay "$f" --suggest --alloc-conf expandable_segments:True 2>&1); test $? -eq 2 || exit 1
    case "$err" in *'--suggest tries the settings itself'*) ;; *) echo "$err"; exit 1;; esac
    err=$("$ranksnap" replay "$f" --device-memory 0 2>&1); test $? -eq 2 || exit 1
    case "$err" in *"--device-memory '0': expected a size from 2MiB"*) ;; *) echo "$err"; exit 1;; esac
    "$ranksnap" replay "$f" --alloc-conf; test $? -eq 2
}

command -v "case_$name" >/dev/null || { echo "pytorch_fixtures.sh: no case '$name'" >&2; exit 2; }
"case_$name"
