/*
 * outside.c — device memory outside the allocator: sampled at steps and dumps, labelled by its
 * holder (NCCL, ncclMemAlloc, CUDA memory pools) when an interposer knows it, and the warning of a
 * preloaded run that saw the device fill up with none of its allocation calls reaching ranksnap;
 * the same advice to a process ranksnap never started in that holds a CUDA context.
 */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "log.h"
#include "device_share.h"
#include "devices.h"
#include "errors.h"
#include "external_mode.h"
#include "format.h"
#include "held.h"
#include "launcher.h"
#include "options.h"
#include "outside.h"
#include "pyframes.h"
#include "owners.h"
#include "recorder.h"
#include "sat.h"
#include "stacks.h"
#include "state.h"
#include "text.h"

static void rs_outside_set(const char *label, uint64_t bytes);

/* What CUDA memory pools keep reserved beyond what is allocated from them (the driver's
 * interposers know the pools; NULL until they saw one). */
static _Atomic(rs_outside_pool_fn) rs_pool_sampler;

void rs_outside_set_pool_sampler(rs_outside_pool_fn fn)
{
    atomic_store_explicit(&rs_pool_sampler, fn, memory_order_release);
}

/* When NVML may be asked again (µs, rs_now_us), process-wide: paced by its answers' cost. */
static _Atomic uint64_t rs_outside_next_us;

/* One device's used bytes into u, and this process's own where it can be known. */
static void rs_outside_use_add(rs_runtime *rt, rs_rt_device *d, int primary, rs_outside_use *u)
{
    uint64_t free_b = 0, total_b = 0, used = 0;
    if (d->backend->ops->mem_info(d->backend, &free_b, &total_b) == RANKSNAP_OK)
        used = total_b > free_b ? total_b - free_b : 0;
    u->device_used += used;
    /* the simulated device is this process's alone */
    if (!rt->is_cuda) {
        u->own += used;
        return;
    }
    rs_device_share sh;
    char detail[sizeof u->detail];
    int why = rs_device_share_query(rt->opts.nvml, d->info.uuid, &sh, detail, sizeof detail);
    if (primary) u->share = sh;
    if (sh.own_known) {
        u->own += sh.own_bytes;
    } else if (u->of == RS_OUTSIDE_PROCESS) {
        u->of = RS_OUTSIDE_DEVICE;
        u->why = why;
        snprintf(u->detail, sizeof u->detail, "%s", detail);
    }
}

int rs_outside_use_now(rs_runtime *rt, rs_rt_device *only, rs_rt_device *primary, int force,
                       rs_outside_use *out)
{
    uint64_t t0 = rs_now_us();
    /* the simulated device is read from memory: no pace */
    if (!force && rt->is_cuda && t0 < atomic_load_explicit(&rs_outside_next_us, memory_order_relaxed))
        return 0;
    memset(out, 0, sizeof *out);
    out->of = RS_OUTSIDE_PROCESS;
    if (only) {
        rs_outside_use_add(rt, only, 1, out);
    } else {
        size_t n = rs_devices_count(rt);
        for (size_t i = 0; i < n; i++) {
            rs_rt_device *d = rs_devices_at(rt, i);
            rs_outside_use_add(rt, d, primary ? d == primary : i == 0, out);
        }
    }
    uint64_t took = rs_now_us() - t0;
    atomic_store_explicit(&rs_outside_next_us, t0 + 100 * took, memory_order_relaxed);
    return 1;
}

uint64_t rs_outside_use_beyond(const rs_outside_use *u, uint64_t reserved)
{
    uint64_t used = u->of == RS_OUTSIDE_PROCESS ? u->own : u->device_used;
    return used > reserved ? used - reserved : 0;
}

/* Set in a rank recorded natively once its framework allocates from a stream-ordered pool: the
 * pools' reserved bytes, which are its allocator's (rs_outside_set_async_reserved). */
static _Atomic(rs_outside_reserved_fn) rs_async_reserved_fn;

uint64_t rs_outside_sample(rs_runtime *rt, uint64_t reserved, rs_rt_device *primary, int force,
                           rs_outside_use *use)
{
    rs_outside_reserved_fn async = atomic_load_explicit(&rs_async_reserved_fn, memory_order_acquire);
    rs_outside_pool_fn pools = atomic_load_explicit(&rs_pool_sampler, memory_order_acquire);
    if (async) {
        /* the pools are this rank's allocator: what they reserve, used or not, is not outside it */
        reserved += async();
    } else if (pools) {
        rs_outside_set("cuda_pool_cached", pools());
    }
    rs_outside_use u;
    if (!rs_outside_use_now(rt, NULL, primary, force, &u)) return 0;
    uint64_t outside = rs_outside_use_beyond(&u, reserved);
    if (outside > rt->outside_peak[u.of]) rt->outside_peak[u.of] = outside;
    if (use) *use = u;
    return outside;
}

/* Device memory held outside the allocator by known holders. Process-wide rather than per
 * instance: a communicator created before a re-init, or destroyed after finalize, still adds up. */
static pthread_mutex_t rs_outside_mu = PTHREAD_MUTEX_INITIALIZER;
static rs_outside_label rs_outside[RS_MAX_OUTSIDE_LABELS];
static size_t rs_n_outside;

