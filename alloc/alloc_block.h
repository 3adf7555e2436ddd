/*
 * alloc_block.h — blocks and where they are kept (alloc_block.c): the pools' size-class bins of
 * treaps, the address map of allocated blocks, recycled block structs, the observer, returning a
 * block to its pool (coalescing, stream events) and the segment list. The helpers of the warm
 * malloc/free path are inline here (RS_HOT).
 */
#ifndef RANKSNAP_ALLOC_BLOCK_H
#define RANKSNAP_ALLOC_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "alloc_struct.h"

void rs_al_treap_insert(rs_block **root, rs_block *n);

/* With parent links a known node is removed without a search: rotate it below its
 * higher-priority child until it has at most one child, then splice it out. */
void rs_al_treap_remove(rs_block **root, rs_block *n);

rs_block *rs_al_treap_next(rs_block *n);

rs_block *rs_al_pool_succ(const rs_pool *p, rs_block *b);

rs_block *rs_al_pool_pred(const rs_pool *p, rs_block *b);

rs_block *rs_al_pool_last(const rs_pool *p);

ranksnap_status rs_al_pool_get(rs_alloc *a, int small, void *stream, rs_pool **out);

/* The size an expandable block could grow to by mapping the address space after it. */
size_t rs_al_expandable_size(const rs_block *b);

ranksnap_status rs_al_map_resize(rs_block_map *m, size_t cap);

ranksnap_status rs_al_spare_reserve(rs_alloc *a, size_t n);

void rs_al_block_free_struct(rs_block *b);

void rs_al_reserved_add(rs_alloc *a, uint64_t n);

/* Polls pending events; events on one stream complete in order, so once one is pending the
 * later ones of that stream are not queried. */
ranksnap_status rs_al_process_events(rs_alloc *a);

/* PyTorch's synchronize_and_free_events: wait for every pending event. */
ranksnap_status rs_al_sync_events(rs_alloc *a);

void rs_al_segment_link(rs_alloc *a, rs_segment *s);

void rs_al_segment_unlink(rs_alloc *a, rs_segment *s);

/* PyTorch's release_block: one cudaFree of a cached whole segment. */
ranksnap_status rs_al_segment_release(rs_alloc *a, rs_segment *s);

/* Monotonic in size: 64 exact classes of 512 B, then 32 classes per power of two. */
RS_HOT unsigned size_class(size_t size)
{
    uint64_t u = (uint64_t)size >> 9;
    if (u < 64) return (unsigned)u;
    unsigned k = 63u - (unsigned)__builtin_clzll(u);
    return 64u + (k - 6u) * 32u + (unsigned)((u >> (k - 5u)) & 31u);
}

RS_HOT int key_less(const rs_block *x, const rs_block *y)
{
    if (x->size != y->size) return x->size < y->size;
    return x->addr < y->addr;
}

/* The smallest block with size >= `size`, lowest address among equals, or NULL. */
RS_HOT rs_block *treap_lower_bound(rs_block *t, size_t size)
{
    rs_block *best = NULL;
    while (t) {
        if (t->size >= size) {
            best = t;
            t = t->child[0];
        } else {
            t = t->child[1];
        }
    }
    return best;
}

RS_HOT rs_block *treap_first(rs_block *t)
{
    while (t && t->child[0]) t = t->child[0];
    return t;
}

/* The first non-empty bin at or after `c`, or -1. */
RS_HOT int pool_next_bin(const rs_pool *p, unsigned c)
{
    if (c >= NBINS) return -1;
    unsigned w = c >> 6;
    uint64_t m = p->bitmap[w] & (~UINT64_C(0) << (c & 63u));
    if (m) return (int)(w * 64u + (unsigned)__builtin_ctzll(m));
    uint64_t sm = (w + 1 < 64) ? p->summary & (~UINT64_C(0) << (w + 1)) : 0;
    if (!sm) return -1;
    w = (unsigned)__builtin_ctzll(sm);
    return (int)(w * 64u + (unsigned)__builtin_ctzll(p->bitmap[w]));
}

/* A pool's free blocks in PyTorch's order, (size, address): the first at or after `size`, the
 * one after or before a block, the last. NULL when there is none. */
RS_HOT rs_block *pool_lower_bound(const rs_pool *p, size_t size)
{
    unsigned c = size_class(size);
    rs_block *b = treap_lower_bound(p->bins[c], size);
    if (b) return b;
    int n = pool_next_bin(p, c + 1);
    return n < 0 ? NULL : treap_first(p->bins[n]);
}

