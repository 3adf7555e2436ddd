#!/bin/bash
# shared-gpu.sh — two ranks of one job on one GPU, as a small job (or MPS) runs them: each rank's
# "outside" must be its own process's device memory, not the device's whole use with the other
# rank's pool in it, and the report must name the device shared by both ranks.
#   c      the demo (ranksnap's caching allocator on the cuda backend) under
#            mpirun -np 2 launch/ranksnap-run --steps 2:6 ranksnap-demo --batch 65536 --diverge 1:1.5
#   torch  tests/gpu/torch_ddp_train.py, DDP over gloo with both ranks on cuda:0, under
#            mpirun -np 2 launch/ranksnap-run --steps 2:6 python3 torch_ddp_train.py --backend gloo
#          (skipped, saying so, without torch and transformers)
#   cost   how long NVML took to load, and the demo's median step time with NVML asked (the
#          default) and not (RANKSNAP_NVML=none)
# The checks read `ranksnap report --json` of each job's files: both ranks' outside is their own
# process's (outside_of "process"), each one's outside peak is below the other rank's peak
# reserved (the device's whole use had that pool in it), and the device is named shared by ranks
# 0 and 1 (shared_devices, and the text report's line). Where NVML cannot give a rank's own figure
# (a container without the host's pid namespace), the report must say so and why instead, with
# n/a in its column; the case then says that this machine could not show the own figure.
# Everything goes under $OUT/shared-gpu; PASS/FAIL lines in its summary.txt.
# Exit status: 0 every case passed, 1 one failed, 77 no GPU or no mpirun (skipped, saying why).
#
#   bash tests/gpu/shared-gpu.sh                         # builds build/ first
#   BUILD=build NO_BUILD=1 bash tests/gpu/shared-gpu.sh  # what `ctest -L gpu` runs
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ranksnap-out}
BUILD=${BUILD:-build}
R=$OUT/shared-gpu
mkdir -p "$R"
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "SKIPPED: no GPU (nvidia-smi lists none): two ranks on one GPU need one"; exit 77
fi
command -v mpirun > /dev/null || { echo "SKIPPED: no mpirun: the two ranks are an MPI job"; exit 77; }
if [ "${NO_BUILD:-0}" != 1 ]; then
    cmake -S . -B "$BUILD" -DRANKSNAP_WERROR=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$R/build.log" 2>&1 &&
      cmake --build "$BUILD" -j16 --target ranksnap ranksnap_reader ranksnap_cli ranksnap-demo >> "$R/build.log" 2>&1 ||
      { tail -30 "$R/build.log"; exit 1; }
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 CUDA_VISIBLE_DEVICES=0 MASTER_ADDR=127.0.0.1
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1
  echo "both ranks on GPU 0 (CUDA_VISIBLE_DEVICES=0)"; } | tee "$R/machine.txt"
summary=$R/summary.txt
: > "$summary"
mpi=(mpirun -np 2 --oversubscribe --bind-to none -x CUDA_VISIBLE_DEVICES -x MASTER_ADDR -x MASTER_PORT
     -x PATH -x LD_LIBRARY_PATH -x RANKSNAP_NVML)
export RANKSNAP_NVML=${RANKSNAP_NVML:-libnvidia-ml.so.1} MASTER_PORT=29810

# job CASE CMD...: the job, bounded, then its reports
job() {
    c=$1; shift
    d=$R/$c
    rm -rf "$d" && mkdir -p "$d"
    echo "+ $*" | tee "$d.cmd"
    timeout -k 5 240 "$@" > "$d.stdout" 2> "$d.stderr"
    echo "exit status $?" > "$d.rc"
    "$BUILD/ranksnap" report "$d" > "$d.report.txt" 2> "$d.report.err"
    "$BUILD/ranksnap" report --json "$d" > "$d.report.json" 2>> "$d.report.err"
    for f in "$d"/rank-*.rsnap "$d"/rank-*.pickle; do
        [ -e "$f" ] && "$BUILD/ranksnap" summary "$f" > "$f.summary.txt" 2>&1
    done
    cat "$d.rc" "$d.report.err" "$d.report.txt"
}

