#!/bin/bash
# The whole test suite, as CI runs it (.ci/run): the commit subjects' length, a warnings-as-errors
# build with the unit and MPI tests, the MPI tests again under MPICH, the wheel (built, installed
# into a fresh venv, run without MPI and with it), jobs launched by srun on a Slurm each case
# starts, report.html in a headless browser, an ASan/UBSan build of the unit tests, the thread
# test under ThreadSanitizer, short libFuzzer runs of the three decoders, and an aarch64 cross
# build (without MPI) whose tests run under qemu-user. GPU tests (label gpu) skip with a reason
# where no GPU is. Every other skipped test is listed with its reason at the end of its step; in
# CI (CI=true) it fails the suite, as tests/setup-deps.sh fails on a missing prerequisite: CI must
# not go green having left a part of the suite out. The one exception is said where it is: the
# MPI tests under MPICH skip what only Open MPI's mpirun does, each saying what.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"

# Each step says its wall time as it ends, and the suite its total: the suite must stay under 20
# minutes on 2 cores (CONTRIBUTING.md), and these say which step to trim when it does not.
suite_t0=$SECONDS step_t0=$SECONDS step_name=""
step_time() { [ -z "$step_name" ] || printf '=== time: %s: %d s\n' "$step_name" $((SECONDS - step_t0)); }
step() { step_time; step_name=$1 step_t0=$SECONDS; printf '\n=== %s\n' "$*"; }
trap 'step_time; printf "=== time: the suite: %d s\n" $((SECONDS - suite_t0))' EXIT

# ctest over BUILD with ARGS (run through $runner when set), then the tests it skipped, each with
# its SKIPPED/ERROR line; a skipped test outside label gpu fails the suite under CI=true, unless
# SKIPS_SAID names why the step skips some (the MPI tests under MPICH: what only Open MPI's mpirun
# does)
tests() {
  build=$1; shift
  log=$build/suite-ctest.log
  # (listed first: `ctest -N` empties the log of the last run, read below for the reasons)
  gpu=$(ctest --test-dir "$build" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: //p')
  ${runner:-} ctest --test-dir "$build" "$@" 2>&1 | tee "$log"
  bad=0
  for t in $(sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) (Skipped)$/\1/p' "$log"); do
    why=$(awk -v t="$t" '$0 ~ "^[0-9]+/[0-9]+ Testing: " t "$" {on = 1} on && /SKIPPED|ERROR/ {print; exit}
      /^<end of output>/ {on = 0}' "$build/Testing/Temporary/LastTest.log")
    if printf '%s\n' "$gpu" | grep -qx "$t"; then
      echo "skipped (no GPU here): $t: ${why:-no reason printed}"
    elif [ -n "${SKIPS_SAID:-}" ]; then
      echo "skipped ($SKIPS_SAID): $t: ${why:-no reason printed}"
    else
      echo "skipped: $t: ${why:-no reason printed}"
      bad=1
    fi
  done
  if [ "$bad" = 1 ] && [ "${CI:-}" = true ]; then
    echo "CI=true: tests outside label gpu were skipped (above, each with its reason)" >&2
    return 1
  fi
}

step "commit subjects at most 72 characters (CONTRIBUTING.md)"
sh tests/arch/check_commits.sh .

step "build (gcc, -Werror)"
cmake -S . -B build-ci -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRANKSNAP_WERROR=ON >/dev/null
cmake --build build-ci -j "$jobs"
step "unit, mpi and gpu tests"
tests build-ci -L 'unit|mpi|gpu' --output-on-failure -j "$jobs"

step "MPI tests under MPICH's mpiexec (Hydra): its plugin, the tests' programs built with MPICH"
cmake -S . -B build-mpich -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRANKSNAP_WERROR=ON -DRANKSNAP_MPI=mpich >/dev/null
cmake --build build-mpich -j "$jobs"
SKIPS_SAID="under MPICH" tests build-mpich -L mpi --output-on-failure -j "$jobs"

step "the wheel: built offline, installed into a fresh venv, a torchrun job without MPI, an mpirun job, uninstalled"
tests build-ci -L wheel --output-on-failure

step "jobs under Slurm's srun, each on a Slurm of its own (label slurm)"
tests build-ci -L slurm --output-on-failure

step "report.html in headless chromium (label html; skipped with a reason where chromium is absent, an error in CI)"
tests build-ci -L html --output-on-failure -j "$jobs"

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

step "aarch64: cross build (Debian's cross compilers, arm64 packages), its tests under qemu-user"
# What the processor changes (platform/, the driver's routes, stacks, the allocator's lock and
# clock) is checked on aarch64 by the C programs of tests/unit and the fake driver's and runtime's
# tests. Left to the native runs above: the command's scripts (the same C, run there), the PyTorch
# glue's (the build machine's Python cannot load an aarch64 library), the tree's and the install's
# checks (sources; the build machine's compilers), three whose work does not depend on the
# processor and takes minutes under qemu (test_read_pickle: real pickles; test_snapshot_bad_input:
# every truncation and bit flip of a file; test_time_ranges: sixty fresh runtimes), test_heap
# (qemu-user ignores madvise: no huge page to see) and test_atomic_file (its case of another
# user's file needs user ids that the emulation's user namespace has not). Without MPI: Debian's
# arm64 Open MPI cannot be installed beside the amd64 one.
cross_missing=""
for c in aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ qemu-aarch64-static; do
  command -v "$c" >/dev/null || cross_missing="$cross_missing $c"
done
for f in /usr/lib/aarch64-linux-gnu/pkgconfig/msgpack.pc /usr/include/aarch64-linux-gnu/libunwind.h; do
  [ -e "$f" ] || cross_missing="$cross_missing $f"
done
[ -n "$cross_missing" ] || why=$(sh tests/emulated.sh true 2>&1) || cross_missing=" ($why)"
if [ -n "$cross_missing" ]; then
  echo "skipped: the aarch64 stage: missing$cross_missing (tests/setup-deps.sh installs them)"
  [ "${CI:-}" = true ] && { echo "CI=true: the aarch64 stage cannot run" >&2; exit 1; }
else
  cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRANKSNAP_WERROR=ON -DRANKSNAP_CUDA_HEADERS_ONLY=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null
  cmake --build build-aarch64 -j "$jobs"
  runner="sh tests/emulated.sh" tests build-aarch64 -L unit --output-on-failure -j "$jobs" \
    -R '^(test_|driver_|dlsym_|intercept_|cuda_backend_|nccl_|fake_driver_)' \
    -E '^(test_read_pickle|test_snapshot_bad_input|test_time_ranges|test_heap|test_atomic_file)$'
fi