/* rs_outside_mu held; NULL only if the table is full and `label` is new. */
static rs_outside_label *rs_outside_find(const char *label, int create)
{
    for (size_t i = 0; i < rs_n_outside; i++)
        if (!strcmp(rs_outside[i].label, label)) return &rs_outside[i];
    if (!create || rs_n_outside == RS_MAX_OUTSIDE_LABELS) return NULL;
    rs_outside_label *l = &rs_outside[rs_n_outside++];
    snprintf(l->label, sizeof l->label, "%s", label);
    l->bytes = 0;
    return l;
}

void rs_outside_add(const char *label, int64_t bytes)
{
    if (!label || !*label || bytes == 0) return;
    /* compared as stored: a longer label is its first 23 bytes */
    char name[sizeof rs_outside[0].label];
    snprintf(name, sizeof name, "%s", label);
    label = name;
    pthread_mutex_lock(&rs_outside_mu);
    rs_outside_label *l = rs_outside_find(label, 0);
    /* the last slot is kept for "other", so that a table full of labels still adds up */
    if (!l) l = rs_n_outside + 1 < RS_MAX_OUTSIDE_LABELS ? rs_outside_find(label, 1)
                                                          : rs_outside_find("other", 1);
    if (l) {
        uint64_t mag = bytes < 0 ? (uint64_t)0 - (uint64_t)bytes : (uint64_t)bytes;
        if (bytes > 0)
            l->bytes += mag;
        else
            l->bytes = mag > l->bytes ? 0 : l->bytes - mag;
    }
    pthread_mutex_unlock(&rs_outside_mu);
}

/* Sets `label` to `bytes`, for a holder whose bytes are read, not added up. */
static void rs_outside_set(const char *label, uint64_t bytes)
{
    pthread_mutex_lock(&rs_outside_mu);
    rs_outside_label *l = rs_outside_find(label, bytes != 0);
    if (l) l->bytes = bytes;
    pthread_mutex_unlock(&rs_outside_mu);
}

/* Copies the table (for the snapshot); returns the number of labels. */
size_t rs_outside_labels_copy(rs_outside_label *out)
{
    pthread_mutex_lock(&rs_outside_mu);
    size_t n = rs_n_outside;
    memcpy(out, rs_outside, n * sizeof *out);
    pthread_mutex_unlock(&rs_outside_mu);
    return n;
}

static uint64_t rs_outside_labelled_bytes(void)
{
    rs_outside_label l[RS_MAX_OUTSIDE_LABELS];
    size_t n = rs_outside_labels_copy(l);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) sum += l[i].bytes;
    return sum;
}

/* The outside event (a pool's async one when `async`) with the stack pcs[0..n) (n may be 0) on
 * `device`. */
static void rs_outside_event(rs_runtime *rt, int is_alloc, int async, uint64_t key, uint64_t size,
                             int device, const uintptr_t *pcs, int n)
{
    static const uint8_t actions[2][2] = {{RS_ACT_OUTSIDE_FREE, RS_ACT_OUTSIDE_ALLOC},
                                          {RS_ACT_ASYNC_FREE, RS_ACT_ASYNC_ALLOC}};
    rs_rt_lock(rt);
    uint32_t id = n > 0 && rs_recorder_enabled(rt->recorder) ? rs_stacks_intern(rt->stacks, pcs, n) : 0;
    rs_recorder_set_device(rt->recorder, device);
    rs_recorder_append_id(rt->recorder, actions[async != 0][is_alloc != 0], key, size, NULL, id);
    rs_rt_unlock(rt);
}

void rs_outside_record(int is_alloc, const void *ptr, uint64_t size)
{
    rs_runtime *rt = rs_state_get();
    if (!rt) return;
    /* unwound before the lock, as for allocations, and whether or not a range records: a range
     * that begins while it is live shows it held (held.c); frees carry no stack, as in the
     * observer */
    uintptr_t pcs[RS_MAX_STACK_DEPTH];
    int n = is_alloc && rt->stacks ? rs_stacks_capture_pcs(rt->stacks, 1, pcs) : 0;
    uint64_t key = (uint64_t)(uintptr_t)ptr;
    int device = rs_devices_current(rt);
    rs_runtime *rec = is_alloc ? rs_held_outside_alloc(key, size, device, pcs, n, 0) : rs_held_outside_free(key);
    if (rec) rs_outside_event(rec, is_alloc, 0, key, size, device, pcs, n);
}

/* ---- allocations the driver made outside ranksnap's allocators -------------------------------- */

/* The library a driver allocation was made for: the first frame of the caller's stack outside
 * ranksnap, the driver and the CUDA runtime (a static runtime is inside its library, so NCCL's
 * own runtime counts as NCCL). */
