#!/bin/bash
# The whole test suite, as CI runs it (.ci/run): the commit subjects' length, a warnings-as-errors
# build with the unit and MPI tests, report.html in a headless browser, an ASan/UBSan build of the unit tests, the thread test
# under ThreadSanitizer, and short libFuzzer runs of the three decoders. GPU tests (label gpu)
# skip with a reason where no GPU is.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"

step() { printf '\n=== %s\n' "$*"; }

step "commit subjects at most 72 characters (CONTRIBUTING.md)"
sh tests/arch/check_commits.sh .

step "build (gcc, -Werror)"
cmake -S . -B build-ci -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRANKSNAP_WERROR=ON >/dev/null
cmake --build build-ci -j "$jobs"
step "unit, mpi and gpu tests"
ctest --test-dir build-ci -L 'unit|mpi|gpu' --output-on-failure -j "$jobs"

step "report.html in headless chromium (label html; skipped with a reason where chromium is absent)"
ctest --test-dir build-ci -L html --output-on-failure -j "$jobs"

step "ASan/UBSan build of the unit tests (clang)"
CC=clang CXX=clang++ cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug \
  -DRANKSNAP_SANITIZE=address,undefined -DRANKSNAP_FUZZ=ON >/dev/null
cmake --build build-asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp" \
  ctest --test-dir build-asan -L unit --output-on-failure -j "$jobs"

step "ThreadSanitizer: allocator and recorder under threads, and the report's decoding threads"
CC=clang CXX=clang++ cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DRANKSNAP_SANITIZE=thread >/dev/null
cmake --build build-tsan -j "$jobs" --target test_alloc_threads ranksnap_cli
ctest --test-dir build-tsan -R '^test_alloc_threads$' --output-on-failure
# `ranksnap report --jobs`: four real PyTorch pickles decoded on four threads of cli/pool.c. (The
# report tests' fixture writer forks ranks whose post-mortem thread warms libbacktrace, which TSan
# can deadlock on inside dl_iterate_phdr; the pool's threads are what needs checking here.)
TSAN_OPTIONS=halt_on_error=1 build-tsan/ranksnap report --jobs 4 --rank-from-name \
  tests/data/snapshot_rank*.pickle tests/data/oom_rank-3_gpt2.pickle > /dev/null

step "fuzz: the .rsnap, ring and pickle decoders, short runs under an RSS limit"
ctest --test-dir build-asan -L fuzz --output-on-failure
