#!/usr/bin/env python3
"""crafted_inputs.py OUTDIR --template RANK.rsnap --ranksnap RANKSNAP — inputs made to be
expensive, and what `ranksnap summary` takes on each: wall time and peak RSS.

Needs GNU time (/usr/bin/time) for the peak RSS. The promise of the decoders (issue 14, item 4): a 1 MB input, whatever it holds, stays under
64 MB of memory and 1 s on the CPU machine. The inputs:

  segment_repeated.pickle   one segment of 300 blocks listed 8,000 times through the memo (the
                            issue's case: 32 KB took 5 GB and 37 s)
  block_repeated.pickle     one block listed 200,000 times in a segment
  entry_repeated.pickle     one trace entry (of 1,000 frames) listed 400,000 times
  empty_dicts.pickle        1 MB of EMPTY_DICT in a list: one value per input byte
  distinct_entries.pickle   ~1 MB of trace entries, every allocation at a new address
  many_frames.pickle        one entry whose frames list names ~50,000 distinct frames
  distinct_addresses.rsnap  the template with its history replaced by ~1 MB of one-byte
                            deltas: 170,000 allocations at distinct addresses

Needs Debian's python3-msgpack for the .rsnap (tests/setup-deps.sh installs it).
"""
import argparse
import os
import pickle
import subprocess
import sys
import time


def write(path, obj):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=4)


def make(out, template):
    os.makedirs(out, exist_ok=True)
    blocks = [{"address": (1 << 40) + 512 * i, "size": 512, "requested_size": 512,
               "state": "active_allocated", "frames": []} for i in range(300)]
    seg = {"device": 0, "address": 1 << 40, "total_size": 2 << 20, "stream": 0,
           "segment_type": "small", "blocks": blocks, "frames": []}
    write(os.path.join(out, "segment_repeated.pickle"),
          {"segments": [seg] * 8000, "device_traces": [[]]})
    b = dict(blocks[0])
    write(os.path.join(out, "block_repeated.pickle"),
          {"segments": [dict(seg, blocks=[b] * 200000)], "device_traces": [[]]})
    frames = [{"name": "f", "filename": "x.py", "line": 1}] * 1000
    e = {"action": "alloc", "addr": 1 << 40, "size": 512, "stream": 0, "time_us": 1,
         "frames": frames}
    write(os.path.join(out, "entry_repeated.pickle"),
          {"segments": [], "device_traces": [[e] * 400000]})
    n = 1 << 20
    with open(os.path.join(out, "empty_dicts.pickle"), "wb") as f:
        f.write(b"\x80\x04]\x94(" + b"}" * (n - 7) + b"e.")
    trace = [{"action": "alloc" if i % 2 == 0 else "free_requested",
              "addr": (1 << 40) + 512 * (i // 2), "size": 512, "stream": 0, "time_us": i,
              "frames": []} for i in range(28000)]
    write(os.path.join(out, "distinct_entries.pickle"), {"segments": [], "device_traces": [trace]})
    many = [{"name": "f%d" % i, "filename": "x.py", "line": i} for i in range(50000)]
    write(os.path.join(out, "many_frames.pickle"),
          {"segments": [], "device_traces": [[dict(e, frames=many)]]})
    if template:
        import msgpack
        with open(template, "rb") as f:
            snap = msgpack.unpackb(f.read(), raw=False, strict_map_key=False)
        m = 170000
        snap["history"] = {"count": m, "dropped": 0, "capacity": m,
                           "time_us": [snap["time_us"]] + [1] * (m - 1), "action": [0] * m,
                           "addr": [1 << 40] + [1] * (m - 1), "size": [100] * m,
                           "stream": [0] * m, "stack": [0] * m}
        with open(os.path.join(out, "distinct_addresses.rsnap"), "wb") as f:
            f.write(msgpack.packb(snap, use_bin_type=True))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("outdir")
    p.add_argument("--template", help="a .rsnap file to build the crafted one from")
    p.add_argument("--ranksnap", help="time `ranksnap summary` on each")
    args = p.parse_args()
    make(args.outdir, args.template)
    if not args.ranksnap:
        return 0
    print("%-28s %10s %8s %9s %s" % ("input", "bytes", "wall s", "RSS MiB", "outcome"))
    for name in sorted(os.listdir(args.outdir)):
        path = os.path.join(args.outdir, name)
        # GNU time starts the command from a small process: a child forked from this script
        # would count the script's own pages (the lists it built) in its peak RSS
        rss_file = os.path.join(args.outdir, ".rss")
        t0 = time.perf_counter()
        proc = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", rss_file, args.ranksnap,
                                 "summary", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        err = proc.stderr.read().decode(errors="replace").strip()
        proc.stderr.close()
        rc = proc.wait()
        wall = time.perf_counter() - t0
        with open(rss_file) as f:
            kib = int(f.read().split()[-1])
        outcome = "read" if rc == 0 else "refused: " + err.split(": ", 2)[-1][:90]
        print("%-28s %10d %8.3f %9.1f %s" % (name, os.path.getsize(path), wall, kib / 1024,
                                             outcome), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