static const char *rs_outside_owner(const uintptr_t *stack, int depth)
{
    /* the stack the recorder captured when there is one: unwinding again through the driver
     * costs microseconds */
    void *pcs[RS_MAX_STACK_DEPTH];
    int n = 0;
    if (depth > 0)
        for (n = 0; n < depth; n++) pcs[n] = (void *)stack[n];
    else
        n = backtrace(pcs, RS_MAX_STACK_DEPTH < 32 ? RS_MAX_STACK_DEPTH : 32);
    Dl_info self;
    if (!dladdr((const void *)(uintptr_t)rs_outside_owner, &self)) self.dli_fbase = NULL;
    for (int i = 1; i < n; i++) {
        Dl_info d;
        if (!dladdr(pcs[i], &d) || !d.dli_fname) continue;
        if (d.dli_fbase == self.dli_fbase) continue;
        const char *base = strrchr(d.dli_fname, '/');
        base = base ? base + 1 : d.dli_fname;
        if (!strncmp(base, "libcuda.so", 10) || !strncmp(base, "libcudart", 9)) continue;
        const char *owner = rs_owner_of_module(base);
        return owner ? owner : "program";
    }
    return "program";
}

/* ---- NCCL's own threads ----------------------------------------------------------------------
 * NCCL allocates part of a communicator's buffers on its own threads (the proxy service thread
 * connects peers and allocates their buffers while the user's thread waits in ncclCommInitRank or
 * in the communicator's first collective). Those stacks hold no line of the user's: such an
 * allocation takes, after its own frames, the stack of the user's NCCL call in flight (the last
 * one when none is). */
static pthread_mutex_t rs_nccl_call_mu = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t rs_nccl_call_pcs[RS_MAX_STACK_DEPTH];
static int rs_nccl_call_n;
static _Thread_local int rs_nccl_call_depth;

void rs_outside_nccl_call_begin(void)
{
    rs_nccl_call_depth++;
    rs_runtime *rt = rs_state_get();
    if (!rt || !rt->stacks) return;
    uintptr_t pcs[RS_MAX_STACK_DEPTH];
    int n = rs_stacks_capture_pcs(rt->stacks, 1, pcs);
    pthread_mutex_lock(&rs_nccl_call_mu);
    memcpy(rs_nccl_call_pcs, pcs, (size_t)n * sizeof pcs[0]);
    rs_nccl_call_n = n;
    pthread_mutex_unlock(&rs_nccl_call_mu);
}

void rs_outside_nccl_call_end(void)
{
    if (rs_nccl_call_depth > 0) rs_nccl_call_depth--;
}

/* pcs[0..n) of an allocation NCCL made on its own thread, followed by the user's NCCL call's
 * frames as far as they fit; the new length. */
static int rs_outside_nccl_caller(uintptr_t *pcs, int n)
{
    pthread_mutex_lock(&rs_nccl_call_mu);
    int k = rs_nccl_call_n < RS_MAX_STACK_DEPTH - n ? rs_nccl_call_n : RS_MAX_STACK_DEPTH - n;
    if (k > 0) memcpy(pcs + n, rs_nccl_call_pcs, (size_t)k * sizeof pcs[0]);
    pthread_mutex_unlock(&rs_nccl_call_mu);
    return n + (k > 0 ? k : 0);
}

/* This thread's net bytes recorded from the driver, and the label its next ones take; the
 * process's, for a measurement that spans NCCL's threads. */
static atomic_llong rs_driver_net_all;
static _Thread_local int64_t rs_driver_net;
static _Thread_local const char *rs_driver_label;
/* Allocations recorded from the driver in this process, for the finalize hint; and the bytes
 * they hold now on each device, for RANKSNAP_MEMORY_LIMIT. */
static atomic_ullong rs_driver_seen;
static atomic_ullong rs_driver_held[RS_MAX_DEVICES];

static void rs_driver_hold(int device, uint64_t size, int take)
{
    if (device < 0 || device >= RS_MAX_DEVICES) return;
    if (take)
        atomic_fetch_add_explicit(&rs_driver_held[device], size, memory_order_relaxed);
    else
        atomic_fetch_sub_explicit(&rs_driver_held[device], size, memory_order_relaxed);
}

/* ---- before the instance is up ----------------------------------------------------------------
 * The driver's interposers keep their books while ranksnap starts on another thread, while its
 * own start allocates (MPI_Init_thread inside it), and before the program's MPI_Init that will
 * start it (instance.h, rs_instance_starting): what the instance would give them then — the
 * cap, how to take a stack — comes from the options, read once, as the instance reads them
 * (the rank the launcher says; a value that does not parse: no cap, no stacks, and the start
 * that follows reports it). An OOM then is kept until the instance can take it. */
static struct {
    uint64_t limit;
    rs_stacks *stacks;
} rs_early;
static pthread_once_t rs_early_once = PTHREAD_ONCE_INIT;

static void rs_early_load(void)
{
    /* one by one: the instance's own reading warns of what is amiss, once */
    rs_options cap, mode, depth;
    if (rs_options_load_one(&cap, "RANKSNAP_MEMORY_LIMIT", NULL) == RANKSNAP_OK)
        rs_early.limit = rs_options_memory_limit_for_rank(&cap.memory_limit, rs_launcher_rank(0));
    if (rs_options_load_one(&mode, "RANKSNAP_STACKS", NULL) == RANKSNAP_OK &&
        rs_options_load_one(&depth, "RANKSNAP_STACK_DEPTH", NULL) == RANKSNAP_OK && mode.stacks != RS_STACKS_NONE)
        (void)rs_stacks_create(rs_external_stacks_mode(mode.stacks), depth.stack_depth, &rs_early.stacks);
    rs_error_clear();
}

