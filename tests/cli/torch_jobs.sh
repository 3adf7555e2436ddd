#!/bin/sh
# PyTorch jobs of several ranks, unmodified (tests/python/train_fake.py on the stand-in torch),
# launched as users launch them: `mpirun -np 4 ranksnap-run ... python train.py` (label mpi),
# and torchrun-like, processes started with RANK/WORLD_SIZE and no MPI (label unit). Each case
# checks the live report (report.json) or `ranksnap report` over the files left behind.
# Skips (77) without python3, saying so (an error under CI=true: cli/missing_prerequisite.sh).
# usage: torch_jobs.sh CASE RANKSNAP_RUN LIB RANKSNAP PYTHON TESTS_PYTHON_DIR WORK [MPIRUN...]
set -u
name=$1 run=$2 lib=$3 ranksnap=$4 py=$5 src=$6 work=$7
shift 7
command -v "$py" >/dev/null ||
    exec sh "$(dirname "$0")/missing_prerequisite.sh" "$py not found" "$name did not run"
dir=$work/$name
rm -rf "$dir" && mkdir -p "$dir"
export RANKSNAP_BACKEND=sim RANKSNAP_DIR="$dir" PYTHONPATH="$src/fake_torch" RANKSNAP_DIVERGENCE=
# the stand-in's env:// process groups meet in a folder of the temporary directory: this case's
rm -rf "$dir.tmp" && mkdir -p "$dir.tmp" && export TMPDIR="$dir.tmp"
train="$src/train_fake.py"

# mpirun -np 4 ranksnap-run FLAGS -- python train_fake.py ARGS (FLAGS and ARGS split by --)
mpi_job() {
    flags=""
    while [ "$1" != "--" ]; do flags="$flags $1"; shift; done
    shift
    "$@" -x RANKSNAP_BACKEND -x RANKSNAP_DIR -x PYTHONPATH -x RANKSNAP_GATHER_TIMEOUT \
        "$run" --lib "$lib" $flags "$py" "$train" $JOB_ARGS > "$dir.stdout" 2> "$dir.stderr"
    echo "mpirun exit code $?"
    cat "$dir.stdout"
}

# N processes as torchrun starts them (RANK, LOCAL_RANK, WORLD_SIZE), no MPI; waits for all
torchrun_like() {
    n=$1; shift
    pids=""
    for r in $(seq 0 $((n - 1))); do
        RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n "$run" --lib "$lib" "$@" > "$dir.out.$r" 2> "$dir.err.$r" &
        pids="$pids $!"
    done
    for p in $pids; do wait "$p"; done
    cat "$dir.out.0"
}

# python assertions on the report.json given (r) and the pickles of DIR (snaps, by rank)
check() {
    json=$1; shift
    "$py" - "$json" "$dir" "$@" <<'PY'
import glob, json, os, pickle, sys
r = json.load(open(sys.argv[1]))
snaps = {}
for p in glob.glob(os.path.join(sys.argv[2], "rank-*.pickle")):
    s = pickle.load(open(p, "rb"))
    snaps[os.path.basename(p)] = s
for expr in sys.argv[3:]:
    if not eval(expr):
        print("FAILED:", expr)
        print("the pickles' reasons:", {n: s.get("ranksnap", {}).get("reason") for n, s in sorted(snaps.items())})
        print(json.dumps(r, indent=1)[:4000])
        sys.exit(1)
PY
    ok=$?
    # a failure that shows once in a loaded suite must say why from its log alone
    [ $ok -eq 0 ] || { tail -40 "$dir.stderr" "$dir".err.* 2>/dev/null; exit 1; }
}

live() { test -f "$dir/report.json" || { echo "no live report"; cat "$dir.stderr" "$dir".err.* 2>/dev/null; exit 1; }; }

case_mpi_torch_divergent_rank_is_flagged_with_its_python_line() {
    JOB_ARGS="--diverge 2:1.5" mpi_job --steps 2:6 -- "$@"
    live
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [2]" \
        "r['divergent_ranks'][0]['pattern'] == 'offset'" \
        "r['divergent_ranks'][0]['sites'][0]['file'].endswith('train_fake.py')" \
        "r['divergent_ranks'][0]['first_divergent_step'] == 2" "len(snaps) == 4"
}

case_mpi_torch_leaking_rank_grows_with_its_python_line() {
    JOB_ARGS="--leak 1 --steps 10" mpi_job --steps 2:9 -- "$@"
    live
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [1]" \
        "r['divergent_ranks'][0]['pattern'] == 'growth'" \
        "r['divergent_ranks'][0]['sites'][0]['file'].endswith('train_fake.py')"
}

case_mpi_torch_identical_ranks_give_no_verdict() {
    JOB_ARGS="" mpi_job --steps 2:6 -- "$@"
    live
    check "$dir/report.json" "r['divergent_ranks'] == [] and r['oom_ranks'] == [] and r['missing_ranks'] == []" \
        "len(r['ranks']) == 4"
}

# Rank 3 runs out of memory at step 3 and its script dies of the OutOfMemoryError; the others
# are blocked (sleeping, the GIL released) until mpirun, seeing rank 3 gone, sends them SIGTERM.
# The job ends by itself; every rank's pickle is on disk; the report names rank 3's request,
# step and line.
case_mpi_torch_oom_rank_ends_the_job_and_every_rank_leaves_its_pickle() {
    # Four Python ranks on two cores beside other tests can take longer than mpirun's second
    # between SIGTERM and SIGKILL to write their pickles (it failed so, rarely, in full suites):
    # both limits raised, as docs/PYTORCH.md tells a user whose dumps are slow. Open MPI 4 waits
    # the timeout twice (SIGCONT, wait, SIGTERM, wait, SIGKILL): 3 s costs the test 4 more.
    export RANKSNAP_DUMP_TIMEOUT_MS=2500
    JOB_ARGS="--oom 3:3 --block-at 3:100" mpi_job --steps 2:6 -- "$@" \
        --mca odls_base_sigkill_timeout 3 -x RANKSNAP_DUMP_TIMEOUT_MS
    for r in 0 1 2 3; do test -f "$dir/rank-0000$r.pickle" || { echo "rank $r left no pickle"; ls -la "$dir"; cat "$dir.stderr"; exit 1; }; done
    "$ranksnap" report --json "$dir" > "$dir.report.json" || exit 1
    "$ranksnap" report "$dir"
    check "$dir.report.json" "[o['rank'] for o in r['oom_ranks']] == [3]" \
        "r['oom_ranks'][0]['requested'] == 64 << 20" "r['oom_ranks'][0]['step'] == 3" \
        "r['oom_ranks'][0]['stack']['file'].endswith('train_fake.py')" \
        "r['oom_ranks'][0]['stack']['function'] == 'forward'" \
        "sorted(s['ranksnap']['reason'] for s in snaps.values()) == ['oom', 'signal', 'signal', 'signal']"
}

# A rank dies of an uncaught exception in the range (gloo's collective fails once its peer is
# gone, as seen on the H100 after an OOM): it leaves its pickle, written at exit. mpirun then
# SIGTERMs the others, which dump on the signal (mpi_torch_oom_rank_ends_the_job... checks that
# path; under a loaded machine mpirun's SIGKILL a second later can come first, so here only the
# dying rank's own pickle is required).
case_mpi_torch_rank_dying_of_an_exception_leaves_its_pickle() {
    JOB_ARGS="--dist $dir/pg --raise-at 1:3 --block-at 3:100" mpi_job --steps 2:6 -- "$@"
    test -f "$dir/rank-00001.pickle" || { echo "rank 1 left no pickle"; ls -la "$dir"; cat "$dir.stderr"; exit 1; }
    "$ranksnap" report --json "$dir" > "$dir.report.json" || exit 1
    "$ranksnap" report "$dir"
    check "$dir.report.json" "1 in [x['rank'] for x in r['ranks']]" \
        "snaps['rank-00001.pickle']['ranksnap']['reason'] == 'dump'" \
        "all(s['ranksnap']['reason'] == 'signal' for n, s in snaps.items() if n != 'rank-00001.pickle')"
}

