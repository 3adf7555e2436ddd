/*
 * alloc_api.c — the allocation calls of the public API (ranksnap_malloc, ranksnap_free, ...) and the
 * allocators' observer, which records their events with the stack unwound before the lock.
 *
 * An allocation is served by the allocator of the device current on the calling thread (or the
 * one the interposer names); a free, record_stream or stats call finds the device itself.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc_api.h"
#include "devices.h"
#include "dump.h"
#include "errors.h"
#include "passthrough.h"
#include "recorder.h"
#include "ring_file.h"
#include "stacks.h"
#include "state.h"

/* The stack of the allocation in flight on this thread, unwound before the allocator lock. */
typedef struct rs_pending_stack {
    int n;
    uint32_t id; /* interned id once the observer has interned it, 0 before */
    uintptr_t pcs[RS_MAX_STACK_DEPTH];
} rs_pending_stack;
static _Thread_local rs_pending_stack rs_pending;

/* The observer while recording. Out of line so that rs_alloc_api_observe, with recording off, is a load,
 * a test and a return: the register saves this part needs are not made for every event. */
__attribute__((noinline)) static uint32_t rs_observe_on(rs_runtime *rt, rs_action act,
                                                        uint64_t addr, uint64_t size, void *stream)
{
    uint32_t id = 0;
    /* The thread-local buffer only with stacks on: each access to it is a call to
     * __tls_get_addr from a shared library. */
    if (rt->stacks && (act == RS_ACT_ALLOC || act == RS_ACT_SEGMENT_ALLOC || act == RS_ACT_OOM)) {
        rs_pending_stack *ps = &rs_pending;
        if (ps->n > 0) {
            if (ps->id == 0) ps->id = rs_stacks_intern(rt->stacks, ps->pcs, ps->n);
            id = ps->id;
        }
    }
    rs_recorder_append_id(rt->recorder, act, addr, size, stream, id);
    return id;
}

/* Called by the allocator with its lock held. rs_recorder_on is inline, not a call into
 * recorder.c: with recording off this is all an event costs. */
uint32_t rs_alloc_api_observe(void *ctx, rs_action act, uint64_t addr, uint64_t size, void *stream)
{
    const rs_rt_device *d = ctx;
    rs_runtime *rt = d->rt;
    /* the file's segment table follows the allocator whether or not events are recorded */
    if (rt->ring_file && (act == RS_ACT_SEGMENT_ALLOC || act == RS_ACT_SEGMENT_FREE))
        rs_ring_file_segment(rt->ring_file, act == RS_ACT_SEGMENT_ALLOC, addr, size, 0,
                             size == RS_SMALL_BUFFER);
    if (!rs_recorder_on(rt->recorder)) return 0;
    rs_recorder_set_device(rt->recorder, d->index);
    return rs_observe_on(rt, act, addr, size, stream);
}

/* ---- allocation ----------------------------------------------------------------------------- */

/* The device an allocation on `device` (< 0: the calling thread's current one) is served on:
 * rs_devices_get, with its warm case (a device used before) inline, since every allocation asks. */
static inline __attribute__((always_inline)) ranksnap_status rs_serving_device(rs_runtime *rt, int device,
                                                                               rs_rt_device **out)
{
    if (device < 0) device = rt->one_device ? 0 : rs_devices_current(rt);
    rs_rt_device *d = (unsigned)device < RS_MAX_DEVICES
                          ? atomic_load_explicit(&rt->devs[device], memory_order_acquire)
                          : NULL;
    if (__builtin_expect(d != NULL, 1)) {
        *out = d;
        return RANKSNAP_OK;
    }
    return rs_devices_get(rt, device, out);
}

/* Device `device` (< 0: the calling thread's current one) allocates. Always inlined: the stack
 * unwound here skips one frame, its caller's (ranksnap_malloc or rs_alloc_api_malloc_on).
 * `caller`, the return address of the program's call, stays with the block: one store, so that a
 * block allocated while nothing records still has a site when a range finds it held. */
