/*
 * alloc_snapshot.c — the allocator's state for a snapshot (alloc_snapshot.h): segments sorted by
 * address with their blocks, an expandable segment shown as one segment per run of mapped pages;
 * and the allocated blocks one by one, for what a rank holds when a range begins.
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
#include "alloc_snapshot.h"
#include "alloc_struct.h"

/* A segment as the snapshot shows it: a whole cudaMalloc'ed segment, or one run of mapped pages
 * of an expandable one. */
typedef struct seg_run {
    const rs_segment *s;
    const rs_block *first;
} seg_run;

static int run_addr_cmp(const void *x, const void *y)
{
    uintptr_t a = ((const seg_run *)x)->first->addr, b = ((const seg_run *)y)->first->addr;
    return (a > b) - (a < b);
}

/* The heads of the runs (every segment's, or with `out` NULL only counts them). */
static size_t list_runs(const rs_alloc *a, seg_run *out)
{
    size_t n = 0;
    for (const rs_segment *s = a->segments; s; s = s->next) {
        if (!s->expandable) {
            if (out) out[n] = (seg_run){s, s->head};
            n++;
            continue;
        }
        for (const rs_block *b = s->head; b; b = b->next) {
            if (!b->mapped || (b->prev && b->prev->mapped)) continue;
            if (out) out[n] = (seg_run){s, b};
            n++;
        }
    }
    return n;
}

void rs_alloc_state_free(rs_alloc_state *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n_segments; i++) free(s->segments[i].blocks);
    free(s->segments);
    s->segments = NULL;
    s->n_segments = 0;
}

ranksnap_status rs_alloc_state_take_locked(rs_alloc *a, rs_alloc_state *out)
{
    if (!a || !out)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                        "rs_alloc_state_take: expected an allocator and an output state");
    out->n_segments = 0;
    out->segments = NULL;
    ranksnap_status st = RANKSNAP_OK;
    size_t n = list_runs(a, NULL);
    seg_run *order = malloc((n ? n : 1) * sizeof *order);
    rs_segment_info *segs = calloc(n ? n : 1, sizeof *segs);
    if (!order || !segs) {
        free(order);
        free(segs);
        st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "allocator state: out of host memory for %zu "
                                                "segments", n);
        goto out;
    }
    list_runs(a, order);
    qsort(order, n, sizeof *order, run_addr_cmp);
    out->segments = segs;
    out->n_segments = n;
    for (size_t i = 0; i < n; i++) {
        const rs_segment *s = order[i].s;
        rs_segment_info *si = &segs[i];
        size_t nb = 0;
        for (const rs_block *b = order[i].first; b && b->mapped; b = b->next) nb++;
        si->blocks = malloc(nb * sizeof *si->blocks);
        if (!si->blocks) {
            rs_alloc_state_free(out);
            st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "allocator state: out of host memory for "
                                                    "%zu blocks", nb);
            break;
        }
        si->addr = order[i].first->addr;
        si->device = a->device_index;
        si->stream = s->pool->stream;
        si->is_small = s->pool->is_small;
        si->stack_id = s->stack_id;
        si->n_blocks = nb;
        size_t k = 0;
        for (const rs_block *b = order[i].first; b && b->mapped; b = b->next, k++) {
            rs_block_info *bi = &si->blocks[k];
            bi->addr = b->addr;
            bi->size = b->size;
            bi->requested_size = b->requested;
            bi->stack_id = b->stack_id;
            bi->state = b->state;
            si->total_size += b->size;
            if (b->state == RS_BLOCK_ACTIVE_ALLOCATED) si->allocated_size += b->size;
            if (b->state != RS_BLOCK_INACTIVE) {
                si->active_size += b->size;
                si->requested_size += b->requested;
            }
        }
    }
    free(order);
out:
    return st;
}

ranksnap_status rs_alloc_state_take(rs_alloc *a, rs_alloc_state *out)
{
    if (!a || !out)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                        "rs_alloc_state_take: expected an allocator and an output state");
    rs_mutex_lock(a->lock);
    ranksnap_status st = rs_alloc_state_take_locked(a, out);
    rs_mutex_unlock(a->lock);
    return st;
}

void rs_alloc_each_active_locked(rs_alloc *a, rs_alloc_active_fn fn, void *ctx)
{
    if (!a || !fn) return;
    for (rs_segment *s = a->segments; s; s = s->next)
        for (rs_block *b = s->head; b; b = b->next)
            if (b->state == RS_BLOCK_ACTIVE_ALLOCATED)
                b->stack_id = fn(ctx, b->addr, b->requested, s->pool->stream, b->stack_id, b->caller);
}
