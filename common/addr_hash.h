/*
 * addr_hash.h — the hash of a block address for the tables keyed by address.
 *
 * Addresses come from files anyone may have crafted: an unseeded hash lets a file choose
 * addresses that all land in one bucket and turn every lookup into a scan (100,000 frees took
 * seconds instead of milliseconds). The seed is drawn once per process from the kernel's random
 * source, so no file can aim at it; the mixer is MurmurHash3's 64-bit finaliser, a bijection
 * whose every output bit depends on every input bit.
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

#endif