/* The stacks to capture with (the instance's, else those of the options) and the cap. */
static const rs_stacks *rs_outside_stacks(const rs_runtime *rt)
{
    if (rt) return rt->stacks;
    pthread_once(&rs_early_once, rs_early_load);
    return rs_early.stacks;
}

static uint64_t rs_outside_limit(const rs_runtime *rt)
{
    if (rt) return rt->memory_limit;
    pthread_once(&rs_early_once, rs_early_load);
    return rs_early.limit;
}

/* The last driver OOM before the instance was up, and how many there were (rs_outside_mu). */
typedef struct rs_outside_early_oom {
    uint64_t count, size, held, time_us;
    int device, n;
    uintptr_t pcs[RS_MAX_STACK_DEPTH];
} rs_outside_early_oom;
static rs_outside_early_oom rs_early_oom;

/* What the rank holds on `device` besides the driver's: the caching allocator's reserved and
 * allocated bytes there (0 when it never allocated there). */
static void rs_driver_allocator_bytes(rs_runtime *rt, int device, uint64_t *reserved,
                                      uint64_t *allocated)
{
    *reserved = *allocated = 0;
    rs_rt_device *d = device >= 0 && device < RS_MAX_DEVICES
                          ? atomic_load_explicit(&rt->devs[device], memory_order_acquire)
                          : NULL;
    if (!d) return;
    ranksnap_stats st;
    memset(&st, 0, sizeof st);
    rs_alloc_get_stats(d->alloc, &st);
    *reserved = st.reserved_bytes;
    *allocated = st.allocated_bytes;
}

int rs_outside_driver_admit(uint64_t size, int device)
{
    if (device < 0 || device >= RS_MAX_DEVICES) return 1;
    rs_runtime *rt = rs_state_get();
    uint64_t limit = rs_outside_limit(rt);
    uint64_t reserved = 0, allocated = 0;
    if (limit && rt) rs_driver_allocator_bytes(rt, device, &reserved, &allocated);
    /* the check and the count in one step: of calls in flight together, those that fit */
    unsigned long long held = atomic_load_explicit(&rs_driver_held[device], memory_order_relaxed);
    do {
        if (limit && (held + reserved > limit || size > limit - held - reserved)) return 0;
    } while (!atomic_compare_exchange_weak_explicit(&rs_driver_held[device], &held, held + size,
                                                    memory_order_relaxed, memory_order_relaxed));
    return 1;
}

void rs_outside_driver_unadmit(uint64_t size, int device)
{
    rs_driver_hold(device, size, 0);
}

int64_t rs_outside_driver_net(void)
{
    return rs_driver_net;
}

int64_t rs_outside_driver_net_all(void)
{
    return atomic_load_explicit(&rs_driver_net_all, memory_order_relaxed);
}

/* The stream-ordered pool's allocations of a rank recorded natively: their live bytes, the peak,
 * and the pool's reserved bytes read at the peak; under rs_outside_mu. */
static uint64_t rs_async_live, rs_async_peak, rs_async_reserved;

void rs_outside_set_async_reserved(rs_outside_reserved_fn fn)
{
    atomic_store_explicit(&rs_async_reserved_fn, fn, memory_order_release);
}

void rs_outside_async(uint64_t *peak, uint64_t *reserved_at_peak)
{
    pthread_mutex_lock(&rs_outside_mu);
    *peak = rs_async_peak;
    *reserved_at_peak = rs_async_reserved;
    pthread_mutex_unlock(&rs_outside_mu);
}

/* `size` more (is_alloc) or fewer live bytes in the pool; at a new peak, its reserved bytes are
 * read after the lock and kept when no later peak came meanwhile and they cover it. */
static void rs_outside_async_add(uint64_t size, int is_alloc)
{
    pthread_mutex_lock(&rs_outside_mu);
    uint64_t peak = 0;
    if (!is_alloc) {
        rs_async_live = size > rs_async_live ? 0 : rs_async_live - size;
    } else {
        rs_async_live += size;
        if (rs_async_live > rs_async_peak) {
            rs_async_peak = peak = rs_async_live;
            rs_async_reserved = 0;
        }
    }
    pthread_mutex_unlock(&rs_outside_mu);
    rs_outside_reserved_fn fn = atomic_load_explicit(&rs_async_reserved_fn, memory_order_acquire);
    if (!peak || !fn) return;
    uint64_t reserved = fn();
    pthread_mutex_lock(&rs_outside_mu);
    if (rs_async_peak == peak && reserved >= peak) rs_async_reserved = reserved;
    pthread_mutex_unlock(&rs_outside_mu);
}

static int rs_outside_is_async(const char *label)
{
    return label && !strcmp(label, RS_OUTSIDE_ASYNC_LABEL);
}

const char *rs_outside_driver_label(const char *label)
{
    const char *prev = rs_driver_label;
    rs_driver_label = label;
    return prev;
}

