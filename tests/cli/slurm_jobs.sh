#!/bin/sh
# slurm_jobs.sh — jobs launched by Slurm's srun, on a Slurm of the test's own: a slurmctld and a
# slurmd (Debian's) on this machine, with their configuration, state, spool folder and ports
# chosen here and stopped, by their process ids, when the case ends, whatever its outcome.
#
# - mpi_demo_names_the_diverging_rank: the MPI demo under `srun --mpi=pmix` (Debian's Open MPI
#   takes its world from Slurm's PMIx server): ranksnap starts in MPI_Init, gathers over MPI,
#   and rank 0's live report names rank 2; one snapshot per rank, Slurm's job id in each;
# - mpi_oom_rank_aborted_job_leaves_every_ranks_snapshot: rank 3 runs out of memory, writes its
#   snapshot and aborts the job (MPI_Abort), on which Slurm SIGKILLs the other tasks at once (no
#   SIGTERM first, unlike mpirun): their event rings are what they leave, and `ranksnap report`
#   recovers them beside rank 3's snapshot and names rank 3 and its request;
# - torch_ranks_take_their_rank_from_slurm: the PyTorch stand-in under
#   `srun -n 4 ranksnap-run python train_fake.py`, no MPI (--mpi=none): each rank's number is
#   SLURM_PROCID, the ranks meet in their files, one pickle per rank, rank 2 named;
# - torch_oom_rank_aborted_job_leaves_every_ranks_pickle: rank 3's OutOfMemoryError ends its
#   script; `srun --kill-on-bad-exit` sends the others SIGTERM, on which each writes its pickle.
#
# Skips (77), saying why, without slurmctld/slurmd, python3, or root (slurmd starts the tasks
# as the job's user); an error under CI=true (cli/missing_prerequisite.sh).
# usage: slurm_jobs.sh CASE RANKSNAP_RUN LIB RANKSNAP DEMO PYTHON TESTS_PYTHON_DIR WORK
set -u
name=$1 run=$2 lib=$3 ranksnap=$4 demo=$5 py=$6 src=$7 work=$8
here=$(cd "$(dirname "$0")" && pwd)
missing() { exec sh "$here/missing_prerequisite.sh" "$1" "the Slurm case $name did not run"; }
for p in slurmctld slurmd srun sinfo; do
    command -v "$p" >/dev/null || missing "no $p (Debian's slurmctld, slurmd and slurm-client)"
done
command -v "$py" >/dev/null || missing "$py not found"
[ "$(id -u)" -eq 0 ] || missing "not root: slurmd must start the tasks as the job's user"

dir=$work/$name
rm -rf "$dir" && mkdir -p "$dir" || exit 1
# The daemons' own folder: short, as it holds slurmd's sockets (a socket's path has 108 bytes).
sl=$(mktemp -d /tmp/ranksnap-slurm.XXXXXX) || exit 1
ctld="" slurmd=""
stop() {
    for p in $slurmd $ctld; do kill "$p" 2>/dev/null; done
    for p in $slurmd $ctld; do wait "$p" 2>/dev/null; done
    # what they logged, for a case that failed
    [ "${ok:-0}" = 1 ] || tail -n 15 "$sl/slurmctld.log" "$sl/slurmd.log" 2>/dev/null
    rm -rf "$sl"
}
trap stop EXIT
trap 'exit 1' INT TERM

