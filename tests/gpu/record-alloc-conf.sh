#!/bin/bash
# On the GPU machine with PyTorch, in one call (docs/PYTORCH.md, "Replay and what-if"): real
# PyTorch traces under each allocator setting with torch.cuda.max_memory_reserved() next to them
# (tests/gpu/record_alloc_conf.py), ranksnap's replay of each against PyTorch's number, the
# suggestion on the trace that ran out of memory against PyTorch's own rerun with
# expandable_segments:True, and ranksnap's allocator with the same settings under PyTorch (the
# pluggable allocator, cuda backend, expandable segments through CUDA's virtual memory API), and
# the GPU tests with RANKSNAP_ALLOC_CONF=expandable_segments:True.
# Results go to $OUT; copy $OUT/alloc_conf/*.pickle and *.json to tests/data/alloc_conf/, where
# test_replay_gpu_traces checks them in CI.
set -uo pipefail
OUT=${OUT:-/tmp/ranksnap-out}
mkdir -p "$OUT/alloc_conf"
cmake -S . -B build -DRANKSNAP_WERROR=OFF > /dev/null && cmake --build build -j16 > /dev/null || exit 1
log="$OUT/alloc_conf.log"
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, torch.cuda.get_device_name(0))' | tee "$log"
python3 tests/gpu/record_alloc_conf.py "$OUT/alloc_conf" --lib build/libranksnap.so 2>&1 | grep -v Warning | tee -a "$log"
ls -la "$OUT/alloc_conf" | tee -a "$log"
# ranksnap's replay of each trace against PyTorch's max_memory_reserved (the test, run on the files)
RS_ALLOC_CONF_TRACES="$OUT/alloc_conf" build/tests/test_replay_gpu_traces 2>&1 | tee -a "$log"
for f in "$OUT"/alloc_conf/*.pickle; do
  n=$(basename "$f" .pickle)
  echo "== $n" ; build/ranksnap replay "$f" --device-memory "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["total_memory"])' "${f%.pickle}.json")"
done > "$OUT/alloc_conf_replay.txt" 2>&1
cat "$OUT/alloc_conf_replay.txt"
echo "== suggestion for oom_defaults (PyTorch's rerun with expandable_segments:True: oom=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["oom"])' "$OUT/alloc_conf/oom_expandable_segments.json"))" | tee -a "$log"
total=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["total_memory"])' "$OUT/alloc_conf/oom_defaults.json")
build/ranksnap replay "$OUT/alloc_conf/oom_defaults.pickle" --suggest --device-memory "$total" | tee -a "$log"
# ranksnap under PyTorch with the same settings: reserved against PyTorch's for the same requests
python3 - "$OUT/alloc_conf" <<'PY' 2>&1 | tee -a "$log"
import json, sys, os
d = sys.argv[1]
for n in ("defaults", "expandable_segments"):
    t, r = (json.load(open(os.path.join(d, n + s))) for s in (".json", ".ranksnap.json"))
    a, b = t["max_memory_reserved"], r["ranksnap_reserved_peak"]
    print("%-22s PyTorch reserved %d, ranksnap (pluggable, same settings) %d: %+.2f%%" % (n, a, b, 100.0 * (b - a) / a))
PY
# the GPU tests with ranksnap's allocator on expandable segments (CUDA's virtual memory API)
RANKSNAP_ALLOC_CONF=expandable_segments:True ctest --test-dir build -L gpu --output-on-failure \
  > "$OUT/ctest_gpu_expandable.log" 2>&1
tail -8 "$OUT/ctest_gpu_expandable.log" | tee -a "$log"