const char *rs_outside_driver_alloc(uint64_t key, uint64_t size, int device, const char *label,
                                    uint64_t admitted)
{
    if (!label) label = rs_driver_label;
    int async = rs_outside_is_async(label);
    if (async) label = NULL; /* the pool's only where the stack shows no library of its own */
    int owned = !label;
    /* the stack whether or not a range records: a range that begins while the allocation is
     * live shows it held, by its site (held.c) */
    uintptr_t pcs[RS_MAX_STACK_DEPTH];
    int n = rs_stacks_capture_pcs(rs_outside_stacks(rs_state_get()), 1, pcs);
    /* a stack of Python frames (a PyTorch rank recorded natively) shows no library: the pool's
     * allocations are PyTorch's, any other is owned by the library its native stack shows
     * (cuBLAS's workspace, taken on the script's thread) */
    int python = n > 0 && rs_pyframes_is(pcs[0]);
    if (!label) label = python && async ? "torch" : rs_outside_owner(pcs, python ? 0 : n);
    if (async && strcmp(label, "program") && strcmp(label, "torch")) async = 0;
    if (async) {
        label = RS_OUTSIDE_ASYNC_LABEL;
        rs_outside_async_add(size, 1);
    }
    /* NCCL's memory on a thread that is not in a call of the user's: one of NCCL's own */
    int nccl_thread = owned && !rs_nccl_call_depth && !strcmp(label, "nccl");
    rs_outside_add(label, (int64_t)size);
    rs_driver_net += (int64_t)size;
    atomic_fetch_add_explicit(&rs_driver_net_all, (int64_t)size, memory_order_relaxed);
    /* what rs_outside_driver_admit counted already is not counted again */
    if (size != admitted) rs_driver_hold(device, size > admitted ? size - admitted : admitted - size, size > admitted);
    atomic_fetch_add_explicit(&rs_driver_seen, 1, memory_order_relaxed);
    if (nccl_thread && n > 0) n = rs_outside_nccl_caller(pcs, n);
    rs_runtime *rec = rs_held_outside_alloc(key, size, device, pcs, n, async);
    if (rec) rs_outside_event(rec, 1, async, key, size, device, pcs, n);
    return label;
}

void rs_outside_driver_free(uint64_t key, uint64_t size, int device, const char *label)
{
    rs_outside_add(label, -(int64_t)size);
    rs_driver_net -= (int64_t)size;
    atomic_fetch_sub_explicit(&rs_driver_net_all, (int64_t)size, memory_order_relaxed);
    rs_driver_hold(device, size, 0);
    int async = rs_outside_is_async(label);
    if (async) rs_outside_async_add(size, 0);
    rs_runtime *rec = rs_held_outside_free(key);
    if (rec) rs_outside_event(rec, 0, async, key, size, device, NULL, 0);
}

/* rt->drv_oom for an OOM of `size` on `device`, the rank then holding `held` bytes at the driver
 * and the allocator's `reserved` and `allocated`. Allocator lock held. */
static void rs_outside_oom_locked(rs_runtime *rt, uint64_t size, int device, uint32_t stack_id,
                                  uint64_t held, uint64_t reserved, uint64_t allocated, uint64_t time_us)
{
    rt->drv_oom.has = 1;
    rt->drv_oom.dumped = 0;
    rt->drv_oom.framework = 0;
    rt->drv_oom.reported = 0;
    rt->drv_oom.count++;
    rt->drv_oom.device = device;
    rt->drv_oom.stack_id = stack_id;
    rt->drv_oom.step = rt->step;
    memset(&rt->drv_oom.info, 0, sizeof rt->drv_oom.info);
    rt->drv_oom.info.requested = size;
    rt->drv_oom.info.rounded = size;
    /* the driver says nothing of what was free: the device's figures stay unknown (0), so that no
     * report reads "0 bytes free" */
    /* what the rank held on the device: the driver's allocations and the allocator's */
    rt->drv_oom.info.allocated = held + allocated;
    rt->drv_oom.info.reserved = held + reserved;
    rt->drv_oom.info.memory_limit = rt->memory_limit;
    rt->drv_oom.info.time_us = time_us;
}

/* The oom event of a request of `size` on `device` with the stack pcs[0..n), `device_free` the
 * device's free bytes (0: not known); its stack id. Allocator lock held. */
static uint32_t rs_outside_oom_event_locked(rs_runtime *rt, uint64_t size, int device,
                                            uint64_t device_free, const uintptr_t *pcs, int n)
{
    uint32_t id = n > 0 && rt->stacks ? rs_stacks_intern(rt->stacks, pcs, n) : 0;
    if (rs_recorder_enabled(rt->recorder)) {
        rs_recorder_set_device(rt->recorder, device);
        rs_recorder_append_id(rt->recorder, RS_ACT_OOM, device_free, size, NULL, id);
    }
    return id;
}

/* An OOM's figures in a rank whose framework allocates from stream-ordered pools (recorded
 * natively): its allocator's bytes are the pools' bytes, live and reserved, as its table's columns
 * are, not every byte it holds at the driver (cuBLAS's workspace is outside the allocator there). */
static void rs_outside_async_held(uint64_t *held, uint64_t *reserved, uint64_t *allocated)
{
    rs_outside_reserved_fn fn = atomic_load_explicit(&rs_async_reserved_fn, memory_order_acquire);
    if (!fn) return;
    pthread_mutex_lock(&rs_outside_mu);
    uint64_t live = rs_async_live;
    pthread_mutex_unlock(&rs_outside_mu);
    uint64_t pools = fn();
    *held = 0;
    *allocated = live;
    *reserved = pools > live ? pools : live;
}

