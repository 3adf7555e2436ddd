/*
 * alloc_block.c — blocks and where they are kept: the pools' size-class bins of treaps keyed by
 * (size, address), the open-addressing map from an allocated block's address to the block,
 * recycled block structs, the stats, returning a block to its pool (coalescing its free
 * neighbours, the events of record_stream) and the list of segments.
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

/* Puts x in the place of its parent, keeping the in-order sequence. */
static void treap_rotate_up(rs_block **root, rs_block *x)
{
    rs_block *p = x->parent, *g = p->parent;
    int d = p->child[1] == x; /* x is p's child on side d; p becomes x's child on side !d */
    p->child[d] = x->child[!d];
    if (p->child[d]) p->child[d]->parent = p;
    x->child[!d] = p;
    p->parent = x;
    x->parent = g;
    if (!g)
        *root = x;
    else
        g->child[g->child[1] == p] = x;
}

void rs_al_treap_insert(rs_block **root, rs_block *n)
{
    rs_block *p = NULL, **link = root;
    while (*link) {
        p = *link;
        link = key_less(n, p) ? &p->child[0] : &p->child[1];
    }
    n->child[0] = n->child[1] = NULL;
    n->parent = p;
    *link = n;
    while (n->parent && n->parent->prio < n->prio) treap_rotate_up(root, n);
}

void rs_al_treap_remove(rs_block **root, rs_block *n)
{
    while (n->child[0] && n->child[1])
        treap_rotate_up(root, n->child[n->child[1]->prio > n->child[0]->prio]);
    rs_block *c = n->child[0] ? n->child[0] : n->child[1];
    rs_block *p = n->parent;
    if (c) c->parent = p;
    if (!p)
        *root = c;
    else
        p->child[p->child[1] == n] = c;
    n->child[0] = n->child[1] = n->parent = NULL;
}

static rs_block *treap_last(rs_block *t)
{
    while (t && t->child[1]) t = t->child[1];
    return t;
}

rs_block *rs_al_treap_next(rs_block *n)
{
    if (n->child[1]) return treap_first(n->child[1]);
    while (n->parent && n->parent->child[1] == n) n = n->parent;
    return n->parent;
}

static rs_block *treap_prev(rs_block *n)
{
    if (n->child[0]) return treap_last(n->child[0]);
    while (n->parent && n->parent->child[0] == n) n = n->parent;
    return n->parent;
}

/* The last non-empty bin before `c`, or -1. */
static int pool_prev_bin(const rs_pool *p, unsigned c)
{
    if (c == 0) return -1;
    c--;
    unsigned w = c >> 6;
    uint64_t m = p->bitmap[w] & (~UINT64_C(0) >> (63u - (c & 63u)));
    if (m) return (int)(w * 64u + 63u - (unsigned)__builtin_clzll(m));
    uint64_t sm = w ? p->summary & (~UINT64_C(0) >> (64u - w)) : 0;
    if (!sm) return -1;
    w = 63u - (unsigned)__builtin_clzll(sm);
    return (int)(w * 64u + 63u - (unsigned)__builtin_clzll(p->bitmap[w]));
}

rs_block *rs_al_pool_succ(const rs_pool *p, rs_block *b)
{
    rs_block *n = rs_al_treap_next(b);
    if (n) return n;
    int c = pool_next_bin(p, (unsigned)b->bin + 1);
    return c < 0 ? NULL : treap_first(p->bins[c]);
}

rs_block *rs_al_pool_pred(const rs_pool *p, rs_block *b)
{
    rs_block *n = treap_prev(b);
    if (n) return n;
    int c = pool_prev_bin(p, b->bin);
    return c < 0 ? NULL : treap_last(p->bins[c]);
}

rs_block *rs_al_pool_last(const rs_pool *p)
{
    int c = pool_prev_bin(p, NBINS);
    return c < 0 ? NULL : treap_last(p->bins[c]);
}

ranksnap_status rs_al_pool_get(rs_alloc *a, int small, void *stream, rs_pool **out)
{
    rs_pool *p = pool_find(a, small, stream);
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p)
            return rs_error(RANKSNAP_ERR_HOST_MEMORY,
                            "allocator: out of host memory for the pool of stream %p", stream);
        p->stream = stream;
        p->is_small = small;
        p->alloc = a;
        p->next = a->pools[small];
        a->pools[small] = p;
    }
    *out = p;
    return RANKSNAP_OK;
}

size_t rs_al_expandable_size(const rs_block *b)
{
    return b->size + (b->next && !b->next->mapped ? b->next->size : 0);
}