/* The pool of (stream, kind), moved to the front of its list so that the usual one or two
 * streams are found at once; NULL if the stream never had a segment of that kind. */
RS_HOT rs_pool *pool_find(rs_alloc *a, int small, void *stream)
{
    rs_pool **link = &a->pools[small], *p = *link;
    if (p && p->stream == stream) return p;
    for (; p; link = &p->next, p = *link) {
        if (p->stream == stream) {
            *link = p->next;
            p->next = a->pools[small];
            a->pools[small] = p;
            return p;
        }
    }
    return NULL;
}

/* A free block that spans its whole segment: one cudaFree gives it back. */
RS_HOT int is_whole(const rs_block *b)
{
    return !b->prev && !b->next;
}

/* What inactive_split_bytes leaves out: whole free segments, and (as PyTorch) expandable blocks,
 * whose free pages can always be unmapped. Constant while a block is in a pool. */
RS_HOT int unsplit(const rs_block *b)
{
    return is_whole(b) || b->seg->expandable;
}

RS_HOT void pool_insert(rs_alloc *a, rs_block *b)
{
    rs_pool *p = b->pool;
    unsigned c = size_class(b->size);
    b->bin = (uint16_t)c;
    a->rng ^= a->rng << 13;
    a->rng ^= a->rng >> 17;
    a->rng ^= a->rng << 5;
    b->prio = a->rng;
    b->state = RS_BLOCK_INACTIVE;
    b->gc_base = a->gc_clock[p->is_small];
    if (!p->bins[c]) {
        /* An empty bin, the usual case on a warm cache: the block is the whole tree. */
        p->bitmap[c >> 6] |= UINT64_C(1) << (c & 63u);
        p->summary |= UINT64_C(1) << (c >> 6);
        b->child[0] = b->child[1] = b->parent = NULL;
        p->bins[c] = b;
    } else {
        rs_al_treap_insert(&p->bins[c], b);
    }
    if (unsplit(b)) a->whole_free += b->size;
}

RS_HOT void pool_remove(rs_alloc *a, rs_block *b)
{
    rs_pool *p = b->pool;
    unsigned c = b->bin;
    if (b->child[0] || b->child[1] || b->parent)
        rs_al_treap_remove(&p->bins[c], b);
    else
        p->bins[c] = NULL; /* the only block of its bin */
    if (!p->bins[c]) {
        p->bitmap[c >> 6] &= ~(UINT64_C(1) << (c & 63u));
        if (!p->bitmap[c >> 6]) p->summary &= ~(UINT64_C(1) << (c >> 6));
    }
    if (unsplit(b)) a->whole_free -= b->size;
}

/* PyTorch's get_free_block: best fit, but a request below max_split_size never takes an
 * oversized block, and an oversized request takes one only if it wastes less than
 * max_non_split_rounding (20 MiB). In an expandable segment, a block that could grow is passed
 * over for a later one that could grow less, so that growth room is kept for what needs it. */
RS_HOT rs_block *pool_best_fit(rs_alloc *a, int small, void *stream, size_t rounded)
{
    if (a->gc_on) a->gc_clock[small]++; /* the age GC measures, in searches of the pool */
    rs_pool *p = pool_find(a, small, stream);
    if (!p) return NULL;
    rs_block *b = pool_lower_bound(p, rounded);
    if (!b) return NULL;
    if (a->expandable && b->seg->expandable) {
        for (rs_block *n = rs_al_pool_succ(p, b);
             b->seg->expandable && n && rs_al_expandable_size(n) < rs_al_expandable_size(b); n = rs_al_pool_succ(p, n))
            b = n;
    }
    if (rounded < a->max_split && b->size >= a->max_split) return NULL;
    if (rounded >= a->max_split && b->size - rounded >= a->max_non_split) return NULL;
    return b;
}

RS_HOT size_t map_home(const rs_block_map *m, uintptr_t key)
{
    return (size_t)(((uint64_t)key * UINT64_C(0x9E3779B97F4A7C15)) >> m->shift);
}

RS_HOT map_slot *map_find(rs_alloc *a, uintptr_t key)
{
    const rs_block_map *m = a->map;
    size_t i = map_home(m, key);
    for (;;) {
        map_slot *s = &m->slots[i];
        if (s->key == key) return s;
        if (s->key == 0) return NULL;
        i = (i + 1) & m->mask;
    }
}

