/*
 * alloc_snapshot.h — the allocator's state for a snapshot (alloc_snapshot.c).
 */
#ifndef RANKSNAP_ALLOC_SNAPSHOT_H
#define RANKSNAP_ALLOC_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"

typedef struct rs_alloc rs_alloc;

/* The state for the snapshot: segments sorted by address, each with its blocks in address order.
 * An expandable segment shows as one segment per run of mapped pages, as PyTorch's snapshot shows
 * it. Built under the lock into memory the caller frees with rs_alloc_state_free. */
typedef struct rs_block_info {
    uint64_t addr;
    uint64_t size;
    uint64_t requested_size;
    uint32_t stack_id;
    uint8_t state; /* rs_block_state */
} rs_block_info;

typedef struct rs_segment_info {
    uint64_t addr;
    uint64_t total_size;
    uint64_t allocated_size;
    uint64_t active_size;
    uint64_t requested_size;
    void *stream;
    int device;        /* the allocator's device_index */
    int is_small;
    uint32_t stack_id; /* stack of the allocation that created the segment */
    size_t n_blocks;
    rs_block_info *blocks;
} rs_segment_info;

typedef struct rs_alloc_state {
    size_t n_segments;
    rs_segment_info *segments;
} rs_alloc_state;

ranksnap_status rs_alloc_state_take(rs_alloc *a, rs_alloc_state *out);
/* The same, for a caller that already holds the lock (rs_alloc_lock), so that the state and the
 * recorder's history are taken at one instant. */
ranksnap_status rs_alloc_state_take_locked(rs_alloc *a, rs_alloc_state *out);
void rs_alloc_state_free(rs_alloc_state *s);

/* Each allocated block (active_allocated) with its request, stream, stack id and caller
 * (rs_alloc_malloc_from; 0 when not known); the block takes the stack id `fn` returns. For the
 * memory a rank holds when a range begins. Lock held. */
typedef uint32_t (*rs_alloc_active_fn)(void *ctx, uint64_t addr, uint64_t requested, void *stream,
                                       uint32_t stack_id, uintptr_t caller);
void rs_alloc_each_active_locked(rs_alloc *a, rs_alloc_active_fn fn, void *ctx);

#endif
