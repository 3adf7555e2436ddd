#!/bin/sh
# check_library.sh LIB READER — the library every rank preloads exports only public names
# (ranksnap_*) and the calls it interposes (CUDA runtime and driver, dlsym, NCCL, MPI), and carries none of the command's
# reader: no pickle decoder, torch export, replay, ring decoder or step inference. The pickle
# reader a PyTorch job's ranks load on demand (libranksnap_reader.so) exports ranksnap_reader_*
# only, and has the decoder.
lib=$1 reader=${2:-}
exports=$(nm -D --defined-only "$lib" | awk '{print $3}')
bad=$(printf '%s\n' "$exports" | grep -Ev '^(ranksnap_|cuda|nccl|MPI_|cu[A-Z]|dlsym$)' || true)
if [ -n "$bad" ]; then
    echo "exported but not public: $bad"
    exit 1
fi
reader_code=$(nm "$lib" | awk '{print $3}' | grep -E '^(rs_pickle|rs_pickler|rs_torch_|rs_export_|rs_replay|rs_ring_decode|rs_steps_infer|rs_decode_)' || true)
if [ -n "$reader_code" ]; then
    echo "the command's reader is in the preloaded library: $reader_code"
    exit 1
fi
echo "ok: $(printf '%s\n' "$exports" | wc -l) exports, all public or interposed; no reader-only code"
[ -n "$reader" ] || exit 0
rexports=$(nm -D --defined-only "$reader" | awk '{print $3}')
rbad=$(printf '%s\n' "$rexports" | grep -Ev '^ranksnap_reader_' || true)
if [ -n "$rbad" ]; then
    echo "$reader exports more than ranksnap_reader_*: $rbad"
    exit 1
fi
nm "$reader" | awk '{print $3}' | grep -q '^rs_torch_decode$' || { echo "$reader has no pickle decoder"; exit 1; }
echo "ok: $reader exports $(printf '%s\n' "$rexports" | wc -l) ranksnap_reader_* functions and has the decoder"