# Rank 1 fails at step 3 inside the range (--steps 2:6) while the others wait for it in the
# collective after every step; the script ends as scripts do (how: see train_fake.py --fail-at).
# Rank 1 writes its own pickle (reason "dump") and leaves at once, never entering ranksnap's
# gather, so mpirun ends the job as it would without ranksnap. RANKSNAP_GATHER_TIMEOUT and the
# process group's timeout are an hour: a rank 1 that enters the gather waits there for rank 0,
# which waits in the training collective for rank 1, until the case's own `timeout` ends the job,
# which fails the case. The job takes a few seconds; 45 is its bound on a loaded machine.
failing_rank_leaves_at_once() {
    how=$1; shift
    export RANKSNAP_GATHER_TIMEOUT=3600
    out=$(JOB_ARGS="--dist $dir/pg --pg-timeout 3600 --sync --fail-at 1:3:$how" mpi_job --steps 2:6 -- timeout 45 "$@")
    echo "$out" | head -1
    ! echo "$out" | grep -q "^mpirun exit code 124$" ||
        { echo "the job ran until timeout ended it: rank 1 waited in ranksnap's gather"; tail -20 "$dir.stderr"; exit 1; }
    test -f "$dir/rank-00001.pickle" || { echo "rank 1 left no pickle"; ls -la "$dir"; tail -20 "$dir.stderr"; exit 1; }
    # the report from the pickles says how rank 1 ended: the status the glue saw it leave with
    "$ranksnap" report "$dir" --json > "$dir.report.json" 2> "$dir.report.stderr" ||
        { cat "$dir.report.stderr"; exit 1; }
    check "$dir.report.json" "snaps['rank-00001.pickle']['ranksnap']['reason'] == 'dump'" \
        "snaps['rank-00001.pickle']['ranksnap'].get('end') == {'exit_status': 1}" \
        "[k.get('ended') for k in r['ranks'] if k['rank'] == 1] == ['exited with status 1']" \
        "'rank 1 exited with status 1; its snapshot was written as it left' in r['notes']"
}

case_mpi_torch_failing_rank_leaves_at_once_with_sys_exit() {
    failing_rank_leaves_at_once exit "$@"
}

case_mpi_torch_failing_rank_leaves_at_once_with_its_own_excepthook() {
    failing_rank_leaves_at_once hook "$@"
}

# Python 3.12+ (sys.monitoring): the SystemExit that ends the program, however it was raised
case_mpi_torch_failing_rank_leaves_at_once_with_raise_system_exit() {
    failing_rank_leaves_at_once raise "$@"
}

case_mpi_torch_failing_rank_leaves_at_once_with_the_exit_builtin() {
    failing_rank_leaves_at_once exit_builtin "$@"
}

case_mpi_torch_failing_rank_leaves_at_once_with_the_quit_builtin() {
    failing_rank_leaves_at_once quit_builtin "$@"
}

case_mpi_torch_failing_rank_leaves_at_once_with_sys_exit_bound_before_torch() {
    failing_rank_leaves_at_once early_exit "$@"
}

# Every rank leaves in the middle of the range with status 0, each its own way (sys.exit(0),
# raise SystemExit(0), exit(0), a return from main): the program ends well, and the range is
# gathered and reported live, as for a range that ends at its last step.
case_mpi_torch_ranks_ending_well_mid_range_are_gathered() {
    export RANKSNAP_GATHER_TIMEOUT=3600
    out=$(JOB_ARGS="--dist $dir/pg --sync --end-at 3:exit --diverge 2:1.5" mpi_job --steps 2:6 -- timeout 120 "$@")
    echo "$out" | head -1
    echo "$out" | grep -q "^mpirun exit code 0$" || { tail -20 "$dir.stderr"; exit 1; }
    live
    check "$dir/report.json" "len(r['ranks']) == 4" "[d['rank'] for d in r['divergent_ranks']] == [2]" \
        "all(s['ranksnap']['reason'] == 'range_end' for s in snaps.values())"
}

case_mpi_torch_failing_rank_leaves_at_once_with_os_exit() {
    failing_rank_leaves_at_once os_exit "$@"
}

# Every rank forks a helper in the middle of the range (--steps 2:6, at step 3) that ends with
# sys.exit(0), running the glue's and the C library's exit paths, and a multiprocessing worker,
# which leaves by os._exit: they finalize nothing in either. The job ends (the helper hung in finalize, on the loader lock it inherited, in most
# runs), each rank's own process writes its pickle under its plain name (a helper wrote it
# first otherwise, the rank's going to rank-RRRRR.job-….pickle) and rank 0 the live report.
case_mpi_torch_forked_child_leaves_the_ranks_files_and_gather_alone() {
    out=$(JOB_ARGS="--fork-at 3 --diverge 2:1.5" mpi_job --steps 2:6 -- timeout 60 "$@")
    echo "$out" | head -1
    echo "$out" | grep -q "^mpirun exit code 0$" || { tail -20 "$dir.stderr"; exit 1; }
    live
    # the ranks' lines share mpirun's stdout: one may run into another
    helpers=$(grep -o "forked helper [0-9]*" "$dir.stdout" | sed 's/forked helper //' | tr '\n' ',')
    test "$(echo "$helpers" | tr ',' '\n' | grep -c .)" -eq 8 || { echo "helpers:"; cat "$dir.stdout"; exit 1; }
    ! ls "$dir" | grep -q "job-" || { ls "$dir"; exit 1; }
    "$ranksnap" report "$dir" > /dev/null || exit 1
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [2]" \
        "sorted(snaps) == ['rank-0000%d.pickle' % i for i in range(4)]" \
        "all(s['ranksnap']['reason'] == 'range_end' for s in snaps.values())" \
        "not any(s['ranksnap']['pid'] in [$helpers] for s in snaps.values())"
}

# A second copy of the glue on PYTHONPATH (an installed ranksnap, a link to python/), then the
# site's own sitecustomize: the copy is recognised and passed over, the site's own runs once per
# rank with one import hook in place (the copies chained to each other some 200 times, with a
# RecursionError, and the site's own never ran), and the job is recorded as without the copy.
case_mpi_torch_second_copy_of_the_glue_is_passed_over() {
    mkdir -p "$dir/site" && cp -r "$src/../../python" "$dir/copy" || exit 1
    cat > "$dir/site/sitecustomize.py" <<'EOF'
import os, sys
hooks = sum(type(h).__name__ == "_TorchImportHook" for h in sys.meta_path)
with open(os.path.join(os.environ["RANKSNAP_DIR"], "site.%d" % os.getpid()), "w") as f:
    f.write(str(hooks))
EOF
    PYTHONPATH="$dir/copy:$dir/site:$src/fake_torch" JOB_ARGS="--diverge 2:1.5" mpi_job --steps 2:6 -- "$@"
    live
    ! grep -q "RecursionError" "$dir.stderr" || { grep -m3 RecursionError "$dir.stderr"; exit 1; }
    test "$(cat "$dir"/site.* 2>/dev/null | tr -d '\n')" = "1111" ||
        { echo "the site's own sitecustomize: $(ls "$dir") $(cat "$dir"/site.* 2>/dev/null)"; exit 1; }
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [2]" "len(snaps) == 4"
}

case_torchrun_like_ranks_meet_in_their_files() {
    export RANKSNAP_GATHER_TIMEOUT=30 RANKSNAP_DEBUG=INFO
    torchrun_like 3 --steps 2:5 "$py" "$train" --diverge 1:1.5
    live
    # no process group: rank 0 read the others' files
    grep -q "no torch.distributed group; waiting for the other ranks' files" "$dir.err.0" || { cat "$dir.err.0"; exit 1; }
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [1]" \
        "r['divergent_ranks'][0]['sites'][0]['file'].endswith('train_fake.py')" "len(r['ranks']) == 3"
}

# PyTorch's backend:cudaMallocAsync has no recorder: ranksnap records each rank itself, at the
# CUDA driver the stand-in's cudaMallocAsync reaches (the fake runtime and driver of tests/gpu,
# FAKE_CUDART's folder), with the Python frames of the thread that allocates, and writes a .rsnap
# per rank. Two torchrun-like ranks meet in their files; the report says how they were recorded.
async_job() {
    export RANKSNAP_GATHER_TIMEOUT=${RANKSNAP_GATHER_TIMEOUT:-30} PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
    export LD_LIBRARY_PATH="$(dirname "$FAKE_CUDART")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export FAKE_CUDART_ASYNC_VIA_DRIVER=1
    unset RANKSNAP_BACKEND
    torchrun_like 2 --steps 2:5 "$py" "$train" "$@"
    for r in 0 1; do
        test -f "$dir/rank-0000$r.rsnap" || { ls "$dir"; cat "$dir.err.$r"; echo "FAIL: rank $r wrote no .rsnap"; exit 1; }
        ! grep -q "the framework's snapshot failed\|_record_memory_history failed" "$dir.err.$r" ||
            { cat "$dir.err.$r"; echo "FAIL: rank $r still tried PyTorch's recorder"; exit 1; }
    done
    ! ls "$dir" | grep -q '\.pickle$' || { ls "$dir"; echo "FAIL: a pickle was written"; exit 1; }
}

