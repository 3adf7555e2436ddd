/*
 * recorder.c — the bounded ring of allocation events and its stream and string tables.
 *
 * The ring is one calloc'ed array of 32-byte events written round-robin: `head` is the next slot,
 * the oldest held event sits `count` slots behind it, and an append to a full ring overwrites the
 * oldest (dropped = total - count). Streams are interned so that an event carries a 16-bit index:
 * index 0 is the NULL (default) stream, distinct pointers get 1..65534 in order of first sight
 * through a linear-probe table on the pointer, with the last stream cached since consecutive
 * events nearly always share one; past 65534 streams, or when the table cannot grow, an event
 * gets RS_STREAM_OTHER and is counted. Annotation names are deduplicated by content into a
 * second table. Clearing empties the ring and restarts total (so dropped stays total - count);
 * the tables are kept, since the indices in a later dump still refer to them.
 *
 * Recording off costs one predictable branch: `enabled` is checked before anything else.
 * Not thread-safe: every caller holds the allocator lock.
 */
#include <assert.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "errors.h"
#include "recorder.h"

static_assert(sizeof(rs_event) == 32, "an event is 32 bytes (see recorder.h)");

#define RS_STREAM_MAX_INDEX 65534u
#define RS_TABLE_MIN_SLOTS 16u

struct rs_recorder {
    rs_recorder_head pub; /* first (see rs_recorder_on): the only field an append reads while
                            * recording is off */
    int with_stacks;
    rs_event *ring;
    uint64_t capacity, head, count, total;
    uint64_t held; /* the first `held` events since the clear: what was held when recording began */
    rs_stacks *stacks;
    rs_fastclock clock; /* event times: a TSC read instead of clock_gettime (clock.h) */

    void *last_stream; /* cache of the last non-NULL stream and its index */
    uint16_t last_index;
    void **streams; /* streams[0] = NULL */
    size_t n_streams, streams_cap;
    uint16_t *stream_slots; /* index, 0 = empty */
    size_t stream_slot_cap;
    uint64_t stream_overflow;

    char **strings;
    size_t n_strings, strings_cap;
    uint32_t *string_slots; /* index + 1, 0 = empty */
    size_t string_slot_cap;
    size_t string_bytes;

    uint64_t grow_budget; /* fault injection: growths left before they fail */

    /* RANKSNAP_RING=mmap: the ring lives in a file mapping owned by the caller, and the count
     * and the stream handles are published into that file's header after each write. */
    int external_ring;
    _Atomic uint64_t *pub_total;
    uint64_t *pub_streams;
    uint64_t *pub_n_streams;
    size_t pub_streams_max;
};

ranksnap_status rs_recorder_create(uint64_t capacity, rs_stacks *stacks, rs_recorder **out)
{
    if (!out) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_recorder_create: out is NULL");
    *out = NULL;
    if (capacity == 0)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                        "RANKSNAP_MAX_ENTRIES=0: expected a capacity of at least 1 event");
    if (capacity > SIZE_MAX / sizeof(rs_event))
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                        "RANKSNAP_MAX_ENTRIES=%llu: expected at most %llu events",
                        (unsigned long long)capacity,
                        (unsigned long long)(SIZE_MAX / sizeof(rs_event)));
    rs_recorder *r = calloc(1, sizeof *r);
    if (!r)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rs_recorder_create: cannot allocate %zu bytes",
                        sizeof *r);
    r->ring = calloc((size_t)capacity, sizeof *r->ring);
    if (!r->ring) {
        free(r);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY,
                        "RANKSNAP_MAX_ENTRIES=%llu: cannot allocate %llu bytes for the event ring",
                        (unsigned long long)capacity,
                        (unsigned long long)(capacity * sizeof(rs_event)));
    }
    r->streams = malloc(sizeof *r->streams);
    if (!r->streams) {
        free(r->ring);
        free(r);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rs_recorder_create: out of memory");
    }
    r->streams[0] = NULL;
    r->n_streams = 1;
    r->streams_cap = 1;
    r->capacity = capacity;
    r->stacks = stacks;
    r->with_stacks = stacks != NULL && rs_stacks_mode_of(stacks) != RS_STACKS_NONE;
    r->grow_budget = UINT64_MAX;
    rs_fastclock_init(&r->clock);
    *out = r;
    return RANKSNAP_OK;
}

