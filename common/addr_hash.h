/* addr_hash.h — the hash of a device address for the collector's open-addressing tables
 * (summarize.c, timeline.c, replay.c): the finalizer of MurmurHash3, since block addresses
 * differ mostly in their middle bits. */
#ifndef RANKSNAP_ADDR_HASH_H
#define RANKSNAP_ADDR_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline size_t rs_addr_hash(uint64_t a)
{
    a ^= a >> 33;
    a *= 0xff51afd7ed558ccdull;
    a ^= a >> 33;
    return (size_t)a;
}

#endif
