#!/bin/sh
# check.sh SOURCE_DIR BUILD_DIR WORK — installs ranksnap into WORK/prefix, then builds the consumer
# with find_package(ranksnap) and again with pkg-config, and runs both on the sim backend.
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