# The table's columns of such ranks are the pool's allocations, in report.json ($1) and in the
# text ($2): peak allocated as the stand-in allocates (its 4 parameters of 8 MiB, the optimizer's
# 32 MiB and forward's 3 x batch MiB: batch 8 on rank 0, 12 on rank 1), peak reserved the pool's
# figure (the fake driver's pool answers it; never below), said under the table; none of it
# repeated as taken outside, where only what $3 says is (nothing by default).
async_columns() {
    check "$1" "[x['peak_allocated'] for x in r['ranks']] == [88 << 20, 100 << 20]" \
        "all(x['reserved_from'] == 'async_pool' and x['peak_reserved'] >= x['peak_allocated'] for x in r['ranks'])" \
        "all(x.get('recorded_outside_peak', 0) == ${3:-0} for x in r['ranks'])"
    grep -q "^\*  *1  .*  100.00 MiB .*  +14%$" "$2" || { cat "$2"; echo "FAIL: $2: rank 1's columns"; exit 1; }
    grep -q "^rank 0 1: peak allocated is the cudaMallocAsync pool's live bytes, peak reserved the pool's reserved bytes at that peak$" "$2" ||
        { cat "$2"; echo "FAIL: $2 does not say where the columns come from"; exit 1; }
    [ -n "${3:-}" ] || ! grep -q "taken outside the allocator" "$2" || { cat "$2"; echo "FAIL: $2 repeats the pool's bytes as outside"; exit 1; }
}

# Rank 1 with 1.5 times the batch is flagged, by the script's Python line, though the stand-in
# allocates with the GIL released, as PyTorch's operators do. cuBLAS's workspace (FAKE_TORCH_CUBLAS:
# 2 MiB from the driver on the script's thread before the first request) is cuBLAS's, by its
# native stack, taken outside the pool and named by the script's line; the pool's bytes are not
# outside.
case_torchrun_like_cuda_malloc_async_ranks_are_recorded_by_ranksnap() {
    async_job --diverge 1:1.5
    live
    async_columns "$dir/report.json" "$dir/report.txt" "2 << 20"
    grep -q "^rank 1: cuBLAS holds 2.00 MiB " "$dir/report.txt" ||
        { cat "$dir/report.txt"; echo "FAIL: cuBLAS's workspace is not said to be cuBLAS's"; exit 1; }
    # the pool's reserved bytes, used or not, are the rank's allocator's, never outside it
    ! grep -q "CUDA memory pools (reserved, unused)" "$dir/report.txt" ||
        { cat "$dir/report.txt"; echo "FAIL: the pool's unused bytes are counted outside the allocator"; exit 1; }
    # a Python stack deeper than RANKSNAP_STACK_DEPTH keeps its outermost frames: with 4 frames,
    # the stand-in's two innermost (its allocator) and the script's two outermost, whose line is
    # the site
    deep=$dir.depth4 && rm -rf "$deep" && mkdir -p "$deep"
    (dir=$deep; export RANKSNAP_DIR=$deep RANKSNAP_STACK_DEPTH=4; async_job --diverge 1:1.5; live) || exit 1
    check "$deep/report.json" "[d['rank'] for d in r['divergent_ranks']] == [1]" \
        "r['divergent_ranks'][0]['sites'][0]['file'].endswith('train_fake.py')" \
        "r['divergent_ranks'][0]['sites'][0]['function'] == 'main'"
    # and `ranksnap summary` of the file says the pool is the rank's allocator, not a holder outside
    "$ranksnap" summary "$dir/rank-00001.rsnap" > "$dir.summary" || exit 1
    grep -q "^  pool        peak 100.00 MiB live in the cudaMallocAsync pool (the rank's allocator), 100.00 MiB reserved then$" "$dir.summary" &&
        ! grep -q "async_pool" "$dir.summary" || { cat "$dir.summary"; echo "FAIL: ranksnap summary of the pool"; exit 1; }
    grep -q "^rank 1: 2.00 MiB taken outside the allocator at its peak: 2.00 MiB at .*(train_fake.py:[0-9]*)" "$dir/report.txt" ||
        { cat "$dir/report.txt"; echo "FAIL: cuBLAS's workspace is not named by the script's line"; exit 1; }
    grep -q "^recorded at the CUDA runtime: PyTorch's recorder does not support backend:cudaMallocAsync (every rank)$" "$dir/report.txt" ||
        { cat "$dir/report.txt"; echo "FAIL: the report does not say how the ranks were recorded"; exit 1; }
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [1]" \
        "r['divergent_ranks'][0]['sites'][0]['file'].endswith('train_fake.py')" \
        "r['divergent_ranks'][0]['sites'][0]['function'] == 'forward'" "len(r['ranks']) == 2"
    # afterwards, from the files alone: the same verdict
    "$ranksnap" report "$dir" > "$dir.after" 2>&1 || { cat "$dir.after"; exit 1; }
    grep -q "^rank 1 .*forward (train_fake.py:" "$dir.after" || { cat "$dir.after"; echo "FAIL: report DIR"; exit 1; }
    "$ranksnap" report --json "$dir" > "$dir.after.json" || exit 1
    async_columns "$dir.after.json" "$dir.after" "2 << 20"
    # exported for PyTorch's viewer: each cudaMallocAsync a segment of one block, named by the
    # script's line, and a trace the viewer's backward replay takes from the segments to the start
    "$ranksnap" export --torch --rank 1 "$dir" -o "$dir.rank1.pickle" > /dev/null || exit 1
    "$py" - "$dir.rank1.pickle" <<'PY' || { echo "FAIL: the exported pickle"; exit 1; }
import pickle, sys
s = pickle.load(open(sys.argv[1], "rb"))
t = s["device_traces"][0]
allocs = [e for e in t if e["action"] == "alloc"]
assert any(f["name"] == "forward" and f["filename"].endswith("train_fake.py")
           for e in allocs for f in e["frames"]), allocs[:3]
assert s["segments"] and all(len(g["blocks"]) == 1 for g in s["segments"]), s["segments"][:2]
blocks = {b["address"] for g in s["segments"] for b in g["blocks"]}
segs = {g["address"] for g in s["segments"]}
for e in reversed(t):
    a, p = e["action"], e["addr"]
    if a == "alloc":
        assert p in blocks, e
        blocks.discard(p)
    elif a == "free_completed":
        assert p not in blocks, e
        blocks.add(p)
    elif a == "free_requested":
        assert p in blocks, e
    elif a == "segment_alloc":
        assert p in segs and p not in blocks, e
        segs.discard(p)
    elif a == "segment_free":
        assert p not in segs, e
        segs.add(p)
PY
}