ranksnap_status rs_recorder_create_on(uint64_t capacity, rs_stacks *stacks, const rs_ring_pub *pub,
                                     rs_recorder **out)
{
    RS_CHECK(rs_recorder_create(1, stacks, out));
    rs_recorder *r = *out;
    free(r->ring);
    r->ring = pub->ring;
    r->capacity = capacity;
    r->external_ring = 1;
    r->pub_total = pub->total;
    r->pub_streams = pub->streams;
    r->pub_n_streams = pub->n_streams;
    r->pub_streams_max = pub->streams_max;
    atomic_store_explicit(r->pub_total, 0, memory_order_release);
    if (r->pub_n_streams) *r->pub_n_streams = r->pub_streams_max ? 1 : 0;
    if (r->pub_streams && r->pub_streams_max) r->pub_streams[0] = 0;
    return RANKSNAP_OK;
}

void rs_recorder_destroy(rs_recorder *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n_strings; i++) free(r->strings[i]);
    free(r->strings);
    free(r->string_slots);
    free(r->streams);
    free(r->stream_slots);
    if (!r->external_ring) free(r->ring);
    free(r);
}

void rs_recorder_set_enabled(rs_recorder *r, int on)
{
    if (r) r->pub.enabled = on ? 1 : 0;
}

int rs_recorder_enabled(const rs_recorder *r)
{
    return r ? r->pub.enabled : 0;
}

void rs_recorder_fail_allocs_after(rs_recorder *r, uint64_t n)
{
    if (r) r->grow_budget = n;
}

static void *rs_recorder_grow(rs_recorder *r, void *p, size_t count, size_t elem)
{
    if (r->grow_budget == 0 || count > SIZE_MAX / elem) return NULL;
    void *q = realloc(p, count * elem);
    if (q && r->grow_budget != UINT64_MAX) r->grow_budget--;
    return q;
}

static void *rs_recorder_zalloc(rs_recorder *r, size_t count, size_t elem)
{
    if (r->grow_budget == 0) return NULL;
    void *q = calloc(count, elem);
    if (q && r->grow_budget != UINT64_MAX) r->grow_budget--;
    return q;
}

/* ---- streams -------------------------------------------------------------------------------- */

static size_t rs_ptr_slot(const void *p, size_t mask)
{
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ (h >> 29)) & mask;
}

static void rs_stream_slots_put(uint16_t *slots, size_t cap, void *const *streams, uint16_t idx)
{
    size_t mask = cap - 1;
    size_t i = rs_ptr_slot(streams[idx], mask);
    while (slots[i] != 0) i = (i + 1) & mask;
    slots[i] = idx;
}

/* A stream not seen before: the out-of-line part of the lookup. */
__attribute__((noinline)) static uint16_t rs_stream_add(rs_recorder *r, void *stream)
{
    if (r->n_streams > RS_STREAM_MAX_INDEX) goto overflow;
    if (r->n_streams * 10 > r->stream_slot_cap * 7) {
        size_t cap = r->stream_slot_cap ? r->stream_slot_cap * 2 : RS_TABLE_MIN_SLOTS;
        uint16_t *slots = rs_recorder_zalloc(r, cap, sizeof *slots);
        if (!slots) goto overflow;
        for (size_t i = 1; i < r->n_streams; i++)
            rs_stream_slots_put(slots, cap, r->streams, (uint16_t)i);
        free(r->stream_slots);
        r->stream_slots = slots;
        r->stream_slot_cap = cap;
    }
    if (r->n_streams == r->streams_cap) {
        size_t cap = r->streams_cap * 2;
        void **s = rs_recorder_grow(r, r->streams, cap, sizeof *s);
        if (!s) goto overflow;
        r->streams = s;
        r->streams_cap = cap;
    }
    uint16_t idx = (uint16_t)r->n_streams++;
    r->streams[idx] = stream;
    if (r->pub_streams && idx < r->pub_streams_max) {
        r->pub_streams[idx] = (uint64_t)(uintptr_t)stream;
        *r->pub_n_streams = (uint64_t)idx + 1;
    }
    rs_stream_slots_put(r->stream_slots, r->stream_slot_cap, r->streams, idx);
    return idx;
overflow:
    r->stream_overflow++;
    return (uint16_t)RS_STREAM_OTHER;
}

