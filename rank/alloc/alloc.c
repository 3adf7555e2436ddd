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

#define NBINS 2048 /* size classes; enough for any size below 2^63 bytes */

/* The helpers of the warm malloc/free path are forced inline: called out of line (as gcc chose
 * for most of them, since each has several callers) every call saved and restored registers
 * and recomputed what the caller already had, which was a third of a malloc+free pair. */
#define RS_HOT static inline __attribute__((always_inline))

typedef struct rs_block rs_block;
typedef struct rs_segment rs_segment;
typedef struct rs_pool rs_pool;

struct rs_block {
    uintptr_t addr;
    size_t size;
    rs_block *child[2], *parent; /* treap links while inactive                    */
    uint32_t prio;               /* treap heap priority (max at the root)          */
    uint32_t stack_id;           /* from the observer's alloc event                */
    uint8_t state;               /* rs_block_state                                 */
    uint16_t bin;                /* its size class while inactive (saves recomputing it) */
    uint8_t mapped;              /* 0: unmapped address space of an expandable segment */
    uint32_t event_count;        /* events still pending (awaiting free)           */
    size_t requested;            /* unrounded request while active                 */
    rs_block *prev, *next;       /* neighbours in the segment; next links the spare list */
    rs_pool *pool;               /* the segment's pool                             */
    rs_segment *seg;
    void **uses;                 /* other streams it was used on (record_stream)  */
    uint32_t n_uses, cap_uses;
    uint64_t gc_base;            /* its pool kind's GC clock when it became free    */
    rs_block *un_prev, *un_next; /* the pool's unmapped blocks, address order       */
};

struct rs_segment {
    uintptr_t addr;
    size_t size;   /* an expandable segment's: its whole address range */
    rs_pool *pool;
    int expandable;
    size_t page;   /* expandable: the mapping granularity           */
    size_t mapped; /* expandable: bytes mapped                      */
    uint32_t stack_id;
    rs_block *head; /* lowest-address block; never recycled by a merge (it absorbs its next) */
    rs_segment *prev, *next;
};

struct rs_pool {
    void *stream;
    int is_small;
    rs_pool *next;
    rs_block *unmapped;           /* expandable: unmapped blocks, address order */
    uint64_t summary;             /* bit w: bitmap[w] != 0    */
    uint64_t bitmap[NBINS / 64];  /* bit c: bins[c] non-empty */
    rs_block *bins[NBINS];        /* treap roots              */
};

typedef struct pending_event {
    rs_dev_event ev;
    void *stream;
    rs_block *block;
} pending_event;

typedef struct map_slot {
    uintptr_t key; /* 0 = empty: no block starts at address 0 */
    rs_block *block;
} map_slot;

struct rs_alloc {
    rs_mutex *lock; /* &own_lock, or the one the config shares among allocators */
    rs_mutex own_lock;
    rs_backend *backend;
    rs_alloc_observer observer;
    void *observer_ctx;
    rs_alloc_conf conf;
    uint64_t memory_limit;   /* RANKSNAP_MEMORY_LIMIT, 0 = none                  */
    int has_cap;             /* PyTorch's allowed_memory_maximum is set          */
    uint64_t cap;            /* the lower of memory_limit and the fraction's cap */
    uint64_t max_split, max_non_split;
    int expandable;          /* expandable_segments, and the backend can map     */
    int gc_on;               /* garbage_collection_threshold with a cap          */
    uint64_t gc_clock[2];    /* [is_small]: PyTorch's get_free_blocks_call_count */
    int device_index;
    uint64_t device_total;

    rs_pool *pools[2]; /* [is_small], most recently used first */
    map_slot *map;
    size_t map_mask, map_count;
    unsigned map_shift;
    rs_block *spare; /* recycled block structs, linked through ->next */
    size_t n_spare;
    rs_segment *segments;
    size_t n_segments;
    pending_event *pending;
    size_t n_pending, cap_pending;

    uint64_t whole_free; /* bytes of inactive blocks that span a whole segment */
    uint32_t rng;
    int64_t step;
    ranksnap_stats st;
    int have_oom;
    rs_oom_info oom;
};

/* ---- policy ---------------------------------------------------------------------------------- */

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

/* ---- pools: size-class bins of treaps keyed by (size, address) ------------------------------- */

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

static void treap_insert(rs_block **root, rs_block *n)
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

/* With parent links a known node is removed without a search: rotate it below its
 * higher-priority child until it has at most one child, then splice it out. */