# Rank 1, which keeps 4 MiB per step, capped at 100 MiB (RANKSNAP_MEMORY_LIMIT, checked at the
# driver) runs out of memory at step 3: PyTorch's OutOfMemoryError ends its script, its snapshot
# is written as it leaves, and the report names the rank, its request, the script's line and
# what was live; the live report (rank 0, which met rank 1's file) and the one from the files.
case_torchrun_like_cuda_malloc_async_capped_rank_oom_names_its_request() {
    unset FAKE_TORCH_CUBLAS
    export RANKSNAP_MEMORY_LIMIT=1:100MiB
    async_job --steps 6 --leak 1
    grep -q "OutOfMemoryError" "$dir.err.1" || { cat "$dir.err.1"; echo "FAIL: rank 1's script did not get the OOM"; exit 1; }
    "$ranksnap" report "$dir" > "$dir.after" 2>&1
    # the script's lines of the kept 4 MiB and of forward's first tensor
    local keep fwd
    keep=$(grep -n 'kept.append(torch.empty(4 \* MIB' "$train" | cut -d: -f1)
    fwd=$(grep -n 'hidden = torch.empty(batch \* 2 \* MIB' "$train" | cut -d: -f1)
    for f in "$dir/report.txt" "$dir.after"; do
        grep -q "^rank 1 ran out of memory at step 3: tried to allocate 4.00 MiB (allocated 100.00 MiB, reserved 100.00 MiB, limit 100.00 MiB) at main (train_fake.py:$keep)" "$f" ||
            { cat "$f"; echo "FAIL: $f does not name rank 1's request and line"; exit 1; }
        grep -A4 "^  live at that moment:" "$f" | grep -q "forward (train_fake.py:$fwd)" ||
            { cat "$f"; echo "FAIL: $f does not say what was live"; exit 1; }
        # the columns: rank 1 at its cap, taken from the pool, rank 0 as the stand-in allocates
        grep -q "^\*  *1  .*  100.00 MiB .*  yes  " "$f" && grep -q "^  *0  .*  88.00 MiB .*  reference$" "$f" ||
            { cat "$f"; echo "FAIL: $f: the columns are not the pool's bytes"; exit 1; }
    done
    # PyTorch's error for the driver's refusal, which the glue reads too, is that one OOM
    "$ranksnap" summary "$dir/rank-00001.rsnap" | grep -q " 1 OOMs$" ||
        { "$ranksnap" summary "$dir/rank-00001.rsnap"; echo "FAIL: the driver's refusal counted twice"; exit 1; }
    # capped at 40 MiB it runs out before the range: its file is written as it leaves all the same
    # (rank 0 waits for a file of the range from it at most RANKSNAP_GATHER_TIMEOUT)
    rm -rf "$dir" && mkdir -p "$dir"
    RANKSNAP_MEMORY_LIMIT=1:40MiB RANKSNAP_GATHER_TIMEOUT=3
    async_job --steps 6
    "$ranksnap" report "$dir" > "$dir.after" 2>&1
    grep -q "^rank 1 ran out of memory: tried to allocate 16.00 MiB (allocated 32.00 MiB, reserved 32.00 MiB, limit 40.00 MiB) at forward (train_fake.py:$fwd)" "$dir.after" ||
        { cat "$dir.after"; echo "FAIL: the OOM before the range is not named"; exit 1; }
}

# Rank 1, which keeps 4 MiB per step, capped at 100 MiB by PyTorch's own limit
# (torch.cuda.set_per_process_memory_fraction of the fake device's 16 GiB), runs out of memory at
# step 3: the backend refuses the request before calling cudaMallocAsync, so the driver never
# sees it, and its OutOfMemoryError ends the script. The report names the rank, its request, the
# script's line and what was live, as for a refusal of the driver's, with the figures of
# PyTorch's message; the traceback the script prints has no frame of ranksnap's. The same when
# the training runs in a thread of its own, when the script catches the error and calls
# sys.exit(1) in its handler, and when it set a sys.excepthook of its own after importing torch;
# a script that catches the error and goes on has no OOM. The reserved bytes are the pool's, as
# in the table: not cuBLAS's workspace (FAKE_TORCH_CUBLAS), which the rank also holds at the
# driver.
async_oom_named() {
    keep=$(grep -n 'kept.append(torch.empty(4 \* MIB' "$train" | cut -d: -f1)
    fwd=$(grep -n 'hidden = torch.empty(batch \* 2 \* MIB' "$train" | cut -d: -f1)
    for f in "$@"; do
        grep -q "^rank 1 ran out of memory at step 3: tried to allocate 4.00 MiB with [0-9.]* GiB free of 16.00 GiB (allocated 100.00 MiB, reserved 100.00 MiB, limit 100.00 MiB) at main (train_fake.py:$keep)$" "$f" ||
            { cat "$f" "$dir.err.1"; echo "FAIL: $f does not name rank 1's request and line"; exit 1; }
        grep -A6 "^  live at that moment:" "$f" | grep -q "forward (train_fake.py:$fwd)" ||
            { cat "$f"; echo "FAIL: $f does not say what was live"; exit 1; }
        grep -q "^\*  *1  .*  100.00 MiB .*  yes  " "$f" || { cat "$f"; echo "FAIL: $f: rank 1 is not OOM"; exit 1; }
    done
    "$ranksnap" summary "$dir/rank-00001.rsnap" | grep -q " 1 OOMs$" ||
        { "$ranksnap" summary "$dir/rank-00001.rsnap"; echo "FAIL: rank 1 does not count one OOM"; exit 1; }
}
case_torchrun_like_cuda_malloc_async_fraction_oom_names_its_request() {
    async_job --steps 6 --leak 1 --fraction 1:0.006103515625
    grep -q "OutOfMemoryError: Allocation on device 0 would exceed allowed memory" "$dir.err.1" ||
        { cat "$dir.err.1"; echo "FAIL: rank 1's script did not get PyTorch's error"; exit 1; }
    ! grep -q "ranksnap/_" "$dir.err.1" || { cat "$dir.err.1"; echo "FAIL: a frame of ranksnap's in the traceback"; exit 1; }
    "$ranksnap" report "$dir" > "$dir.after" 2>&1
    async_oom_named "$dir/report.txt" "$dir.after"
    for how in --thread "--on-oom exit" --own-hook; do
        rm -rf "$dir" && mkdir -p "$dir"
        async_job --steps 6 --leak 1 --fraction 1:0.006103515625 $how
        "$ranksnap" report "$dir" > "$dir.after" 2>&1
        echo "$how:"
        async_oom_named "$dir.after"
    done
    rm -rf "$dir" && mkdir -p "$dir"
    async_job --steps 6 --leak 1 --fraction 1:0.006103515625 --on-oom skip
    grep -q "^step 3: out of memory: Allocation on device 0 would exceed" "$dir.err.1" || { cat "$dir.err.1"; exit 1; }
    "$ranksnap" report "$dir" > "$dir.after" 2>&1
    ! grep -q "ran out of memory" "$dir.after" && grep -q "^\*\?  *1  .*  no " "$dir.after" ||
        { cat "$dir.after"; echo "FAIL: an error the script caught and went on from is named as its OOM"; exit 1; }
}

# Inference with no optimizer (tests/python/infer_fake.py), two ranks, rank 1 with 1.5 times the
# batch, --steps 2:5: the steps are the model's calls (or generate's), found with no flag, the
# range is recorded on both ranks, and rank 1 is flagged with the model's line.
inference_job() {
    how=$1 site=$2; shift 2
    export RANKSNAP_GATHER_TIMEOUT=30
    torchrun_like 2 --steps 2:5 "$py" "$src/infer_fake.py" --diverge 1:1.5 "$@"
    live
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [1]" \
        "r['divergent_ranks'][0]['sites'][0]['file'].endswith('$site')" \
        "[x['steps_from'] for x in r['ranks']] == ['$how'] * 2" \
        "len(snaps) == 2" "all(s['ranksnap']['ranges'] == [[2, 5]] for s in snaps.values())"
}
case_torchrun_like_inference_steps_are_the_models_calls() {
    inference_job "calls of Generator, the outermost module: no optimizer, gradients off" train_model_fake.py
}
case_torchrun_like_generate_steps_are_the_generate_calls() {
    inference_job "generate calls of Generator: no optimizer" train_model_fake.py --generate 3
}

# Under backend:cudaMallocAsync, the model an installed package's (a copy of train_model_fake.py
# in a site-packages folder), as a transformers model is: rank 1 is flagged with the model's line
# and, above it, the script's (the outermost frames a stack keeps), in the live report and in the
# one from the files, as in a rank PyTorch records.
case_torchrun_like_cuda_malloc_async_site_has_the_scripts_line_above_the_models() {
    pkg=$dir.pkg
    mkdir -p "$pkg/site-packages" && cp "$src/infer_fake.py" "$src/train_fake.py" "$pkg/" &&
        cp "$src/train_model_fake.py" "$pkg/site-packages/" || exit 1
    export RANKSNAP_GATHER_TIMEOUT=30 PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync FAKE_CUDART_ASYNC_VIA_DRIVER=1
    export LD_LIBRARY_PATH="$(dirname "$FAKE_CUDART")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    unset RANKSNAP_BACKEND
    PYTHONPATH="$src/fake_torch:$pkg/site-packages" torchrun_like 2 --steps 2:5 "$py" "$pkg/infer_fake.py" --diverge 1:1.5
    live
    "$ranksnap" report --json "$dir" > "$dir.after.json" || exit 1
    for j in "$dir/report.json" "$dir.after.json"; do
        check "$j" "[d['rank'] for d in r['divergent_ranks']] == [1]" \
            "'site-packages' in r['divergent_ranks'][0]['sites'][0]['file']" \
            "r['divergent_ranks'][0]['sites'][0]['path'][0]['file'].endswith('infer_fake.py')"
    done
}