static uint16_t rs_stream_index(rs_recorder *r, void *stream)
{
    if (!stream) return 0;
    if (stream == r->last_stream) return r->last_index;
    uint16_t idx = 0;
    if (r->stream_slot_cap) {
        size_t mask = r->stream_slot_cap - 1;
        for (size_t i = rs_ptr_slot(stream, mask); r->stream_slots[i] != 0; i = (i + 1) & mask) {
            if (r->streams[r->stream_slots[i]] == stream) {
                idx = r->stream_slots[i];
                break;
            }
        }
    }
    if (idx == 0) {
        idx = rs_stream_add(r, stream);
        if (idx == RS_STREAM_OTHER) return idx; /* not cached: every such event is counted */
    }
    r->last_stream = stream;
    r->last_index = idx;
    return idx;
}

size_t rs_recorder_n_streams(const rs_recorder *r)
{
    return r ? r->n_streams : 0;
}

void *rs_recorder_stream(const rs_recorder *r, size_t idx)
{
    return r && idx < r->n_streams ? r->streams[idx] : NULL;
}

uint64_t rs_recorder_streams_overflowed(const rs_recorder *r)
{
    return r ? r->stream_overflow : 0;
}

/* ---- events --------------------------------------------------------------------------------- */

static inline void rs_push(rs_recorder *r, rs_action act, uint64_t addr, uint64_t size,
                           void *stream, uint32_t stack_id)
{
    if (act == RS_ACT_FREE_COMPLETED && r->count > 0) {
        rs_event *p = &r->ring[r->head ? r->head - 1 : r->capacity - 1];
        if (p->action == RS_ACT_FREE_REQUESTED && p->addr == addr && p->flags == r->pub.device_flags) {
            p->flags |= RS_EV_COMPLETED; /* see RS_EV_COMPLETED in recorder.h */
            return;
        }
    }
    rs_event *e = &r->ring[r->head];
    e->time_us = rs_fastclock_now_us(&r->clock);
    e->addr = addr;
    e->size = size;
    e->stack_id = stack_id;
    e->stream = rs_stream_index(r, stream);
    e->action = (uint8_t)act;
    /* steps and annotations happen on no device */
    e->flags = act == RS_ACT_STEP || act == RS_ACT_ANNOTATION_BEGIN || act == RS_ACT_ANNOTATION_END
                   ? 0
                   : r->pub.device_flags;
    if (++r->head == r->capacity) r->head = 0;
    if (r->count < r->capacity) r->count++;
    r->total++;
    /* after the event: a reader of the file never counts a slot that is half written */
    if (r->pub_total) atomic_store_explicit(r->pub_total, r->total, memory_order_release);
}

/* Recording on: capture the stack and write the event. The stack is captured here, where the
 * frames above are known: this function, then rs_recorder_append (kept by the fence there), then
 * the caller; `skip + 2` leaves out the first two. */
__attribute__((noinline)) static uint32_t rs_append_slow(rs_recorder *r, rs_action act,
                                                         uint64_t addr, uint64_t size,
                                                         void *stream, int with_stack, int skip)
{
    uint32_t stack_id = 0;
    if (with_stack && r->with_stacks) stack_id = rs_stacks_capture(r->stacks, skip + 2);
    rs_push(r, act, addr, size, stream, stack_id);
    return stack_id;
}

/* With recording off this is a load, a test and a return: the work, and the register saves it
 * needs, live in rs_append_slow. The signal fence (a compiler barrier, no instruction) keeps the
 * call from becoming a tail call, which would remove this frame and shift the skip count. */
uint32_t rs_recorder_append(rs_recorder *r, rs_action act, uint64_t addr, uint64_t size,
                            void *stream, int with_stack, int skip)
{
    if (!r->pub.enabled) return 0;
    uint32_t stack_id = rs_append_slow(r, act, addr, size, stream, with_stack, skip);
    atomic_signal_fence(memory_order_seq_cst);
    return stack_id;
}

void rs_recorder_append_id(rs_recorder *r, rs_action act, uint64_t addr, uint64_t size,
                           void *stream, uint32_t stack_id)
{
    if (!r->pub.enabled) return;
    rs_push(r, act, addr, size, stream, stack_id);
}

uint64_t rs_recorder_capacity(const rs_recorder *r)
{
    return r ? r->capacity : 0;
}

uint64_t rs_recorder_count(const rs_recorder *r)
{
    return r ? r->count : 0;
}

uint64_t rs_recorder_total(const rs_recorder *r)
{
    return r ? r->total : 0;
}

