/*
 * alloc.c — the caching allocator: PyTorch's CUDACachingAllocator policy, in C.
 *
 * Memory comes from the backend in segments; a segment is cut into blocks, a doubly linked list
 * in address order (prev/next). With expandable segments a segment is instead one virtual range
 * per (stream, pool), 1.125 times the device's memory, of which only some pages are mapped: its
 * blocks are mapped (as any block) or unmapped address space, kept in address order in their
 * pool's `unmapped` list and never in its bins. Every mapped block is in exactly one of three
 * states:
 *   - inactive: free, in its pool's index, reusable;
 *   - active_allocated: handed out, in the address map;
 *   - active_awaiting_free: freed by the program but used on other streams (record_stream);
 *     held until the events recorded on those streams at free time complete.
 *
 * Data structures, chosen so that a warm malloc+free costs well under 100 ns:
 *   - pools: one per (stream, small|large), as PyTorch keys its pools' order by stream first.
 *     A pool bins its inactive blocks by size class (exact 512 B steps below 32 KiB, then 32
 *     classes per power of two); each bin is an intrusive treap keyed by (size, address), and a
 *     two-level bitmap says which bins are non-empty. Best fit is the lower_bound of the
 *     request in its own bin, else the leftmost block of the next non-empty bin: the smallest
 *     fitting block of that stream, lowest address on ties — PyTorch's BlockComparatorSize order
 *     — while every tree stays a few nodes deep, however many blocks are cached;
 *   - an open-addressing map (linear probing, backward-shift deletion) from the address of an
 *     allocated block to the block, for O(1) free, record_stream and owns;
 *   - block structs recycled through a free list, so the warm path never calls malloc;
 *   - the events of awaiting blocks in one FIFO, polled at the start of each malloc (only when
 *     it is not empty) and synchronized before a reservation is retried.
 *
 * inactive_split_bytes is derived rather than tracked per block: every reserved byte is active
 * or inactive, and an inactive block that is a whole segment is the only unsplit case (PyTorch
 * also leaves expandable blocks out), so inactive_split = reserved - active - (bytes of free whole
 * segments and free expandable blocks), and only the last term needs maintaining, in
 * pool_insert/pool_remove.
 *
 * Trace sizes follow PyTorch's record_trace: alloc, free_requested and free_completed carry the
 * requested (unrounded) size; segment_alloc/segment_free the segment size (or the bytes mapped or
 * unmapped); oom the rounded request, with the device's free bytes as the address. One mutex
 * guards everything and the observer runs under it. rs_alloc_destroy does not call the observer:
 * the recorder may already be gone.
 *
 * The parts: alloc_block.c (pools, the address map, block structs, returning blocks, segments),
 * alloc_expandable.c (expandable segments), alloc_release.c (giving cached memory back),
 * alloc_snapshot.c (the state for a snapshot), alloc_check.c (the self-check); the types are in
 * alloc_struct.h. This file holds the policy (rounding, splitting), the slow path and the API.
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

static const rs_alloc_conf rs_default_conf;

size_t rs_alloc_round_size(size_t size)
{
    return (size_t)rs_alloc_conf_round(&rs_default_conf, size);
}

size_t rs_alloc_segment_size(size_t rounded)
{
    return (size_t)rs_alloc_conf_segment_size(&rs_default_conf, rounded);
}

/* Large blocks are split only for requests below max_split_size and when more than 1 MiB would
 * remain, so that large segments are not shredded into pieces no large request can use. An
 * expandable segment has no such pieces to fear: its free pages can always be unmapped. */
RS_HOT int should_split(const rs_alloc *a, const rs_block *b, size_t rounded)
{
    size_t remaining = b->size - rounded;
    if (b->pool->is_small || a->expandable) return remaining >= RS_MIN_BLOCK_SIZE;
    return rounded < a->max_split && remaining > RS_SMALL_SIZE;
}

