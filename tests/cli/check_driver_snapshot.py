#!/usr/bin/env python3
"""check_driver_snapshot.py LIVE END DEVICE [--nccl] — what tests/gpu/test_driver_routes.c allocated through
the driver's routes, as its two snapshots must show it: in LIVE every allocation once, as an
outside_alloc event on DEVICE with a stack through main, under the label of its owner (the
program; managed memory apart) and nothing cached by the pool; in END all of it freed, the pool's
20 MiB cached under "cuda_pool_cached", and the refused request as the OOM. With --nccl, the
communicator's 25 and 23 MiB under "nccl", the 23 MiB NCCL's own thread allocated with the stack of
the user's call (main) all the same."""
import sys

import msgpack

MIB = 1 << 20
PROGRAM = [3, 5, 7, 9, 11, 15, 4, 17, 19, 21]  # MiB, by route (see test_driver_routes.c)
POOL_CACHED = 9 + 11  # MiB: the two stream-ordered allocations, freed into the pool
MANAGED = [13]
NCCL = [25, 23]
OUTSIDE_ALLOC, OUTSIDE_FREE, OOM = 9, 10, 5


def load(path):
    with open(path, "rb") as f:
        return msgpack.unpackb(f.read(), raw=False, strict_map_key=False)


def events(s, action):
    h = s["history"]
    dev = h.get("device") or [max(s["device"]["index"], 0)] * h["count"]
    return [(h["size"][i], dev[i], h["stack"][i]) for i in range(h["count"]) if h["action"][i] == action]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    live, end, device = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
    nccl = NCCL if "--nccl" in sys.argv[4:] else []
    allocs = events(live, OUTSIDE_ALLOC)
    want = sorted(m * MIB for m in PROGRAM + MANAGED + nccl)
    got = sorted(size for size, _, _ in allocs)
    if got != want:
        fail(f"{sys.argv[1]}: outside allocations {[g // MIB for g in got]} MiB, expected {[w // MIB for w in want]}")
    for size, dev, stack in allocs:
        if dev != device:
            fail(f"{size // MIB} MiB recorded on device {dev}, expected {device}")
        frames = [live["frames"][k] for k in live["stacks"][stack - 1]] if stack else []
        if not any(fr[2] == "main" for fr in frames):
            fail(f"{size // MIB} MiB: no frame of main in its stack {[fr[2] for fr in frames]}")
    labels = live["totals"]["outside_labels"]
    if labels.get("program") != sum(PROGRAM) * MIB or labels.get("managed") != sum(MANAGED) * MIB:
        fail(f"labels {labels}, expected program {sum(PROGRAM)} MiB and managed {sum(MANAGED)} MiB")
    if labels.get("nccl", 0) != sum(nccl) * MIB:
        fail(f"labels {labels}, expected nccl {sum(nccl)} MiB")
    if labels.get("cuda_pool_cached", 0):
        fail(f"labels {labels}: the pool caches nothing while its allocations are live")
    frees = sorted(size for size, _, _ in events(end, OUTSIDE_FREE))
    if frees != want:
        fail(f"{sys.argv[2]}: outside frees {[f // MIB for f in frees]} MiB, expected {[w // MIB for w in want]}")
    left = {k: v for k, v in end["totals"]["outside_labels"].items() if v}
    if left.pop("cuda_pool_cached", 0) != POOL_CACHED * MIB:
        fail(f"labels {end['totals']['outside_labels']}: expected the pool's {POOL_CACHED} MiB cached")
    if left:
        fail(f"still held at the end: {left}")
    oom = end.get("oom")
    if not oom or oom.get("requested") != 1 << 50 or oom.get("device") != device:
        fail(f"OOM record {oom}, expected the refused 1 PiB on device {device}")
    if not [e for e in events(end, OOM) if e[0] == 1 << 50]:
        fail("no oom event for the refused request")
    print(f"ok: {len(allocs)} driver allocations on device {device}, each once, freed, and the OOM")


if __name__ == "__main__":
    main()
