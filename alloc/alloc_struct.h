/*
 * alloc_struct.h — the caching allocator's state, which the files of alloc/ share: blocks,
 * segments, pools and the allocator itself (alloc.c's head comment says how they fit). Types
 * only: each part's functions are in its own file's header.
 */
#ifndef RANKSNAP_ALLOC_STRUCT_H
#define RANKSNAP_ALLOC_STRUCT_H

#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "mutex.h"

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
    uintptr_t caller;            /* return address of the allocating call while active, 0 = not
                                  * known: its site when no stack was recorded                */
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
    rs_alloc *alloc; /* its allocator: a free found in a shared map is served by the block's own */
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

/* The open-addressing map from an allocated block's address to the block. The allocators of a
 * rank's devices share one (they share one lock too), so that a free finds its block, and through
 * the block's pool its allocator, in one probe whichever device handed it out. */
struct rs_block_map {
    map_slot *slots;
    size_t mask, count;
    unsigned shift;
};

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

    rs_pool *pools[2];  /* [is_small], most recently used first */
    rs_block_map *map;  /* &own_map, or the one the config shares among allocators */
    rs_block_map own_map;
    size_t n_allocated; /* this allocator's blocks in the map */
    rs_block *spare; /* recycled block structs, linked through ->next */
    size_t n_spare;
    rs_segment *segments;
    size_t n_segments;
    pending_event *pending;
    size_t n_pending, cap_pending;

    uint64_t whole_free; /* bytes of inactive blocks that span a whole segment */
    uint32_t rng;
    int64_t step;
    uintptr_t caller; /* the caller of the allocation in flight (rs_alloc_malloc_from), lock held */
    ranksnap_stats st;
    int have_oom;
    rs_oom_info oom;
};

#endif
