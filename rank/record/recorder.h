/*
 * recorder.h — the bounded ring of allocation events.
 *
 * At most `capacity` events (RANKSNAP_MAX_ENTRIES); when full the oldest are overwritten and
 * counted as dropped. An event is 32 bytes: time, address, size, stack id, stream index, action.
 * Streams and annotation names are interned into small tables so that events stay fixed-size.
 * Switching recording off makes rs_recorder_append a single predictable branch. Not thread-safe:
 * every writer holds the allocator lock (see alloc.h).
 */
#ifndef RANKSNAP_RECORDER_H
#define RANKSNAP_RECORDER_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "format.h"
#include "ranksnap.h"
#include "stacks.h"

typedef struct rs_event {
    uint64_t time_us;
    uint64_t addr;
    uint64_t size;
    uint32_t stack_id;
    uint16_t stream; /* index into the stream table */
    uint8_t action;  /* rs_action */
    uint8_t flags;
} rs_event;

/* rs_event.flags: a free_requested whose free_completed came right after it (the common case: no
 * other stream used the block) is one event in the ring with this flag, and two events, at the
 * same time, in the snapshot and the ring file's reader. That is a third of the events of a
 * malloc+free pair saved on the hot path. */
#define RS_EV_COMPLETED 0x1u
/* rs_event.flags >> RS_EV_DEVICE_SHIFT: the device (0..63) an allocator event happened on
 * (rs_recorder_set_device); 0 for events of no device (steps, annotations). */
#define RS_EV_DEVICE_SHIFT 2u

static inline int rs_event_device(const rs_event *e)
{
    return e->flags >> RS_EV_DEVICE_SHIFT;
}

typedef struct rs_recorder rs_recorder;

/* `stacks` may be NULL (no stacks). The recorder does not own it. */
ranksnap_status rs_recorder_create(uint64_t capacity, rs_stacks *stacks, rs_recorder **out);
void rs_recorder_destroy(rs_recorder *r);

/* Where a recorder on a file mapping (RANKSNAP_RING=mmap, ring_file.c) writes: `ring` holds
 * `capacity` events and is not freed by the recorder; `total` is stored after every event; the
 * first `streams_max` stream handles are copied to `streams` and their count to `n_streams`. */
typedef struct rs_ring_pub {
    rs_event *ring;
    _Atomic uint64_t *total;
    uint64_t *streams;
    uint64_t *n_streams;
    size_t streams_max;
} rs_ring_pub;

ranksnap_status rs_recorder_create_on(uint64_t capacity, rs_stacks *stacks, const rs_ring_pub *pub,
                                     rs_recorder **out);

void rs_recorder_set_enabled(rs_recorder *r, int on);
int rs_recorder_enabled(const rs_recorder *r);

/* The first member of every recorder: its switch, readable inline where a call to
 * rs_recorder_enabled (in another file, so never inlined) is too dear, as in the allocator's
 * observer, which runs three times per malloc+free pair. A pointer to a struct points to its
 * first member (C11 6.7.2.1), so the cast below is well defined. */
typedef struct rs_recorder_head {
    int enabled;
    uint8_t device_flags; /* the device of the next events, as rs_event.flags holds it */
} rs_recorder_head;

/* rs_recorder_enabled for a non-NULL recorder, inline. Same locking as every recorder call. */
static inline int rs_recorder_on(const rs_recorder *r)
{
    return ((const rs_recorder_head *)(const void *)r)->enabled;
}

/* The device the events appended from now on happened on (0..63; the allocators' observer sets
 * it before each event). Same locking as every recorder call. */
static inline void rs_recorder_set_device(rs_recorder *r, int device)
{
    ((rs_recorder_head *)(void *)r)->device_flags = (uint8_t)(((unsigned)device & 63u) << RS_EV_DEVICE_SHIFT);
}

/* Appends one event stamped now; captures and interns the stack when `with_stack` and stacks
 * are on (skipping `skip` innermost frames). Returns the stack id (0 = none). No-op returning 0
 * when recording is off. */
uint32_t rs_recorder_append(rs_recorder *r, rs_action act, uint64_t addr, uint64_t size,
                            void *stream, int with_stack, int skip);
/* Appends one event stamped now with a stack id interned beforehand (e.g. from pcs unwound
 * before the allocator lock was taken). No-op when recording is off. */
void rs_recorder_append_id(rs_recorder *r, rs_action act, uint64_t addr, uint64_t size,
                           void *stream, uint32_t stack_id);

/* Appends one event stamped now with a stack id interned by the caller (no capture here). */
void rs_recorder_append_id(rs_recorder *r, rs_action act, uint64_t addr, uint64_t size,
                           void *stream, uint32_t stack_id);

/* Interned annotation name; returns its index, or UINT32_MAX if it could not be stored. */
uint32_t rs_recorder_intern_string(rs_recorder *r, const char *s);

uint64_t rs_recorder_capacity(const rs_recorder *r);
uint64_t rs_recorder_count(const rs_recorder *r);    /* events held now, <= capacity */
uint64_t rs_recorder_total(const rs_recorder *r);    /* events appended since create */
uint64_t rs_recorder_dropped(const rs_recorder *r);  /* total - count                 */
/* The events appended since the last clear are what the program held when the range began
 * (runtime/held.c), not what it did in it; rs_recorder_held: how many of them are still in the
 * ring, as the first events of rs_recorder_at. */
void rs_recorder_mark_held(rs_recorder *r);
uint64_t rs_recorder_held(const rs_recorder *r);
/* The i-th oldest event held, 0 <= i < count. */
const rs_event *rs_recorder_at(const rs_recorder *r, uint64_t i);
void rs_recorder_clear(rs_recorder *r);

/* Stream indices: 0 is the NULL (default) stream; streams beyond the 65534th share index
 * RS_STREAM_OTHER, which names no stream, and are counted. */
#define RS_STREAM_OTHER 65535u
size_t rs_recorder_n_streams(const rs_recorder *r);
uint64_t rs_recorder_streams_overflowed(const rs_recorder *r); /* events given RS_STREAM_OTHER */
void *rs_recorder_stream(const rs_recorder *r, size_t idx);
size_t rs_recorder_n_strings(const rs_recorder *r);
const char *rs_recorder_string(const rs_recorder *r, size_t idx);
rs_stacks *rs_recorder_stacks(const rs_recorder *r);
/* Ring bytes (capacity * sizeof(rs_event)) plus the stream and string tables. */
size_t rs_recorder_memory_bytes(const rs_recorder *r);
/* Test hook (fault injection): after `n` more successful growths of the stream or string
 * tables every growth fails, as a failing malloc would; UINT64_MAX (the default) never fails. */
void rs_recorder_fail_allocs_after(rs_recorder *r, uint64_t n);

#endif
