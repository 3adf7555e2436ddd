/*
 * held.c — what a rank holds when a recorded range begins, made part of the range.
 *
 * A range starts with a fresh history, and most C/C++ programs allocate everything before their
 * loop: without this, the range would show none of it, and a rank holding gigabytes would look
 * like one that recorded nothing. So the range's first events are the memory live at that
 * moment — every allocated block of the caching allocators (alloc) and every allocation taken
 * outside them (outside_alloc: the driver's interposers, pools, ncclMemAlloc) — and the recorder
 * marks them (rs_recorder_mark_held), which the snapshot writes as history.held: the reports
 * name them "held since before step N". Each carries its stack: the one recorded when the block
 * was allocated in an earlier range; else, for a block, the return address of the program's
 * allocating call, which the allocator keeps in the block (one store per allocation); for an
 * outside allocation, the stack unwound when it was made (they are few: this table keeps it).
 *
 * The same holds for the range that begins with the instance (the whole run): the driver's
 * interposers record before the instance is up, and the instance is published under this table's
 * lock, after its held events, so that an outside allocation made meanwhile on another thread is
 * either one of them or recorded by its own event, never both or neither (rs_held_publish).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_snapshot.h"
#include "devices.h"
#include "held.h"
#include "recorder.h"
#include "stacks.h"
#include "state.h"

/* The live outside allocations, process-wide (as outside.c's labels): open addressing by key,
 * tombstones for frees. */
typedef struct held_slot {
    uint64_t key; /* key + 1; 0 = empty, UINT64_MAX = deleted */
    uint64_t size;
    int device;
    int n;
    int async; /* a pool's async allocation (rs_held_outside_alloc) */
    uintptr_t *pcs;
} held_slot;

#define HELD_DELETED UINT64_MAX

static pthread_mutex_t rs_held_mu = PTHREAD_MUTEX_INITIALIZER;
static held_slot *rs_held;
static size_t rs_held_cap, rs_held_used;

static size_t held_hash(uint64_t k)
{
    return (size_t)((k * 0x9e3779b97f4a7c15ull) >> 17);
}

/* rs_held_mu held: the slot of `key`, or NULL when absent. */
static held_slot *held_find(uint64_t key)
{
    if (!rs_held_cap) return NULL;
    for (size_t i = held_hash(key + 1) & (rs_held_cap - 1);; i = (i + 1) & (rs_held_cap - 1)) {
        if (rs_held[i].key == key + 1) return &rs_held[i];
        if (rs_held[i].key == 0) return NULL;
    }
}

/* rs_held_mu held: room for one more (the table at most half used, tombstones dropped on a
 * rehash); 0 without host memory. */
static int held_room(void)
{
    if (2 * (rs_held_used + 1) <= rs_held_cap) return 1;
    size_t cap = rs_held_cap ? rs_held_cap * 2 : 64;
    held_slot *t = calloc(cap, sizeof *t);
    if (!t) return 0;
    size_t used = 0;
    for (size_t i = 0; i < rs_held_cap; i++) {
        held_slot *o = &rs_held[i];
        if (o->key == 0 || o->key == HELD_DELETED) continue;
        size_t k = held_hash(o->key) & (cap - 1);
        while (t[k].key) k = (k + 1) & (cap - 1);
        t[k] = *o;
        used++;
    }
    free(rs_held);
    rs_held = t;
    rs_held_cap = cap;
    rs_held_used = used;
    return 1;
}

/* rs_held_mu held: the instance an outside event goes to now, NULL when none records. Read under
 * the mutex that the injection of a range's held allocations and the publication of the instance
 * hold too, so that an allocation is either among those or recorded by its own event. */
static rs_runtime *held_recording_locked(void)
{
    rs_runtime *rt = rs_state_get();
    return rt && atomic_load_explicit(&rt->recording, memory_order_relaxed) ? rt : NULL;
}