/* PyTorch's alloc_block: new memory for the request, unless the cap forbids it. *out is a new
 * segment's block (*in_pool = 0) or, with expandable segments, a free block of its pool holding
 * `rounded` bytes (*in_pool = 1); NULL when there is no room (device or cap), which is not an
 * error. */
static ranksnap_status alloc_block(rs_alloc *a, rs_pool *pool, size_t rounded, size_t alloc_size,
                                   int retry, rs_block **out, int *in_pool)
{
    *out = NULL;
    if (retry) a->st.num_alloc_retries++;
    if (a->has_cap && a->st.reserved_bytes + alloc_size > a->cap) return RANKSNAP_OK;
    if (a->expandable) {
        *in_pool = 1;
        return rs_al_expandable_alloc(a, pool, rounded, out);
    }
    RS_CHECK(spare_reserve(a, 1));
    rs_segment *s = calloc(1, sizeof *s);
    if (!s) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "allocator: out of host memory for "
                                                      "segment bookkeeping");
    void *ptr = NULL;
    ranksnap_status st = a->backend->ops->reserve(a->backend, alloc_size, &ptr);
    if (st != RANKSNAP_OK) {
        free(s);
        return st == RANKSNAP_ERR_OUT_OF_MEMORY ? RANKSNAP_OK : st;
    }
    s->addr = (uintptr_t)ptr;
    s->size = alloc_size;
    s->pool = pool;
    rs_al_segment_link(a, s);
    rs_al_reserved_add(a, alloc_size);
    a->st.num_segment_allocs++;
    s->stack_id = observe(a, RS_ACT_SEGMENT_ALLOC, s->addr, alloc_size, pool->stream);

    rs_block *b = spare_pop(a);
    b->addr = s->addr;
    b->size = alloc_size;
    b->pool = pool;
    b->seg = s;
    b->state = RS_BLOCK_INACTIVE;
    s->head = b;
    *in_pool = 0;
    *out = b;
    return RANKSNAP_OK;
}

/* PyTorch's OOM: the trace entry (the rounded request, the device's free bytes as the address),
 * the record, and the message, whose "Tried to allocate" is the segment the request needed. */
static ranksnap_status oom_error(rs_alloc *a, size_t size, size_t rounded, size_t alloc_size,
                                 void *stream)
{
    uint64_t dfree = 0, dtotal = a->device_total;
    if (a->backend->ops->mem_info(a->backend, &dfree, &dtotal) != RANKSNAP_OK) {
        dfree = 0;
        dtotal = a->device_total;
    }
    observe(a, RS_ACT_OOM, dfree, rounded, stream);
    a->st.num_ooms++;
    a->have_oom = 1;
    a->oom.requested = size;
    a->oom.rounded = alloc_size;
    a->oom.device_free = dfree;
    a->oom.device_total = dtotal;
    a->oom.allocated = a->st.allocated_bytes;
    a->oom.reserved = a->st.reserved_bytes;
    a->oom.memory_limit = a->has_cap ? a->cap : 0;
    a->oom.time_us = rs_now_us();
    a->oom.stream = stream;
    a->oom.step = a->step;

    char seg[32], total[32], fr[32], al[32], un[32], cap[48] = "", req[32];
    rs_text_format_bytes(alloc_size, seg, sizeof seg);
    rs_text_format_bytes(dtotal, total, sizeof total);
    rs_text_format_bytes(dfree, fr, sizeof fr);
    rs_text_format_bytes(a->st.allocated_bytes, al, sizeof al);
    rs_text_format_bytes(a->st.reserved_bytes - a->st.allocated_bytes, un, sizeof un);
    rs_text_format_bytes(size, req, sizeof req);
    if (a->has_cap) {
        rs_text_format_bytes(a->cap, cap, sizeof cap - 12);
        strcat(cap, " allowed; ");
    }
    return rs_error(RANKSNAP_ERR_OUT_OF_MEMORY,
                    "CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s "
                    "of which %s is free. %sOf the allocated memory %s is allocated by ranksnap, "
                    "and %s is reserved by ranksnap but unallocated. If reserved but unallocated "
                    "memory is large try setting RANKSNAP_ALLOC_CONF=expandable_segments:True to "
                    "avoid fragmentation. (The request: %s.)",
                    seg, a->device_index, total, fr, cap, al, un, req);
}

