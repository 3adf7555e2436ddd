#!/bin/bash
# On the GPU machine with PyTorch (docs/PYTORCH.md): real PyTorch snapshots (the fixtures of
# tests/data/), ranksnap's report and replay on them, and ranksnap's export checked by PyTorch's
# own _memory_viz.py. Everything it prints goes to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/ranksnap-out}
mkdir -p "$OUT/fx"
cmake -S . -B build -G Ninja -DRANKSNAP_WERROR=OFF > /dev/null && cmake --build build -j16 > /dev/null || exit 1
log="$OUT/verify.log"
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' | tee "$log"
python3 tests/data/make_torch_fixtures.py "$OUT/fx" 2>&1 | grep -v Warning | tee -a "$log"
ls -la "$OUT/fx" | tee -a "$log"
build/ranksnap report --rank-from-name "$OUT"/fx/*.pickle > "$OUT/torch_report.txt" 2>&1
build/ranksnap report --rank-from-name --json "$OUT"/fx/*.pickle > "$OUT/torch_report.json" 2>>"$log"
cat "$OUT/torch_report.txt"
# replay: the fixtures, and a longer trace of the same model (100,000 entries, not kept)
{
  for f in "$OUT"/fx/*.pickle; do echo "== $(basename "$f")"; build/ranksnap replay --json "$f"; done
  python3 - "$OUT/long.pickle" <<'PY'
import sys, torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.cuda.memory._record_memory_history(max_entries=100000, stacks="python")
cfg = GPT2Config(n_layer=6, n_head=8, n_embd=512, vocab_size=16384, n_positions=256)
m = GPT2LMHeadModel(cfg).cuda(); opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
for step in range(6):
    ids = torch.randint(0, cfg.vocab_size, (16 + 4 * (step % 3), 256), device="cuda")
    m(input_ids=ids, labels=ids).loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
print("torch max_memory_allocated", torch.cuda.max_memory_allocated(), "max_memory_reserved", torch.cuda.max_memory_reserved())
torch.cuda.memory._dump_snapshot(sys.argv[1])
PY
  echo "== long.pickle (GPT-2 6 layers, 512 wide, 6 steps, varying batch)"
  build/ranksnap replay --json "$OUT/long.pickle"
  build/ranksnap replay "$OUT/long.pickle"
} > "$OUT/replay.txt" 2>&1
rm -f "$OUT/long.pickle"
cat "$OUT/replay.txt"
# export: a demo snapshot (cuda backend here) → PyTorch's viewer code
rm -rf /tmp/rsx && RANKSNAP_DIR=/tmp/rsx RANKSNAP_BACKEND=cuda build/tests/workloads/ranksnap-demo --iters 3 --quiet
build/ranksnap export --torch --rank 0 /tmp/rsx -o /tmp/rank0.pickle 2>&1 | tee -a "$log"
python3 - /tmp/rank0.pickle "$OUT" <<'PY' 2>&1 | tee -a "$log"
import pickle, sys, torch
from torch.cuda import _memory_viz as mv
d = pickle.load(open(sys.argv[1], "rb"))
print("keys", sorted(d.keys()), "segments", len(d["segments"]), "trace entries", sum(len(t) for t in d["device_traces"]))
print(mv.segsum(d)[:1500])
print(mv.trace(d)[:1500])
print("segments flamegraph lines", len(mv.segments(d, format_flamegraph=lambda s: s).splitlines()))
print("memory flamegraph lines", len(mv.memory(d, format_flamegraph=lambda s: s).splitlines()))
t = mv.trace_plot(d); s = mv.segment_plot(d)
print("trace_plot html bytes", len(t), "segment_plot html bytes", len(s))
print("EXPORT VERIFIED with torch", torch.__version__)
PY