uint64_t rs_recorder_dropped(const rs_recorder *r)
{
    return r ? r->total - r->count : 0;
}

void rs_recorder_mark_held(rs_recorder *r)
{
    if (r) r->held = r->total;
}

uint64_t rs_recorder_held(const rs_recorder *r)
{
    /* the oldest events are the first a full ring overwrites */
    if (!r) return 0;
    uint64_t dropped = r->total - r->count;
    return r->held > dropped ? r->held - dropped : 0;
}

const rs_event *rs_recorder_at(const rs_recorder *r, uint64_t i)
{
    if (!r || i >= r->count) return NULL;
    uint64_t oldest = r->head >= r->count ? r->head - r->count : r->head + r->capacity - r->count;
    uint64_t k = oldest + i;
    if (k >= r->capacity) k -= r->capacity;
    return &r->ring[k];
}

void rs_recorder_clear(rs_recorder *r)
{
    if (!r) return;
    r->head = 0;
    r->count = 0;
    r->total = 0;
    r->held = 0;
    if (r->pub_total) atomic_store_explicit(r->pub_total, 0, memory_order_release);
}

rs_stacks *rs_recorder_stacks(const rs_recorder *r)
{
    return r ? r->stacks : NULL;
}

/* ---- strings -------------------------------------------------------------------------------- */

static uint64_t rs_hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

static void rs_string_slots_put(uint32_t *slots, size_t cap, uint64_t hash, uint32_t idx)
{
    size_t mask = cap - 1;
    size_t i = (size_t)hash & mask;
    while (slots[i] != 0) i = (i + 1) & mask;
    slots[i] = idx + 1;
}

uint32_t rs_recorder_intern_string(rs_recorder *r, const char *s)
{
    if (!r || !s) return UINT32_MAX;
    uint64_t hash = rs_hash_str(s);
    if (r->string_slot_cap) {
        size_t mask = r->string_slot_cap - 1;
        for (size_t i = (size_t)hash & mask; r->string_slots[i] != 0; i = (i + 1) & mask) {
            uint32_t idx = r->string_slots[i] - 1;
            if (strcmp(r->strings[idx], s) == 0) return idx;
        }
    }
    if (r->n_strings >= UINT32_MAX - 1) return UINT32_MAX;
    if ((r->n_strings + 1) * 10 > r->string_slot_cap * 7) {
        size_t cap = r->string_slot_cap ? r->string_slot_cap * 2 : RS_TABLE_MIN_SLOTS;
        uint32_t *slots = rs_recorder_zalloc(r, cap, sizeof *slots);
        if (!slots) return UINT32_MAX;
        for (size_t i = 0; i < r->n_strings; i++)
            rs_string_slots_put(slots, cap, rs_hash_str(r->strings[i]), (uint32_t)i);
        free(r->string_slots);
        r->string_slots = slots;
        r->string_slot_cap = cap;
    }
    if (r->n_strings == r->strings_cap) {
        size_t cap = r->strings_cap ? r->strings_cap * 2 : RS_TABLE_MIN_SLOTS;
        char **v = rs_recorder_grow(r, r->strings, cap, sizeof *v);
        if (!v) return UINT32_MAX;
        r->strings = v;
        r->strings_cap = cap;
    }
    size_t len = strlen(s) + 1;
    char *copy = rs_recorder_grow(r, NULL, len, 1);
    if (!copy) return UINT32_MAX;
    memcpy(copy, s, len);
    uint32_t idx = (uint32_t)r->n_strings++;
    r->strings[idx] = copy;
    r->string_bytes += len;
    rs_string_slots_put(r->string_slots, r->string_slot_cap, hash, idx);
    return idx;
}

size_t rs_recorder_n_strings(const rs_recorder *r)
{
    return r ? r->n_strings : 0;
}

const char *rs_recorder_string(const rs_recorder *r, size_t idx)
{
    return r && idx < r->n_strings ? r->strings[idx] : NULL;
}

size_t rs_recorder_memory_bytes(const rs_recorder *r)
{
    if (!r) return 0;
    return sizeof *r + (size_t)r->capacity * sizeof *r->ring + r->streams_cap * sizeof *r->streams +
           r->stream_slot_cap * sizeof *r->stream_slots + r->strings_cap * sizeof *r->strings +
           r->string_slot_cap * sizeof *r->string_slots + r->string_bytes;
}