static void treap_remove(rs_block **root, rs_block *n)
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

static rs_block *treap_last(rs_block *t)
{
    while (t && t->child[1]) t = t->child[1];
    return t;
}

static rs_block *treap_next(rs_block *n)
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

static rs_block *pool_succ(const rs_pool *p, rs_block *b)
{
    rs_block *n = treap_next(b);
    if (n) return n;
    int c = pool_next_bin(p, (unsigned)b->bin + 1);
    return c < 0 ? NULL : treap_first(p->bins[c]);
}

static rs_block *pool_pred(const rs_pool *p, rs_block *b)
{
    rs_block *n = treap_prev(b);
    if (n) return n;
    int c = pool_prev_bin(p, b->bin);
    return c < 0 ? NULL : treap_last(p->bins[c]);
}

static rs_block *pool_last(const rs_pool *p)
{
    int c = pool_prev_bin(p, NBINS);
    return c < 0 ? NULL : treap_last(p->bins[c]);
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

static ranksnap_status pool_get(rs_alloc *a, int small, void *stream, rs_pool **out)
{
    rs_pool *p = pool_find(a, small, stream);
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p)
            return rs_error(RANKSNAP_ERR_HOST_MEMORY,
                            "allocator: out of host memory for the pool of stream %p", stream);
        p->stream = stream;
        p->is_small = small;
        p->next = a->pools[small];
        a->pools[small] = p;
    }
    *out = p;
    return RANKSNAP_OK;
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
        treap_insert(&p->bins[c], b);
    }
    if (unsplit(b)) a->whole_free += b->size;
}

RS_HOT void pool_remove(rs_alloc *a, rs_block *b)
{
    rs_pool *p = b->pool;
    unsigned c = b->bin;
    if (b->child[0] || b->child[1] || b->parent)
        treap_remove(&p->bins[c], b);
    else
        p->bins[c] = NULL; /* the only block of its bin */
    if (!p->bins[c]) {
        p->bitmap[c >> 6] &= ~(UINT64_C(1) << (c & 63u));
        if (!p->bitmap[c >> 6]) p->summary &= ~(UINT64_C(1) << (c >> 6));
    }
    if (unsplit(b)) a->whole_free -= b->size;
}

/* The size an expandable block could grow to by mapping the address space after it. */
static size_t expandable_size(const rs_block *b)
{
    return b->size + (b->next && !b->next->mapped ? b->next->size : 0);
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
        for (rs_block *n = pool_succ(p, b);
             b->seg->expandable && n && expandable_size(n) < expandable_size(b); n = pool_succ(p, n))
            b = n;
    }
    if (rounded < a->max_split && b->size >= a->max_split) return NULL;
    if (rounded >= a->max_split && b->size - rounded >= a->max_non_split) return NULL;
    return b;
}

/* ---- address map of allocated blocks --------------------------------------------------------- */

RS_HOT size_t map_home(const rs_alloc *a, uintptr_t key)
{
    return (size_t)(((uint64_t)key * UINT64_C(0x9E3779B97F4A7C15)) >> a->map_shift);
}

RS_HOT map_slot *map_find(rs_alloc *a, uintptr_t key)
{
    size_t i = map_home(a, key);
    for (;;) {
        map_slot *s = &a->map[i];
        if (s->key == key) return s;
        if (s->key == 0) return NULL;
        i = (i + 1) & a->map_mask;
    }
}

RS_HOT void map_put(map_slot *slots, size_t mask, unsigned shift, uintptr_t key, rs_block *b)
{
    size_t i = (size_t)(((uint64_t)key * UINT64_C(0x9E3779B97F4A7C15)) >> shift);
    while (slots[i].key) i = (i + 1) & mask;
    slots[i].key = key;
    slots[i].block = b;
}

static ranksnap_status map_resize(rs_alloc *a, size_t cap)
{
    map_slot *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY,
                        "allocator: could not grow the block map to %zu slots", cap);
    unsigned bits = 0;
    while (((size_t)1 << bits) < cap) bits++;
    unsigned shift = 64 - bits;
    if (a->map)
        for (size_t i = 0; i <= a->map_mask; i++)
            if (a->map[i].key) map_put(slots, cap - 1, shift, a->map[i].key, a->map[i].block);
    free(a->map);
    a->map = slots;
    a->map_mask = cap - 1;
    a->map_shift = shift;
    return RANKSNAP_OK;
}

