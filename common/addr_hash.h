/*
 * addr_hash.h — the hashes of the tables keyed by data from a file: block addresses, stream
 * handles, memo keys (rs_addr_hash) and names (rs_bytes_hash).
 *
 * Addresses come from files anyone may have crafted: an unseeded hash lets a file choose
 * addresses that all land in one bucket and turn every lookup into a scan (100,000 frees took
 * seconds instead of milliseconds). The seed is drawn once per process from the kernel's random
 * source, so no file can aim at it; the mixer is MurmurHash3's 64-bit finaliser, a bijection
 * whose every output bit depends on every input bit. Names get SipHash, keyed with the seed: a
 * mixer of a seeded sum would let inputs of equal length collide whatever the seed.
 */
#ifndef RANKSNAP_ADDR_HASH_H
#define RANKSNAP_ADDR_HASH_H

#include <stddef.h>
#include <stdint.h>

/* The process's seed (never 0; the same for the whole process). */
uint64_t rs_addr_hash_seed(void);

static inline size_t rs_addr_hash(uint64_t a, uint64_t seed)
{
    a ^= seed;
    a ^= a >> 33;
    a *= 0xff51afd7ed558ccdull;
    a ^= a >> 33;
    a *= 0xc4ceb9fe1a85ec53ull;
    a ^= a >> 33;
    return (size_t)a;
}

/* A keyed hash of n bytes (SipHash-1-3, the one Python and Rust use for their dicts), keyed with
 * the process's seed and `h`, so that hashes can be chained (the name, then the file of a frame)
 * and no file can choose names that collide. */
uint64_t rs_bytes_hash(uint64_t h, const void *p, size_t n);

#endif
