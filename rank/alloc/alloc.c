/*
 * alloc.c — the caching allocator: PyTorch's CUDACachingAllocator policy, in C.
 *
 * Memory comes from the backend in segments; a segment is cut into blocks, a doubly linked list
 * in address order (prev/next). Every block is in exactly one of three states:
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
 * or inactive, and an inactive block that is a whole segment is the only unsplit case, so
 * inactive_split = reserved - active - (bytes of free whole segments), and only the last term
 * needs maintaining, in pool_insert/pool_remove.
 *
 * Trace sizes follow PyTorch's record_trace: alloc, free_requested and free_completed carry the
 * requested (unrounded) size; segment_alloc/segment_free the segment size; oom the request, with
 * the device's free bytes as the address. One mutex guards everything and the observer runs
 * under it. rs_alloc_destroy does not call the observer: the recorder may already be gone.
 */
#include <inttypes.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "errors.h"
#include "log.h"
#include "options.h"
#include "text.h"

#define NBINS 2048 /* size classes; enough for any size below 2^63 bytes */

/* The helpers of the warm malloc/free path are forced inline: called out of line (as gcc chose
 * for most of them, since each has several callers) every call saved and restored registers
 * and recomputed what the caller already had, which was a third of a malloc+free pair. */
#define RS_HOT static inline __attribute__((always_inline))

/* ---- the lock -------------------------------------------------------------------------------- */

/* A futex mutex (Drepper, "Futexes Are Tricky", mutex 3): 0 free, 1 held, 2 held and maybe
 * waited on. Uncontended, lock and unlock are one atomic read-modify-write each, as in glibc's
 * pthread_mutex, but inline: glibc's pair of calls through the PLT, with their checks of the
 * mutex kind, cost ~55 instructions per call, a tenth of a warm malloc+free pair. Contended, a
 * waiter spins briefly (the critical sections are ~100 ns) and then sleeps in the kernel. The
 * acquire/release orderings are what ThreadSanitizer sees, so it checks the allocator's state as
 * it did under pthread_mutex. Not recursive, like the default pthread_mutex it replaces. */
typedef struct rs_mutex {
    atomic_int v;
} rs_mutex;