/* No cached block fits: PyTorch's order of remedies (alloc.h), then OOM. *out is the block that
 * holds the request: a new segment's (*in_pool = 0) or one of the pool's (*in_pool = 1). After an
 * event synchronisation no pool is searched again, as in PyTorch: a block it gave back serves a
 * later request. */
static ranksnap_status malloc_slow(rs_alloc *a, size_t size, size_t rounded, int small,
                                   void *stream, rs_block **out, int *in_pool)
{
    size_t alloc_size = (size_t)rs_alloc_conf_segment_size(&a->conf, rounded);
    rs_pool *pool = NULL;
    rs_block *b = NULL;
    RS_CHECK(rs_al_pool_get(a, small, stream, &pool));
    if (a->gc_on) RS_CHECK(rs_al_garbage_collect(a));
    RS_CHECK(alloc_block(a, pool, rounded, alloc_size, 0, &b, in_pool));
    if (!b) {
        int released = 0;
        RS_CHECK(rs_al_release_available(a, pool, rounded, &released));
        if (released) RS_CHECK(alloc_block(a, pool, rounded, alloc_size, 0, &b, in_pool));
    }
    if (!b) {
        RS_CHECK(rs_al_release_cached(a));
        RS_CHECK(alloc_block(a, pool, rounded, alloc_size, 1, &b, in_pool));
    }
    if (!b) return oom_error(a, size, rounded, alloc_size, stream);
    /* the split after this needs one block struct */
    ranksnap_status st = spare_reserve(a, 1);
    if (st != RANKSNAP_OK) {
        if (!*in_pool) pool_insert(a, b);
        return st;
    }
    *out = b;
    return RANKSNAP_OK;
}

static ranksnap_status malloc_locked(rs_alloc *a, size_t size, void *stream, void **ptr)
{
    if (a->n_pending) RS_CHECK(rs_al_process_events(a));
    RS_CHECK(map_reserve_one(a));
    RS_CHECK(spare_reserve(a, 1));

    size_t rounded = (size_t)rs_alloc_conf_round(&a->conf, size);
    int small = rounded <= RS_SMALL_SIZE;
    rs_block *b = pool_best_fit(a, small, stream, rounded);
    int in_pool = b != NULL;
    if (!b) RS_CHECK(malloc_slow(a, size, rounded, small, stream, &b, &in_pool));
    if (in_pool) pool_remove(a, b);

    if (should_split(a, b, rounded)) {
        rs_block *r = spare_pop(a);
        r->addr = b->addr + rounded;
        r->size = b->size - rounded;
        r->pool = b->pool;
        r->seg = b->seg;
        r->prev = b;
        r->next = b->next;
        if (r->next) r->next->prev = r;
        b->next = r;
        b->size = rounded;
        pool_insert(a, r);
    }

    b->state = RS_BLOCK_ACTIVE_ALLOCATED;
    b->requested = size;
    map_insert(a, b);

    ranksnap_stats *s = &a->st;
    s->allocated_bytes += b->size;
    s->active_bytes += b->size;
    s->requested_bytes += size;
    s->num_allocs++;
    if (s->allocated_bytes > s->allocated_bytes_peak) {
        s->allocated_bytes_peak = s->allocated_bytes;
        s->peak_time_us = rs_now_us();
        s->peak_step = a->step;
    }
    if (s->active_bytes > s->active_bytes_peak) s->active_bytes_peak = s->active_bytes;
    if (s->requested_bytes > s->requested_bytes_peak) s->requested_bytes_peak = s->requested_bytes;

    b->stack_id = observe(a, RS_ACT_ALLOC, b->addr, size, stream);
    b->caller = a->caller;
    *ptr = (void *)b->addr;
    return RANKSNAP_OK;
}