static inline __attribute__((always_inline)) ranksnap_status rs_malloc_on(int device, void **ptr, size_t size, void *stream,
                                                                          const void *caller)
{
    if (!ptr) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "ranksnap_malloc: ptr is NULL");
    *ptr = NULL;
    rs_runtime *rt = rs_state_get();
    if (!rt) {
        if (rs_passthrough_on()) return rs_passthrough_malloc(ptr, size);
        return rs_state_not_running("ranksnap_malloc", 0);
    }
    rs_rt_device *d;
    RS_CHECK(rs_serving_device(rt, device, &d));
    /* Without stacks to capture the thread-local buffer is not touched (its address is a call
     * to __tls_get_addr in a shared library): it holds n == 0 between calls, so the observer
     * finds no stack. */
    ranksnap_status st;
    if (!rt->stacks || !atomic_load_explicit(&rt->recording, memory_order_relaxed)) {
        st = rs_alloc_malloc_from(d->alloc, size, stream, ptr, (uintptr_t)caller);
    } else {
        rs_pending_stack *ps = &rs_pending;
        ps->id = 0;
        ps->n = rs_stacks_capture_pcs(rt->stacks, 1, ps->pcs);
        st = rs_alloc_malloc_from(d->alloc, size, stream, ptr, (uintptr_t)caller);
        ps->n = 0;
    }
    if (__builtin_expect(st == RANKSNAP_ERR_OUT_OF_MEMORY, 0)) rs_dump_after_oom(rt);
    return st;
}

ranksnap_status ranksnap_malloc(void **ptr, size_t size, void *stream)
{
    return rs_malloc_on(-1, ptr, size, stream, __builtin_return_address(0));
}

ranksnap_status rs_alloc_api_malloc_on(int device, void **ptr, size_t size, void *stream,
                                       const void *caller)
{
    if (device < 0)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "ranksnap_malloc: device %d is not a device",
                        device);
    return rs_malloc_on(device, ptr, size, stream, caller);
}

static ranksnap_status rs_unknown(const char *fn, const void *ptr)
{
    return rs_error(RANKSNAP_ERR_UNKNOWN_POINTER, "%s: %p was not allocated by ranksnap", fn, ptr);
}

ranksnap_status ranksnap_free(void *ptr)
{
    if (!ptr) return RANKSNAP_OK;
    rs_runtime *rt = rs_state_get();
    if (!rt) {
        if (rs_passthrough_on()) return rs_passthrough_free(ptr);
        return rs_state_not_running("ranksnap_free", 0);
    }
    /* the devices' allocators share one block map: any of them hands the free to the owner */
    rs_alloc *a = atomic_load_explicit(&rt->any_alloc, memory_order_acquire);
    return a ? rs_alloc_free(a, ptr) : rs_unknown("ranksnap_free", ptr);
}

ranksnap_status ranksnap_record_stream(void *ptr, void *stream)
{
    if (!ptr) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "ranksnap_record_stream: ptr is NULL");
    RS_NEED_OR_PASS(rt);
    rs_alloc *a = atomic_load_explicit(&rt->any_alloc, memory_order_acquire);
    return a ? rs_alloc_record_stream(a, ptr, stream) : rs_unknown("ranksnap_record_stream", ptr);
}

ranksnap_status ranksnap_empty_cache(void)
{
    RS_NEED_OR_PASS(rt);
    size_t n = rs_devices_count(rt);
    for (size_t i = 0; i < n; i++) RS_CHECK(rs_alloc_empty_cache(rs_devices_at(rt, i)->alloc));
    return RANKSNAP_OK;
}

/* ---- stats ---------------------------------------------------------------------------------- */

ranksnap_status ranksnap_get_stats(ranksnap_stats *out)
{
    if (!out) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "ranksnap_get_stats: out is NULL");
    memset(out, 0, sizeof *out);
    RS_NEED(rt);
    rs_devices_stats(rt, out);
    rs_rt_lock(rt);
    out->events_recorded = rs_recorder_total(rt->recorder);
    out->events_dropped = rs_recorder_dropped(rt->recorder);
    /* the driver's refusals are the rank's OOMs too, as in its snapshots */
    out->num_ooms += rt->drv_oom.count;
    rs_rt_unlock(rt);
    return RANKSNAP_OK;
}

ranksnap_status ranksnap_reset_peak_stats(void)
{
    RS_NEED_OR_PASS(rt);
    rs_devices_reset_peak_stats(rt);
    return RANKSNAP_OK;
}