static void rs_futex(atomic_int *addr, int op, int val)
{
    syscall(SYS_futex, (int *)addr, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

static inline void rs_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("pause");
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

__attribute__((noinline)) static void rs_mutex_lock_slow(rs_mutex *m)
{
    for (int i = 0; i < 128; i++) {
        rs_cpu_relax();
        int c = atomic_load_explicit(&m->v, memory_order_relaxed);
        if (c == 0 && atomic_compare_exchange_weak_explicit(&m->v, &c, 1, memory_order_acquire,
                                                            memory_order_relaxed))
            return;
        if (c == 2) break; /* others already sleep: queue behind them */
    }
    /* Mark the lock contended; whoever releases it then wakes a sleeper. */
    while (atomic_exchange_explicit(&m->v, 2, memory_order_acquire) != 0)
        rs_futex(&m->v, FUTEX_WAIT, 2);
}

static inline void rs_mutex_lock(rs_mutex *m)
{
    int c = 0;
    if (!atomic_compare_exchange_strong_explicit(&m->v, &c, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        rs_mutex_lock_slow(m);
}

static inline void rs_mutex_unlock(rs_mutex *m)
{
    if (atomic_exchange_explicit(&m->v, 0, memory_order_release) == 2)
        rs_futex(&m->v, FUTEX_WAKE, 1);
}

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
    uint32_t event_count;        /* events still pending (awaiting free)           */
    size_t requested;            /* unrounded request while active                 */
    rs_block *prev, *next;       /* neighbours in the segment; next links the spare list */
    rs_pool *pool;               /* the segment's pool                             */
    rs_segment *seg;
    void **uses;                 /* other streams it was used on (record_stream)  */
    uint32_t n_uses, cap_uses;
};

struct rs_segment {
    uintptr_t addr;
    size_t size;
    rs_pool *pool;
    uint32_t stack_id;
    rs_block *head; /* lowest-address block; never recycled by a merge (it absorbs its next) */
    rs_segment *prev, *next;
};

struct rs_pool {
    void *stream;
    int is_small;
    rs_pool *next;
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
    rs_mutex mu;
    rs_backend *backend;
    rs_alloc_observer observer;
    void *observer_ctx;
    uint64_t memory_limit;
    uint64_t max_split;
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

size_t rs_alloc_round_size(size_t size)
{
    if (size < RS_MIN_BLOCK_SIZE) return RS_MIN_BLOCK_SIZE;
    return RS_MIN_BLOCK_SIZE * ((size + RS_MIN_BLOCK_SIZE - 1) / RS_MIN_BLOCK_SIZE);
}

size_t rs_alloc_segment_size(size_t rounded)
{
    if (rounded <= RS_SMALL_SIZE) return RS_SMALL_BUFFER;
    if (rounded < RS_MIN_LARGE_ALLOC) return RS_LARGE_BUFFER;
    return RS_ROUND_LARGE * ((rounded + RS_ROUND_LARGE - 1) / RS_ROUND_LARGE);
}

/* Large blocks are split only for requests below max_split_size and when more than 1 MiB would
 * remain, so that large segments are not shredded into pieces no large request can use. */
RS_HOT int should_split(const rs_alloc *a, const rs_block *b, size_t rounded)
{
    size_t remaining = b->size - rounded;
    if (b->pool->is_small) return remaining >= RS_MIN_BLOCK_SIZE;
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

static rs_block *treap_next(rs_block *n)
{
    if (n->child[1]) return treap_first(n->child[1]);
    while (n->parent && n->parent->child[1] == n) n = n->parent;
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

/* A free block that spans its whole segment is the one inactive block that is not "split". */
RS_HOT int is_whole(const rs_block *b)
{
    return !b->prev && !b->next;
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
    if (!p->bins[c]) {
        /* An empty bin, the usual case on a warm cache: the block is the whole tree. */
        p->bitmap[c >> 6] |= UINT64_C(1) << (c & 63u);
        p->summary |= UINT64_C(1) << (c >> 6);
        b->child[0] = b->child[1] = b->parent = NULL;
        p->bins[c] = b;
    } else {
        treap_insert(&p->bins[c], b);
    }
    if (is_whole(b)) a->whole_free += b->size;
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
    if (is_whole(b)) a->whole_free -= b->size;
}

/* PyTorch's get_free_block: best fit, but a request below max_split_size never takes an
 * oversized block, and an oversized request takes one only if it wastes less than 20 MiB. */
RS_HOT rs_block *pool_best_fit(rs_alloc *a, int small, void *stream, size_t rounded)
{
    rs_pool *p = pool_find(a, small, stream);
    if (!p) return NULL;
    unsigned c = size_class(rounded);
    rs_block *b = treap_lower_bound(p->bins[c], rounded);
    if (!b) {
        int n = pool_next_bin(p, c + 1);
        if (n < 0) return NULL;
        b = treap_first(p->bins[n]);
    }
    if (rounded < a->max_split && b->size >= a->max_split) return NULL;
    if (rounded >= a->max_split && b->size - rounded >= RS_LARGE_BUFFER) return NULL;
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
RS_HOT void block_to_pool(rs_alloc *a, rs_block *b)
{
    a->st.active_bytes -= b->size;
    a->st.requested_bytes -= b->requested;
    observe(a, RS_ACT_FREE_COMPLETED, b->addr, b->requested, b->pool->stream);
    b->requested = 0;
    b->stack_id = 0;
    b->n_uses = 0;

    rs_block *p = b->prev;
    if (p && p->state == RS_BLOCK_INACTIVE) {
        pool_remove(a, p);
        p->size += b->size;
        p->next = b->next;
        if (p->next) p->next->prev = p;
        spare_push(a, b);
        b = p;
    }
    rs_block *n = b->next;
    if (n && n->state == RS_BLOCK_INACTIVE) {
        pool_remove(a, n);
        b->size += n->size;
        b->next = n->next;
        if (b->next) b->next->prev = b;
        spare_push(a, n);
    }
    pool_insert(a, b);
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
    if (s->prev)
        s->prev->next = s->next;
    else
        a->segments = s->next;
    if (s->next) s->next->prev = s->prev;
    a->n_segments--;
    spare_push(a, b);
    free(s);
    return RANKSNAP_OK;
}

/* Gives back every segment that is one free block. */
static ranksnap_status release_free_segments(rs_alloc *a)
{
    rs_segment *s = a->segments;
    while (s) {
        rs_segment *next = s->next;
        if (s->head->state == RS_BLOCK_INACTIVE && !s->head->next) RS_CHECK(segment_release(a, s));
        s = next;
    }
    return RANKSNAP_OK;
}

/* PyTorch's release_cached_blocks: wait for events, then give back whole free segments. */
static ranksnap_status release_cached(rs_alloc *a)
{
    RS_CHECK(sync_events(a));
    return release_free_segments(a);
}

static ranksnap_status reserve(rs_alloc *a, size_t seg_size, void **ptr)
{
    if (a->memory_limit && a->st.reserved_bytes + seg_size > a->memory_limit)
        return rs_error(RANKSNAP_ERR_OUT_OF_MEMORY,
                        "memory limit of %" PRIu64 " bytes reached", a->memory_limit);
    return a->backend->ops->reserve(a->backend, seg_size, ptr);
}

static ranksnap_status oom_error(rs_alloc *a, size_t size, size_t seg_size, void *stream)
{
    uint64_t dfree = 0, dtotal = a->device_total;
    if (a->backend->ops->mem_info(a->backend, &dfree, &dtotal) != RANKSNAP_OK) {
        dfree = 0;
        dtotal = a->device_total;
    }
    a->st.num_ooms++;
    a->have_oom = 1;
    a->oom.requested = size;
    a->oom.rounded = seg_size;
    a->oom.device_free = dfree;
    a->oom.device_total = dtotal;
    a->oom.allocated = a->st.allocated_bytes;
    a->oom.reserved = a->st.reserved_bytes;
    a->oom.memory_limit = a->memory_limit;
    a->oom.time_us = rs_now_us();
    a->oom.stream = stream;
    observe(a, RS_ACT_OOM, dfree, size, stream);

    char req[32], seg[64], total[32], fr[32], al[32], un[32], lim[32];
    rs_text_format_bytes(size, req, sizeof req);
    seg[0] = '\0';
    if (seg_size != rs_alloc_round_size(size)) {
        /* Small requests fail for want of a whole 2 or 20 MiB segment: say so. */
        char b[32];
        rs_text_format_bytes(seg_size, b, sizeof b);
        snprintf(seg, sizeof seg, ", needing a new segment of %s", b);
    }
    rs_text_format_bytes(dtotal, total, sizeof total);
    rs_text_format_bytes(dfree, fr, sizeof fr);
    rs_text_format_bytes(a->st.allocated_bytes, al, sizeof al);
    rs_text_format_bytes(a->st.reserved_bytes - a->st.allocated_bytes, un, sizeof un);
    rs_text_format_bytes(a->memory_limit, lim, sizeof lim);
    return rs_error(RANKSNAP_ERR_OUT_OF_MEMORY,
                    "out of memory: tried to allocate %s (device %d%s). "
                    "The device has a total capacity of %s of which %s is free. Of the allocated "
                    "memory %s is allocated by ranksnap, and %s is reserved by ranksnap but "
                    "unallocated.%s%s%s",
                    req, a->device_index, seg, total, fr, al, un,
                    a->memory_limit ? " [memory limit " : "", a->memory_limit ? lim : "",
                    a->memory_limit ? "]" : "");
}

/* No cached block fits: reserve a new segment, or free the cache and retry, or report OOM.
 * On success *out is either the block of a new segment (*in_pool = 0) or a cached block that
 * waiting for the pending events gave back (*in_pool = 1). PyTorch goes straight to freeing the
 * cache there; looking again first avoids an OOM when the awaited block sits in a split
 * segment that freeing the cache cannot give back. */
static ranksnap_status malloc_slow(rs_alloc *a, size_t size, size_t rounded, int small,
                                   void *stream, rs_block **out, int *in_pool)
{
    *in_pool = 0;
    size_t seg_size = rs_alloc_segment_size(rounded);
    rs_pool *pool = NULL;
    RS_CHECK(spare_reserve(a, 2));
    RS_CHECK(pool_get(a, small, stream, &pool));
    rs_segment *s = calloc(1, sizeof *s);
    if (!s) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "allocator: out of host memory for "
                                                      "segment bookkeeping");
    void *ptr = NULL;
    ranksnap_status st = reserve(a, seg_size, &ptr);
    if (st == RANKSNAP_ERR_OUT_OF_MEMORY) {
        st = sync_events(a);
        if (st == RANKSNAP_OK) {
            rs_block *b = pool_best_fit(a, small, stream, rounded);
            if (b) {
                free(s);
                *out = b;
                *in_pool = 1;
                return RANKSNAP_OK;
            }
            st = release_free_segments(a);
        }
        if (st == RANKSNAP_OK) {
            a->st.num_alloc_retries++;
            st = reserve(a, seg_size, &ptr);
            if (st == RANKSNAP_ERR_OUT_OF_MEMORY) st = oom_error(a, size, seg_size, stream);
        }
    }
    if (st != RANKSNAP_OK) {
        free(s);
        return st;
    }

    s->addr = (uintptr_t)ptr;
    s->size = seg_size;
    s->pool = pool;
    s->next = a->segments;
    if (a->segments) a->segments->prev = s;
    a->segments = s;
    a->n_segments++;
    reserved_add(a, seg_size);
    a->st.num_segment_allocs++;
    s->stack_id = observe(a, RS_ACT_SEGMENT_ALLOC, s->addr, seg_size, stream);

    rs_block *b = spare_pop(a);
    b->addr = s->addr;
    b->size = seg_size;
    b->pool = pool;
    b->seg = s;
    b->state = RS_BLOCK_INACTIVE;
    s->head = b;
    *out = b;
    return RANKSNAP_OK;
}

static ranksnap_status malloc_locked(rs_alloc *a, size_t size, void *stream, void **ptr)
{
    if (a->n_pending) RS_CHECK(process_events(a));
    RS_CHECK(map_reserve_one(a));
    RS_CHECK(spare_reserve(a, 1));

    size_t rounded = rs_alloc_round_size(size);
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
    atomic_init(&a->mu.v, 0);
    a->backend = backend;
    a->max_split = UINT64_MAX;
    if (cfg) {
        a->memory_limit = cfg->memory_limit;
        /* 0 from a zero-initialised config means "no cap", as UINT64_MAX does. */
        if (cfg->max_split_size) a->max_split = cfg->max_split_size;
        a->device_index = cfg->device_index;
        a->observer = cfg->observer;
        a->observer_ctx = cfg->observer_ctx;
    }
    a->device_total = info.total_bytes;
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
    rs_mutex_lock(&a->mu);
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
        if (ops->release(a->backend, (void *)s->addr, s->size) != RANKSNAP_OK)
            RS_WARN(RS_SUB_ALLOC, "allocator teardown: releasing segment 0x%" PRIxPTR
                    " (%zu bytes) failed: %s", s->addr, s->size, ranksnap_last_error());
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
    rs_mutex_unlock(&a->mu);
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
    rs_mutex_lock(&a->mu);
    ranksnap_status st = malloc_locked(a, size, stream, ptr);
    rs_mutex_unlock(&a->mu);
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
    rs_mutex_lock(&a->mu);
    map_slot *slot = map_find(a, (uintptr_t)ptr);
    if (!slot) {
        rs_mutex_unlock(&a->mu);
        return rs_error(RANKSNAP_ERR_UNKNOWN_POINTER,
                        "free of %p: expected the start of a block allocated by ranksnap and not "
                        "yet freed (never allocated here, or freed twice)",
                        ptr);
    }
    rs_block *b = slot->block;
    if (b->n_uses) {
        ranksnap_status st = record_events(a, b);
        if (st != RANKSNAP_OK) {
            rs_mutex_unlock(&a->mu);
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
    rs_mutex_unlock(&a->mu);
    return RANKSNAP_OK;
}

ranksnap_status rs_alloc_record_stream(rs_alloc *a, void *ptr, void *stream)
{
    if (!a) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_alloc_record_stream: allocator "
                                                           "is NULL");
    ranksnap_status st = RANKSNAP_OK;
    rs_mutex_lock(&a->mu);
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
    rs_mutex_unlock(&a->mu);
    return st;
}

ranksnap_status rs_alloc_empty_cache(rs_alloc *a)
{
    if (!a) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_alloc_empty_cache: allocator is "
                                                           "NULL");
    rs_mutex_lock(&a->mu);
    ranksnap_status st = release_cached(a);
    rs_mutex_unlock(&a->mu);
    return st;
}

int rs_alloc_owns(rs_alloc *a, const void *ptr)
{
    if (!a || !ptr) return 0;
    rs_mutex_lock(&a->mu);
    int owns = map_find(a, (uintptr_t)ptr) != NULL;
    rs_mutex_unlock(&a->mu);
    return owns;
}

void rs_alloc_get_stats(rs_alloc *a, ranksnap_stats *out)
{
    if (!a || !out) return;
    rs_mutex_lock(&a->mu);
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
    out->memory_limit_bytes = a->memory_limit;
    rs_mutex_unlock(&a->mu);
}

void rs_alloc_reset_peak_stats(rs_alloc *a)
{
    if (!a) return;
    rs_mutex_lock(&a->mu);
    ranksnap_stats *s = &a->st;
    s->allocated_bytes_peak = s->allocated_bytes;
    s->requested_bytes_peak = s->requested_bytes;
    s->reserved_bytes_peak = s->reserved_bytes;
    s->active_bytes_peak = s->active_bytes;
    s->peak_time_us = rs_now_us();
    s->peak_step = a->step;
    rs_mutex_unlock(&a->mu);
}

void rs_alloc_set_step(rs_alloc *a, int64_t step)
{
    if (!a) return;
    rs_mutex_lock(&a->mu);
    a->step = step;
    rs_mutex_unlock(&a->mu);
}

int rs_alloc_last_oom(rs_alloc *a, rs_oom_info *out)
{
    if (!a) return 0;
    rs_mutex_lock(&a->mu);
    int have = a->have_oom;
    if (have && out) *out = a->oom;
    rs_mutex_unlock(&a->mu);
    return have;
}

uint64_t rs_alloc_memory_limit(const rs_alloc *a)
{
    if (!a) return 0;
    rs_alloc *m = (rs_alloc *)(uintptr_t)a; /* the lock is not part of the logical state */
    rs_mutex_lock(&m->mu);
    uint64_t limit = a->memory_limit;
    rs_mutex_unlock(&m->mu);
    return limit;
}

void rs_alloc_set_memory_limit(rs_alloc *a, uint64_t limit)
{
    if (!a) return;
    rs_mutex_lock(&a->mu);
    a->memory_limit = limit;
    rs_mutex_unlock(&a->mu);
}

void rs_alloc_lock(rs_alloc *a)
{
    rs_mutex_lock(&a->mu);
}

int rs_alloc_trylock(rs_alloc *a)
{
    int c = 0;
    return atomic_compare_exchange_strong_explicit(&a->mu.v, &c, 1, memory_order_acquire,
                                                   memory_order_relaxed);
}

void rs_alloc_unlock(rs_alloc *a)
{
    rs_mutex_unlock(&a->mu);
}

/* ---- state for the snapshot ------------------------------------------------------------------ */

static int segment_addr_cmp(const void *x, const void *y)
{
    const rs_segment *a = *(rs_segment *const *)x, *b = *(rs_segment *const *)y;
    return (a->addr > b->addr) - (a->addr < b->addr);
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
    size_t n = a->n_segments;
    rs_segment **order = malloc((n ? n : 1) * sizeof *order);
    rs_segment_info *segs = calloc(n ? n : 1, sizeof *segs);
    if (!order || !segs) {
        free(order);
        free(segs);
        st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "allocator state: out of host memory for %zu "
                                                "segments", n);
        goto out;
    }
    size_t i = 0;
    for (rs_segment *s = a->segments; s; s = s->next) order[i++] = s;
    qsort(order, n, sizeof *order, segment_addr_cmp);
    out->segments = segs;
    out->n_segments = n;
    for (i = 0; i < n; i++) {
        const rs_segment *s = order[i];
        rs_segment_info *si = &segs[i];
        size_t nb = 0;
        for (const rs_block *b = s->head; b; b = b->next) nb++;
        si->blocks = malloc(nb * sizeof *si->blocks);
        if (!si->blocks) {
            rs_alloc_state_free(out);
            st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "allocator state: out of host memory for "
                                                    "%zu blocks", nb);
            break;
        }
        si->addr = s->addr;
        si->total_size = s->size;
        si->stream = s->pool->stream;
        si->is_small = s->pool->is_small;
        si->stack_id = s->stack_id;
        si->n_blocks = nb;
        size_t k = 0;
        for (const rs_block *b = s->head; b; b = b->next, k++) {
            rs_block_info *bi = &si->blocks[k];
            bi->addr = b->addr;
            bi->size = b->size;
            bi->requested_size = b->requested;
            bi->stack_id = b->stack_id;
            bi->state = b->state;
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
    rs_mutex_lock(&a->mu);
    ranksnap_status st = rs_alloc_state_take_locked(a, out);
    rs_mutex_unlock(&a->mu);
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
    for (const rs_segment *s = a->segments; s; s = s->next) {
        FAIL_IF(++n_segs > a->n_segments, "more segments listed than counted");
        FAIL_IF(s->next && s->next->prev != s, "segment list links broken");
        reserved += s->size;
        uintptr_t at = s->addr;
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
            if (b->state == RS_BLOCK_INACTIVE) {
                n_inactive++;
                FAIL_IF(b->next && b->next->state == RS_BLOCK_INACTIVE,
                        "free neighbours 0x%" PRIxPTR " and 0x%" PRIxPTR " did not coalesce",
                        b->addr, b->next->addr);
                if (is_whole(b)) whole += b->size;
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
    }
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
    rs_mutex_lock(&a->mu);
    int ok = validate(a);
    rs_mutex_unlock(&a->mu);
    return ok;
}
