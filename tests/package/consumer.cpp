// A user's C++ program: the public header compiles as C++ without CUDA or MPI headers, and the
// installed package links (find_package(ranksnap) / pkg-config).
#include <ranksnap.h>

#include <cstdio>

int main() {
  if (ranksnap_init(nullptr) != RANKSNAP_OK) {
    std::fprintf(stderr, "init: %s\n", ranksnap_last_error());
    return 1;
  }
  void *p = nullptr;
  ranksnap_status st = ranksnap_malloc(&p, 1 << 20, nullptr);
  ranksnap_stats s{};
  ranksnap_get_stats(&s);
  std::printf("consumer: %s, allocated %llu bytes, ranksnap %s\n", ranksnap_strerror(st),
              static_cast<unsigned long long>(s.allocated_bytes), ranksnap_version());
  ranksnap_free(p);
  ranksnap_finalize();
  return st == RANKSNAP_OK && s.allocated_bytes == (1u << 20) ? 0 : 1;
}