/* Keeps the load at most 1/2 after one more insert; called before any state changes. */
RS_HOT ranksnap_status map_reserve_one(rs_alloc *a)
{
    if ((a->map_count + 1) * 2 <= a->map_mask + 1) return RANKSNAP_OK;
    return map_resize(a, (a->map_mask + 1) * 2);
}

RS_HOT void map_insert(rs_alloc *a, rs_block *b)
{
    map_put(a->map, a->map_mask, a->map_shift, b->addr, b);
    a->map_count++;
}

/* Backward-shift deletion: keeps every probe chain unbroken without tombstones. */
RS_HOT void map_erase(rs_alloc *a, map_slot *s)
{
    size_t i = (size_t)(s - a->map), j = i;
    for (;;) {
        j = (j + 1) & a->map_mask;
        if (a->map[j].key == 0) break;
        size_t k = map_home(a, a->map[j].key);
        /* Move j back into the hole at i unless its home lies cyclically in (i, j]. */
        int stays = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            a->map[i] = a->map[j];
            i = j;
        }
    }
    a->map[i].key = 0;
    a->map[i].block = NULL;
    a->map_count--;
}

/* ---- block structs --------------------------------------------------------------------------- */

static ranksnap_status spare_reserve(rs_alloc *a, size_t n)
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

static void block_free_struct(rs_block *b)
{
    free(b->uses);
    free(b);
}

/* ---- observer and stats ---------------------------------------------------------------------- */

RS_HOT uint32_t observe(rs_alloc *a, rs_action act, uint64_t addr, uint64_t size, void *stream)
{
    if (!a->observer) return 0;
    return a->observer(a->observer_ctx, act, addr, size, stream);
}

static void reserved_add(rs_alloc *a, uint64_t n)
{
    a->st.reserved_bytes += n;
    if (a->st.reserved_bytes > a->st.reserved_bytes_peak)
        a->st.reserved_bytes_peak = a->st.reserved_bytes;
}

/* ---- returning blocks to the pool ------------------------------------------------------------ */

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

/* An event of an awaiting block completed (and is destroyed). */
static void event_done(rs_alloc *a, pending_event *pe)
{
    a->backend->ops->event_destroy(a->backend, pe->ev);
    if (--pe->block->event_count == 0) block_to_pool(a, pe->block);
}

/* Polls pending events; events on one stream complete in order, so once one is pending the
 * later ones of that stream are not queried. */
static ranksnap_status process_events(rs_alloc *a)
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

/* PyTorch's synchronize_and_free_events: wait for every pending event. */
static ranksnap_status sync_events(rs_alloc *a)
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

/* ---- segments -------------------------------------------------------------------------------- */

static void segment_link(rs_alloc *a, rs_segment *s)
{
    s->prev = NULL;
    s->next = a->segments;
    if (a->segments) a->segments->prev = s;
    a->segments = s;
    a->n_segments++;
}

static void segment_unlink(rs_alloc *a, rs_segment *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        a->segments = s->next;
    if (s->next) s->next->prev = s->prev;
    a->n_segments--;
}

/* PyTorch's release_block: one cudaFree of a cached whole segment. */
static ranksnap_status segment_release(rs_alloc *a, rs_segment *s)
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
    segment_unlink(a, s);
    spare_push(a, b);
    free(s);
    return RANKSNAP_OK;
}

/* ---- expandable segments (PyTorch's ExpandableSegment and the blocks over it) ----------------- */

static void unmapped_insert(rs_pool *p, rs_block *b)
{
    rs_block *prev = NULL, *cur = p->unmapped;
    while (cur && cur->addr < b->addr) {
        prev = cur;
        cur = cur->un_next;
    }
    b->un_prev = prev;
    b->un_next = cur;
    if (prev)
        prev->un_next = b;
    else
        p->unmapped = b;
    if (cur) cur->un_prev = b;
}

static void unmapped_remove(rs_pool *p, rs_block *b)
{
    if (b->un_prev)
        b->un_prev->un_next = b->un_next;
    else
        p->unmapped = b->un_next;
    if (b->un_next) b->un_next->un_prev = b->un_prev;
    b->un_prev = b->un_next = NULL;
}

/* Free address space a request may take: a free mapped block or unmapped space. */
static int allocatable(const rs_block *b)
{
    return b && b->state == RS_BLOCK_INACTIVE;
}

