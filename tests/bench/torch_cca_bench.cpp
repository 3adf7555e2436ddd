// torch_cca_bench.cpp — PyTorch's CUDACachingAllocator under the same pattern as alloc_bench:
// nanoseconds per raw_alloc+raw_delete pair on a warm cache, sizes 512 B, 64 KiB, 4 MiB, 64 MiB,
// 1 or 64 live at once, median of --reps repetitions. Prints alloc_bench's JSON rows with mode
// "torch_cca" (--json) or a table. Built only on a machine with PyTorch (RANKSNAP_TORCH_BENCH).
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {
constexpr size_t kSizes[] = {512, 64u << 10, 4u << 20, 64u << 20};
constexpr int kLives[] = {1, 64};

double round_ns(size_t size, int live, long iters) {
  auto *alloc = c10::cuda::CUDACachingAllocator::get();
  std::vector<void *> p(static_cast<size_t>(live));
  long rounds = std::max(1L, iters / live);
  for (long i = 0; i < rounds / 10 + 1; i++) {
    for (int j = 0; j < live; j++) p[j] = alloc->raw_alloc(size);
    for (int j = 0; j < live; j++) alloc->raw_delete(p[j]);
  }
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < rounds; i++) {
    for (int j = 0; j < live; j++) p[j] = alloc->raw_alloc(size);
    for (int j = 0; j < live; j++) alloc->raw_delete(p[j]);
  }
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / double(rounds * live);
}
}  // namespace

int main(int argc, char **argv) {
  bool json = false;
  long iters = 200000;
  int reps = 5;
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--json")) json = true;
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::strtol(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = int(std::strtol(argv[++i], nullptr, 10));
    else { std::fprintf(stderr, "usage: torch_cca_bench [--json] [--iters N] [--reps R]\n"); return 2; }
  }
  if (iters < 64 || reps < 1) { std::fprintf(stderr, "torch_cca_bench: --iters >= 64, --reps >= 1\n"); return 2; }
  c10::cuda::set_device(0);
  c10::cuda::CUDACachingAllocator::init(1);
  bool first = true;
  if (json) std::printf("[\n");
  else std::printf("%-16s %10s %5s %12s\n", "mode", "size", "live", "ns/pair");
  for (size_t s : kSizes)
    for (int live : kLives) {
      long it = s >= (64u << 20) ? iters / 20 : iters;
      std::vector<double> v;
      for (int r = 0; r < reps; r++) v.push_back(round_ns(s, live, it));
      std::sort(v.begin(), v.end());
      double ns = v[v.size() / 2];
      if (json) {
        std::printf("%s  {\"mode\": \"torch_cca\", \"size\": %zu, \"live\": %d, \"ns_per_pair\": %.1f}",
                    first ? "" : ",\n", s, live, ns);
        first = false;
      } else {
        std::printf("%-16s %10zu %5d %12.1f\n", "torch_cca", s, live, ns);
      }
    }
  if (json) std::printf("\n]\n");
  return 0;
}