/* PyTorch's allowed_memory_maximum, from the limit and the fraction; GC acts only under it. */
static void update_cap(rs_alloc *a)
{
    a->has_cap = rs_alloc_conf_cap(&a->conf, a->memory_limit, a->device_total, &a->cap);
    if (!a->has_cap) a->cap = 0;
    a->gc_on = a->has_cap && a->conf.garbage_collection_threshold > 0.0;
}

ranksnap_status rs_alloc_create(rs_backend *backend, const rs_alloc_config *cfg, rs_alloc **out)
{
    if (!out) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_alloc_create: out is NULL");
    *out = NULL;
    if (!backend || !backend->ops)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_alloc_create: expected a backend");
    rs_device_info info;
    RS_CHECK(backend->ops->device_info(backend, &info));

    rs_alloc *a = calloc(1, sizeof *a);
    if (!a) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rs_alloc_create: out of host memory");
    atomic_init(&a->own_lock.v, 0);
    a->lock = cfg && cfg->lock ? cfg->lock : &a->own_lock;
    a->backend = backend;
    if (cfg) {
        if (cfg->conf) a->conf = *cfg->conf;
        a->memory_limit = cfg->memory_limit;
        /* 0 from a zero-initialised config means "no cap", as UINT64_MAX does. */
        if (cfg->max_split_size && cfg->max_split_size != UINT64_MAX)
            a->conf.max_split_size = cfg->max_split_size;
        a->device_index = cfg->device_index;
        a->observer = cfg->observer;
        a->observer_ctx = cfg->observer_ctx;
    }
    if (a->conf.expandable_segments && !backend->ops->map) {
        RS_WARN(RS_SUB_ALLOC, "expandable_segments:True needs CUDA's virtual memory API, which "
                              "the %s backend lacks; segments are not expandable",
                backend->ops->name);
        a->conf.expandable_segments = 0;
    }
    a->expandable = a->conf.expandable_segments;
    a->max_split = rs_alloc_conf_max_split(&a->conf);
    a->max_non_split = rs_alloc_conf_max_non_split_rounding(&a->conf);
    a->device_total = info.total_bytes;
    update_cap(a);
    a->rng = 0x9e3779b9u;
    a->step = -1;
    a->st.peak_step = -1;
    a->map = cfg && cfg->block_map ? cfg->block_map : &a->own_map;
    if (!a->map->slots) {
        ranksnap_status st = rs_al_map_resize(a->map, 1024);
        if (st != RANKSNAP_OK) {
            free(a);
            return st;
        }
    }
    *out = a;
    return RANKSNAP_OK;
}