static int has_room(const rs_block *b, size_t size)
{
    size_t bytes = 0;
    for (; bytes < size && allocatable(b); b = b->next) bytes += b->size;
    return bytes >= size;
}

/* A new virtual range for (stream, pool): 1.125 times the device's memory, in whole pages. */
static ranksnap_status expandable_create(rs_alloc *a, rs_pool *pool, rs_block **out)
{
    size_t page = pool->is_small ? RS_SMALL_BUFFER : (size_t)rs_alloc_conf_large_segment(&a->conf);
    uint64_t want = a->device_total + a->device_total / 8;
    uint64_t pages = (want + page - 1) / page;
    if (pages == 0 || pages > SIZE_MAX / page)
        return rs_error(RANKSNAP_ERR_BACKEND,
                        "allocator: no address range for an expandable segment of a %" PRIu64
                        "-byte device in %zu-byte pages", a->device_total, page);
    size_t size = (size_t)pages * page;
    RS_CHECK(spare_reserve(a, 1));
    rs_segment *s = calloc(1, sizeof *s);
    if (!s) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "allocator: out of host memory for "
                                                      "segment bookkeeping");
    void *ptr = NULL;
    ranksnap_status st = a->backend->ops->va_reserve(a->backend, size, &ptr);
    if (st != RANKSNAP_OK) {
        free(s);
        return st;
    }
    s->addr = (uintptr_t)ptr;
    s->size = size;
    s->pool = pool;
    s->expandable = 1;
    s->page = page;
    segment_link(a, s);
    rs_block *b = spare_pop(a);
    b->addr = s->addr;
    b->size = size;
    b->pool = pool;
    b->seg = s;
    b->mapped = 0;
    b->state = RS_BLOCK_INACTIVE;
    s->head = b;
    unmapped_insert(pool, b);
    *out = b;
    return RANKSNAP_OK;
}

/* PyTorch's find_expandable_block: the lowest address where `size` bytes of free or unmapped
 * space follow one another (starting at the free block just before unmapped space, if any); else
 * a new range. */
static ranksnap_status expandable_find(rs_alloc *a, rs_pool *pool, size_t size, rs_block **out)
{
    for (rs_block *u = pool->unmapped; u; u = u->un_next) {
        rs_block *c = allocatable(u->prev) ? u->prev : u;
        if (has_room(c, size)) {
            *out = c;
            return RANKSNAP_OK;
        }
    }
    return expandable_create(a, pool, out);
}

/* PyTorch's map_block: backs the first `size` bytes (in whole pages) of the unmapped block `m`,
 * which then merges with free mapped neighbours; *out is the free block that holds them, in its
 * pool, or NULL when the device had no room. */
static ranksnap_status expandable_map(rs_alloc *a, rs_block *m, size_t size, rs_block **out)
{
    rs_segment *s = m->seg;
    rs_pool *pool = m->pool;
    size_t len = (size + s->page - 1) / s->page * s->page;
    *out = NULL;
    RS_CHECK(spare_reserve(a, 1));
    ranksnap_status st = a->backend->ops->map(a->backend, (void *)m->addr, len, s->page);
    if (st == RANKSNAP_ERR_OUT_OF_MEMORY) return RANKSNAP_OK;
    RS_CHECK(st);
    uintptr_t at = m->addr;
    unmapped_remove(pool, m);
    m->mapped = 1;
    if (len < m->size) {
        rs_block *r = spare_pop(a);
        r->addr = m->addr + len;
        r->size = m->size - len;
        r->pool = pool;
        r->seg = s;
        r->mapped = 0;
        r->state = RS_BLOCK_INACTIVE;
        r->prev = m;
        r->next = m->next;
        if (r->next) r->next->prev = r;
        m->next = r;
        m->size = len;
        unmapped_insert(pool, r);
    }
    m = coalesce(a, m);
    pool_insert(a, m);
    s->mapped += len;
    reserved_add(a, len);
    a->st.num_segment_allocs++;
    uint32_t id = observe(a, RS_ACT_SEGMENT_ALLOC, at, len, pool->stream);
    if (!s->stack_id) s->stack_id = id;
    *out = m;
    return RANKSNAP_OK;
}

/* PyTorch's try_allocate_expandable_block: maps the free or unmapped space found for `size` bytes;
 * *out is the free block (in its pool) that holds them, or NULL when the device had no room (the
 * pages already mapped stay mapped: free, reserved memory). */