ranksnap_status rs_al_map_resize(rs_block_map *m, size_t cap)
{
    map_slot *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY,
                        "allocator: could not grow the block map to %zu slots", cap);
    unsigned bits = 0;
    while (((size_t)1 << bits) < cap) bits++;
    unsigned shift = 64 - bits;
    if (m->slots)
        for (size_t i = 0; i <= m->mask; i++)
            if (m->slots[i].key) map_put(slots, cap - 1, shift, m->slots[i].key, m->slots[i].block);
    free(m->slots);
    m->slots = slots;
    m->mask = cap - 1;
    m->shift = shift;
    return RANKSNAP_OK;
}

ranksnap_status rs_al_spare_reserve(rs_alloc *a, size_t n)
{
    while (a->n_spare < n) {
        rs_block *b = calloc(1, sizeof *b);
        if (!b)
            return rs_error(RANKSNAP_ERR_HOST_MEMORY,
                            "allocator: out of host memory for block bookkeeping");
        b->next = a->spare;
        a->spare = b;
        a->n_spare++;
    }
    return RANKSNAP_OK;
}

void rs_al_block_free_struct(rs_block *b)
{
    free(b->uses);
    free(b);
}

void rs_al_reserved_add(rs_alloc *a, uint64_t n)
{
    a->st.reserved_bytes += n;
    if (a->st.reserved_bytes > a->st.reserved_bytes_peak)
        a->st.reserved_bytes_peak = a->st.reserved_bytes;
}

/* An event of an awaiting block completed (and is destroyed). */
static void event_done(rs_alloc *a, pending_event *pe)
{
    a->backend->ops->event_destroy(a->backend, pe->ev);
    if (--pe->block->event_count == 0) block_to_pool(a, pe->block);
}

ranksnap_status rs_al_process_events(rs_alloc *a)
{
    void *blocked[8];
    size_t n_blocked = 0, w = 0, i;
    ranksnap_status st = RANKSNAP_OK;
    for (i = 0; i < a->n_pending; i++) {
        pending_event pe = a->pending[i];
        size_t k = 0;
        while (k < n_blocked && blocked[k] != pe.stream) k++;
        if (k < n_blocked) {
            a->pending[w++] = pe;
            continue;
        }
        int r = a->backend->ops->event_query(a->backend, pe.ev);
        if (r < 0) {
            st = (ranksnap_status)-r;
            break;
        }
        if (r == 0) {
            a->pending[w++] = pe;
            if (n_blocked < sizeof blocked / sizeof blocked[0]) blocked[n_blocked++] = pe.stream;
            continue;
        }
        event_done(a, &pe);
    }
    for (; i < a->n_pending; i++) a->pending[w++] = a->pending[i];
    a->n_pending = w;
    return st;
}

ranksnap_status rs_al_sync_events(rs_alloc *a)
{
    a->st.num_sync_all_streams++;
    size_t i;
    ranksnap_status st = RANKSNAP_OK;
    for (i = 0; i < a->n_pending; i++) {
        st = a->backend->ops->event_synchronize(a->backend, a->pending[i].ev);
        if (st != RANKSNAP_OK) break;
        pending_event pe = a->pending[i];
        event_done(a, &pe);
    }
    size_t w = 0;
    for (; i < a->n_pending; i++) a->pending[w++] = a->pending[i];
    a->n_pending = w;
    return st;
}

void rs_al_segment_link(rs_alloc *a, rs_segment *s)
{
    s->prev = NULL;
    s->next = a->segments;
    if (a->segments) a->segments->prev = s;
    a->segments = s;
    a->n_segments++;
}

void rs_al_segment_unlink(rs_alloc *a, rs_segment *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        a->segments = s->next;
    if (s->next) s->next->prev = s->prev;
    a->n_segments--;
}

ranksnap_status rs_al_segment_release(rs_alloc *a, rs_segment *s)
{
    rs_block *b = s->head;
    pool_remove(a, b);
    ranksnap_status st = a->backend->ops->release(a->backend, (void *)s->addr, s->size);
    if (st != RANKSNAP_OK) {
        pool_insert(a, b);
        return st;
    }
    a->st.reserved_bytes -= s->size;
    a->st.num_segment_frees++;
    observe(a, RS_ACT_SEGMENT_FREE, s->addr, s->size, s->pool->stream);
    rs_al_segment_unlink(a, s);
    spare_push(a, b);
    free(s);
    return RANKSNAP_OK;
}