static uint64_t rs_driver_held_on(int device)
{
    return device >= 0 && device < RS_MAX_DEVICES
               ? atomic_load_explicit(&rs_driver_held[device], memory_order_relaxed)
               : 0;
}

void rs_outside_driver_oom(uint64_t size, int device)
{
    uint64_t held = rs_driver_held_on(device);
    uintptr_t pcs[RS_MAX_STACK_DEPTH];
    int n = rs_stacks_capture_pcs(rs_outside_stacks(rs_state_get()), 1, pcs);
    /* before the instance is up, kept for it: decided under the mutex rs_outside_adopt takes after
     * the instance is published, so that the OOM is either kept and adopted or the instance's */
    pthread_mutex_lock(&rs_outside_mu);
    rs_runtime *rt = rs_state_get();
    if (!rt) {
        rs_early_oom.count++;
        rs_early_oom.size = size;
        rs_early_oom.device = device;
        rs_early_oom.held = held;
        rs_early_oom.time_us = rs_now_us();
        rs_early_oom.n = n;
        memcpy(rs_early_oom.pcs, pcs, (size_t)n * sizeof pcs[0]);
    }
    pthread_mutex_unlock(&rs_outside_mu);
    if (!rt) return;
    uint64_t reserved = 0, allocated = 0;
    rs_driver_allocator_bytes(rt, device, &reserved, &allocated);
    rs_outside_async_held(&held, &reserved, &allocated);
    rs_rt_lock(rt);
    /* the driver does not say how much was free: 0 */
    uint32_t id = rs_outside_oom_event_locked(rt, size, device, 0, pcs, n);
    rs_outside_oom_locked(rt, size, device, id, held, reserved, allocated, rs_now_us());
    rs_rt_unlock(rt);
    RS_INFO(RS_SUB_ALLOC, "the driver refused %llu bytes on device %d: out of memory",
            (unsigned long long)size, device);
}

/* Whether the framework's error `said` (its figures each within `rounding` of the exact ones) is
 * the driver's refusal recorded last: PyTorch's cudaMallocAsync backend raises the same error for
 * a request over its own limit, which it checks before calling CUDA, and for one CUDA refused. A
 * request over the limit beyond the rounding never reached the driver; otherwise it is the
 * driver's when the driver's last refusal was of that size (within the rounding) on that device
 * and no error of the framework's was matched to it yet. What this takes wrongly: a refusal of the
 * driver's the script caught and went on from, followed by a request of the same size over the
 * limit by less than the rounding. Allocator lock held. */
static int rs_outside_is_drivers(const rs_runtime *rt, const rs_oom_info *said, int device, uint64_t rounding)
{
    uint64_t need = rs_sat_add_u64(said->allocated, said->requested);
    uint64_t slack = rs_sat_add_u64(rs_sat_add_u64(rounding, rounding), rounding);
    if (said->requested && said->memory_limit && need > rs_sat_add_u64(said->memory_limit, slack)) return 0;
    if (!rt->drv_oom.has || rt->drv_oom.framework || rt->drv_oom.reported || rt->drv_oom.device != device)
        return 0;
    uint64_t got = rt->drv_oom.info.requested, asked = said->requested;
    return !asked || (got > asked ? got - asked : asked - got) <= rounding;
}

int rs_outside_framework_oom(rs_runtime *rt, const rs_oom_info *said, int device, uint64_t rounding,
                             const uintptr_t *pcs, int n)
{
    uint64_t held = rs_driver_held_on(device), reserved = 0, allocated = 0;
    rs_driver_allocator_bytes(rt, device, &reserved, &allocated);
    rs_outside_async_held(&held, &reserved, &allocated);
    rs_rt_lock(rt);
    if (rs_outside_is_drivers(rt, said, device, rounding)) {
        rt->drv_oom.reported = 1;
        rs_rt_unlock(rt);
        return 0;
    }
    uint32_t id = rs_outside_oom_event_locked(rt, said->requested, device, said->device_free, pcs, n);
    rs_outside_oom_locked(rt, said->requested, device, id, held, reserved, allocated, rs_now_us());
    /* the figures of the framework's error: its allocated bytes, which its limit counts, and the
     * device's that it asked CUDA for; the rank's reserved bytes stay its pools' (or, with no
     * pool, every byte it held at the driver) */
    rt->drv_oom.info.allocated = said->allocated;
    rt->drv_oom.info.memory_limit = said->memory_limit;
    rt->drv_oom.info.device_free = said->device_free;
    rt->drv_oom.info.device_total = said->device_total;
    rt->drv_oom.framework = 1;
    rs_rt_unlock(rt);
    return 1;
}

void rs_outside_adopt(rs_runtime *rt)
{
    pthread_mutex_lock(&rs_outside_mu);
    rs_outside_early_oom oom = rs_early_oom;
    rs_early_oom.count = 0;
    pthread_mutex_unlock(&rs_outside_mu);
    if (!oom.count) return;
    rs_rt_lock(rt);
    if (rt->drv_oom.has) {
        rt->drv_oom.count += oom.count; /* one since the instance is up is the last */
    } else {
        /* before the instance, the allocator held nothing */
        uint32_t id = oom.n > 0 && rt->stacks ? rs_stacks_intern(rt->stacks, oom.pcs, oom.n) : 0;
        rs_outside_oom_locked(rt, oom.size, oom.device, id, oom.held, 0, 0, oom.time_us);
        rt->drv_oom.count = oom.count;
    }
    rs_rt_unlock(rt);
}

