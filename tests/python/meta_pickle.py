"""meta_pickle.py — a small PyTorch 2.11-shaped snapshot with ranksnap's "ranksnap" key, for the
tests of the reader's side of it (tests/cli/torch_meta.sh).

    meta_pickle.py OUT.pickle '{"rank": 1, ...}' [BLOCK_MIB] [OOM_MIB]
The trace allocates BLOCK_MIB (default 8) then frees it, three times, 1 ms apart from
time_us = 1e15, from a line of model.py; OOM_MIB appends an oom entry of that request. The
metadata JSON goes under "ranksnap" as it is (a value of any type, for the error cases).
"""
import json
import pickle
import sys

MIB = 1 << 20
T0 = 10 ** 15


def frame(line):
    return [{"name": "forward", "filename": "/job/model.py", "line": line},
            {"name": "<module>", "filename": "/job/train.py", "line": 9}]


def main():
    out, meta = sys.argv[1], json.loads(sys.argv[2])
    block = int(sys.argv[3]) * MIB if len(sys.argv) > 3 else 8 * MIB
    oom = int(sys.argv[4]) * MIB if len(sys.argv) > 4 else 0
    base = 0x7F0000000000
    trace = [{"action": "segment_alloc", "addr": base, "size": 64 * MIB, "stream": 0, "time_us": T0,
              "compile_context": "N/A", "user_metadata": "", "frames": frame(3)}]
    t = T0
    for i in range(3):
        t += 1000
        trace.append({"action": "alloc", "addr": base, "size": block, "stream": 0, "time_us": t,
                      "compile_context": "N/A", "user_metadata": "", "frames": frame(3)})
        for act in ("free_requested", "free_completed"):
            t += 10
            trace.append({"action": act, "addr": base, "size": block, "stream": 0, "time_us": t,
                          "compile_context": "N/A", "user_metadata": "", "frames": []})
    if oom:
        trace.append({"action": "oom", "device_free": 0, "size": oom, "stream": 0, "time_us": t + 5,
                      "compile_context": "N/A", "user_metadata": "", "frames": frame(4)})
    snap = {"segments": [{"device": 0, "address": base, "total_size": 64 * MIB, "allocated_size": 0,
                          "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
                          "segment_pool_id": (0, 0), "is_expandable": False, "frames": frame(3),
                          "blocks": [{"address": base, "size": 64 * MIB, "requested_size": 0,
                                      "state": "inactive", "frames": []}]}],
            "device_traces": [trace], "allocator_settings": {"max_split_size": -1},
            "external_annotations": [], "ranksnap": meta}
    with open(out, "wb") as f:
        pickle.dump(snap, f, protocol=4)


if __name__ == "__main__":
    main()
