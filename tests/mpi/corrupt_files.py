#!/usr/bin/env python3
"""corrupt_files.py SRC DST — copies the rank files of a finished run from SRC to DST and spoils
some of them the ways files get spoiled: rank 0 truncated, rank 1 with a bit flipped in its
history, rank 2 left as it is, rank 3 from a newer format version, plus an empty file and one
from another job. Prints the names of the spoiled files, one a line."""
import os
import shutil
import sys

import msgpack  # Debian: python3-msgpack

src, dst = sys.argv[1], sys.argv[2]
shutil.rmtree(dst, ignore_errors=True)
os.makedirs(dst)
for n in sorted(os.listdir(src)):
    if n.startswith("rank-") and n.endswith(".rsnap"):
        shutil.copy(os.path.join(src, n), os.path.join(dst, n))
# a rank whose SIGTERM dump did not make it before SIGKILL left only its ring: these tests are
# about spoiled snapshots, so such a rank gets a copy of rank 2's, renumbered
for r in (0, 1, 3):
    p = os.path.join(dst, "rank-%05d.rsnap" % r)
    if not os.path.exists(p):
        with open(os.path.join(dst, "rank-00002.rsnap"), "rb") as f:
            d = msgpack.unpackb(f.read(), strict_map_key=False, raw=False)
        d["rank"] = r
        d["oom"] = None
        with open(p, "wb") as f:
            f.write(msgpack.packb(d))


def path(rank):
    return os.path.join(dst, "rank-%05d.rsnap" % rank)


with open(path(0), "rb") as f:
    b = f.read()
with open(path(0), "wb") as f:
    f.write(b[: len(b) // 2])

with open(path(1), "rb") as f:
    d = msgpack.unpackb(f.read(), strict_map_key=False, raw=False)
d["history"]["action"] = d["history"]["action"][:-1]  # columns no longer line up
with open(path(1), "wb") as f:
    f.write(msgpack.packb(d))

with open(path(3), "rb") as f:
    d = msgpack.unpackb(f.read(), strict_map_key=False, raw=False)
d["version"] = 99
with open(path(3), "wb") as f:
    f.write(msgpack.packb(d))

open(os.path.join(dst, "rank-00004.rsnap"), "wb").close()

with open(path(2), "rb") as f:
    d = msgpack.unpackb(f.read(), strict_map_key=False, raw=False)
d["job"] = "another-job"
d["rank"] = 5
d["world_size"] = 8
with open(os.path.join(dst, "rank-00005.rsnap"), "wb") as f:
    f.write(msgpack.packb(d))

for r in (0, 1, 3, 4, 5):
    print(os.path.basename(path(r)))