# a job started from inside another Slurm job (a CI runner's) must not take that job's
# allocation for its own
for v in $(env | sed -n 's/^\(SLURM_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done

# two ports no one listens on, for the controller and the node
set -- $("$py" -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
host=$(hostname -s)
cat > "$sl/slurm.conf" <<EOF
ClusterName=ranksnap-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$1
SlurmdPort=$2
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$sl/state
SlurmdSpoolDir=$sl/spool
SlurmctldPidFile=$sl/slurmctld.pid
SlurmdPidFile=$sl/slurmd.pid
SlurmctldLogFile=$sl/slurmctld.log
SlurmdLogFile=$sl/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=10
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=ranksnap Nodes=$host Default=YES MaxTime=10 State=UP OverSubscribe=FORCE
EOF
mkdir -p "$sl/state" "$sl/spool"
export SLURM_CONF="$sl/slurm.conf"
slurmctld -D -f "$SLURM_CONF" > "$sl/slurmctld.out" 2>&1 &
ctld=$!
slurmd -D -f "$SLURM_CONF" > "$sl/slurmd.out" 2>&1 &
slurmd=$!
# the node is up when the controller lists it idle: polled, for at most 60 s
i=0
until [ "$(sinfo -h -n "$host" -o %T 2>/dev/null)" = idle ]; do
    i=$((i + 1))
    if [ $i -ge 600 ] || ! kill -0 "$ctld" 2>/dev/null || ! kill -0 "$slurmd" 2>/dev/null; then
        echo "FAIL: the test's Slurm did not come up"; cat "$sl/slurmctld.out" "$sl/slurmd.out"; exit 1
    fi
    sleep 0.1
done
echo "Slurm: slurmctld on port $1, slurmd on port $2 ($(slurmd -V))"

export RANKSNAP_BACKEND=sim RANKSNAP_DIR="$dir" RANKSNAP_DIVERGENCE= OMPI_MCA_btl=self,vader
# srun -n 4 ARGS..., its status and what it printed, bounded
job() {
    timeout 240 srun -n 4 "$@" > "$dir.stdout" 2> "$dir.stderr"
    rc=$?
    cat "$dir.stdout"
    echo "srun exit code $rc"
}
fail() { echo "FAIL: $*"; tail -n 30 "$dir.stderr"; ls -la "$dir"; exit 1; }
# every rank's file of KIND (rsnap, pickle) is there
each_rank_left() {
    for r in 0 1 2 3; do test -f "$dir/rank-0000$r.$1" || fail "rank $r left no .$1"; done
}
# python assertions on report.json (r) and, for pickles, the files (snaps)
check() {
    "$py" - "$@" <<'PY' || fail "the report says otherwise"
import glob, json, os, pickle, sys
r = json.load(open(sys.argv[1]))
snaps = {os.path.basename(p): pickle.load(open(p, "rb"))
         for p in glob.glob(os.path.join(os.path.dirname(sys.argv[1]), "rank-*.pickle"))}
for expr in sys.argv[2:]:
    if not eval(expr):
        print("FAILED:", expr)
        print(json.dumps(r, indent=1)[:3000])
        sys.exit(1)
PY
}

case_mpi_demo_names_the_diverging_rank() {
    out=$(job --mpi=pmix "$run" --lib "$lib" --steps 2:6 "$demo" --iters 8 --quiet --diverge 2:1.5)
    echo "$out"
    echo "$out" | grep -q "^srun exit code 0$" || fail "the job failed"
    each_rank_left rsnap
    test -f "$dir/report.json" || fail "rank 0 wrote no live report"
    grep -q "^rank 2 peaks 22% above the median" "$dir/report.txt" || fail "rank 2 is not named"
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [2]" \
        "r['missing_ranks'] == [] and len(r['ranks']) == 4"
    # the job each snapshot names is Slurm's, the same for all
    "$py" - "$dir" <<'PY' || fail "the snapshots do not name one Slurm job"
import glob, msgpack, sys
jobs = {msgpack.unpackb(open(p, "rb").read(), raw=False, strict_map_key=False)["job"]
        for p in glob.glob(sys.argv[1] + "/rank-*.rsnap")}
print("job", jobs)
assert len(jobs) == 1 and jobs.pop().isdigit()
PY
}

case_mpi_oom_rank_aborted_job_leaves_every_ranks_snapshot() {
    out=$(job --mpi=pmix --kill-on-bad-exit=1 "$run" --lib "$lib" --steps 2:6 "$demo" --iters 8 \
          --quiet --oom 3)
    echo "$out"
    echo "$out" | grep -q "^srun exit code 0$" && fail "the aborted job ended well"
    test -f "$dir/rank-00003.rsnap" || fail "rank 3 wrote no snapshot at its OOM"
    for r in 0 1 2; do
        test -f "$dir/rank-0000$r.rsnap" -o -f "$dir/rank-0000$r.ring" || fail "rank $r left nothing"
    done
    "$ranksnap" report --json "$dir" > "$dir/post.json" || fail "ranksnap report failed"
    "$ranksnap" report "$dir"
    check "$dir/post.json" "[o['rank'] for o in r['oom_ranks']] == [3]" \
        "r['oom_ranks'][0]['requested'] > 0" "r['missing_ranks'] == [] and len(r['ranks']) == 4" \
        "[x['rank'] for x in r['ranks'] if x['peak_allocated'] > 0] == [0, 1, 2, 3]"
}

case_torch_ranks_take_their_rank_from_slurm() {
    export PYTHONPATH="$src/fake_torch"
    out=$(job --mpi=none "$run" --lib "$lib" --steps 2:6 "$py" "$src/train_fake.py" --diverge 2:1.5)
    echo "$out"
    echo "$out" | grep -q "^srun exit code 0$" || fail "the job failed"
    each_rank_left pickle
    test -f "$dir/report.json" || fail "rank 0 wrote no live report"
    check "$dir/report.json" "[d['rank'] for d in r['divergent_ranks']] == [2]" \
        "r['divergent_ranks'][0]['sites'][0]['file'].endswith('train_fake.py')" \
        "r['missing_ranks'] == [] and len(r['ranks']) == 4" "len(snaps) == 4"
}

case_torch_oom_rank_aborted_job_leaves_every_ranks_pickle() {
    export PYTHONPATH="$src/fake_torch"
    out=$(job --mpi=none --kill-on-bad-exit=1 "$run" --lib "$lib" --steps 2:6 "$py" \
          "$src/train_fake.py" --oom 3:3 --block-at 3:100)
    echo "$out"
    echo "$out" | grep -q "^srun exit code 0$" && fail "the aborted job ended well"
    each_rank_left pickle
    "$ranksnap" report --json "$dir" > "$dir/post.json" || fail "ranksnap report failed"
    "$ranksnap" report "$dir"
    check "$dir/post.json" "[o['rank'] for o in r['oom_ranks']] == [3]" \
        "r['oom_ranks'][0]['step'] == 3" "r['missing_ranks'] == [] and len(r['ranks']) == 4" \
        "sorted(s['ranksnap']['reason'] for s in snaps.values()) == ['oom', 'signal', 'signal', 'signal']"
}

"case_$name"
ok=1
echo "slurm_jobs: $name ok"