void rs_alloc_destroy(rs_alloc *a)
{
    if (!a) return;
    rs_mutex_lock(a->lock);
    const rs_backend_ops *ops = a->backend->ops;
    for (size_t i = 0; i < a->n_pending; i++) {
        if (ops->event_synchronize(a->backend, a->pending[i].ev) != RANKSNAP_OK)
            RS_WARN(RS_SUB_ALLOC, "allocator teardown: waiting for an event failed: %s",
                    ranksnap_last_error());
        ops->event_destroy(a->backend, a->pending[i].ev);
    }
    rs_segment *s = a->segments;
    while (s) {
        rs_segment *next = s->next;
        if (s->expandable) {
            /* every run of mapped pages, then the range */
            for (const rs_block *r = s->head; r;) {
                if (!r->mapped) {
                    r = r->next;
                    continue;
                }
                uintptr_t at = r->addr;
                size_t n = 0;
                for (; r && r->mapped; r = r->next) n += r->size;
                if (ops->unmap(a->backend, (void *)at, n, s->page, s->pool->stream) != RANKSNAP_OK)
                    RS_WARN(RS_SUB_ALLOC, "allocator teardown: unmapping 0x%" PRIxPTR
                            " (%zu bytes) failed: %s", at, n, ranksnap_last_error());
            }
            if (ops->va_release(a->backend, (void *)s->addr, s->size) != RANKSNAP_OK)
                RS_WARN(RS_SUB_ALLOC, "allocator teardown: releasing the range 0x%" PRIxPTR
                        " (%zu bytes) failed: %s", s->addr, s->size, ranksnap_last_error());
        } else if (ops->release(a->backend, (void *)s->addr, s->size) != RANKSNAP_OK) {
            RS_WARN(RS_SUB_ALLOC, "allocator teardown: releasing segment 0x%" PRIxPTR
                    " (%zu bytes) failed: %s", s->addr, s->size, ranksnap_last_error());
        }
        rs_block *b = s->head;
        while (b) {
            rs_block *bn = b->next;
            if (b->state == RS_BLOCK_ACTIVE_ALLOCATED && a->map != &a->own_map) {
                /* a shared map outlives this allocator: its blocks must not stay in it */
                map_slot *slot = map_find(a, b->addr);
                if (slot) map_erase(a, slot);
            }
            rs_al_block_free_struct(b);
            b = bn;
        }
        free(s);
        s = next;
    }
    rs_block *b = a->spare;
    while (b) {
        rs_block *bn = b->next;
        rs_al_block_free_struct(b);
        b = bn;
    }
    for (int k = 0; k < 2; k++) {
        rs_pool *p = a->pools[k];
        while (p) {
            rs_pool *pn = p->next;
            free(p);
            p = pn;
        }
    }
    free(a->pending);
    free(a->own_map.slots);
    rs_mutex_unlock(a->lock);
    free(a);
}

ranksnap_status rs_alloc_malloc(rs_alloc *a, size_t size, void *stream, void **ptr)
{
    return rs_alloc_malloc_from(a, size, stream, ptr, 0);
}

ranksnap_status rs_alloc_malloc_from(rs_alloc *a, size_t size, void *stream, void **ptr,
                                     uintptr_t caller)
{
    if (!a || !ptr)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                        "rs_alloc_malloc: expected an allocator and an output pointer");
    *ptr = NULL;
    if (size == 0) return RANKSNAP_OK;
    /* Rounding to a 2 MiB multiple must not wrap around. */
    if (size > SIZE_MAX / 2)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                        "rs_alloc_malloc: %zu bytes: expected a size below %zu", size,
                        SIZE_MAX / 2);
    rs_mutex_lock(a->lock);
    a->caller = caller;
    ranksnap_status st = malloc_locked(a, size, stream, ptr);
    rs_mutex_unlock(a->lock);
    return st;
}

/* Records an event on each stream the block was used on, all or none. */
static ranksnap_status record_events(rs_alloc *a, rs_block *b)
{
    size_t need = a->n_pending + b->n_uses;
    if (need > a->cap_pending) {
        size_t cap = a->cap_pending ? a->cap_pending * 2 : 64;
        while (cap < need) cap *= 2;
        pending_event *p = realloc(a->pending, cap * sizeof *p);
        if (!p)
            return rs_error(RANKSNAP_ERR_HOST_MEMORY,
                            "allocator: could not grow the pending event list to %zu", cap);
        a->pending = p;
        a->cap_pending = cap;
    }
    size_t base = a->n_pending;
    for (uint32_t i = 0; i < b->n_uses; i++) {
        rs_dev_event ev = NULL;
        ranksnap_status st = a->backend->ops->event_record(a->backend, b->uses[i], &ev);
        if (st != RANKSNAP_OK) {
            for (size_t k = base; k < base + i; k++)
                a->backend->ops->event_destroy(a->backend, a->pending[k].ev);
            return st;
        }
        a->pending[base + i].ev = ev;
        a->pending[base + i].stream = b->uses[i];
        a->pending[base + i].block = b;
    }
    a->n_pending = need;
    b->event_count = b->n_uses;
    return RANKSNAP_OK;
}