# torch.compile on the stand-in: the model runs as the wrapper Inductor wrote for it, whose lines
# allocate. As with a transformers model, the model's code is an installed package's (a copy of
# train_model_fake.py in a site-packages folder): each stack is then the model's lines (the
# generated code's line map leads back to them), the generated file under them, then the script.
# Rank 1 is flagged with the model's line and, above it, the script's, as in eager mode; the
# generated file is in no site and no path, and stays in the pickles' stacks.
case_torchrun_like_compiled_model_is_named_by_its_source_lines() {
    pkg=$dir.pkg
    mkdir -p "$pkg/site-packages" && cp "$src/infer_fake.py" "$src/train_fake.py" "$pkg/" &&
        cp "$src/train_model_fake.py" "$pkg/site-packages/" || exit 1
    PYTHONPATH="$src/fake_torch:$pkg/site-packages" src=$pkg inference_job \
        "calls of Generator (compiled), the outermost module: no optimizer, gradients off" \
        train_model_fake.py --compile
    check "$dir/report.json" \
        "not [f for d in r['divergent_ranks'] for s in d['sites'] for f in [s] + s['path'] if 'torchinductor' in f['file']]" \
        "r['divergent_ranks'][0]['sites'][0]['function'] == 'forward'" \
        "'site-packages' in r['divergent_ranks'][0]['sites'][0]['file']" \
        "r['divergent_ranks'][0]['sites'][0]['path'][0]['file'].endswith('infer_fake.py')" \
        "any('torchinductor_stand_in' in f['filename'] for e in snaps['rank-00001.pickle']['device_traces'][0] for f in e['frames'])"
}

# torch.compile(mode="reduce-overhead") on the stand-in: the model is recorded into a CUDA graph at
# its second call, before the range, in a private pool. Each rank's pool is named by the line that
# called the compiled model, and left out of its fragmentation; rank 1's larger graph outputs,
# made then, are the graph's, named by that line too.
case_torchrun_like_reduce_overhead_pool_is_named_by_the_line_that_captured_it() {
    inference_job "calls of Generator (compiled), the outermost module: no optimizer, gradients off" \
        infer_fake.py --reduce-overhead --diverge 1:4
    check "$dir/report.json" "all(x['pools_at_peak'] > 0 for x in r['ranks'])" \
        "all(x['largest_pool']['function'] == 'CUDA graph pool of main' and x['largest_pool']['file'].endswith('infer_fake.py') for x in r['ranks'])" \
        "all(x['fragmentation'] == x['reserved_at_peak'] - x['peak_allocated'] - x['pools_free_at_peak'] for x in r['ranks'])"
    grep -q "not counted as fragmentation" "$dir/report.txt" || { cat "$dir/report.txt"; exit 1; }
}

# The same under Inductor's graph partitions, as torch.compile's CUDA graph trees capture: under
# the code Inductor generated (a cHASH.py of its cache, outside torch), which calls the partition
# that captures. The pool is still named by the script's line that called the compiled model, not
# left as "CUDA graph pool" (the generated file is no user's line).
case_torchrun_like_graph_trees_pool_is_named_by_the_line_that_called_the_model() {
    inference_job "calls of Generator (compiled), the outermost module: no optimizer, gradients off" \
        infer_fake.py --reduce-overhead --graph-partition --diverge 1:4
    check "$dir/report.json" "all(x['pools_at_peak'] > 0 for x in r['ranks'])" \
        "all(x['largest_pool']['function'] == 'CUDA graph pool of main' and x['largest_pool']['file'].endswith('infer_fake.py') for x in r['ranks'])" \
        "any('torchinductor_stand_in' in f['filename'] for g in snaps['rank-00000.pickle']['segments'] for f in g['frames'])"
}

case_torchrun_like_rank_that_never_writes_is_named_missing() {
    export RANKSNAP_GATHER_TIMEOUT=3
    # rank 2 is killed at step 3, in the middle of the range 2:6
    torchrun_like 3 --steps 2:6 "$py" "$train" --killed 2:3
    live
    check "$dir/report.json" "r['missing_ranks'] == [2]" "len(r['ranks']) == 2"
}

# A model trained with loss.backward() (tests/python/train_model_fake.py): the backward pass
# allocates on the stand-in's autograd thread with no Python frame, as PyTorch does. Under the
# default settings every byte of the report has a name: the backward's by the module whose
# backward made it (or the loss's autograd node and the line that called backward()), the bytes
# alive before the range as such, the parameters and optimizer state by their names.
case_torchrun_like_backward_and_pre_range_bytes_are_named() {
    export RANKSNAP_GATHER_TIMEOUT=30
    torchrun_like 2 --steps 2:6 "$py" "$src/train_model_fake.py" --leak 1
    live
    "$ranksnap" report "$dir" > "$dir.report.txt" || exit 1
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [1]" \
        "'(no stack)' not in open(sys.argv[1]).read()" \
        "'(no stack)' not in open(sys.argv[1][:-len('/report.json')] + '.report.txt').read()" \
        "'allocated before step 2' in json.dumps(r['divergent_ranks'])" \
        "'backward of h.' in open(sys.argv[1][:-len('.json')] + '.html').read()" \
        "any(f['name'].startswith('backward of h.0.mlp (MLP)') and f['filename'].endswith('train_model_fake.py') for s in snaps.values() for e in s['device_traces'][0] for f in e['frames'])" \
        "any(f['name'] == 'parameter h.0.mlp.fc (allocated before step 2)' for s in snaps.values() for g in s['segments'] for b in g['blocks'] for f in b['frames'])" \
        "any(f['name'].startswith('optimizer state momentum_buffer of ') for s in snaps.values() for g in s['segments'] for b in g['blocks'] for f in b['frames'])"
}

# backward_oom FUNCTION ARGS...: rank 1 of train_model_fake.py ARGS runs out of memory in the
# backward pass; its request is named FUNCTION at a line of the script, and nothing in the report
# is "(no stack)"
backward_oom() {
    export RANKSNAP_GATHER_TIMEOUT=5
    want=$1; shift
    torchrun_like 2 --steps 2:6 "$py" "$src/train_model_fake.py" "$@" --oom-backward 1:3 > /dev/null
    grep -q OutOfMemoryError "$dir.err.1" || { echo "rank 1 did not die of its OutOfMemoryError"; cat "$dir.err.1"; exit 1; }
    "$ranksnap" report --json "$dir" > "$dir.report.json" || exit 1
    "$ranksnap" report "$dir" > "$dir.report.txt"
    cat "$dir.report.txt"
    check "$dir.report.json" "[o['rank'] for o in r['oom_ranks']] == [1]" \
        "r['oom_ranks'][0]['stack']['function'] == '$want'" \
        "r['oom_ranks'][0]['stack']['file'].endswith('train_model_fake.py')" \
        "'(no stack)' not in open(sys.argv[1]).read()" \
        "'(no stack)' not in open(sys.argv[1][:-len('.report.json')] + '.report.txt').read()"
}

# The jobs of tests/gpu/torch-names.sh, shaped alike on the stand-in (CASE: oom-backward,
# fsdp2-oom-backward, leak-from-step-0, trainer-longer) and checked by the same
# check_named_report.py as their GPU fixtures: those (torch_gpu_fixtures_are_named_*) read
# pickles frozen in tests/data, and stay green whatever the glue names; these run the glue.
named_like_the_gpu_fixture() {
    export RANKSNAP_GATHER_TIMEOUT=5
    what=$1; shift
    torchrun_like 2 --steps 2:6 "$py" "$src/train_model_fake.py" "$@" > /dev/null
    "$ranksnap" report --json "$dir" > "$dir.report.json" || exit 1
    "$ranksnap" report "$dir" > "$dir.report.txt" || exit 1
    "$py" "$src/check_named_report.py" "$what" "$dir.report.json" "$dir.report.txt" \
        "$dir"/rank-*.pickle || { tail -20 "$dir".err.*; exit 1; }
}
case_torchrun_like_oom_backward_job_is_named_as_its_gpu_fixture() {
    named_like_the_gpu_fixture oom-backward --oom-backward 1:3
}
case_torchrun_like_fsdp2_oom_backward_job_is_named_as_its_gpu_fixture() {
    named_like_the_gpu_fixture fsdp2-oom-backward --fsdp block --oom-backward 1:3
}
case_torchrun_like_leak_from_step_0_job_is_named_as_its_gpu_fixture() {
    named_like_the_gpu_fixture leak-from-step-0 --leak 1
}
case_torchrun_like_longer_rank_job_is_named_as_its_gpu_fixture() {
    named_like_the_gpu_fixture trainer-longer --diverge 1:1.5
}

