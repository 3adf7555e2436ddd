#!/bin/sh
# check.sh SOURCE_DIR BUILD_DIR WORK — installs ranksnap into WORK/prefix, then builds the consumer
# with find_package(ranksnap) and again with pkg-config, and runs both on the sim backend; then a
# PyTorch job (the stand-in torch) through the installed ranksnap-run.
set -eu
src=$1 build=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
export RANKSNAP_BACKEND=sim RANKSNAP_DIR="$work/out" LD_LIBRARY_PATH="$work/prefix/lib"
cmake -S "$src/tests/package" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/cmake" >/dev/null
"$work/cmake/consumer"
PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" c++ "$src/tests/package/consumer.cpp" -o "$work/consumer-pc" \
  $(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags --libs ranksnap)
"$work/consumer-pc"

# `ranksnap collect` becomes the ranksnap-collect installed beside it (built when MPI is found)
if [ -x "$build/ranksnap-collect" ]; then
  test -x "$work/prefix/bin/ranksnap-collect"
  "$work/prefix/bin/ranksnap" collect --help | grep -q "usage: ranksnap collect"
fi

# A PyTorch job from the install tree (the stand-in torch of tests/python): ranksnap-run finds the
# library, the glue (lib/ranksnap/python) and the pickle reader next to the library.
if command -v python3 >/dev/null; then
  unset RANKSNAP_RECORDER
  # ranksnap's sitecustomize ran when its import hook waits for torch; the module named
  # sitecustomize afterwards is the site's own where there is one (Ubuntu's python3 has), which
  # ranksnap's chains to
  got=$("$work/prefix/bin/ranksnap-run" python3 -c 'import sys, ranksnap; print(ranksnap.__file__, any(type(f).__name__ == "_TorchImportHook" for f in sys.meta_path))')
  case "$got" in
    "$work/prefix/lib/ranksnap/python/ranksnap/__init__.py True") ;;
    *) echo "the installed ranksnap-run gave Python: $got (expected the installed ranksnap and its torch import hook: True)"; exit 1 ;;
  esac
  RANKSNAP_DIR="$work/torch" PYTHONPATH="$src/tests/python/fake_torch" \
    "$work/prefix/bin/ranksnap-run" --steps 2:4 python3 "$src/tests/python/train_fake.py" > "$work/torch.out"
  grep -q "1 of 1 rank" "$work/torch.out" || { cat "$work/torch.out"; exit 1; }
  test -f "$work/torch/rank-00000.pickle"
fi
