#!/bin/bash
# What one call on the GPU machine runs (docs/GPU.md): build there, the gpu and unit tests, the
# allocator benchmark on the cuda backend next to cudaMallocAsync, and PyTorch's allocator
# benchmark built against the machine's torch. Results go under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/ranksnap-out}
mkdir -p "$OUT"
# libunwind from the carried Debian packages, unpacked aside: the packages' ./lib would replace
# the merged-/usr symlink. Only its own headers and libraries are copied in.
if ls .device-deps/libunwind*.deb >/dev/null 2>&1 && [ ! -e /usr/include/x86_64-linux-gnu/libunwind.h ]; then
  for f in .device-deps/libunwind*.deb; do dpkg -x "$f" /tmp/unw; done
  cp -a /tmp/unw/usr/lib/x86_64-linux-gnu/libunwind* /usr/lib/x86_64-linux-gnu/
  cp -a /tmp/unw/usr/lib/x86_64-linux-gnu/pkgconfig/libunwind* /usr/lib/x86_64-linux-gnu/pkgconfig/
  cp -a /tmp/unw/usr/include/x86_64-linux-gnu/libunwind*.h /usr/include/x86_64-linux-gnu/
  ldconfig
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/machine.txt"
lscpu | grep "Model name" | tee -a "$OUT/machine.txt"
gcc --version | head -1 | tee -a "$OUT/machine.txt"
{ cmake -S . -B build -G Ninja -DRANKSNAP_WERROR=OFF 2>&1 | grep -E "ranksnap:|Error"
  cmake --build build -j16 2>&1 | grep -E "warning|error|FAILED" | head -40; } | tee "$OUT/build.log"
ctest --test-dir build -L 'gpu|unit' --output-on-failure > "$OUT/ctest.log" 2>&1
tail -8 "$OUT/ctest.log"
RANKSNAP_BACKEND=cuda build/tests/bench/alloc_bench --json > "$OUT/bench_cuda.json" 2> "$OUT/bench_cuda.err"
RANKSNAP_BACKEND=cuda build/tests/bench/alloc_bench 2>&1 | tee "$OUT/bench_cuda.txt"
TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
python3 -c 'import torch;print("torch", torch.__version__)' | tee -a "$OUT/machine.txt"
if cmake -S . -B build-torch -G Ninja -DRANKSNAP_WERROR=OFF -DRANKSNAP_TORCH_BENCH=ON \
     -DCMAKE_PREFIX_PATH="$TP" > "$OUT/torch_build.log" 2>&1 \
   && cmake --build build-torch --target torch_cca_bench -j16 >> "$OUT/torch_build.log" 2>&1; then
  build-torch/tests/bench/torch_cca_bench --json > "$OUT/torch.json"
  build-torch/tests/bench/torch_cca_bench | tee "$OUT/torch.txt"
else
  tail -30 "$OUT/torch_build.log"
fi
