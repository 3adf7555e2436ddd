/*
 * addr_hash.c — the per-process seed of addr_hash.h, and the keyed hash of names.
 */
#include <stdatomic.h>
#include <string.h>
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

#define RS_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static void rs_sip_round(uint64_t v[4])
{
    v[0] += v[1];
    v[1] = RS_ROTL(v[1], 13);
    v[1] ^= v[0];
    v[0] = RS_ROTL(v[0], 32);
    v[2] += v[3];
    v[3] = RS_ROTL(v[3], 16);
    v[3] ^= v[2];
    v[0] += v[3];
    v[3] = RS_ROTL(v[3], 21);
    v[3] ^= v[0];
    v[2] += v[1];
    v[1] = RS_ROTL(v[1], 17);
    v[1] ^= v[2];
    v[2] = RS_ROTL(v[2], 32);
}

uint64_t rs_bytes_hash(uint64_t h, const void *p, size_t n)
{
    /* SipHash-1-3 (Aumasson and Bernstein): one round per 8 bytes, three to finish */
    uint64_t k0 = rs_addr_hash_seed() ^ h, k1 = rs_addr_hash(h, rs_addr_hash_seed());
    uint64_t v[4] = {k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
                     k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull};
    const unsigned char *b = p;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t m = 0;
        for (int k = 7; k >= 0; k--) m = m << 8 | b[i + (size_t)k];
        v[3] ^= m;
        rs_sip_round(v);
        v[0] ^= m;
    }
    uint64_t last = (uint64_t)n << 56;
    for (size_t k = 0; i + k < n; k++) last |= (uint64_t)b[i + k] << (8 * k);
    v[3] ^= last;
    rs_sip_round(v);
    v[0] ^= last;
    v[2] ^= 0xff;
    for (int r = 0; r < 3; r++) rs_sip_round(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}
