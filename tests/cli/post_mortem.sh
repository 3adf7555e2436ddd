#!/bin/sh
# `ranksnap report` and `ranksnap collect` on what the MPI tests' jobs left behind: the files of a
# job aborted by one rank's OOM, of a job with a SIGKILLed rank, spoiled copies of them.
# usage: post_mortem.sh CASE ARGS... (each case below says its ARGS)
set -u
name=$1
shift

# DIR RANKSNAP PYTHON: every rank of the aborted job left a snapshot or a ring, and the report
# from them names rank 2 as the OOM rank, with its request, and no rank missing
case_report_after_oom_abort_names_the_oom_rank() {
    d=$1 ranksnap=$2 python=$3
    for r in 0 1 2 3; do test -e "$d/rank-0000$r.rsnap" -o -e "$d/rank-0000$r.ring" || { echo rank $r left nothing; exit 1; }; done
    test -e "$d/rank-00002.rsnap" && "$ranksnap" report "$d" --json > "$d/post.json" && "$python" -c "import json; r=json.load(open('$d/post.json')); assert [o['rank'] for o in r['oom_ranks']] == [2], r['oom_ranks']; assert r['oom_ranks'][0]['requested'] > 0; assert r['missing_ranks'] == []; print('oom rank 2, request', r['oom_ranks'][0]['requested'])"
}

# DIR RANKSNAP PYTHON: the killed rank 1 is recovered from its ring, incomplete but with its
# peak and the way it numbered its steps, beside the other three. The notes say what the files
# recorded: rank 1 ended without writing a snapshot and without an exit, a signal or an MPI_Abort
# that ranksnap saw, the cause not recorded (never a guessed one); the others got SIGTERM (mpirun's,
# after rank 1 died) and wrote on it, or, under load, were killed before they were done, or
# before their handler ran
case_report_recovers_the_killed_rank_incomplete() {
    d=$1 ranksnap=$2 python=$3
    test -e "$d/rank-00001.ring" && "$ranksnap" report "$d" --json > "$d/post.json" && "$python" -c "
import json, re
r = json.load(open('$d/post.json'))
k = [x for x in r['ranks'] if x['rank'] == 1]
assert k and k[0]['complete'] is False and k[0]['recovered'] is True, r['ranks']
assert k[0]['peak_allocated'] > 0
assert k[0].get('steps_from') == 'ranksnap_step', k[0]
assert 'ended' not in k[0], k[0]
assert len(r['ranks']) == 4, r['ranks']
def ranks_of(note):
    m = re.match(r'ranks? ([0-9, .]+?) [a-z]', note)
    return [int(x) for x in m.group(1).split(', ') if x.isdigit()] if m else []
said = {}
for n in r['notes']:
    for rank in ranks_of(n):
        said[rank] = n
assert 'ended without writing' in said.get(1, '') and 'the cause was not recorded' in said[1], r['notes']
for rank in (0, 2, 3): # SIGTERM, or on a loaded machine mpirun's SIGKILL before its handler ran
    n = said.get(rank, '')
    assert 'got signal 15 (SIGTERM)' in n or 'the cause was not recorded' in n, (rank, r['notes'])
    assert [x for x in r['ranks'] if x['rank'] == rank][0].get('ended') in ('got signal 15 (SIGTERM)', None)
assert not [n for n in r['notes'] if 'out of host memory' in n or 'SIGKILL, out of' in n], r['notes']
print('rank 1 recovered, peak', k[0]['peak_allocated'], '; notes:', r['notes'])"
}

# DIR FROM RANKSNAP PYTHON CORRUPT_PY: corrupt_files.py copies FROM into DIR, spoiling all files
# but rank 2's (truncated, inconsistent, newer version, empty, another job); the report errs once
# per spoiled file, naming it, and reports on rank 2
case_report_on_spoiled_files_errs_per_file_and_reports_the_rest() {
    d=$1 from=$2 ranksnap=$3 python=$4 corrupt=$5
    bad=$("$python" "$corrupt" "$from" "$d") || exit 1
    "$ranksnap" report "$d" > "$d.out" 2> "$d.err"; rc=$?; cat "$d.out" "$d.err"
    test $rc -eq 0 || exit 1
    for f in $bad; do grep -q "$f" "$d.err" || { echo "no error for $f"; exit 1; }; done
    grep -q 'rank 2 ran out of memory' "$d.out"
}

# FROM TO MPIEXEC RANKSNAP: two "nodes" sharing FROM gather its files to rank 0 over MPI into TO
# (all four ranks), and the report from them names rank 2's OOM at its site
case_collect_gathers_node_local_files_and_reports() {
    from=$1 to=$2 mpiexec=$3 ranksnap=$4
    rm -rf "$to" && "$mpiexec" -np 2 --oversubscribe --allow-run-as-root "$ranksnap" collect --from "$from" --to "$to" > "$to.out"; rc=$?; cat "$to.out"
    test $rc -eq 0 && test $(ls "$to"/rank-*.rsnap "$to"/rank-*.ring | sed 's/[.].*//' | sort -u | wc -l) -eq 4 && grep -q 'rank 2 ran out of memory.*at attention_scores\|rank 2 ran out of memory.*at block_activations\|rank 2 ran out of memory.*at matmul_workspace' "$to.out"
}

# PICKLES WORK MPIEXEC RANKSNAP: a PyTorch job's pickles, one per "node" (two --from folders,
# MPMD), gathered into one --to, a file that is not a rank file left behind, and the report over
# them names rank 1's OOM (tests/data/torch_mode/mpirun-c: a real DDP GPT-2 run)
case_collect_gathers_a_pytorch_jobs_pickles() {
    pickles=$1 work=$2 mpiexec=$3 ranksnap=$4
    rm -rf "$work" && mkdir -p "$work/node0" "$work/node1" || exit 1
    cp "$pickles/rank-00000.pickle" "$work/node0/" && cp "$pickles/rank-00001.pickle" "$work/node1/" || exit 1
    echo notes > "$work/node1/notes.txt"
    "$mpiexec" --oversubscribe --allow-run-as-root -np 1 "$ranksnap" collect --from "$work/node0" --to "$work/to" : \
        -np 1 "$ranksnap" collect --from "$work/node1" --to "$work/to" > "$work/out"; rc=$?; cat "$work/out"
    test $rc -eq 0 || exit 1
    cmp "$pickles/rank-00001.pickle" "$work/to/rank-00001.pickle" && cmp "$pickles/rank-00000.pickle" "$work/to/rank-00000.pickle" || exit 1
    test ! -e "$work/to/notes.txt" || { echo "notes.txt was collected"; exit 1; }
    grep -q "rank 1 ran out of memory at step 4" "$work/out"
}

command -v "case_$name" >/dev/null || { echo "post_mortem.sh: no case '$name'" >&2; exit 2; }
"case_$name" "$@"
