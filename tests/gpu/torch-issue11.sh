#!/bin/bash
# Issue 11 on the GPU machine, in one call of at most 9 minutes (docs/EXAMPLES.md has the command,
# what to commit where afterwards and, once run, the results): an unmodified DDP GPT-2 script
# (tests/gpu/torch_ddp_train.py; transformers GPT2Config, random init, no download) under
#   mpirun -np 2 launch/ranksnap-run --steps 2:6 python torch_ddp_train.py ...
#   torchrun --nproc-per-node 2 --no-python launch/ranksnap-run --steps 2:6 python torch_ddp_train.py ...
# for the four cases: (a) rank 1 with a 1.5x batch, (b) rank 1 keeping every step's logits,
# (c) rank 1 running out of memory at step 4, (d) identical ranks. Two GPUs with NCCL when the
# machine has two, else both ranks on GPU 0 with gloo. Then the overhead benchmark and the time
# from SIGTERM to a rank's pickle. Everything goes under $OUT; PASS/FAIL lines in
# $OUT/issue11/summary.txt; the pickles to commit as fixtures in $OUT/issue11/fixtures.
# Every job is bounded by what is left of BUDGET seconds (default 500): a hang is a FAIL and the
# steps after it are SKIPPED, never a call that runs past the device's limit.
#
#   source .device-deps/setup.sh && bash tests/gpu/torch-issue11.sh
set -uo pipefail
OUT=${OUT:-/tmp/ranksnap-out}
R=$OUT/issue11
BUDGET=${BUDGET:-500}
mkdir -p "$R"
cd "$(dirname "$0")/../.."
# seconds left of the budget (the benchmarks after the jobs keep their own margins below)
left() { echo $((BUDGET - SECONDS)); }
for need in "python3 -c 'import torch, transformers'" "command -v mpirun" "command -v torchrun" \
            "python3 -c 'import torch; assert torch.cuda.is_available()'"; do
    sh -c "$need" > /dev/null 2>&1 || { echo "missing on this machine: $need" | tee "$R/summary.txt"; exit 1; }
done
# Makefiles, not Ninja: under Ninja the target "ranksnap" is the command's file (its OUTPUT_NAME),
# and libranksnap.so would not be built
gen=
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 MASTER_ADDR=127.0.0.1
cmake -S . -B build $gen -DRANKSNAP_WERROR=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$R/build.log" 2>&1 && cmake --build build -j16 --target ranksnap ranksnap_reader ranksnap_cli >> "$R/build.log" 2>&1 \
  || { tail -30 "$R/build.log"; exit 1; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
  mpirun --version | head -1
  echo "GPUs: $(nvidia-smi -L | wc -l) (2: one rank per GPU with NCCL; 1: both ranks on it with gloo)"; } | tee "$R/machine.txt"
summary=$R/summary.txt
: > "$summary"
train=tests/gpu/torch_ddp_train.py
port=29600

# run LAUNCHER CASE ARGS...: the job, bounded (a hang is a failure), its files in $R/LAUNCHER-CASE
run() {
    launcher=$1 case=$2; shift 2
    d=$R/$launcher-$case
    rm -rf "$d" && mkdir -p "$d"
    port=$((port + 1))
    export MASTER_PORT=$port
    limit=$(left); [ "$limit" -gt 150 ] && limit=150
    if [ "$limit" -lt 30 ]; then
        echo "$launcher $case: SKIPPED (the budget of $BUDGET s is spent)" | tee -a "$R/times.txt"
        return 125
    fi
    start=$(python3 -c 'import time; print(time.time())')
    if [ "$launcher" = mpirun ]; then
        timeout -k 5 "$limit" mpirun -np 2 --bind-to none -x MASTER_ADDR -x MASTER_PORT -x PATH -x LD_LIBRARY_PATH \
            launch/ranksnap-run --steps 2:6 --dir "$d" python3 "$train" "$@" > "$d.stdout" 2> "$d.stderr"
    else
        timeout -k 5 "$limit" torchrun --standalone --nproc-per-node 2 --no-python \
            launch/ranksnap-run --steps 2:6 --dir "$d" python3 "$train" "$@" > "$d.stdout" 2> "$d.stderr"
    fi
    rc=$?
    echo "$launcher $case: exit $rc after $(python3 -c "import time; print(round(time.time() - $start, 1))") s" | tee -a "$R/times.txt"
    ls -la "$d" > "$d.ls"
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "$launcher $case: HUNG, killed after $limit s" | tee -a "$R/times.txt"
    return $rc
}