# In the loss's node: the failing request is named by that node and the line that called backward().
case_torchrun_like_oom_in_the_backward_pass_names_its_request() {
    backward_oom "backward of NllLossBackward0"
}

# FSDP2's all-gather runs in torch's Python, in a hook on a layer's output node that runs before
# the node's pre-hooks (on the loss's node for the model's own, while the autograd thread still
# holds the previous step's last name): rank 1 runs out of memory there, and its request is named
# by that layer, or by the loss's node, and the line, after FSDP's own frames.
fsdp_oom() {
    backward_oom "$2" --fsdp "$1"
    check "$dir.report.json" \
        "'_unshard' in [f['name'] for e in snaps['rank-00001.pickle']['device_traces'][0] if e['action'] == 'oom' for f in e['frames']]"
}
case_torchrun_like_oom_in_an_fsdp_hook_names_the_layer_and_line() {
    fsdp_oom block "AddBackward0 in backward of h.2 (Block)"
}
# ... and the shards the optimizer holds are named, though the model's parameters are their
# all-gathered copies at that moment
case_torchrun_like_oom_in_fsdps_root_hook_names_the_loss_and_line() {
    fsdp_oom root "backward of NllLossBackward0"
    check "$dir.report.json" \
        "'parameter wte (allocated before step 2)' in [f['name'] for g in snaps['rank-00001.pickle']['segments'] for b in g['blocks'] for f in b['frames']]" \
        "'optimizer state momentum_buffer of wte' in [o['function'] for o in r['oom_ranks'][0]['live_sites']]"
}

# With torch.distributed initialised, rank 0 gathers over a gloo group of ranksnap's own: the
# stand-in's collectives leave their files in the process group's folder.
case_torchrun_like_gather_over_the_process_group() {
    export RANKSNAP_GATHER_TIMEOUT=30 RANKSNAP_DEBUG=INFO
    torchrun_like 3 --steps 2:5 "$py" "$train" --diverge 2:1.5 --dist "$dir/pg"
    live
    ls "$dir/pg" | grep -q '^g1\.' || { echo "no collective of ranksnap's group in $dir/pg"; ls "$dir/pg"; exit 1; }
    ! grep -q "waiting for the other ranks' files" "$dir.err.0" || { echo "fell back to the files"; exit 1; }
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [2]" "len(r['ranks']) == 3"
}

# A pipeline x data-parallel job's ranks in a ("pp", "dp") DeviceMesh (which makes the process
# group itself), one more group made with new_group: each rank's pickle carries the groups it was
# in, every member of a group with the same id, named by the mesh's dimension, its rank the index
# among the sorted members; neither the whole world's groups nor the mesh's again without a name.
case_torchrun_like_device_mesh_groups_are_in_every_ranks_pickle() {
    export RANKSNAP_GATHER_TIMEOUT=30 MASTER_ADDR=mesh MASTER_PORT=$$
    torchrun_like 4 --steps 2:5 "$py" "$train" --mesh pp=2,dp=2 --group 0,1,2 --sync
    live
    "$ranksnap" report "$dir" > "$dir.report.txt" || exit 1  # the reader takes them
    "$py" - "$dir" <<'PY' || { tail -20 "$dir".err.*; exit 1; }
import glob, os, pickle, sys
want = {"pp": [[0, 2], [1, 3]], "dp": [[0, 1], [2, 3]], "": [[0, 1, 2]]}
got, ids, bad = {}, {}, []
for r in range(4):
    s = pickle.load(open(os.path.join(sys.argv[1], f"rank-{r:05d}.pickle"), "rb"))
    if s["ranksnap"].get("rank") != r:
        bad.append(f"rank-{r:05d}.pickle says rank {s['ranksnap'].get('rank')}")
    for c in s["ranksnap"].get("communicators", []):
        if c["kind"] != "torch" or c["allreduces"] != 0 or set(c) != {"id", "size", "rank", "kind", "name", "allreduces"}:
            bad.append(f"rank {r}: {c}")
        got.setdefault(c["name"], {}).setdefault(c["id"], []).append((r, c["rank"], c["size"]))
for name, groups in want.items():
    members = sorted(sorted(r for r, _, _ in m) for m in got.get(name, {}).values())
    if members != groups:
        bad.append(f"{name!r} groups {members}, want {groups}")
    for m in got.get(name, {}).values():
        ranks = sorted(r for r, _, _ in m)
        if any(i != ranks.index(r) or n != len(ranks) for r, i, n in m):
            bad.append(f"{name!r}: ranks and sizes {m}")
if set(got) - set(want):
    bad.append(f"groups named {sorted(set(got) - set(want))}")
all_ids = [i for g in got.values() for i in g]
if len(all_ids) != len(set(all_ids)):
    bad.append("two groups share an id")
print("\n".join(bad) or "ok")
sys.exit(1 if bad else 0)
PY
}

# A torchrun restart (TORCHELASTIC_RESTART_COUNT=1) writes rank-RRRRR.a1.pickle and leaves
# attempt 0's files as they were; `ranksnap report` compares one attempt, --attempt picks it.
case_torchrun_restart_keeps_the_previous_attempt() {
    export RANKSNAP_GATHER_TIMEOUT=30
    torchrun_like 2 --steps 2:5 "$py" "$train" --diverge 1:1.5 > /dev/null
    sum0=$(cat "$dir"/rank-00000.pickle "$dir"/rank-00001.pickle | cksum)
    TORCHELASTIC_RESTART_COUNT=1 torchrun_like 2 --steps 2:5 "$py" "$train" > /dev/null
    test -f "$dir/rank-00000.a1.pickle" && test -f "$dir/rank-00001.a1.pickle" || { ls "$dir"; exit 1; }
    test "$(cat "$dir"/rank-00000.pickle "$dir"/rank-00001.pickle | cksum)" = "$sum0" || { echo "attempt 0 overwritten"; exit 1; }
    "$ranksnap" report --json "$dir" > "$dir.a1.json" 2> "$dir.a1.err" || exit 1
    "$ranksnap" report --json --attempt 0 "$dir" > "$dir.a0.json" || exit 1
    grep -q "comparing attempt 1" "$dir.a1.err" || { cat "$dir.a1.err"; exit 1; }
    check "$dir.a1.json" "r['divergent_ranks'] == []"
    check "$dir.a0.json" "[d['rank'] for d in r['divergent_ranks']] == [1]"
}