/* Device memory beyond what labels explain that finalize calls unexplained when a preloaded run
 * intercepted nothing: more than CUDA libraries' handles and workspaces take. */
#define RS_UNSEEN_GROWTH ((uint64_t)64 << 20)
/* When no allocation reached ranksnap it never opened a device, so it has no baseline from before
 * the program's own use: a CUDA context (with its modules loaded lazily) is allowed this much. */
#define RS_CONTEXT_ALLOWANCE ((uint64_t)1 << 30)

/* A preloaded ranksnap that saw no allocation call while the device filled up: the program's
 * calls never reached the interposer, almost always because it is linked with the static CUDA
 * runtime (nvcc's default), whose cudaMalloc is inside the executable. Said once, on rank 0. */
void rs_outside_warn_if_nothing_intercepted(rs_runtime *rt)
{
    if (!rt->is_cuda || rs_state_intercepted() != 0 || rt->rank != 0) return;
    if (!rs_launcher_preloaded()) return;
    ranksnap_stats s;
    rs_devices_stats(rt, &s);
    /* a program that allocates through ranksnap's API (the demo) reached it all the same; the
     * device memory it saw grow is NCCL's or another library's, already accounted outside */
    if (s.num_allocs > 0) return;
    /* its allocations reached ranksnap at the driver: recorded, without the allocator's blocks */
    unsigned long long seen = atomic_load_explicit(&rs_driver_seen, memory_order_relaxed);
    if (seen) {
        fprintf(stderr,
                "ranksnap: rank %d: no cudaMalloc/cudaFree call reached ranksnap's caching "
                "allocator; %llu allocations were recorded at the CUDA driver instead (memory "
                "outside the allocator, by owner and call site). For the allocator's per-block "
                "detail, link the program with ranksnap::wrap, or build it with nvcc -cudart "
                "shared (docs/GPU.md, \"Interception\").\n",
                rt->rank, seen);
        return;
    }
    /* the device the program runs on now: opened here if nothing had reached ranksnap */
    uint64_t known = rs_outside_labelled_bytes();
    int opened = rs_devices_count(rt) == 0;
    if (opened) {
        rs_rt_device *d;
        if (rs_devices_get_current(rt, &d) != RANKSNAP_OK) return;
    }
    rs_outside_use use;
    rs_rt_lock(rt);
    rs_outside_sample(rt, s.reserved_bytes, NULL, 1, &use);
    uint64_t peak = rt->outside_peak[use.of];
    rs_rt_unlock(rt);
    /* the process's own use holds its context and nothing of another process's: the allowance
     * is its baseline; the device's use held what was there when ranksnap first used it */
    known += opened || use.of == RS_OUTSIDE_PROCESS ? RS_CONTEXT_ALLOWANCE
                                                    : rs_devices_at(rt, 0)->outside_at_init;
    if (peak <= known || peak - known < RS_UNSEEN_GROWTH) return;
    char grown[32];
    rs_text_format_bytes(peak - known, grown, sizeof grown);
    if (!rt->opts.driver) {
        /* the user's setting, not the program's build, is why they were not seen */
        fprintf(stderr,
                "ranksnap: rank %d: no cudaMalloc/cudaFree call reached ranksnap, yet %s of device "
                "memory were taken outside it while it ran: RANKSNAP_DRIVER=0 leaves the CUDA "
                "driver's calls, where they would have been seen, unrecorded.\n",
                rt->rank, grown);
        return;
    }
    fprintf(stderr,
            "ranksnap: rank %d: no cudaMalloc/cudaFree call reached ranksnap, yet %s of device "
            "memory were taken outside it while it ran. The program is probably linked with the "
            "static CUDA runtime (nvcc's default), whose calls LD_PRELOAD cannot reach. Link it "
            "with ranksnap's link-time route instead: CMake target_link_libraries(app PRIVATE "
            "ranksnap::wrap), or $(pkg-config --libs ranksnap-wrap) on the link line; or build "
            "it with nvcc -cudart shared (docs/GPU.md, \"Interception\").\n",
            rt->rank, grown);
}

/* ---- a process in which ranksnap never started --------------------------------------------- */

/* The driver API's few calls and codes the check below makes (cuda.h is not needed for them). */
#define RS_CU_SUCCESS 0
#define RS_CU_ERROR_DEINITIALIZED 4
typedef int (*rs_cu_count_fn)(int *);
typedef int (*rs_cu_get_fn)(int *, int);
typedef int (*rs_cu_state_fn)(int, unsigned *, int *);
typedef int (*rs_cu_current_fn)(void **);

/* What the loaded driver says of this process, asked without changing anything. */
typedef enum rs_cu_seen {
    RS_CU_UNANSWERED = -1, /* it no longer answers: at exit, after its own teardown */
    RS_CU_UNUSED = 0,      /* never initialised (or no device, or a stub): no context, ever */
    RS_CU_NO_CONTEXT = 1,  /* initialised, no context now (a launcher that counted the GPUs; or,
                            * at exit, a runtime that released its context already) */
    RS_CU_CONTEXT = 2      /* a context is active: on *device, -1 for one made by hand */
} rs_cu_seen;