rs_runtime *rs_held_outside_alloc(uint64_t key, uint64_t size, int device, const uintptr_t *pcs, int n,
                                  int async)
{
    uintptr_t *copy = n > 0 ? malloc((size_t)n * sizeof *copy) : NULL;
    if (copy) memcpy(copy, pcs, (size_t)n * sizeof *copy);
    pthread_mutex_lock(&rs_held_mu);
    /* key + 1 must be neither empty nor deleted */
    held_slot *sl = key < HELD_DELETED - 1 ? held_find(key) : NULL;
    if (!sl && key < HELD_DELETED - 1 && held_room()) {
        size_t i = held_hash(key + 1) & (rs_held_cap - 1);
        while (rs_held[i].key && rs_held[i].key != HELD_DELETED) i = (i + 1) & (rs_held_cap - 1);
        sl = &rs_held[i];
        if (sl->key == 0) rs_held_used++;
        sl->pcs = NULL;
    }
    if (sl) {
        /* an allocation at a key whose free was not seen replaces it */
        free(sl->pcs);
        *sl = (held_slot){key + 1, size, device, copy ? n : 0, async != 0, copy};
        copy = NULL;
    }
    rs_runtime *rt = held_recording_locked();
    pthread_mutex_unlock(&rs_held_mu);
    free(copy);
    return rt;
}

rs_runtime *rs_held_outside_free(uint64_t key)
{
    pthread_mutex_lock(&rs_held_mu);
    held_slot *sl = held_find(key);
    if (sl) {
        free(sl->pcs);
        sl->pcs = NULL;
        sl->key = HELD_DELETED;
    }
    rs_runtime *rt = held_recording_locked();
    pthread_mutex_unlock(&rs_held_mu);
    return rt;
}

typedef struct held_ctx {
    rs_runtime *rt;
} held_ctx;

/* A block held by an allocator: its recorded stack, else its caller's one frame. */
static uint32_t held_block(void *ctx, uint64_t addr, uint64_t requested, void *stream,
                           uint32_t stack_id, uintptr_t caller)
{
    rs_runtime *rt = ((held_ctx *)ctx)->rt;
    if (!stack_id && caller && rt->stacks) stack_id = rs_stacks_intern(rt->stacks, &caller, 1);
    rs_recorder_append_id(rt->recorder, RS_ACT_ALLOC, addr, requested, stream, stack_id);
    return stack_id;
}

/* The held events of a range that begins now (`range`), and then, under the same mutex, what makes
 * the outside allocations that come after record their own events: the recording flag, or the
 * instance itself when it is published (held_recording_locked). Allocator lock held. */
static void held_begin(rs_runtime *rt, int range, int publish)
{
    held_ctx ctx = {rt};
    size_t nd = range ? rs_devices_count(rt) : 0;
    for (size_t i = 0; i < nd; i++) {
        rs_rt_device *d = rs_devices_at(rt, i);
        rs_recorder_set_device(rt->recorder, d->index);
        rs_alloc_each_active_locked(d->alloc, held_block, &ctx);
    }
    pthread_mutex_lock(&rs_held_mu);
    for (size_t i = 0; range && i < rs_held_cap; i++) {
        const held_slot *sl = &rs_held[i];
        if (sl->key == 0 || sl->key == HELD_DELETED) continue;
        uint32_t id = sl->n > 0 && rt->stacks ? rs_stacks_intern(rt->stacks, sl->pcs, sl->n) : 0;
        rs_recorder_set_device(rt->recorder, sl->device);
        rs_recorder_append_id(rt->recorder, sl->async ? RS_ACT_ASYNC_ALLOC : RS_ACT_OUTSIDE_ALLOC,
                              sl->key - 1, sl->size, NULL, id);
    }
    if (publish)
        rs_state_publish(rt);
    else
        atomic_store(&rt->recording, 1);
    pthread_mutex_unlock(&rs_held_mu);
    if (range) rs_recorder_mark_held(rt->recorder);
}

void rs_held_range_begin_locked(rs_runtime *rt)
{
    held_begin(rt, 1, 0);
}

void rs_held_publish(rs_runtime *rt)
{
    rs_rt_lock(rt);
    /* the whole run is a range that began at init: what the driver's interposers recorded before
     * (threads racing the start, allocations before MPI_Init) is held in it */
    held_begin(rt, atomic_load(&rt->recording) != 0, 1);
    rs_rt_unlock(rt);
}
