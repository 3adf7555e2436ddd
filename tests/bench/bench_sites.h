/*
 * bench_sites.h — the allocation workload gather_bench and report_bench_rank share: sizes drawn
 * from one xorshift sequence (the same on every rank, so ranks that do not diverge have the same
 * peaks) and five call sites, each a frame of its own in the native stacks, so that the reports
 * have sites to tell apart. Header-only; the including file defines bench_ok(status, what),
 * which a failed call goes to.
 */
#ifndef RANKSNAP_BENCH_SITES_H
#define RANKSNAP_BENCH_SITES_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"

static void bench_ok(ranksnap_status st, const char *what);

static inline uint64_t bench_rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Log-uniform from 512 B to 8 MiB: a mix of small tensors and activations. */
static inline size_t bench_next_size(uint64_t *s)
{
    unsigned shift = 9 + (unsigned)(bench_rng_next(s) % 14); /* 2^9 .. 2^22 */
    size_t base = (size_t)1 << shift;
    return base + (size_t)(bench_rng_next(s) % base);
}

/* noinline (and -fno-ipa-icf where gcc would fold the identical bodies) keeps each a frame. */
#define BENCH_SITE(name)                                                                           \
    __attribute__((noinline)) static void *name(size_t n)                                          \
    {                                                                                              \
        void *p = NULL;                                                                            \
        bench_ok(ranksnap_malloc(&p, n, NULL), "ranksnap_malloc (" #name ")");                    \
        __asm__ volatile("" ::: "memory");                                                         \
        return p;                                                                                  \
    }

BENCH_SITE(site_weights)
BENCH_SITE(site_activations)
BENCH_SITE(site_workspace)
BENCH_SITE(site_scratch)
/* the buffer the divergent rank holds on to */
BENCH_SITE(site_divergent_buffer)

#define BENCH_N_SITES 4
static void *(*const bench_sites[BENCH_N_SITES])(size_t) = {site_weights, site_activations,
                                                             site_workspace, site_scratch};

#endif
