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
# peak and the way it numbered its steps, beside the other three; the notes name rank 1 as the
# one recovered from its ring, and the ranks that wrote from a crash path (mpirun's SIGTERM
# after rank 1 died) apart from it
case_report_recovers_the_killed_rank_incomplete() {
    d=$1 ranksnap=$2 python=$3
    test -e "$d/rank-00001.ring" && "$ranksnap" report "$d" --json > "$d/post.json" && "$python" -c "
import json
r = json.load(open('$d/post.json'))
k = [x for x in r['ranks'] if x['rank'] == 1]
assert k and k[0]['complete'] is False and k[0]['recovered'] is True, r['ranks']
assert k[0]['peak_allocated'] > 0
assert k[0].get('steps_from') == 'ranksnap_step', k[0]  # its ring says how, as a snapshot would
assert len(r['ranks']) == 4, r['ranks']
# under load mpirun may SIGKILL another rank before its dumper is done: it is recovered too
def named(ranks, one, many):
    return ('rank %d %s' % (ranks[0], one)) if len(ranks) == 1 else ('ranks %s %s' % (', '.join(map(str, ranks)), many))
rec = [x['rank'] for x in r['ranks'] if x['recovered']]
assert [n for n in r['notes'] if n.startswith(named(rec, 'was recovered from its event ring', 'were recovered from their event rings'))], (rec, r['notes'])
crash = [x['rank'] for x in r['ranks'] if not x['complete'] and not x['recovered']]
assert not crash or [n for n in r['notes'] if n.startswith(named(crash, 'wrote its snapshot from a crash path', 'wrote their snapshots from a crash path'))], (crash, r['notes'])
print('recovered from their rings', rec, 'peak of rank 1', k[0]['peak_allocated'], '; crash-path ranks', crash)"
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
