/*
 * devices.c — a rank's devices (devices.h): the allocator and backend of each device the program
 * allocates on, made at the first allocation there.
 *
 * The table is indexed by device ordinal and written only under devs_mu; readers on the hot path
 * load a slot with acquire order and never lock. A device, once made, lives until the runtime is
 * destroyed (or retired with it), so a pointer read from the table stays valid for as long as the
 * instance it came from.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"
#include "backend_sim.h"
#include "device_share.h"
#include "devices.h"
#include "errors.h"
#include "log.h"
#include "ring_file.h"
#include "state.h"

ranksnap_status rs_devices_init(rs_runtime *rt, rs_alloc_observer observer)
{
    rt->observer = observer;
    rs_backend_kind kind = rt->opts.backend;
    if (kind == RS_BACKEND_AUTO) kind = rs_backend_cuda_available() ? RS_BACKEND_CUDA : RS_BACKEND_SIM;
    if (kind == RS_BACKEND_CUDA) RS_CHECK(rs_backend_cuda_check());
    rt->backend_kind = kind;
    rt->is_cuda = kind == RS_BACKEND_CUDA;
    /* Every allocation asks for the current device: asked of CUDA only where the answer can
     * change. The sim device stands in for whatever device a CUDA runtime in the process (a
     * test's stand-in) has current; looked up by name once, here, since dlsym walks every loaded
     * object's symbols under the loader's lock, several times the cost of an allocation. */
    int n_visible = 0;
    if (rt->is_cuda) {
        n_visible = rs_backend_cuda_device_count();
    } else {
        int (*count)(int *);
        *(void **)(&count) = dlsym(RTLD_DEFAULT, "cudaGetDeviceCount");
        *(void **)(&rt->sim_get_device) = dlsym(RTLD_DEFAULT, "cudaGetDevice");
        if (!count || count(&n_visible) != 0) n_visible = 0;
    }
    rt->one_device = n_visible <= 1 || (!rt->is_cuda && !rt->sim_get_device);
    int rc = pthread_mutex_init(&rt->devs_mu, NULL);
    if (rc != 0)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "ranksnap_init: pthread_mutex_init failed (%s)",
                        strerror(rc));
    rt->devs_mu_ok = 1;
    return rs_block_map_create(&rt->block_map);
}

void rs_devices_destroy(rs_runtime *rt)
{
    /* the allocators share rt->lock: none is in use any more when the runtime goes */
    for (size_t i = rs_devices_count(rt); i-- > 0;) {
        rs_rt_device *d = rs_devices_at(rt, i);
        if (d->alloc) rs_alloc_destroy(d->alloc);
        if (d->backend) d->backend->ops->destroy(d->backend);
        free(d);
    }
    atomic_store(&rt->n_devs, 0);
    atomic_store(&rt->any_alloc, NULL);
    rs_block_map_destroy(rt->block_map);
    rt->block_map = NULL;
    if (rt->devs_mu_ok) pthread_mutex_destroy(&rt->devs_mu);
    rt->devs_mu_ok = 0;
}

size_t rs_devices_count(const rs_runtime *rt)
{
    return (size_t)atomic_load_explicit(&rt->n_devs, memory_order_acquire);
}

rs_rt_device *rs_devices_at(const rs_runtime *rt, size_t i)
{
    return atomic_load_explicit(&rt->devs[rt->dev_order[i]], memory_order_acquire);
}