static ranksnap_status expandable_alloc(rs_alloc *a, rs_pool *pool, size_t size, rs_block **out)
{
    rs_block *c = NULL;
    *out = NULL;
    RS_CHECK(expandable_find(a, pool, size, &c));
    if (!c->mapped) {
        RS_CHECK(expandable_map(a, c, c->size < size ? c->size : size, &c));
        if (!c) return RANKSNAP_OK;
    }
    while (c->size < size) {
        rs_block *n = c->next; /* unmapped: free mapped neighbours are always merged */
        size_t rest = size - c->size;
        RS_CHECK(expandable_map(a, n, n->size < rest ? n->size : rest, &c));
        if (!c) return RANKSNAP_OK;
    }
    *out = c;
    return RANKSNAP_OK;
}

/* PyTorch's unmap_block: gives back the whole pages inside the free block `b`; partial pages at
 * either end stay mapped as free blocks of their own. The unmapped part merges with unmapped
 * neighbours. */
static ranksnap_status expandable_unmap(rs_alloc *a, rs_block *b)
{
    rs_segment *s = b->seg;
    rs_pool *pool = b->pool;
    uintptr_t end = b->addr + b->size;
    uintptr_t ub = s->addr + (b->addr - s->addr + s->page - 1) / s->page * s->page;
    uintptr_t ue = s->addr + (end - s->addr) / s->page * s->page;
    if (ub >= ue) return RANKSNAP_OK;
    RS_CHECK(spare_reserve(a, 2));
    RS_CHECK(a->backend->ops->unmap(a->backend, (void *)ub, ue - ub, s->page, pool->stream));
    pool_remove(a, b);
    if (ub > b->addr) {
        rs_block *f = spare_pop(a);
        f->addr = b->addr;
        f->size = ub - b->addr;
        f->pool = pool;
        f->seg = s;
        f->prev = b->prev;
        f->next = b;
        if (f->prev)
            f->prev->next = f;
        else
            s->head = f;
        b->prev = f;
        pool_insert(a, f);
    }
    if (ue < end) {
        rs_block *g = spare_pop(a);
        g->addr = ue;
        g->size = end - ue;
        g->pool = pool;
        g->seg = s;
        g->prev = b;
        g->next = b->next;
        if (g->next) g->next->prev = g;
        b->next = g;
        pool_insert(a, g);
    }
    b->addr = ub;
    b->size = ue - ub;
    b->mapped = 0;
    b->state = RS_BLOCK_INACTIVE;
    rs_block *p = b->prev;
    if (p && !p->mapped) { /* unmapped space is always free */
        p->size += b->size;
        p->next = b->next;
        if (p->next) p->next->prev = p;
        spare_push(a, b);
        b = p;
    } else {
        unmapped_insert(pool, b);
    }
    rs_block *n = b->next;
    if (n && !n->mapped) {
        unmapped_remove(pool, n);
        b->size += n->size;
        b->next = n->next;
        if (b->next) b->next->prev = b;
        spare_push(a, n);
    }
    s->mapped -= ue - ub;
    a->st.reserved_bytes -= ue - ub;
    a->st.num_segment_frees++;
    observe(a, RS_ACT_SEGMENT_FREE, ub, ue - ub, pool->stream);
    return RANKSNAP_OK;
}

/* PyTorch's release_expandable_segment: a range with nothing mapped is given back. */
static ranksnap_status expandable_release(rs_alloc *a, rs_segment *s)
{
    RS_CHECK(a->backend->ops->va_release(a->backend, (void *)s->addr, s->size));
    unmapped_remove(s->pool, s->head);
    spare_push(a, s->head);
    segment_unlink(a, s);
    free(s);
    return RANKSNAP_OK;
}

/* ---- freeing cached memory -------------------------------------------------------------------- */

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
        for (rs_block *b = pool_lower_bound(pools[i], 0); b; b = pool_succ(pools[i], b)) n++;
    if (n) out->v = malloc(n * sizeof *out->v);
    if (n && !out->v) {
        free(pools);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "allocator: out of host memory to list %zu "
                                                  "cached blocks", n);
    }
    for (size_t i = 0; i < n_pools; i++)
        for (rs_block *b = pool_lower_bound(pools[i], 0); b; b = pool_succ(pools[i], b))
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
            st = segment_release(a, b->seg);
    }
    for (size_t i = 0; i < n_unmap && st == RANKSNAP_OK; i++) {
        rs_block *b = bv.v[i];
        rs_segment *s = b->seg;
        st = expandable_unmap(a, b);
        if (st == RANKSNAP_OK && is_whole(s->head) && !s->head->mapped)
            st = expandable_release(a, s);
    }
    free(bv.v);
    return st;
}

