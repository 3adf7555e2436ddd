#!/bin/sh
# check.sh SOURCE_DIR BUILD_DIR WORK [MPI_C_COMPILER] — installs ranksnap into WORK/prefix and moves the tree to
# WORK/moved (an install must not depend on where it was made); then, from the moved tree, builds
# the consumer with find_package(ranksnap) against the shared and the static target, and with
# pkg-config (`--libs`, and `--static --libs` with the archive), and, given the MPI it was built
# with, an MPI program with ranksnap::mpi, and runs each on the sim backend;
# then a PyTorch job (the stand-in torch) through the installed ranksnap-run.
set -eu
src=$1 build=$2 work=$3 mpi_c_compiler=${4:-}
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
mv "$work/prefix" "$work/moved"
prefix="$work/moved"
export RANKSNAP_BACKEND=sim LD_LIBRARY_PATH="$prefix/lib" PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
run() { # NAME PROGRAM: runs it with a folder of its own, and checks it linked what it should
  name=$1 prog=$2
  RANKSNAP_DIR="$work/out-$name" "$prog" > "$work/$name.out" || { cat "$work/$name.out"; exit 1; }
  grep -q "^consumer: success" "$work/$name.out"
  if [ "$name" = "${name%static}" ]; then
    ldd "$prog" | grep -q "libranksnap.so" || { echo "$name does not load libranksnap.so"; exit 1; }
  elif ldd "$prog" | grep -q "libranksnap.so"; then
    echo "$name loads libranksnap.so: the static library was not the one linked"; exit 1
  fi
  echo "package: $name ok"
}
for kind in shared static; do
  static=OFF; [ $kind = static ] && static=ON
  cmake -S "$src/tests/package" -B "$work/cmake-$kind" -DCMAKE_PREFIX_PATH="$prefix" \
    -DRANKSNAP_CONSUMER_STATIC=$static >/dev/null
  cmake --build "$work/cmake-$kind" >/dev/null
  run "cmake-$kind" "$work/cmake-$kind/consumer"
done
# an MPI program linking ranksnap::mpi (the MPI plugin of the MPI ranksnap was built with): its
# MPI_Init starts ranksnap, alone (MPI's singleton) since no launcher started it
if [ -n "$mpi_c_compiler" ]; then
  cmake -S "$src/tests/package" -B "$work/cmake-mpi" -DCMAKE_PREFIX_PATH="$prefix" \
    -DRANKSNAP_CONSUMER_MPI=ON -DMPI_C_COMPILER="$mpi_c_compiler" >/dev/null
  cmake --build "$work/cmake-mpi" >/dev/null
  RANKSNAP_DIR="$work/out-mpi" RANKSNAP_REPORT=0 "$work/cmake-mpi/consumer" > "$work/mpi.out" 2>&1 ||
    { cat "$work/mpi.out"; exit 1; }
  grep -q "^consumer: success after MPI_Init" "$work/mpi.out" || { cat "$work/mpi.out"; exit 1; }
  echo "package: cmake-mpi ok"
fi
c++ "$src/tests/package/consumer.cpp" -o "$work/pc-shared" $(pkg-config --cflags --libs ranksnap)
run pc-shared "$work/pc-shared"
# the archive by name (-l:libranksnap.a), the rest as Libs.private and its Requires.private say
c++ "$src/tests/package/consumer.cpp" -o "$work/pc-static" $(pkg-config --cflags ranksnap) \
  $(pkg-config --static --libs ranksnap | sed 's/-lranksnap /-l:libranksnap.a /')
run pc-static "$work/pc-static"
# no path of the build machine's compiler or of the tree before the move
if grep -rn -e "$work/prefix" -e "/usr/lib/gcc" "$prefix/lib/cmake" "$prefix/lib/pkgconfig"; then
  echo "the installed package names a path that does not move with it"; exit 1
fi

# `ranksnap collect` becomes the ranksnap-collect installed beside it (built when MPI is found)
if [ -x "$build/ranksnap-collect" ]; then
  test -x "$prefix/bin/ranksnap-collect"
  "$prefix/bin/ranksnap" collect --help | grep -q "usage: ranksnap collect"
fi

# A PyTorch job from the install tree (the stand-in torch of tests/python): ranksnap-run finds the
# library, the glue (lib/ranksnap/python) and the pickle reader next to the library.
if command -v python3 >/dev/null; then
  unset RANKSNAP_RECORDER
  # ranksnap's sitecustomize ran when its import hook waits for torch; the module named
  # sitecustomize afterwards is the site's own where there is one (Ubuntu's python3 has), which
  # ranksnap's chains to
  got=$("$prefix/bin/ranksnap-run" python3 -c 'import sys, ranksnap; print(ranksnap.__file__, any(type(f).__name__ == "_TorchImportHook" for f in sys.meta_path))')
  case "$got" in
    "$prefix/lib/ranksnap/python/ranksnap/__init__.py True") ;;
    *) echo "the installed ranksnap-run gave Python: $got (expected the installed ranksnap and its torch import hook: True)"; exit 1 ;;
  esac
  RANKSNAP_DIR="$work/torch" PYTHONPATH="$src/tests/python/fake_torch" \
    "$prefix/bin/ranksnap-run" --steps 2:4 python3 "$src/tests/python/train_fake.py" > "$work/torch.out"
  grep -q "1 of 1 rank" "$work/torch.out" || { cat "$work/torch.out"; exit 1; }
  test -f "$work/torch/rank-00000.pickle"
fi