/* Makes device `index`'s backend and allocator; devs_mu held. */
static ranksnap_status rs_device_make(rs_runtime *rt, int index, rs_rt_device **out)
{
    *out = NULL;
    rs_rt_device *d = calloc(1, sizeof *d);
    if (!d) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "ranksnap: out of host memory for device %d", index);
    d->rt = rt;
    d->index = index;
    ranksnap_status st = rt->is_cuda ? rs_backend_cuda_create(index, &d->backend)
                                     : rs_backend_sim_create_on(index, rt->opts.sim_capacity, &d->backend);
    if (st == RANKSNAP_OK) st = d->backend->ops->device_info(d->backend, &d->info);
    if (st == RANKSNAP_OK) {
        /* the baseline of finalize's "nothing was intercepted" check */
        uint64_t free_b = 0, total_b = 0;
        if (d->backend->ops->mem_info(d->backend, &free_b, &total_b) == RANKSNAP_OK)
            d->outside_at_init = total_b > free_b ? total_b - free_b : 0;
        /* NVML (outside.h) is loaded now, beside the new context, so that no dump is the first
         * to load it: a fatal signal's has a bounded time */
        if (rt->is_cuda) {
            rs_device_share sh;
            char why[200];
            (void)rs_device_share_query(rt->opts.nvml, d->info.uuid, &sh, why, sizeof why);
        }
        rs_alloc_config cfg = {
            .memory_limit = rt->memory_limit,
            .conf = &rt->opts.alloc_conf,
            .device_index = index,
            .lock = &rt->lock,
            .block_map = rt->block_map,
            .observer = rt->observer,
            .observer_ctx = d,
        };
        st = rs_alloc_create(d->backend, &cfg, &d->alloc);
    }
    if (st != RANKSNAP_OK) {
        if (d->backend) d->backend->ops->destroy(d->backend);
        free(d);
        return st;
    }
    rs_mutex_lock(&rt->lock);
    int64_t step = rt->step;
    rs_mutex_unlock(&rt->lock);
    rs_alloc_set_step(d->alloc, step);
    if (rs_devices_count(rt) == 0 && rt->ring_file)
        rs_ring_file_set_device(rt->ring_file, d->info.name, d->info.total_bytes);
    RS_INFO(RS_SUB_INIT, "device %d: %s, %llu bytes, backend %s, limit %llu", index, d->info.name,
            (unsigned long long)d->info.total_bytes, d->backend->ops->name,
            (unsigned long long)rs_alloc_memory_limit(d->alloc));
    *out = d;
    return RANKSNAP_OK;
}

ranksnap_status rs_devices_get(rs_runtime *rt, int index, rs_rt_device **out)
{
    *out = NULL;
    if (index < 0 || index >= RS_MAX_DEVICES)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "ranksnap: device %d is out of range (0..%d)",
                        index, RS_MAX_DEVICES - 1);
    rs_rt_device *d = atomic_load_explicit(&rt->devs[index], memory_order_acquire);
    if (__builtin_expect(d != NULL, 1)) {
        *out = d;
        return RANKSNAP_OK;
    }
    ranksnap_status st = RANKSNAP_OK;
    pthread_mutex_lock(&rt->devs_mu);
    d = atomic_load_explicit(&rt->devs[index], memory_order_acquire);
    if (!d && (st = rs_device_make(rt, index, &d)) == RANKSNAP_OK) {
        int n = atomic_load_explicit(&rt->n_devs, memory_order_relaxed);
        rt->dev_order[n] = index;
        atomic_store_explicit(&rt->devs[index], d, memory_order_release);
        if (n == 0) atomic_store_explicit(&rt->any_alloc, d->alloc, memory_order_release);
        atomic_store_explicit(&rt->n_devs, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&rt->devs_mu);
    *out = d;
    return st;
}

int rs_devices_current_known(const rs_runtime *rt, int *device)
{
    if (!rt->is_cuda) return 0;
    if (rt->one_device) {
        *device = 0;
        return 1;
    }
    return rs_backend_cuda_context_device(device);
}

int rs_devices_current(rs_runtime *rt)
{
    int dev = 0;
    if (rt->one_device || rs_devices_current_known(rt, &dev)) return dev;
    if (rt->is_cuda) return rs_backend_cuda_current_device(&dev) == RANKSNAP_OK ? dev : 0;
    if (rt->sim_get_device(&dev) != 0) dev = 0;
    return dev;
}