# Two torchrun-like jobs one after the other in one RANKSNAP_DIR: the second (another
# RANKSNAP_JOB) leaves the first's pickles and report as they were and writes its own under
# the job-qualified names; its rank 0 finds its peers' files under those names; `ranksnap report
# DIR` compares one job's ranks and names the other job's files left out, as for .rsnap files
# (tests/cli/rank_files.sh).
case_torchrun_like_second_job_keeps_the_first_jobs_pickles() {
    export RANKSNAP_GATHER_TIMEOUT=30 RANKSNAP_DEBUG=INFO
    RANKSNAP_JOB=job-A torchrun_like 2 --steps 2:5 "$py" "$train" --diverge 1:1.5 > /dev/null
    a=$(cd "$dir" && cksum rank-00000.pickle rank-00001.pickle report.json report.txt)
    RANKSNAP_JOB=job-B torchrun_like 2 --steps 2:5 "$py" "$train" --diverge 0:1.5 > /dev/null
    ls "$dir"
    test "$(cd "$dir" && cksum rank-00000.pickle rank-00001.pickle report.json report.txt)" = "$a" ||
        { echo "job A's files changed"; exit 1; }
    grep -q "holds another job's file, .*rank-00001.pickle (job job-A); this job (job-B) leaves it alone and writes rank-00001.job-job-B.pickle" "$dir.err.1" ||
        { echo "rank 1 of job B did not say whose file it left alone"; cat "$dir.err.1"; exit 1; }
    grep -q "waiting for the other ranks' files" "$dir.err.0" || { cat "$dir.err.0"; exit 1; }
    test -f "$dir/report.job-job-B.json" || { echo "no live report of job B"; cat "$dir.err.0"; exit 1; }
    check "$dir/report.job-job-B.json" "[d['rank'] for d in r['divergent_ranks']] == [0]" \
        "len(r['ranks']) == 2" "r['missing_ranks'] == []" \
        "sorted(n for n, s in snaps.items() if s['ranksnap']['job'] == 'job-B') == ['rank-00000.job-job-B.pickle', 'rank-00001.job-job-B.pickle']" \
        "sorted(n for n, s in snaps.items() if s['ranksnap']['job'] == 'job-A') == ['rank-00000.pickle', 'rank-00001.pickle']"
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [1]"
    "$ranksnap" report --json "$dir" > "$dir.r.json" 2> "$dir.r.err"; rc=$?
    cat "$dir.r.err"
    test $rc -eq 0 || { echo "ranksnap report DIR: exit status $rc"; exit 1; }
    test "$(grep -c 'is from job .* left out' "$dir.r.err")" -eq 2 || { echo "the other job's files not named"; exit 1; }
    check "$dir.r.json" "len(r['ranks']) == 2" "r['missing_ranks'] == []"
}

# The same for a restart: job B's attempt 1 finds job A's rank-RRRRR.a1.pickle and writes
# rank-RRRRR.a1.job-job-B.pickle; A's attempts stay as they were, B's live report compares its
# own attempt, and `ranksnap report DIR` one attempt of one job.
case_torchrun_restart_of_a_second_job_keeps_the_first_jobs_attempt() {
    export RANKSNAP_GATHER_TIMEOUT=30 RANKSNAP_DEBUG=INFO TORCHELASTIC_RESTART_COUNT=1
    RANKSNAP_JOB=job-A torchrun_like 2 --steps 2:5 "$py" "$train" > /dev/null
    a=$(cat "$dir"/rank-00000.a1.pickle "$dir"/rank-00001.a1.pickle | cksum)
    RANKSNAP_JOB=job-B torchrun_like 2 --steps 2:5 "$py" "$train" --diverge 1:1.5 > /dev/null
    ls "$dir"
    test "$(cat "$dir"/rank-00000.a1.pickle "$dir"/rank-00001.a1.pickle | cksum)" = "$a" ||
        { echo "job A's attempt 1 overwritten"; exit 1; }
    test -f "$dir/rank-00000.a1.job-job-B.pickle" && test -f "$dir/rank-00001.a1.job-job-B.pickle" ||
        { echo "job B's qualified names of attempt 1"; exit 1; }
    check "$dir/report.job-job-B.json" "[d['rank'] for d in r['divergent_ranks']] == [1]" "len(r['ranks']) == 2" \
        "all(s['ranksnap']['attempt'] == 1 for s in snaps.values())"
    "$ranksnap" report --json "$dir" > "$dir.r.json" 2> "$dir.r.err"; rc=$?
    cat "$dir.r.err"
    test $rc -eq 0 && test "$(grep -c 'is from job .* left out' "$dir.r.err")" -eq 2 ||
        { echo "ranksnap report DIR"; exit 1; }
    check "$dir.r.json" "len(r['ranks']) == 2"
}

# The dumps outside a range's end take the same names: job B's rank 1 runs out of memory (its
# pickle written by the OOM observer through ranksnap_dump) in a folder where job A's files
# are; A's stay as they were, and `ranksnap report DIR` names B's OOM rank from B's files.
case_torchrun_like_second_jobs_oom_pickle_takes_its_own_name() {
    export RANKSNAP_GATHER_TIMEOUT=3
    RANKSNAP_JOB=job-A torchrun_like 2 --steps 2:5 "$py" "$train" > /dev/null
    a=$(cd "$dir" && cksum rank-00000.pickle rank-00001.pickle)
    RANKSNAP_JOB=job-B torchrun_like 2 --steps 2:6 "$py" "$train" --oom 1:3 > /dev/null
    ls "$dir"
    test "$(cd "$dir" && cksum rank-00000.pickle rank-00001.pickle)" = "$a" || { echo "job A's files changed"; exit 1; }
    "$ranksnap" report --json "$dir" > "$dir.r.json" 2> "$dir.r.err"; rc=$?
    cat "$dir.r.err"
    test $rc -eq 0 && test "$(grep -c 'is from job job-A .* left out' "$dir.r.err")" -eq 2 ||
        { echo "ranksnap report DIR"; exit 1; }
    check "$dir.r.json" "[o['rank'] for o in r['oom_ranks']] == [1]" "r['oom_ranks'][0]['step'] == 3" \
        "snaps['rank-00001.job-job-B.pickle']['ranksnap']['reason'] == 'oom'" \
        "snaps['rank-00001.job-job-B.pickle']['ranksnap']['job'] == 'job-B'"
}

# A plain name another job creates while this one runs (after this one looked at it at start):
# this job's pickle is created without replacing it and takes the job-qualified name then.
case_torchrun_like_pickle_made_by_another_job_meanwhile_is_left_alone() {
    export RANKSNAP_GATHER_TIMEOUT=3 RANKSNAP_DEBUG=INFO
    rm -f "$dir.err.0" # an earlier run's says the recorder started
    RANKSNAP_JOB=job-B torchrun_like 1 --steps 2:5 "$py" "$train" --block-at 3:3 > /dev/null &
    job=$!
    i=0
    until grep -q "the framework's recorder started" "$dir.err.0" 2>/dev/null; do
        i=$((i + 1)); [ $i -lt 200 ] || { echo "job B never started recording"; exit 1; }; sleep 0.05
    done
    printf 'another job' > "$dir/rank-00000.pickle"
    wait $job
    ls "$dir"
    test "$(cat "$dir/rank-00000.pickle")" = "another job" || { echo "the other job's file replaced"; exit 1; }
    grep -q "rank-00000.pickle is another job's (or an earlier run's) file; this job (job-B) leaves it alone and writes .*rank-00000.job-job-B.pickle instead" "$dir.err.0" ||
        { cat "$dir.err.0"; exit 1; }
    "$py" -c "import pickle, sys; m = pickle.load(open(sys.argv[1], 'rb'))['ranksnap']; \
assert m['job'] == 'job-B' and m['reason'] == 'range_end', m" "$dir/rank-00000.job-job-B.pickle" || exit 1
}

# A trigger without MPI: rank 0 takes RANKSNAP_DIR/trigger and publishes the start step; every
# rank records the same steps (they step together through the process group's barrier).
case_torchrun_like_trigger_starts_a_range_on_every_rank() {
    export RANKSNAP_GATHER_TIMEOUT=30 RANKSNAP_TRIGGER_STEPS=3 RANKSNAP_TRIGGER_LAG=2
    "$ranksnap" trigger "$dir" > /dev/null || exit 1
    torchrun_like 3 --steps 1000:1001 "$py" "$train" --steps 8 --dist "$dir/pg" --sync
    live
    check "$dir/report.json" "len(r['ranks']) == 3" \
        "all(s['ranksnap']['ranges'] == [[3, 6]] for s in snaps.values())"
}

# ---- the launchers PyTorch users type, and ranksnap-run in front of them ----------------------
#
# Each must give one pickle per rank, all of one job, under the plain names, and no warning of
# another job's file; and the launcher's own process (which loaded the CUDA driver, as torchrun's
# and accelerate's do, through the stand-in torch and FAKE_TORCH_CUDA_DRIVER) says nothing.

# the pickles of DIR are rank-00000.pickle .. rank-(N-1).pickle, of one job and world size N
one_file_per_rank() {
    n=$1
    ls "$dir"
    "$py" - "$dir" "$n" <<'PY' || { cat "$dir.stderr"; exit 1; }
import glob, os, pickle, sys
d, n = sys.argv[1], int(sys.argv[2])
names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(d, "rank-*")))
want = ["rank-%05d.pickle" % r for r in range(n)]
assert names == want, "files %s, expected %s" % (names, want)
metas = [pickle.load(open(os.path.join(d, x), "rb"))["ranksnap"] for x in names]
assert [m["rank"] for m in metas] == list(range(n)), [m["rank"] for m in metas]
assert all(m["world_size"] == n for m in metas), [m["world_size"] for m in metas]
assert len({m["job"] for m in metas}) == 1, [m["job"] for m in metas]
assert not [x for x in os.listdir(d) if ".job-" in x], os.listdir(d)
PY
    for bad in "another job's" "could not be read" "none of its allocation calls reached"; do
        ! grep -q "$bad" "$dir.stderr" || { echo "said: $bad"; cat "$dir.stderr"; exit 1; }
    done
}