ranksnap_status rs_alloc_free(rs_alloc *a, void *ptr)
{
    if (!a) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_alloc_free: allocator is NULL");
    if (!ptr) return RANKSNAP_OK;
    rs_mutex_lock(a->lock);
    map_slot *slot = map_find(a, (uintptr_t)ptr);
    if (!slot) {
        rs_mutex_unlock(a->lock);
        return rs_error(RANKSNAP_ERR_UNKNOWN_POINTER,
                        "free of %p: expected the start of a block allocated by ranksnap and not "
                        "yet freed (never allocated here, or freed twice)",
                        ptr);
    }
    rs_block *b = slot->block;
    rs_alloc *o = b->pool->alloc; /* `a`, or the device's allocator that handed it out */
    if (b->n_uses) {
        ranksnap_status st = record_events(o, b);
        if (st != RANKSNAP_OK) {
            rs_mutex_unlock(a->lock);
            return st;
        }
    }
    map_erase(o, slot);
    o->st.allocated_bytes -= b->size;
    o->st.num_frees++;
    observe(o, RS_ACT_FREE_REQUESTED, b->addr, b->requested, b->pool->stream);
    if (b->event_count) {
        b->state = RS_BLOCK_ACTIVE_AWAITING_FREE;
        b->n_uses = 0;
    } else {
        block_to_pool(o, b);
    }
    rs_mutex_unlock(a->lock);
    return RANKSNAP_OK;
}

ranksnap_status rs_alloc_record_stream(rs_alloc *a, void *ptr, void *stream)
{
    if (!a) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_alloc_record_stream: allocator "
                                                           "is NULL");
    ranksnap_status st = RANKSNAP_OK;
    rs_mutex_lock(a->lock);
    map_slot *slot = ptr ? map_find(a, (uintptr_t)ptr) : NULL;
    if (!slot) {
        st = rs_error(RANKSNAP_ERR_UNKNOWN_POINTER,
                      "record_stream of %p: expected the start of a block allocated by ranksnap "
                      "and not yet freed",
                      ptr);
        goto out;
    }
    rs_block *b = slot->block;
    if (stream == b->pool->stream) goto out;
    for (uint32_t i = 0; i < b->n_uses; i++)
        if (b->uses[i] == stream) goto out;
    if (b->n_uses == b->cap_uses) {
        uint32_t cap = b->cap_uses ? b->cap_uses * 2 : 4;
        void **u = realloc(b->uses, cap * sizeof *u);
        if (!u) {
            st = rs_error(RANKSNAP_ERR_HOST_MEMORY,
                          "record_stream of %p: out of host memory for its stream list", ptr);
            goto out;
        }
        b->uses = u;
        b->cap_uses = cap;
    }
    b->uses[b->n_uses++] = stream;
out:
    rs_mutex_unlock(a->lock);
    return st;
}

ranksnap_status rs_alloc_empty_cache(rs_alloc *a)
{
    if (!a) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_alloc_empty_cache: allocator is "
                                                           "NULL");
    rs_mutex_lock(a->lock);
    ranksnap_status st = rs_al_release_cached(a);
    rs_mutex_unlock(a->lock);
    return st;
}

rs_alloc *rs_alloc_owner(rs_alloc *a, const void *ptr)
{
    if (!a || !ptr) return NULL;
    rs_mutex_lock(a->lock);
    map_slot *slot = map_find(a, (uintptr_t)ptr);
    rs_alloc *o = slot ? slot->block->pool->alloc : NULL;
    rs_mutex_unlock(a->lock);
    return o;
}

int rs_alloc_owns(rs_alloc *a, const void *ptr)
{
    return a && rs_alloc_owner(a, ptr) == a;
}

void *rs_alloc_observer_ctx(const rs_alloc *a)
{
    return a->observer_ctx;
}

ranksnap_status rs_block_map_create(rs_block_map **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "allocator: out of host memory for a block map");
    ranksnap_status st = rs_al_map_resize(*out, 1024);
    if (st != RANKSNAP_OK) {
        free(*out);
        *out = NULL;
    }
    return st;
}

