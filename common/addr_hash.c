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

/* One SipRound on four locals: kept in registers (an array passed to a function was not). */
#define RS_SIP_ROUND(v0, v1, v2, v3)                                                               \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = RS_ROTL(v1, 13);                                                                      \
        v1 ^= v0;                                                                                  \
        v0 = RS_ROTL(v0, 32);                                                                      \
        v2 += v3;                                                                                  \
        v3 = RS_ROTL(v3, 16);                                                                      \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = RS_ROTL(v3, 21);                                                                      \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = RS_ROTL(v1, 17);                                                                      \
        v1 ^= v2;                                                                                  \
        v2 = RS_ROTL(v2, 32);                                                                      \
    } while (0)

/* Eight bytes as a little-endian word, in one load where the host is little-endian. */
static inline uint64_t load_le64(const unsigned char *b)
{
    uint64_t m;
    memcpy(&m, b, sizeof m);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    m = __builtin_bswap64(m);
#endif
    return m;
}

uint64_t rs_bytes_hash(uint64_t h, const void *p, size_t n)
{
    /* SipHash-1-3 (Aumasson and Bernstein): one round per 8 bytes, three to finish */
    uint64_t k0 = rs_addr_hash_seed() ^ h, k1 = rs_addr_hash(h, rs_addr_hash_seed());
    uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull,
             v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
    const unsigned char *b = p;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t m = load_le64(b + i);
        v3 ^= m;
        RS_SIP_ROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    uint64_t last = (uint64_t)n << 56;
    for (size_t k = 0; i + k < n; k++) last |= (uint64_t)b[i + k] << (8 * k);
    v3 ^= last;
    RS_SIP_ROUND(v0, v1, v2, v3);
    v0 ^= last;
    v2 ^= 0xff;
    for (int r = 0; r < 3; r++) RS_SIP_ROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}
