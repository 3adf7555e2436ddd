/*
 * alloc_release.c — giving cached memory back to the backend, as PyTorch does: release_cached
 * (empty_cache, and the last retry of a failed allocation), release_available (the fewest
 * segments that cover a request) and garbage_collect (garbage_collection_threshold: the blocks
 * freed longest ago first).
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "errors.h"
#include "log.h"
#include "mutex.h"
#include "options.h"
#include "text.h"
#include "alloc_block.h"
#include "alloc_expandable.h"
#include "alloc_release.h"

typedef struct block_vec {
    rs_block **v;
    size_t n;
} block_vec;

static int pool_stream_cmp(const void *x, const void *y)
{
    uintptr_t a = (uintptr_t)(*(rs_pool *const *)x)->stream;
    uintptr_t b = (uintptr_t)(*(rs_pool *const *)y)->stream;
    return (a > b) - (a < b);
}

/* The free blocks of every pool of one kind, in PyTorch's BlockPool order (stream, size,
 * address): the order in which its release and garbage collection visit them. */
static ranksnap_status free_blocks_of_kind(rs_alloc *a, int small, block_vec *out)
{
    size_t n_pools = 0, n = 0;
    out->v = NULL;
    out->n = 0;
    for (rs_pool *p = a->pools[small]; p; p = p->next) n_pools++;
    if (!n_pools) return RANKSNAP_OK;
    rs_pool **pools = malloc(n_pools * sizeof *pools);
    if (!pools) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "allocator: out of host memory to "
                                                          "order %zu pools", n_pools);
    n_pools = 0;
    for (rs_pool *p = a->pools[small]; p; p = p->next) pools[n_pools++] = p;
    qsort(pools, n_pools, sizeof *pools, pool_stream_cmp);
    for (size_t i = 0; i < n_pools; i++)
        for (rs_block *b = pool_lower_bound(pools[i], 0); b; b = rs_al_pool_succ(pools[i], b)) n++;
    if (n) out->v = malloc(n * sizeof *out->v);
    if (n && !out->v) {
        free(pools);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "allocator: out of host memory to list %zu "
                                                  "cached blocks", n);
    }
    for (size_t i = 0; i < n_pools; i++)
        for (rs_block *b = pool_lower_bound(pools[i], 0); b; b = rs_al_pool_succ(pools[i], b))
            out->v[out->n++] = b;
    free(pools);
    return RANKSNAP_OK;
}

/* PyTorch's release_blocks: every whole cached segment of one kind is freed, every free page of
 * its expandable segments unmapped (ranges left with nothing mapped are given back). */
static ranksnap_status release_blocks(rs_alloc *a, int small)
{
    block_vec bv;
    RS_CHECK(free_blocks_of_kind(a, small, &bv));
    ranksnap_status st = RANKSNAP_OK;
    size_t n_unmap = 0;
    for (size_t i = 0; i < bv.n && st == RANKSNAP_OK; i++) {
        rs_block *b = bv.v[i];
        if (b->seg->expandable)
            bv.v[n_unmap++] = b; /* after the others, as PyTorch does */
        else if (is_whole(b))
            st = rs_al_segment_release(a, b->seg);
    }
    for (size_t i = 0; i < n_unmap && st == RANKSNAP_OK; i++) {
        rs_block *b = bv.v[i];
        rs_segment *s = b->seg;
        st = rs_al_expandable_unmap(a, b);
        if (st == RANKSNAP_OK && is_whole(s->head) && !s->head->mapped)
            st = rs_al_expandable_release(a, s);
    }
    free(bv.v);
    return st;
}

ranksnap_status rs_al_release_cached(rs_alloc *a)
{
    RS_CHECK(rs_al_sync_events(a));
    RS_CHECK(release_blocks(a, 0));
    return release_blocks(a, 1);
}

ranksnap_status rs_al_release_available(rs_alloc *a, rs_pool *pool, size_t rounded,
                                         int *released)
{
    *released = 0;
    if (a->max_split == UINT64_MAX) return RANKSNAP_OK;
    uint64_t key = rounded < a->max_split ? a->max_split : rounded;
    rs_block *b = pool_lower_bound(pool, (size_t)key);
    if (b && !b->seg->expandable) {
        if (is_whole(b)) RS_CHECK(rs_al_segment_release(a, b->seg));
        *released = 1;
        return RANKSNAP_OK;
    }
    rs_block *c = b ? rs_al_pool_pred(pool, b) : rs_al_pool_last(pool);
    uint64_t total = 0;
    while (c && total < key && c->size >= a->max_split) {
        rs_block *prev = rs_al_pool_pred(pool, c);
        if (!c->seg->expandable && is_whole(c)) {
            total += c->size;
            RS_CHECK(rs_al_segment_release(a, c->seg));
        }
        c = prev;
    }
    *released = total >= key;
    return RANKSNAP_OK;
}

ranksnap_status rs_al_garbage_collect(rs_alloc *a)
{
    uint64_t threshold = (uint64_t)(a->conf.garbage_collection_threshold * (double)a->cap);
    if (a->st.reserved_bytes <= threshold) return RANKSNAP_OK;
    uint64_t target = a->st.reserved_bytes - threshold, reclaimed = 0, total_age = 0;
    block_vec bv;
    RS_CHECK(free_blocks_of_kind(a, 0, &bv));
    size_t freeable = 0;
    for (size_t i = 0; i < bv.n; i++) {
        if (!is_whole(bv.v[i])) {
            bv.v[i] = NULL;
            continue;
        }
        total_age += a->gc_clock[0] - bv.v[i]->gc_base;
        freeable++;
    }
    ranksnap_status st = RANKSNAP_OK;
    int freed = 1;
    while (st == RANKSNAP_OK && reclaimed < target && freed && freeable > 0) {
        double age_threshold = (double)total_age / (double)freeable;
        freed = 0;
        for (size_t i = 0; i < bv.n && st == RANKSNAP_OK; i++) {
            rs_block *b = bv.v[i];
            if (!b || b->seg->expandable) continue;
            uint64_t age = a->gc_clock[0] - b->gc_base;
            if ((double)age < age_threshold) continue;
            freed = 1;
            reclaimed += b->size;
            total_age -= age;
            freeable--;
            bv.v[i] = NULL;
            st = rs_al_segment_release(a, b->seg);
        }
    }
    free(bv.v);
    return st;
}