void rs_block_map_destroy(rs_block_map *m)
{
    if (!m) return;
    free(m->slots);
    free(m);
}

void rs_alloc_get_stats(rs_alloc *a, ranksnap_stats *out)
{
    if (!a || !out) return;
    rs_mutex_lock(a->lock);
    const ranksnap_stats *s = &a->st;
    out->allocated_bytes = s->allocated_bytes;
    out->allocated_bytes_peak = s->allocated_bytes_peak;
    out->requested_bytes = s->requested_bytes;
    out->requested_bytes_peak = s->requested_bytes_peak;
    out->reserved_bytes = s->reserved_bytes;
    out->reserved_bytes_peak = s->reserved_bytes_peak;
    out->active_bytes = s->active_bytes;
    out->active_bytes_peak = s->active_bytes_peak;
    out->inactive_split_bytes = s->reserved_bytes - s->active_bytes - a->whole_free;
    out->num_allocs = s->num_allocs;
    out->num_frees = s->num_frees;
    out->num_alloc_retries = s->num_alloc_retries;
    out->num_ooms = s->num_ooms;
    out->num_segment_allocs = s->num_segment_allocs;
    out->num_segment_frees = s->num_segment_frees;
    out->num_sync_all_streams = s->num_sync_all_streams;
    out->peak_time_us = s->peak_time_us;
    out->peak_step = s->peak_step;
    out->device_total_bytes = a->device_total;
    out->memory_limit_bytes = a->has_cap ? a->cap : 0;
    rs_mutex_unlock(a->lock);
}

void rs_alloc_reset_peak_stats(rs_alloc *a)
{
    if (!a) return;
    rs_mutex_lock(a->lock);
    ranksnap_stats *s = &a->st;
    s->allocated_bytes_peak = s->allocated_bytes;
    s->requested_bytes_peak = s->requested_bytes;
    s->reserved_bytes_peak = s->reserved_bytes;
    s->active_bytes_peak = s->active_bytes;
    s->peak_time_us = rs_now_us();
    s->peak_step = a->step;
    rs_mutex_unlock(a->lock);
}

void rs_alloc_set_step(rs_alloc *a, int64_t step)
{
    if (!a) return;
    rs_mutex_lock(a->lock);
    a->step = step;
    rs_mutex_unlock(a->lock);
}

int rs_alloc_last_oom(rs_alloc *a, rs_oom_info *out)
{
    if (!a) return 0;
    rs_mutex_lock(a->lock);
    int have = a->have_oom;
    if (have && out) *out = a->oom;
    rs_mutex_unlock(a->lock);
    return have;
}

uint64_t rs_alloc_memory_limit(const rs_alloc *a)
{
    if (!a) return 0;
    rs_alloc *m = (rs_alloc *)(uintptr_t)a; /* the lock is not part of the logical state */
    rs_mutex_lock(m->lock);
    uint64_t limit = a->has_cap ? a->cap : 0;
    rs_mutex_unlock(m->lock);
    return limit;
}

void rs_alloc_set_memory_limit(rs_alloc *a, uint64_t limit)
{
    if (!a) return;
    rs_mutex_lock(a->lock);
    a->memory_limit = limit;
    update_cap(a);
    rs_mutex_unlock(a->lock);
}

void rs_alloc_get_conf(rs_alloc *a, rs_alloc_conf *out)
{
    if (!a || !out) return;
    rs_mutex_lock(a->lock);
    *out = a->conf;
    rs_mutex_unlock(a->lock);
}

void rs_alloc_lock(rs_alloc *a)
{
    rs_mutex_lock(a->lock);
}

int rs_alloc_trylock(rs_alloc *a)
{
    return rs_mutex_trylock(a->lock);
}

void rs_alloc_unlock(rs_alloc *a)
{
    rs_mutex_unlock(a->lock);
}