/* PyTorch's release_cached_blocks (also empty_cache): wait for every event, then release the
 * large pools' cached memory and the small pools'. */
static ranksnap_status release_cached(rs_alloc *a)
{
    RS_CHECK(sync_events(a));
    RS_CHECK(release_blocks(a, 0));
    return release_blocks(a, 1);
}

/* PyTorch's release_available_cached_blocks (only with max_split_size): frees the smallest
 * cached oversize segment that holds the request, else the largest ones below it, largest first,
 * until they add up to it. *released says whether enough was freed (what was freed stays freed
 * either way). */
static ranksnap_status release_available(rs_alloc *a, rs_pool *pool, size_t rounded,
                                         int *released)
{
    *released = 0;
    if (a->max_split == UINT64_MAX) return RANKSNAP_OK;
    uint64_t key = rounded < a->max_split ? a->max_split : rounded;
    rs_block *b = pool_lower_bound(pool, (size_t)key);
    if (b && !b->seg->expandable) {
        if (is_whole(b)) RS_CHECK(segment_release(a, b->seg));
        *released = 1;
        return RANKSNAP_OK;
    }
    rs_block *c = b ? pool_pred(pool, b) : pool_last(pool);
    uint64_t total = 0;
    while (c && total < key && c->size >= a->max_split) {
        rs_block *prev = pool_pred(pool, c);
        if (!c->seg->expandable && is_whole(c)) {
            total += c->size;
            RS_CHECK(segment_release(a, c->seg));
        }
        c = prev;
    }
    *released = total >= key;
    return RANKSNAP_OK;
}

/* PyTorch's garbage_collect_cached_blocks: over the threshold's share of the cap, free cached
 * whole large segments that have gone unused for at least the average age (in searches of the
 * large pools), pass after pass, until the excess is reclaimed or nothing more goes. No
 * synchronisation. */
static ranksnap_status garbage_collect(rs_alloc *a)
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
            st = segment_release(a, b->seg);
        }
    }
    free(bv.v);
    return st;
}

/* ---- the slow path ---------------------------------------------------------------------------- */

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
        return expandable_alloc(a, pool, rounded, out);
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
    segment_link(a, s);
    reserved_add(a, alloc_size);
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
    RS_CHECK(pool_get(a, small, stream, &pool));
    if (a->gc_on) RS_CHECK(garbage_collect(a));
    RS_CHECK(alloc_block(a, pool, rounded, alloc_size, 0, &b, in_pool));
    if (!b) {
        int released = 0;
        RS_CHECK(release_available(a, pool, rounded, &released));
        if (released) RS_CHECK(alloc_block(a, pool, rounded, alloc_size, 0, &b, in_pool));
    }
    if (!b) {
        RS_CHECK(release_cached(a));
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
    if (a->n_pending) RS_CHECK(process_events(a));
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
    *ptr = (void *)b->addr;
    return RANKSNAP_OK;
}

/* ---- public API ------------------------------------------------------------------------------ */

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
    ranksnap_status st = map_resize(a, 1024);
    if (st != RANKSNAP_OK) {
        free(a);
        return st;
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
            block_free_struct(b);
            b = bn;
        }
        free(s);
        s = next;
    }
    rs_block *b = a->spare;
    while (b) {
        rs_block *bn = b->next;
        block_free_struct(b);
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
    free(a->map);
    rs_mutex_unlock(a->lock);
    free(a);
}

ranksnap_status rs_alloc_malloc(rs_alloc *a, size_t size, void *stream, void **ptr)
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
    if (b->n_uses) {
        ranksnap_status st = record_events(a, b);
        if (st != RANKSNAP_OK) {
            rs_mutex_unlock(a->lock);
            return st;
        }
    }
    map_erase(a, slot);
    a->st.allocated_bytes -= b->size;
    a->st.num_frees++;
    observe(a, RS_ACT_FREE_REQUESTED, b->addr, b->requested, b->pool->stream);
    if (b->event_count) {
        b->state = RS_BLOCK_ACTIVE_AWAITING_FREE;
        b->n_uses = 0;
    } else {
        block_to_pool(a, b);
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
    ranksnap_status st = release_cached(a);
    rs_mutex_unlock(a->lock);
    return st;
}