RS_HOT void map_put(map_slot *slots, size_t mask, unsigned shift, uintptr_t key, rs_block *b)
{
    size_t i = (size_t)(((uint64_t)key * UINT64_C(0x9E3779B97F4A7C15)) >> shift);
    while (slots[i].key) i = (i + 1) & mask;
    slots[i].key = key;
    slots[i].block = b;
}

/* Keeps the load at most 1/2 after one more insert; called before any state changes. */
RS_HOT ranksnap_status map_reserve_one(rs_alloc *a)
{
    if ((a->map->count + 1) * 2 <= a->map->mask + 1) return RANKSNAP_OK;
    return rs_al_map_resize(a->map, (a->map->mask + 1) * 2);
}

RS_HOT void map_insert(rs_alloc *a, rs_block *b)
{
    rs_block_map *m = a->map;
    map_put(m->slots, m->mask, m->shift, b->addr, b);
    m->count++;
    a->n_allocated++;
}

/* Backward-shift deletion: keeps every probe chain unbroken without tombstones. `a` is the
 * allocator of the slot's block. */
RS_HOT void map_erase(rs_alloc *a, map_slot *s)
{
    rs_block_map *m = a->map;
    size_t i = (size_t)(s - m->slots), j = i;
    for (;;) {
        j = (j + 1) & m->mask;
        if (m->slots[j].key == 0) break;
        size_t k = map_home(m, m->slots[j].key);
        /* Move j back into the hole at i unless its home lies cyclically in (i, j]. */
        int stays = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i].key = 0;
    m->slots[i].block = NULL;
    m->count--;
    a->n_allocated--;
}

/* rs_al_spare_reserve's warm case, inline: every malloc asks, and the spares almost always
 * suffice. */
RS_HOT ranksnap_status spare_reserve(rs_alloc *a, size_t n)
{
    return __builtin_expect(a->n_spare >= n, 1) ? RANKSNAP_OK : rs_al_spare_reserve(a, n);
}

/* Only after spare_reserve guaranteed one. */
RS_HOT rs_block *spare_pop(rs_alloc *a)
{
    rs_block *b = a->spare;
    a->spare = b->next;
    a->n_spare--;
    b->prev = b->next = NULL;
    b->child[0] = b->child[1] = b->parent = NULL;
    b->un_prev = b->un_next = NULL;
    b->mapped = 1;
    b->event_count = 0;
    b->n_uses = 0;
    b->requested = 0;
    b->stack_id = 0;
    return b;
}

RS_HOT void spare_push(rs_alloc *a, rs_block *b)
{
    b->seg = NULL;
    b->next = a->spare;
    a->spare = b;
    a->n_spare++;
}

RS_HOT uint32_t observe(rs_alloc *a, rs_action act, uint64_t addr, uint64_t size, void *stream)
{
    if (!a->observer) return 0;
    return a->observer(a->observer_ctx, act, addr, size, stream);
}

/* PyTorch's free_block: the block is no longer used by anyone; merge it with free neighbours of
 * the same segment and make it reusable. */
/* Merges the block `b` (not in its pool) with its free mapped neighbours, which leave the pool;
 * returns the merged block (the lower one survives, so a segment's head is never recycled), which
 * the caller inserts. */
RS_HOT rs_block *coalesce(rs_alloc *a, rs_block *b)
{
    rs_block *p = b->prev;
    if (p && p->state == RS_BLOCK_INACTIVE && p->mapped) {
        pool_remove(a, p);
        p->size += b->size;
        p->next = b->next;
        if (p->next) p->next->prev = p;
        spare_push(a, b);
        b = p;
    }
    rs_block *n = b->next;
    if (n && n->state == RS_BLOCK_INACTIVE && n->mapped) {
        pool_remove(a, n);
        b->size += n->size;
        b->next = n->next;
        if (b->next) b->next->prev = b;
        spare_push(a, n);
    }
    return b;
}

RS_HOT void block_to_pool(rs_alloc *a, rs_block *b)
{
    a->st.active_bytes -= b->size;
    a->st.requested_bytes -= b->requested;
    observe(a, RS_ACT_FREE_COMPLETED, b->addr, b->requested, b->pool->stream);
    b->requested = 0;
    b->stack_id = 0;
    b->n_uses = 0;
    pool_insert(a, coalesce(a, b));
}

#endif