# verdict LAUNCHER CASE JSON EXPR...: PASS when every Python expression on report r holds
verdict() {
    launcher=$1 case=$2 json=$3; shift 3
    if grep -q "^$launcher $case: SKIPPED" "$R/times.txt"; then echo "SKIPPED $launcher $case (time)" >> "$summary"; return; fi
    if python3 - "$json" "$@" > "$R/$launcher-$case.verdict" 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for e in sys.argv[2:]:
    if not eval(e):
        print("FAILED:", e)
        print(json.dumps(r, indent=1)[:6000])
        sys.exit(1)
print("ok")
PY
    then echo "PASS $launcher $case" >> "$summary"; else echo "FAIL $launcher $case (see $launcher-$case.verdict)" >> "$summary"; fi
}

py_site='(lambda s: s["file"].endswith(".py") and s["line"] > 0)'
for launcher in mpirun torchrun; do
    run "$launcher" a --bigger 1:1.5
    verdict "$launcher" a "$R/$launcher-a/report.json" "[d['rank'] for d in r['divergent_ranks']] == [1]" \
        "$py_site(r['divergent_ranks'][0]['sites'][0])"
    # no report from the first job: the glue or the library is broken here, and every other job
    # would spend the budget saying so again
    if [ ! -f "$R/$launcher-a/report.json" ]; then
        echo "STOPPED: $launcher a wrote no report.json (see $launcher-a.stderr)" | tee -a "$summary"
        tail -20 "$R/$launcher-a.stderr"
        exit 1
    fi
    run "$launcher" b --keep-logits 1
    verdict "$launcher" b "$R/$launcher-b/report.json" "[d['rank'] for d in r['divergent_ranks']] == [1]" \
        "r['divergent_ranks'][0]['pattern'] == 'growth'" "$py_site(r['divergent_ranks'][0]['sites'][0])"
    run "$launcher" c --oom 1:4; rc=$?
    build/ranksnap report "$R/$launcher-c" > "$R/$launcher-c.report.txt" 2>&1
    build/ranksnap report --json "$R/$launcher-c" > "$R/$launcher-c.report.json" 2>> "$R/$launcher-c.report.txt"
    echo "exit code $rc (124 or 137: hung, killed by the time limit)" >> "$R/$launcher-c.report.txt"
    verdict "$launcher" c "$R/$launcher-c.report.json" "$rc not in (124, 137)" \
        "[o['rank'] for o in r['oom_ranks']] == [1]" "r['oom_ranks'][0]['requested'] > 0" \
        "r['oom_ranks'][0]['step'] == 4" "$py_site(r['oom_ranks'][0]['stack'])" \
        "len(r['ranks']) == 2 and r['missing_ranks'] == []"
    run "$launcher" d
    verdict "$launcher" d "$R/$launcher-d/report.json" "r['divergent_ranks'] == [] and r['oom_ranks'] == []" \
        "len(r['ranks']) == 2"
done

# the pickles open in PyTorch's own viewer code
python3 - "$R/mpirun-a/rank-00001.pickle" > "$R/memory_viz.txt" 2>&1 <<'PY'
import pickle, sys
from torch.cuda import _memory_viz as mv
d = pickle.load(open(sys.argv[1], "rb"))
print(sorted(d.keys()))
print(mv.segsum(d)[:2000])
print("trace_plot html bytes", len(mv.trace_plot(d)), "segment_plot html bytes", len(mv.segment_plot(d)))
PY
echo "memory_viz: $(tail -1 "$R/memory_viz.txt")" >> "$summary"

# the fixtures for tests/data/torch_mode (tests/cli/torch_mode_fixtures.sh checks them once
# committed): the pickles of cases (a) and (c) under mpirun, as ranksnap wrote them
for c in a c; do
    mkdir -p "$R/fixtures/mpirun-$c"
    cp "$R/mpirun-$c"/rank-*.pickle "$R/fixtures/mpirun-$c/" 2>/dev/null
done
du -sh "$R/fixtures"/* >> "$summary" 2>&1

# the overhead (docs/BENCHMARKS.md) and the time from SIGTERM to a rank's pickle (docs/POSTMORTEM.md)
export MASTER_PORT=$((port + 50))
if [ "$(left)" -gt 100 ]; then
    timeout -k 5 $(($(left) - 60)) python3 tests/bench/torch_overhead.py --lib build/libranksnap.so \
        --run launch/ranksnap-run --out "$R/overhead" > "$R/overhead.txt" 2>&1
    echo "overhead: exit $?" >> "$summary"
else
    echo "SKIPPED overhead (time)" | tee "$R/overhead.txt" >> "$summary"
fi
if [ "$(left)" -gt 40 ]; then
    timeout -k 5 $(($(left) - 10)) python3 tests/gpu/torch_sigterm_timing.py --run launch/ranksnap-run \
        --lib build/libranksnap.so --out "$R/sigterm" > "$R/sigterm.txt" 2>&1
    echo "sigterm timing: exit $?" >> "$summary"
else
    echo "SKIPPED sigterm timing (time)" | tee "$R/sigterm.txt" >> "$summary"
fi
echo "total: $SECONDS s" >> "$summary"
cat "$summary" "$R/times.txt" "$R/overhead.txt" "$R/sigterm.txt"
