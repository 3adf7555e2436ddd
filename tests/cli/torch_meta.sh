#!/bin/sh
# `ranksnap report` on PyTorch snapshots that carry ranksnap's "ranksnap" key (what the glue of a
# PyTorch job writes, docs/PYTORCH.md): the rank, job and world size come from it, so do the
# steps and the memory outside PyTorch's allocator; a key of the wrong shape is an error naming
# the field. The pickles are made by tests/python/meta_pickle.py. Skips (77) without python3.
# usage: torch_meta.sh CASE RANKSNAP PYTHON TESTS_PYTHON_DIR WORK
set -u
name=$1 ranksnap=$2 py=$3 src=$4 work=$5
command -v "$py" >/dev/null || exit 77
dir=$work/$name
rm -rf "$dir" && mkdir -p "$dir"
make() { "$py" "$src/meta_pickle.py" "$@" || exit 1; }
has() {
    case "$1" in *"$2"*) ;; *) echo "missing: $2"; exit 1 ;; esac
}

# files named in no particular way, given in no particular order: the key says who is who
case_report_takes_the_rank_and_job_from_the_ranksnap_key() {
    make "$dir/first.pickle" '{"rank": 2, "world_size": 4, "job": "j7", "host": "node2"}' 12
    make "$dir/second.pickle" '{"rank": 0, "world_size": 4, "job": "j7", "host": "node0"}'
    make "$dir/third.pickle" '{"rank": 1, "world_size": 4, "job": "j7", "host": "node1"}'
    out=$("$ranksnap" report "$dir"/*.pickle) || exit 1
    echo "$out"
    has "$out" "3 of 4 ranks"
    has "$out" "missing: rank 3"
    has "$out" "rank 2 peaks 50% above the median"
    has "$out" "node2"
}

case_report_shows_nccl_memory_from_the_ranksnap_key() {
    make "$dir/rank-00000.pickle" '{"rank": 0, "world_size": 1, "outside_bytes_end": 2147483648,
        "outside_bytes_peak": 2147483648, "outside_labels": {"nccl": 1288490188}}'
    out=$("$ranksnap" report "$dir") || exit 1
    echo "$out"
    has "$out" "rank 0: NCCL holds 1.20 GiB"
}

# steps from the key (the glue's step starts), not inferred: the OOM's step is the key's
case_report_uses_the_recorded_steps() {
    make "$dir/rank-00000.pickle" '{"rank": 0, "world_size": 1, "ranges": [[40, 43]],
        "steps": [[40, 1000000000000500], [41, 1000000000001500], [42, 1000000000002500]]}' 8 96
    out=$("$ranksnap" report "$dir") || exit 1
    echo "$out"
    has "$out" "rank 0 ran out of memory at step 42: tried to allocate 96.00 MiB"
    has "$out" "forward (model.py:4)"
}

case_report_refuses_a_ranksnap_key_of_the_wrong_shape() {
    make "$dir/rank-00000.pickle" '{"rank": "zero"}'
    make "$dir/rank-00001.pickle" '{"rank": 1, "steps": [[5, 10], [6, 3]]}'
    make "$dir/rank-00002.pickle" '[1, 2]'
    out=$("$ranksnap" report "$dir" 2>&1); rc=$?
    echo "$out"
    test $rc -eq 1 || exit 1
    has "$out" "ranksnap.rank: expected an integer"
    has "$out" "ranksnap.steps: expected [step, time_us] pairs in time order"
    has "$out" "ranksnap: expected a dict, found a list"
}

# A CUDA graph's private pool (tests/python/pool_pickle.py): rank 0 made it before its peak, rank
# 1 after. Rank 0's 40 MiB of it in no block are reserved by design, named by the line that
# captured the graph, and left out of its fragmentation; rank 1 had no pool at its peak.
pools() {
    "$py" "$src/pool_pickle.py" "$dir/rank-00000.pickle" 0 before || exit 1
    "$py" "$src/pool_pickle.py" "$dir/rank-00001.pickle" 1 after || exit 1
}
case_report_keeps_a_cuda_graph_pool_apart_from_fragmentation() {
    pools
    out=$("$ranksnap" report "$dir") || exit 1
    echo "$out"
    has "$out" "rank 0: 40.00 MiB of its reserved bytes at the peak in private pools (the largest: CUDA graph pool of main (capture.py:7)), 40.00 MiB of it in no block"
    test "$(echo "$out" | grep -c 'in private pools')" -eq 1 || { echo "rank 1 had no pool at its peak"; exit 1; }
    test "$(echo "$out" | grep -c '60.00 MiB        4.00 MiB')" -eq 2 || { echo "fragmentation"; exit 1; }
    "$ranksnap" report --json "$dir" > "$dir/report.json" || exit 1
    "$py" - "$dir/report.json" <<'PY' || exit 1
import json, sys
r = {x["rank"]: x for x in json.load(open(sys.argv[1]))["ranks"]}
assert r[0]["pools_at_peak"] == r[0]["pools_free_at_peak"] == 40 << 20, r[0]
assert r[0]["largest_pool"]["function"] == "CUDA graph pool of main", r[0]
assert r[0]["fragmentation"] == r[1]["fragmentation"] == 4 << 20, r
assert "pools_at_peak" not in r[1], r[1]
PY
}
# Two ranks whose allocated peaks are equal (16 MiB) and whose CUDA graphs' pools are not (88 MiB
# and 152 MiB, all free as blocks but kept for the replays): rank 1 holds 64 MiB more, and is
# flagged for it, the pool named as a site by the line that captured the graph.
case_report_flags_a_rank_whose_cuda_graph_pools_are_larger() {
    "$py" "$src/pool_pickle.py" "$dir/rank-00000.pickle" 0 88 || exit 1
    "$py" "$src/pool_pickle.py" "$dir/rank-00001.pickle" 1 152 || exit 1
    out=$("$ranksnap" report "$dir") || exit 1
    echo "$out"
    has "$out" "rank 1: +64.00 MiB in CUDA graph pools (152.00 MiB vs 88.00 MiB on rank 0, the reference), allocated equal (16.00 MiB)"
    has "$out" "+64.00 MiB at CUDA graph pool of main (capture.py:7)"
    has "$out" "ranks are compared by their peak allocated plus their private pools' free bytes"
    if echo "$out" | grep -q "no rank diverges"; then echo "rank 1 not flagged"; exit 1; fi
    "$ranksnap" report --json "$dir" > "$dir/report.json" || exit 1
    "$py" - "$dir/report.json" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
d, = r["divergent_ranks"]
assert d["rank"] == 1 and d["by_pools"]["graph"], d
assert d["by_pools"]["pools_at_peak"] - d["by_pools"]["reference_pools_at_peak"] == 64 << 20, d
assert d["by_pools"]["peak_allocated"] == d["by_pools"]["reference_peak_allocated"] == 16 << 20, d
assert d["sites"][0]["function"] == "CUDA graph pool of main" and d["sites"][0]["bytes_delta"] == 64 << 20, d
assert r["compared_by"] == "peak_allocated + pools_free_at_peak", r
PY
}
# A pool of torch.compile's CUDA graph trees ((0, 3), a MemPool's shape), its capture under the
# code Inductor generated and the model's forward of an installed package: named by the script's
# line that called the compiled model.
case_report_names_a_graph_trees_pool_by_the_line_that_called_the_model() {
    "$py" "$src/pool_pickle.py" "$dir/rank-00000.pickle" 0 trees || exit 1
    "$py" "$src/pool_pickle.py" "$dir/rank-00001.pickle" 1 trees || exit 1
    out=$("$ranksnap" report "$dir") || exit 1
    echo "$out"
    has "$out" "rank 0: 40.00 MiB of its reserved bytes at the peak in private pools (the largest: CUDA graph pool of main (infer.py:41))"
}
case_replay_keeps_a_cuda_graph_pool_apart_from_fragmentation() {
    pools
    out=$("$ranksnap" replay "$dir/rank-00000.pickle") || exit 1
    echo "$out"
    has "$out" "private pools (CUDA graphs'): 40.00 MiB of the original's reserved bytes at its peak, 40.00 MiB of it in no block"
    has "$out" "fragmentation at peak                4.00 MiB"
}

"case_$name"