# python SCRIPT ARGS under ranksnap-run, stdout and stderr kept (every process of the job shares them)
in_front() {
    "$run" --lib "$lib" --steps 2:5 "$py" "$@" > "$dir.stdout" 2> "$dir.stderr"
    rc=$?
    cat "$dir.stdout"
    test $rc -eq 0 || { echo "exit status $rc"; cat "$dir.stderr"; exit 1; }
}

# Lightning's Trainer(devices=2, strategy="ddp"), unmodified: the main process starts the second
# with LOCAL_RANK=1, WORLD_SIZE=2 and no RANK, each passes its rank to init_process_group.
case_lightning_like_second_process_takes_its_rank_from_torch_distributed() {
    export RANKSNAP_GATHER_TIMEOUT=30
    in_front "$src/lightning_fake.py" --devices 2 --diverge 1:1.5
    one_file_per_rank 2
    live
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [1]" \
        "r['divergent_ranks'][0]['sites'][0]['file'].endswith('train_fake.py')" \
        "len(r['ranks']) == 2" "r['missing_ranks'] == []"
}

# The same with mpi4py imported in each process (a singleton MPI world, which ranksnap joined):
# a world of one numbers nothing, and torch.distributed's ranks are taken all the same.
case_lightning_like_rank_that_imported_mpi4py_takes_its_rank_from_torch_distributed() {
    export RANKSNAP_GATHER_TIMEOUT=30
    in_front "$src/lightning_fake.py" --devices 2 --diverge 1:1.5 --mpi4py
    one_file_per_rank 2
    live
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [1]" "len(r['ranks']) == 2"
}

# The same when the script allocates before Trainer.fit: ranksnap started in the main process
# as a program on its own (rank 0 of 1, its own job id), which becomes rank 0 of 2 of the job
# before it writes anything.
case_lightning_like_main_process_that_allocated_before_fit_becomes_rank_0_of_2() {
    export RANKSNAP_GATHER_TIMEOUT=30
    in_front "$src/lightning_fake.py" --devices 2 --diverge 1:1.5 --early
    one_file_per_rank 2
    live
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [1]" "len(r['ranks']) == 2"
}

# Lightning's second process runs out of memory in its first forward pass, before any step: the
# OOM observer's pickle is rank 1's (torch.distributed says so), not a guessed rank 0's.
case_lightning_like_rank_out_of_memory_before_its_first_step_writes_its_own_pickle() {
    "$run" --lib "$lib" --steps 2:5 "$py" "$src/lightning_fake.py" --devices 2 --oom 1 \
        > "$dir.stdout" 2> "$dir.stderr"
    ls "$dir"
    grep -q "OutOfMemoryError" "$dir.stderr" || { echo "no OutOfMemoryError"; cat "$dir.stderr"; exit 1; }
    test "$(cd "$dir" && ls rank-* 2>/dev/null | tr '\n' ' ')" = "rank-00001.pickle " || { cat "$dir.stderr"; exit 1; }
    "$py" -c "import pickle, sys; m = pickle.load(open(sys.argv[1], 'rb'))['ranksnap']; \
assert (m['rank'], m['world_size'], m['reason']) == (1, 2, 'oom'), m" "$dir/rank-00001.pickle" || exit 1
}

# srun in front of torchrun: the agent is task 1 of 2 (a second node), and its workers inherit
# SLURM_PROCID=1 beside torchrun's RANK: each worker is the rank torchrun gave it, of the
# Slurm job, and meets its peer in the files (no process group).
case_torchrun_like_under_srun_takes_torchruns_ranks() {
    export RANKSNAP_GATHER_TIMEOUT=30 SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=0 SLURM_JOB_ID=4242
    in_front "$src/torchrun_fake.py" --nproc-per-node 2 "$train" --diverge 1:1.5
    one_file_per_rank 2
    live
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [1]" "len(r['ranks']) == 2" \
        "all(s['ranksnap']['job'] == '4242' for s in snaps.values())"
}

# A process started as one of two without its rank (LOCAL_RANK=1, WORLD_SIZE=2, no RANK) whose
# script never makes a process group: nothing is written under a guessed rank 0; it says why.
case_process_without_its_rank_or_a_process_group_writes_nothing() {
    env -u RANK LOCAL_RANK=1 WORLD_SIZE=2 "$run" --lib "$lib" --steps 2:5 "$py" "$train" \
        > "$dir.stdout" 2> "$dir.stderr" || { cat "$dir.stderr"; exit 1; }
    cat "$dir.stderr"
    test -z "$(ls "$dir")" || { echo "written:"; ls "$dir"; exit 1; }
    test "$(grep -c "not recording yet: this process was started as one of 2 ranks without its rank" "$dir.stderr")" -eq 1 ||
        { echo "not said once"; exit 1; }
}

# ranksnap-run torchrun --nproc-per-node 2 train.py: the agent is a Python process that imports
# torch, loads the driver and allocates nothing; its workers are the ranks.
case_ranksnap_run_in_front_of_a_torchrun_like_agent() {
    export RANKSNAP_GATHER_TIMEOUT=30
    in_front "$src/torchrun_fake.py" --nproc-per-node 2 "$train" --diverge 1:1.5 --dist env --sync
    one_file_per_rank 2
    live
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [1]" "len(r['ranks']) == 2"
}

# ranksnap-run accelerate launch --multi_gpu --num_processes 2 train.py: the launcher checks the
# GPUs and runs torch's elastic agent in its own process.
case_ranksnap_run_in_front_of_an_accelerate_like_launcher() {
    export RANKSNAP_GATHER_TIMEOUT=30
    in_front "$src/accelerate_fake.py" launch --multi_gpu --num_processes 2 "$train" --diverge 1:1.5 --dist env --sync
    one_file_per_rank 2
    live
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [1]" "len(r['ranks']) == 2"
}

# The hint about the static CUDA runtime stays for a process that holds device memory ranksnap
# never saw (a context on GPU 0, no shared CUDA runtime loaded), whether the glue's exit asks
# (torch imported) or the library's destructor. A process that only initialised the driver is
# left in peace when the glue asks, while the driver answers; the destructor, after a static
# runtime may have released its context, still says the process "used CUDA". With the shared
# runtime loaded (whose cudaMalloc the preload would have seen: a launcher that asked for a
# device's properties) neither says anything.
case_process_holding_a_context_ranksnap_never_saw_is_told_how_to_link() {
    ctx='import ctypes, os; d = ctypes.CDLL(os.environ["FAKE_TORCH_CUDA_DRIVER"]); d.cuInit(0)'
    retain='d.cuDevicePrimaryCtxRetain(ctypes.byref(ctypes.c_void_p()), 0)'
    count='n = ctypes.c_int(); d.cuDeviceGetCount(ctypes.byref(n))'
    hint="none of its allocation calls reached the preloaded ranksnap"
    said() { # PROGRAM EXPECTED ("" = nothing)
        out=$("$run" --lib "$lib" "$py" -c "$1" 2>&1)
        ok=0
        if [ -z "$2" ]; then [ -n "$out" ] || ok=1; else case "$out" in "$2"*) ok=1 ;; esac; fi
        [ $ok -eq 1 ] || { echo "for: $1"; echo "got: ${out:-nothing}"; echo "expected: ${2:-nothing}"; exit 1; }
        echo "ok: ${out:-nothing} <- $1"
    }
    for prog in "import torch; $ctx" "$ctx"; do
        said "$prog; $retain" "ranksnap: this process holds a CUDA context (device memory) on GPU 0, but $hint"
        said "$prog; ctypes.CDLL(os.environ['FAKE_CUDART']); $retain" ""
    done
    said "import torch; $ctx; $count" ""
    said "$ctx; $count" "ranksnap: this process used CUDA, but $hint"
    said "import ctypes, os; ctypes.CDLL(os.environ['FAKE_TORCH_CUDA_DRIVER'])" ""
}

"case_$name" "$@"
