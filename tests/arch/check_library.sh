#!/bin/sh
# check_library.sh LIB READER [PLUGIN...] — the library every rank preloads exports only public
# names (ranksnap_*) and the calls it interposes (CUDA runtime and driver, dlsym, NCCL), needs no
# MPI library and carries no MPI wrapper, and carries none of the command's reader: no pickle
# decoder, torch export, replay, ring decoder or step inference. The pickle reader a PyTorch job's
# ranks load on demand (libranksnap_reader.so) exports ranksnap_reader_* only, and has the
# decoder. Each MPI plugin (libranksnap-mpi-FAMILY.so) exports its MPI_* wrappers and
# ranksnap_mpi_plugin only, is linked with neither an MPI library nor libranksnap.so (its PMPI
# calls bind to the process's MPI, its calls into ranksnap are weak), and loads in a process that
# has no MPI.
lib=$1 reader=${2:-}
[ $# -ge 2 ] && shift 2 || shift $#
exports=$(nm -D --defined-only "$lib" | awk '{print $3}')
bad=$(printf '%s\n' "$exports" | grep -Ev '^(ranksnap_|cuda|nccl|cu[A-Z]|dlsym$)' || true)
if [ -n "$bad" ]; then
    echo "exported but not public: $bad"
    exit 1
fi
if readelf -d "$lib" | grep -E 'NEEDED.*\[lib(mpi|mpich)[._]'; then
    echo "$lib needs an MPI library: MPI belongs to the plugins"
    exit 1
fi
reader_code=$(nm "$lib" | awk '{print $3}' | grep -E '^(rs_pickle|rs_pickler|rs_torch_|rs_export_|rs_replay|rs_ring_decode|rs_steps_infer|rs_decode_)' || true)
if [ -n "$reader_code" ]; then
    echo "the command's reader is in the preloaded library: $reader_code"
    exit 1
fi
echo "ok: $(printf '%s\n' "$exports" | wc -l) exports, all public or interposed; no MPI; no reader-only code"
[ -n "$reader" ] || exit 0
rexports=$(nm -D --defined-only "$reader" | awk '{print $3}')
rbad=$(printf '%s\n' "$rexports" | grep -Ev '^ranksnap_reader_' || true)
if [ -n "$rbad" ]; then
    echo "$reader exports more than ranksnap_reader_*: $rbad"
    exit 1
fi
nm "$reader" | awk '{print $3}' | grep -q '^rs_torch_decode$' || { echo "$reader has no pickle decoder"; exit 1; }
echo "ok: $reader exports $(printf '%s\n' "$rexports" | wc -l) ranksnap_reader_* functions and has the decoder"
for plugin in "$@"; do
    pexports=$(nm -D --defined-only "$plugin" | awk '{print $3}')
    pbad=$(printf '%s\n' "$pexports" | grep -Ev '^(MPI_[A-Z][a-z_]*|ranksnap_mpi_plugin)$' || true)
    if [ -n "$pbad" ]; then
        echo "$plugin exports more than its MPI wrappers and ranksnap_mpi_plugin: $pbad"
        exit 1
    fi
    printf '%s\n' "$pexports" | grep -qx 'MPI_Init' || { echo "$plugin has no MPI_Init wrapper"; exit 1; }
    if readelf -d "$plugin" | grep -E 'NEEDED.*\[lib(mpi|mpich|ranksnap)[._]'; then
        echo "$plugin is linked with an MPI library or libranksnap.so"
        exit 1
    fi
    # preloaded into a process without MPI (ranksnap-run's preload reaches an MPI program's
    # children), every reference bound at once: it loads, and does nothing. Not a sanitizer
    # build's: that loads only where the sanitizer's runtime is, as its library does.
    if nm -D --undefined-only "$plugin" | grep -q ' __[at]san_'; then
        echo "ok: $plugin exports its MPI wrappers (a sanitizer build's: not preloaded alone)"
        continue
    fi
    LD_BIND_NOW=1 LD_PRELOAD="$plugin" sh -c true 2>&1 | grep . &&
        { echo "$plugin does not load in a process without MPI"; exit 1; }
    echo "ok: $plugin exports $(printf '%s\n' "$pexports" | wc -l) MPI wrappers and its entry, needs no MPI, loads without it"
done