# check CASE: PASS/FAIL CASE with why
check() {
    python3 - "$R" "$1" <<'PY' | tee -a "$summary"
import json, sys
R, case = sys.argv[1], sys.argv[2]
d = f"{R}/{case}"
why, notes = [], []
rc = open(d + ".rc").read().split()[-1]
if rc != "0":
    why.append(f"exit {rc}")
try:
    r, text = json.load(open(d + ".report.json")), open(d + ".report.txt").read()
except Exception as e:
    sys.exit(print(f"FAIL {case}: no report ({e})"))
ranks = {x["rank"]: x for x in r["ranks"]}
if sorted(ranks) != [0, 1]:
    why.append(f"ranks {sorted(ranks)}")
GiB = 1 << 30
for k, x in sorted(ranks.items()):
    print(f"  {case} rank {k}: outside peak {x['outside_peak'] / GiB:.2f} GiB ({x.get('outside_of')}"
          f"{', ' + x['outside_why'] if x.get('outside_why') else ''}), peak reserved "
          f"{x['peak_reserved'] / GiB:.2f} GiB, device {x.get('device_uuid')}, NVML listed "
          f"{x.get('device_processes')}, others {x.get('device_others_bytes', 0) / GiB:.2f} GiB")
own = all(x.get("outside_of") == "process" for x in ranks.values())
uuids = {x.get("device_uuid") for x in ranks.values()}
if len(uuids) != 1 or None in uuids:
    why.append(f"the ranks name devices {uuids}, not one GPU")
uuid = next(iter(uuids)) if len(uuids) == 1 else None
shared = [s for s in r.get("shared_devices", []) if s["uuid"] == uuid]
if not shared or shared[0]["ranks"] != [0, 1]:
    why.append(f"shared_devices {r.get('shared_devices')} does not name {uuid} with ranks 0 and 1")
if uuid and f"{uuid} is shared by ranks 0 and 1" not in text:
    why.append("the text report does not name the device shared by ranks 0 and 1")
if own:
    for k, x in ranks.items():
        other = ranks.get(1 - k)
        if other and x["outside_peak"] >= other["peak_reserved"]:
            why.append(f"rank {k}'s outside peak {x['outside_peak']} is not below rank {1 - k}'s "
                       f"peak reserved {other['peak_reserved']}: the other rank's pool is in it")
        if x.get("device_processes", 0) < 2:
            why.append(f"rank {k}: NVML listed {x.get('device_processes')} processes, not both ranks")
    if "each rank's outside is its own process's" not in text:
        why.append("the text report does not say each rank's outside is its own")
else:
    # NVML could not give the own figure here: the report must say so, and why, not the figure
    for k, x in ranks.items():
        if x.get("outside_of") != "device" or not x.get("outside_why"):
            why.append(f"rank {k}: outside_of {x.get('outside_of')} without a reason")
        if f"rank {k}: its own device memory is not known (" not in text:
            why.append(f"rank {k}: the text report does not say its own use is not known")
    notes.append("NVML gave no own figure on this machine ("
                 + ", ".join(sorted({x.get("outside_why") or "?" for x in ranks.values()}))
                 + "): the report said so; the own figure was NOT shown here")
for n in notes:
    print(f"  NOTE {case}: {n}")
print(("PASS " + case) if not why else ("FAIL " + case + ": " + "; ".join(why)))
PY
}

job c "${mpi[@]}" launch/ranksnap-run --backend cuda --steps 2:6 --dir "$R/c" \
    "$BUILD/tests/workloads/ranksnap-demo" --iters 8 --batch 65536 --diverge 1:1.5 --quiet
check c

if python3 -c 'import torch, transformers; assert torch.cuda.is_available()' > /dev/null 2>&1; then
    MASTER_PORT=29811 job torch "${mpi[@]}" launch/ranksnap-run --steps 2:6 --dir "$R/torch" \
        python3 tests/gpu/torch_ddp_train.py --backend gloo --batch 32 --seq 512 --width 1024 --layers 8
    check torch
else
    echo "SKIP torch: torch with CUDA and transformers are not importable here" | tee -a "$summary"
fi

# what asking NVML costs: loading it (once, at the device's first use), and the demo's median step
# with NVML asked at its steps and not
for nvml in libnvidia-ml.so.1 none; do
    RANKSNAP_NVML=$nvml RANKSNAP_DEBUG_SUBSYS=ALLOC timeout -k 5 120 "${mpi[@]}" -x RANKSNAP_DEBUG_SUBSYS \
        launch/ranksnap-run --backend cuda --debug INFO --dir "$R/cost-$nvml" \
        "$BUILD/tests/workloads/ranksnap-demo" --iters 400 --timing --quiet 2>&1 |
        grep -E "median step|NVML \(" | sed "s/^/  cost: RANKSNAP_NVML=$nvml: /" | tee -a "$summary"
done
cat "$summary"
! grep -q '^FAIL' "$summary"
