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

# the replay of rank 0 lands on the peak allocated PyTorch recorded
case_replay_of_a_pytorch_fixture_reproduces_its_peak_allocated() {
    "$ranksnap" replay --json "$data"/snapshot_rank0.pickle > fixture-replay.json && "$python" -c "import json; r=json.load(open('fixture-replay.json')); assert r['original']['peak_allocated'] == r['ranksnap']['peak_allocated'] == 362729472, r; print('ok')"
}

command -v "case_$name" >/dev/null || { echo "pytorch_fixtures.sh: no case '$name'" >&2; exit 2; }
"case_$name"