int rs_alloc_owns(rs_alloc *a, const void *ptr)
{
    if (!a || !ptr) return 0;
    rs_mutex_lock(a->lock);
    int owns = map_find(a, (uintptr_t)ptr) != NULL;
    rs_mutex_unlock(a->lock);
    return owns;
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

/* ---- state for the snapshot ------------------------------------------------------------------ */

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

/* ---- self-check ------------------------------------------------------------------------------ */

#define FAIL_IF(cond, ...)                                                                         \
    do {                                                                                           \
        if (cond) {                                                                                \
            rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, __VA_ARGS__);                                  \
            return 0;                                                                              \
        }                                                                                          \
    } while (0)

/* Every node of one bin: parent links, heap order, key order, class, state and pool. */
static int validate_bin(const rs_pool *p, unsigned c, size_t limit, size_t *count)
{
    const rs_block *root = p->bins[c];
    int bit = (p->bitmap[c >> 6] >> (c & 63u)) & 1u;
    FAIL_IF(bit != (root != NULL), "bin %u: bitmap bit %d disagrees with the tree", c, bit);
    FAIL_IF(root && root->parent, "bin %u: root has a parent", c);
    const rs_block *prev = NULL;
    for (rs_block *b = treap_first((rs_block *)(uintptr_t)root); b; b = treap_next(b)) {
        FAIL_IF(++*count > limit, "bin %u: more nodes than blocks (a cycle?)", c);
        FAIL_IF(b->state != RS_BLOCK_INACTIVE, "block 0x%" PRIxPTR " in a bin is not inactive",
                b->addr);
        FAIL_IF(b->pool != p, "block 0x%" PRIxPTR " is in the bins of another pool", b->addr);
        FAIL_IF(size_class(b->size) != c || b->bin != c,
                "block 0x%" PRIxPTR " of %zu bytes is in bin %u (its own says %u)", b->addr,
                b->size, c, (unsigned)b->bin);
        FAIL_IF(prev && !key_less(prev, b), "bin %u: blocks out of (size, address) order", c);
        for (int k = 0; k < 2; k++)
            FAIL_IF(b->child[k] && (b->child[k]->parent != b || b->child[k]->prio > b->prio),
                    "bin %u: bad parent link or heap order below 0x%" PRIxPTR, c, b->addr);
        prev = b;
    }
    return 1;
}