static rs_cu_seen rs_outside_context(void *driver, int *device)
{
    rs_cu_count_fn count = (rs_cu_count_fn)dlsym(driver, "cuDeviceGetCount");
    rs_cu_get_fn get = (rs_cu_get_fn)dlsym(driver, "cuDeviceGet");
    rs_cu_state_fn state = (rs_cu_state_fn)dlsym(driver, "cuDevicePrimaryCtxGetState");
    rs_cu_current_fn current = (rs_cu_current_fn)dlsym(driver, "cuCtxGetCurrent");
    if (!count || !get || !state) return RS_CU_UNANSWERED;
    int n = 0, r = count(&n);
    if (r == RS_CU_ERROR_DEINITIALIZED) return RS_CU_UNANSWERED;
    if (r != RS_CU_SUCCESS) return RS_CU_UNUSED; /* never initialised (3), no device (100), a stub (34) */
    for (int i = 0; i < n; i++) {
        int dev = 0, active = 0;
        unsigned flags = 0;
        if (get(&dev, i) != RS_CU_SUCCESS) continue;
        r = state(dev, &flags, &active);
        if (r == RS_CU_ERROR_DEINITIALIZED) return RS_CU_UNANSWERED;
        if (r == RS_CU_SUCCESS && active) {
            *device = i;
            return RS_CU_CONTEXT;
        }
    }
    void *ctx = NULL;
    if (current && current(&ctx) == RS_CU_SUCCESS && ctx) {
        *device = -1;
        return RS_CU_CONTEXT;
    }
    return RS_CU_NO_CONTEXT;
}

/* dl_iterate_phdr's callback: stops (1) at a loaded libcudart.so*, the shared CUDA runtime. */
static int rs_outside_shared_runtime_cb(struct dl_phdr_info *info, size_t size, void *found)
{
    (void)size;
    const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    base = base ? base + 1 : info->dlpi_name;
    return *(int *)found = base && strncmp(base, "libcudart.so", 12) == 0;
}

void rs_outside_warn_if_cuda_unseen(int at_exit)
{
    /* once: at finalize, while the driver still answers, or else at exit */
    static atomic_int decided;
    if (atomic_exchange(&decided, 1)) return;
    if (rs_state_intercepted() != 0 || rs_state_ever_started()) return;
    if (!rs_launcher_preloaded() || rs_launcher_rank(0) != 0) return;
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!driver) return;
    int device = -1;
    rs_cu_seen seen = rs_outside_context(driver, &device);
    dlclose(driver);
    /* At finalize the driver's answer is the truth; at exit the runtime (a static one, inside the
     * program) may have released its context already, so only a driver never used is silence. */
    if (seen == RS_CU_UNUSED || (!at_exit && seen != RS_CU_CONTEXT)) return;
    /* With the shared runtime loaded, every cudaMalloc of the process would have come through the
     * preloaded one: a context without one is a launcher's (it asked for a device's properties)
     * or memory from the driver API, and linking with ranksnap::wrap changes neither. */
    int shared = 0;
    dl_iterate_phdr(rs_outside_shared_runtime_cb, &shared);
    if (shared) return;
    /* what follows from a setting is said as such, never guessed as the program's build: ranksnap
     * gave up and said why already; an option that does not parse (RANKSNAP_DRIVER=maybe, read by
     * the driver's interposers alone where nothing started ranksnap) is named here;
     * RANKSNAP_DRIVER=0 is why a driver allocation was not seen */
    if (rs_state_gave_up() != RANKSNAP_OK) return;
    rs_options o;
    if (rs_options_load_env(&o) != RANKSNAP_OK) {
        fprintf(stderr, "ranksnap: nothing was recorded in this process: invalid RANKSNAP_* option: %s\n",
                ranksnap_last_error());
        rs_error_clear();
        return;
    }
    char what[96];
    if (seen == RS_CU_CONTEXT && device >= 0)
        snprintf(what, sizeof what, "holds a CUDA context (device memory) on GPU %d", device);
    else if (seen == RS_CU_CONTEXT)
        snprintf(what, sizeof what, "holds a CUDA context (device memory)");
    else
        snprintf(what, sizeof what, "used CUDA");
    if (!o.driver) {
        fprintf(stderr,
                "ranksnap: this process %s, but none of its allocation calls reached the preloaded "
                "ranksnap, so nothing was recorded: RANKSNAP_DRIVER=0 leaves the CUDA driver's calls, "
                "where its allocations would have been seen, unrecorded.\n",
                what);
        return;
    }
    fprintf(stderr,
            "ranksnap: this process %s, but none of its allocation calls reached the preloaded "
            "ranksnap, so nothing was recorded. It is probably linked with the static CUDA runtime "
            "(nvcc's default), whose cudaMalloc LD_PRELOAD cannot reach (or it allocates through "
            "the driver API). Link it with ranksnap's link-time route instead: CMake "
            "target_link_libraries(app PRIVATE ranksnap::wrap), or $(pkg-config --libs "
            "ranksnap-wrap) on the link line; or build it with nvcc -cudart shared (docs/GPU.md, "
            "\"Interception\").\n",
            what);
}
