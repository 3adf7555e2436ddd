/*
 * addr_hash.c — the per-process seed of addr_hash.h.
 */
#include <stdatomic.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "addr_hash.h"

uint64_t rs_addr_hash_seed(void)
{
    static _Atomic uint64_t seed;
    uint64_t s = atomic_load_explicit(&seed, memory_order_relaxed);
    if (s) return s;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) {
        /* no entropy yet (early boot) or no getrandom: the clock, the pid and where the loader
         * put this library are still unknown to whoever wrote the file */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        s = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec ^
            (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)&seed;
    }
    if (!s) s = 0x9e3779b97f4a7c15ull;
    uint64_t expected = 0;
    if (!atomic_compare_exchange_strong(&seed, &expected, s)) s = expected;
    return s;
}