ranksnap_status rs_devices_get_current(rs_runtime *rt, rs_rt_device **out)
{
    return rs_devices_get(rt, rs_devices_current(rt), out);
}

rs_rt_device *rs_devices_owner(const rs_runtime *rt, const void *ptr)
{
    /* one shared block map: any device's allocator finds the one that handed `ptr` out */
    if (rs_devices_count(rt) == 0) return NULL;
    rs_alloc *o = rs_alloc_owner(rs_devices_at(rt, 0)->alloc, ptr);
    return o ? rs_alloc_observer_ctx(o) : NULL;
}

rs_rt_device *rs_devices_primary(const rs_runtime *rt)
{
    rs_rt_device *best = NULL;
    uint64_t best_peak = 0;
    size_t n = rs_devices_count(rt);
    for (size_t i = 0; i < n; i++) {
        rs_rt_device *d = rs_devices_at(rt, i);
        ranksnap_stats s;
        memset(&s, 0, sizeof s);
        rs_alloc_get_stats(d->alloc, &s);
        if (!best || s.reserved_bytes_peak > best_peak) {
            best = d;
            best_peak = s.reserved_bytes_peak;
        }
    }
    return best;
}

void rs_devices_stats(const rs_runtime *rt, ranksnap_stats *out)
{
    memset(out, 0, sizeof *out);
    out->peak_step = -1;
    uint64_t top_peak = 0;
    int any = 0;
    size_t n = rs_devices_count(rt);
    for (size_t i = 0; i < n; i++) {
        ranksnap_stats s;
        memset(&s, 0, sizeof s);
        rs_alloc_get_stats(rs_devices_at(rt, i)->alloc, &s);
#define RS_ADD(f) out->f += s.f
        RS_ADD(allocated_bytes);
        RS_ADD(allocated_bytes_peak);
        RS_ADD(requested_bytes);
        RS_ADD(requested_bytes_peak);
        RS_ADD(reserved_bytes);
        RS_ADD(reserved_bytes_peak);
        RS_ADD(active_bytes);
        RS_ADD(active_bytes_peak);
        RS_ADD(inactive_split_bytes);
        RS_ADD(num_allocs);
        RS_ADD(num_frees);
        RS_ADD(num_alloc_retries);
        RS_ADD(num_ooms);
        RS_ADD(num_segment_allocs);
        RS_ADD(num_segment_frees);
        RS_ADD(num_sync_all_streams);
#undef RS_ADD
        if (!any || s.allocated_bytes_peak > top_peak) {
            top_peak = s.allocated_bytes_peak;
            out->peak_time_us = s.peak_time_us;
            out->peak_step = s.peak_step;
            any = 1;
        }
    }
    rs_rt_device *p = rs_devices_primary(rt);
    if (p) out->device_total_bytes = p->info.total_bytes;
    out->memory_limit_bytes = rt->memory_limit;
}

void rs_devices_set_step(const rs_runtime *rt, int64_t step)
{
    size_t n = rs_devices_count(rt);
    for (size_t i = 0; i < n; i++) rs_alloc_set_step(rs_devices_at(rt, i)->alloc, step);
}

void rs_devices_reset_peak_stats(const rs_runtime *rt)
{
    size_t n = rs_devices_count(rt);
    for (size_t i = 0; i < n; i++) rs_alloc_reset_peak_stats(rs_devices_at(rt, i)->alloc);
}

void rs_devices_set_memory_limit(rs_runtime *rt, uint64_t limit)
{
    /* under devs_mu, so that a device made meanwhile takes the new limit too */
    pthread_mutex_lock(&rt->devs_mu);
    rt->memory_limit = limit;
    size_t n = rs_devices_count(rt);
    for (size_t i = 0; i < n; i++) rs_alloc_set_memory_limit(rs_devices_at(rt, i)->alloc, limit);
    pthread_mutex_unlock(&rt->devs_mu);
}