static int validate(rs_alloc *a)
{
    uint64_t allocated = 0, active = 0, requested = 0, reserved = 0, whole = 0;
    size_t n_blocks = 0, n_inactive = 0, n_allocated = 0, n_events = 0, n_segs = 0;
    size_t n_unmapped = 0;
    for (const rs_segment *s = a->segments; s; s = s->next) {
        FAIL_IF(++n_segs > a->n_segments, "more segments listed than counted");
        FAIL_IF(s->next && s->next->prev != s, "segment list links broken");
        uintptr_t at = s->addr;
        size_t mapped = 0;
        FAIL_IF(!s->head || s->head->prev, "segment 0x%" PRIxPTR ": bad head block", s->addr);
        for (const rs_block *b = s->head; b; b = b->next) {
            n_blocks++;
            FAIL_IF(b->addr != at, "segment 0x%" PRIxPTR ": gap or overlap at 0x%" PRIxPTR,
                    s->addr, b->addr);
            FAIL_IF(b->seg != s || b->pool != s->pool,
                    "block 0x%" PRIxPTR ": wrong segment or pool", b->addr);
            FAIL_IF(b->next && b->next->prev != b, "block 0x%" PRIxPTR ": broken next link",
                    b->addr);
            at += b->size;
            if (!b->mapped) {
                n_unmapped++;
                FAIL_IF(!s->expandable, "block 0x%" PRIxPTR " unmapped in a plain segment",
                        b->addr);
                FAIL_IF(b->state != RS_BLOCK_INACTIVE, "unmapped block 0x%" PRIxPTR " in use",
                        b->addr);
                FAIL_IF((b->addr - s->addr) % s->page || b->size % s->page,
                        "unmapped block 0x%" PRIxPTR " is not whole pages", b->addr);
                FAIL_IF(b->next && !b->next->mapped,
                        "unmapped neighbours 0x%" PRIxPTR " and 0x%" PRIxPTR " did not coalesce",
                        b->addr, b->next->addr);
                continue;
            }
            mapped += b->size;
            if (b->state == RS_BLOCK_INACTIVE) {
                n_inactive++;
                FAIL_IF(b->next && b->next->state == RS_BLOCK_INACTIVE && b->next->mapped,
                        "free neighbours 0x%" PRIxPTR " and 0x%" PRIxPTR " did not coalesce",
                        b->addr, b->next->addr);
                if (unsplit(b)) whole += b->size;
                continue;
            }
            active += b->size;
            requested += b->requested;
            if (b->state == RS_BLOCK_ACTIVE_ALLOCATED) {
                n_allocated++;
                allocated += b->size;
                map_slot *slot = map_find(a, b->addr);
                FAIL_IF(!slot || slot->block != b, "allocated block 0x%" PRIxPTR " not in the map",
                        b->addr);
            } else {
                FAIL_IF(b->event_count == 0, "awaiting block 0x%" PRIxPTR " has no events",
                        b->addr);
                n_events += b->event_count;
            }
        }
        FAIL_IF(at != s->addr + s->size, "segment 0x%" PRIxPTR ": blocks do not add up",
                s->addr);
        FAIL_IF(s->expandable && mapped != s->mapped,
                "expandable segment 0x%" PRIxPTR ": %zu bytes mapped, blocks say %zu", s->addr,
                s->mapped, mapped);
        reserved += mapped;
    }
    size_t listed = 0;
    for (int k = 0; k < 2; k++)
        for (const rs_pool *p = a->pools[k]; p; p = p->next)
            for (const rs_block *b = p->unmapped; b; b = b->un_next) {
                FAIL_IF(++listed > n_unmapped, "more unmapped blocks listed than exist");
                FAIL_IF(b->mapped || b->pool != p, "block 0x%" PRIxPTR " is in the wrong "
                                                   "unmapped list", b->addr);
                FAIL_IF(b->un_next && b->un_next->addr <= b->addr,
                        "unmapped list out of address order at 0x%" PRIxPTR, b->addr);
            }
    FAIL_IF(listed != n_unmapped, "%zu unmapped blocks, %zu listed", n_unmapped, listed);
    FAIL_IF(n_segs != a->n_segments, "segment count %zu, listed %zu", a->n_segments, n_segs);
    FAIL_IF(allocated != a->st.allocated_bytes, "allocated_bytes %" PRIu64 ", blocks %" PRIu64,
            a->st.allocated_bytes, allocated);
    FAIL_IF(active != a->st.active_bytes, "active_bytes %" PRIu64 ", blocks %" PRIu64,
            a->st.active_bytes, active);
    FAIL_IF(requested != a->st.requested_bytes, "requested_bytes %" PRIu64 ", blocks %" PRIu64,
            a->st.requested_bytes, requested);
    FAIL_IF(reserved != a->st.reserved_bytes, "reserved_bytes %" PRIu64 ", segments %" PRIu64,
            a->st.reserved_bytes, reserved);
    FAIL_IF(whole != a->whole_free, "whole free bytes %" PRIu64 ", blocks %" PRIu64,
            a->whole_free, whole);
    FAIL_IF(n_allocated != a->map_count, "map holds %zu blocks, %zu allocated", a->map_count,
            n_allocated);
    FAIL_IF(n_events != a->n_pending, "%zu pending events, blocks await %zu", a->n_pending,
            n_events);
    size_t in_bins = 0;
    for (int k = 0; k < 2; k++) {
        for (const rs_pool *p = a->pools[k]; p; p = p->next) {
            FAIL_IF(p->is_small != k, "pool of stream %p is in the wrong list", p->stream);
            for (unsigned w = 0; w < NBINS / 64; w++)
                FAIL_IF(((p->summary >> w) & 1u) != (p->bitmap[w] != 0),
                        "pool summary bit %u disagrees with its bitmap", w);
            for (unsigned c = 0; c < NBINS; c++)
                if (!validate_bin(p, c, n_blocks, &in_bins)) return 0;
        }
    }
    FAIL_IF(in_bins != n_inactive, "%zu blocks in bins, %zu inactive", in_bins, n_inactive);
    return 1;
}

int rs_alloc_check(rs_alloc *a)
{
    if (!a) return 0;
    rs_mutex_lock(a->lock);
    int ok = validate(a);
    rs_mutex_unlock(a->lock);
    return ok;
}
