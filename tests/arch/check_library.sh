#!/bin/sh
# check_library.sh LIB — the library every rank preloads exports only public names (ranksnap_*)
# and the calls it interposes (CUDA, NCCL, MPI), and carries none of the command's reader: no
# pickle decoder, torch export, replay, ring decoder or step inference.
lib=$1
exports=$(nm -D --defined-only "$lib" | awk '{print $3}')
bad=$(printf '%s\n' "$exports" | grep -Ev '^(ranksnap_|cuda|nccl|MPI_)' || true)
if [ -n "$bad" ]; then
    echo "exported but not public: $bad"
    exit 1
fi
reader=$(nm "$lib" | awk '{print $3}' | grep -E '^(rs_pickle|rs_pickler|rs_torch_|rs_export_|rs_replay|rs_ring_decode|rs_steps_infer|rs_decode_)' || true)
if [ -n "$reader" ]; then
    echo "the command's reader is in the preloaded library: $reader"
    exit 1
fi
echo "ok: $(printf '%s\n' "$exports" | wc -l) exports, all public or interposed; no reader-only code"
