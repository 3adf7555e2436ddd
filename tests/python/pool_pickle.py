"""pool_pickle.py — a PyTorch 2.11-shaped snapshot with a CUDA graph's private pool, for the
tests of how the reader keeps a pool's reserved bytes apart from fragmentation
(tests/cli/torch_meta.sh).

    pool_pickle.py OUT.pickle RANK before|after|MIB
A default-pool segment of 20 MiB holds the peak's 16 MiB block; a 40 MiB segment of the private
pool (1, 0), made by the graph captured at capture.py:7 (PyTorch's capture code under it), holds
a 4 MiB block freed at once. With `before` the pool is made before the peak, with `after` after
it: at the peak its 40 MiB are reserved, in no block, or not reserved yet. With a number the
pool is made before the peak with that many MiB, in a pool of CUDA graph trees' shape (0, 3):
ranks whose allocated bytes are equal and whose graphs' pools are not. With `trees` the pool
(0, 3) is made before the peak with the stack the glue keeps for a capture of torch.compile's CUDA
graph trees: PyTorch's capture code, the code Inductor generated, the compiled model's forward in
an installed package, then the script's line that called the model (infer.py:41).
"""
import pickle
import sys

MIB = 1 << 20
T0 = 10 ** 15
DEFAULT, POOL = 0x7F0000000000, 0x7F1000000000


def entry(action, addr, size, t, frames=()):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
            "compile_context": "N/A", "user_metadata": "", "frames": list(frames)}


def main():
    out, rank, when = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    pool_mib, pool_id = 40, (1, 0)
    if when.isdigit():
        pool_mib, pool_id, when = int(when), (0, 3), "before"
    trees = when == "trees"
    if trees:
        pool_id, when = (0, 3), "before"
    model = [{"name": "forward", "filename": "/job/model.py", "line": 12},
             {"name": "main", "filename": "/job/infer.py", "line": 30}]
    capture = [{"name": "forward", "filename": "/job/model.py", "line": 12},
               {"name": "record", "filename": "/usr/lib/python3/site-packages/torch/_inductor/cudagraph_trees.py", "line": 900},
               {"name": "main", "filename": "/job/capture.py", "line": 7}]
    if trees:
        torch = "/venv/lib/python3.12/site-packages/torch/"
        capture = [{"name": "capture_begin", "filename": torch + "cuda/graphs.py", "line": 0},
                   {"name": "__enter__", "filename": torch + "cuda/graphs.py", "line": 260},
                   {"name": "_record", "filename": torch + "_inductor/cudagraph_trees.py", "line": 1240},
                   {"name": "run", "filename": torch + "_inductor/cudagraph_trees.py", "line": 2010},
                   {"name": "call", "filename": "/tmp/torchinductor_root/ab/c" + "a" * 51 + ".py", "line": 120},
                   {"name": "forward", "filename": "/venv/lib/python3.12/site-packages/transformers/models/gpt2/modeling_gpt2.py", "line": 1060},
                   {"name": "_call_impl", "filename": torch + "nn/modules/module.py", "line": 1784},
                   {"name": "main", "filename": "/job/infer.py", "line": 41}]
    peak = [entry("segment_alloc", DEFAULT, 20 * MIB, 0, model),
            entry("alloc", DEFAULT, 16 * MIB, 0, model),
            entry("free_requested", DEFAULT, 16 * MIB, 0),
            entry("free_completed", DEFAULT, 16 * MIB, 0)]
    pool = [entry("segment_alloc", POOL, pool_mib * MIB, 0, capture),
            entry("alloc", POOL, 4 * MIB, 0, capture),
            entry("free_requested", POOL, 4 * MIB, 0),
            entry("free_completed", POOL, 4 * MIB, 0)]
    trace = pool + peak if when == "before" else peak + pool
    for i, e in enumerate(trace):
        e["time_us"] = T0 + 1000 * i

    def segment(addr, size, pool_id, frames):
        return {"device": 0, "address": addr, "total_size": size, "allocated_size": 0,
                "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
                "segment_pool_id": pool_id, "is_expandable": False, "frames": frames,
                "blocks": [{"address": addr, "size": size, "requested_size": 0, "state": "inactive",
                            "frames": []}]}

    snap = {"segments": [segment(DEFAULT, 20 * MIB, (0, 0), model), segment(POOL, pool_mib * MIB, pool_id, capture)],
            "device_traces": [trace], "allocator_settings": {"max_split_size": -1},
            "external_annotations": [], "ranksnap": {"rank": rank, "world_size": 2, "job": "pools"}}
    with open(out, "wb") as f:
        pickle.dump(snap, f, protocol=4)


if __name__ == "__main__":
    main()
