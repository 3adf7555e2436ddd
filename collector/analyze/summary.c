/*
 * summary.c — summary.h: one rank's snapshot reduced to what the comparison needs: its peaks, the
 * per-step peak series, the OOM and the allocation sites that held memory at the peak.
 *
 * The snapshot has the state at the end and the history that led there, but not the state at
 * the peak: the levels come from the one history walk (walk.h), whose rules every reader shares.
 * The allocator's own totals win over what the walk finds, which can only add what they lack (a
 * snapshot converted from elsewhere with no totals, or a ring).
 */
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "sat.h"
#include "sites.h"
#include "outside_sites.h"
#include "pools.h"
#include "summary.h"
#include "text.h"
#include "walk.h"

/* Per-step peaks of allocated bytes, the reserved level at the peak, and the highest levels the
 * walk saw. */
static void step_series(rs_walk *w, rs_summary *out)
{
    const rs_snap *s = w->s;
    const rs_snap_history *h = &s->history;

    /* Buckets of `stride` consecutive step numbers; a span too wide for an int32 stride (step
     * numbers that are not a training loop's) gives no series. */
    uint64_t stride = 1, span = 0;
    int series = w->any_step;
    if (series) {
        span = (uint64_t)w->step_max - (uint64_t)w->step_min;
        stride = span / RS_SUMMARY_MAX_STEPS + 1;
        if (span + 1 <= RS_SUMMARY_MAX_STEPS) stride = 1;
        if (stride > INT32_MAX) series = 0;
    }
    for (int k = 0; k < RS_SUMMARY_MAX_STEPS; k++) out->step_peak[k] = RS_SUMMARY_NO_DATA;
    int64_t cur = -1;
    if (w->peak_event < 0) out->reserved_at_peak = w->start_reserved;

    if (rs_walk_levels_exact(w)) {
        /* the first pass's levels and runs of steps say it: no walk (walk.h) */
        if (w->peak_event >= 0)
            out->reserved_at_peak = w->start_reserved + (uint64_t)w->rel_reserved_at_peak;
        for (size_t k = 0; series && k < w->n_runs; k++) {
            cur = (int64_t)(((uint64_t)w->run_step[k] - (uint64_t)w->step_min) / stride);
            uint64_t level = w->start_allocated + (uint64_t)w->run_peak[k];
            if (out->step_peak[cur] == RS_SUMMARY_NO_DATA || level > out->step_peak[cur])
                out->step_peak[cur] = level;
        }
    } else {
        rs_walk_reset(w);
        rs_walk_change c;
        for (uint64_t i = 0; i < h->count; i++) {
            rs_walk_event(w, &c);
            if ((int64_t)i == w->peak_event) out->reserved_at_peak = w->reserved;
            if (!series) continue;
            if (h->action[i] == RS_ACT_STEP)
                cur = (int64_t)(((uint64_t)(int64_t)h->size[i] - (uint64_t)w->step_min) / stride);
            if (cur >= 0 &&
                (out->step_peak[cur] == RS_SUMMARY_NO_DATA || w->allocated > out->step_peak[cur]))
                out->step_peak[cur] = w->allocated;
        }
    }
    if (series) {
        out->n_steps = (int32_t)(span / stride + 1);
        out->step_stride = (int32_t)stride;
        out->step_first = w->step_min;
    }
    if (!w->any_block_event) out->reserved_at_peak = s->totals.reserved_bytes_peak;
    if (w->peak_allocated > out->peak_allocated) out->peak_allocated = w->peak_allocated;
    if (w->peak_reserved > out->peak_reserved) out->peak_reserved = w->peak_reserved;
}

int rs_summary_outside_only(const rs_summary *s)
{
    return s->peak_allocated == 0 && s->peak_reserved == 0 && s->recorded_outside_peak > 0;
}

uint64_t rs_summary_peak(const rs_summary *s)
{
    return rs_summary_outside_only(s) ? s->recorded_outside_peak : s->peak_allocated;
}

uint64_t rs_summary_held(const rs_summary *s)
{
    return rs_sat_add_u64(rs_summary_peak(s), s->pools_free_at_peak);
}

int rs_summary_has_data(const rs_summary *s)
{
    return s->oom || s->peak_allocated != 0 || s->peak_reserved != 0 || s->recorded_outside_peak != 0;
}

uint64_t rs_summary_capacity(const rs_summary *s)
{
    uint64_t c = s->memory_limit ? s->memory_limit : s->device_total;
    if (s->oom && !c) c = s->oom_memory_limit ? s->oom_memory_limit : s->oom_device_total;
    return c;
}

uint64_t rs_summary_fragmentation(const rs_summary *s)
{
    return rs_sat_sub_u64(rs_sat_sub_u64(s->reserved_at_peak, s->peak_allocated), s->pools_free_at_peak);
}

/* What the private pools held when allocated peaked (pools.h); nothing to walk without them. */
static void pools_at_peak(rs_walk *w, rs_summary *out)
{
    rs_pools_use use;
    if (!rs_pools_any(w->s) || rs_pools_at(w, w->peak_event, &use) != RANKSNAP_OK) return;
    out->pools_at_peak = use.reserved;
    out->pools_free_at_peak = use.reserved - use.allocated;
}

const char *rs_summary_outside_label_name(const char *label)
{
    static const char *const names[][2] = {{"nccl", "NCCL"},
                                           {"nccl_mem", "ncclMemAlloc"},
                                           {"cuda_mempool", "cudaMallocFromPoolAsync"},
                                           {"program", "the program (at the driver)"},
                                           {"cublas", "cuBLAS"},
                                           {"cudnn", "cuDNN"},
                                           {"torch", "PyTorch outside its allocator"},
                                           {"managed", "managed memory"},
                                           {"cuda_pool_cached", "CUDA memory pools (reserved, unused)"},
                                           {"other", "other holders"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(label, names[i][0])) return names[i][1];
    return label;
}

/* The holders that hold something, largest first (a few: insertion sort). A stream-ordered
 * pool's allocations in a rank recorded natively ("async_pool") are its allocator's, not
 * outside it (summarize_async_pool). */
static void summarize_outside_labels(const rs_snap_totals *t, rs_summary *out)
{
    int n = 0;
    for (size_t i = 0; i < t->n_outside_labels; i++) {
        const rs_snap_outside_label *l = &t->outside_labels[i];
        if (!l->bytes || !strcmp(l->label, "async_pool")) continue;
        int at = n < RS_SUMMARY_MAX_OUTSIDE_LABELS ? n : RS_SUMMARY_MAX_OUTSIDE_LABELS - 1;
        if (n == RS_SUMMARY_MAX_OUTSIDE_LABELS && out->outside_labels[at].bytes >= l->bytes) continue;
        while (at > 0 && out->outside_labels[at - 1].bytes < l->bytes) {
            out->outside_labels[at] = out->outside_labels[at - 1];
            at--;
        }
        rs_text_copy_head(out->outside_labels[at].label, sizeof out->outside_labels[at].label, l->label);
        out->outside_labels[at].bytes = l->bytes;
        if (n < RS_SUMMARY_MAX_OUTSIDE_LABELS) n++;
    }
    out->n_outside_labels = n;
}

/* How the steps were numbered, cut to the summary's field: when it ends with the setting to use
 * ("; try RANKSNAP_STEP_ON=MPI_Allreduce:1"), the middle goes, never that setting. */
static void copy_steps_from(char *dst, size_t cap, const char *src)
{
    const char *try = strstr(src, "; try ");
    size_t n = strlen(src), tail = try ? strlen(try) : 0;
    if (n < cap || !try || tail + 8 >= cap) {
        rs_text_copy_head(dst, cap, src);
        return;
    }
    rs_text_copy_head(dst, cap - tail - 3, src);
    size_t k = strlen(dst);
    memcpy(dst + k, "...", 3);
    memcpy(dst + k + 3, try, tail + 1);
}

void rs_summary_of(const rs_snap *s, rs_summary *out)
{
    rs_summary_of_sites(s, out, NULL);
}

void rs_summary_sites_free(rs_summary_sites *sites)
{
    free(sites->sites);
    free(sites->paths);
    memset(sites, 0, sizeof *sites);
}

/* What the outside bytes are measured against, and the rank's device as NVML listed it. */
static void summarize_device_share(const rs_snap *s, rs_summary *out)
{
    const rs_snap_totals *t = &s->totals;
    out->outside_of = (int8_t)t->outside_of;
    out->outside_why = (uint8_t)(t->outside_of == RS_OUTSIDE_DEVICE ? t->outside_why : 0);
    /* a simulated device is each process's own, whatever its name */
    if (!(s->backend && !strcmp(s->backend, "sim")) &&
        rs_text_uuid_parse(s->device.uuid, out->device_uuid) != 0)
        memset(out->device_uuid, 0, sizeof out->device_uuid);
    const rs_snap_device *d = &s->device;
    out->device_processes = (uint16_t)(d->processes < UINT16_MAX ? d->processes : UINT16_MAX);
    out->device_others_unknown =
        (uint16_t)(d->others_unknown < UINT16_MAX ? d->others_unknown : UINT16_MAX);
    uint64_t kib = (d->others_bytes + 512) / 1024;
    out->device_others_kib = (uint32_t)(kib < UINT32_MAX ? kib : UINT32_MAX);
}

/* A rank recorded natively whose framework's allocator served it from a stream-ordered pool
 * (PyTorch's backend:cudaMallocAsync): that pool is its allocator. Its peak allocated is the
 * pool's peak of live bytes (the rank's totals, else the history's async events), its sites and
 * step those of the history's peak, its peak reserved the pool's reserved bytes read at that
 * peak, else (not read, or the history's peak is the higher) its peak allocated, as async_pool
 * says. NCCL's and other driver memory stay outside. The per-step series, the allocator's, is
 * dropped: it would read 0 at every step. */
static void summarize_async_pool(const rs_snap *s, const rs_site_picker *pk, rs_summary *out,
                                 rs_summary_sites *sites)
{
    const rs_snap_totals *t = &s->totals;
    uint64_t walked = 0;
    int64_t step = -1;
    rs_site top[RS_SUMMARY_MAX_SITES];
    rs_site_path *paths = sites && pk ? calloc(RS_SUMMARY_MAX_SITES, sizeof *paths) : NULL;
    int n = 0;
    if (pk) rs_outside_sites_at_peak(s, pk, 1, &walked, top, NULL, RS_SUMMARY_MAX_SITES, &n, &step, paths);
    /* an allocator of ranksnap's own served the rank too: not this mode, nothing to replace */
    if ((!walked && !t->async_bytes_peak) || out->peak_allocated || out->peak_reserved) {
        free(paths);
        return;
    }
    int pool = t->async_reserved_at_peak && t->async_bytes_peak >= walked;
    out->async_pool = (int8_t)(pool ? RS_SUMMARY_ASYNC_POOL_RESERVED : RS_SUMMARY_ASYNC_AS_ALLOCATED);
    out->peak_allocated = t->async_bytes_peak > walked ? t->async_bytes_peak : walked;
    out->peak_reserved = pool ? t->async_reserved_at_peak : out->peak_allocated;
    out->reserved_at_peak = out->peak_reserved;
    /* the totals' peak came before the history: its step and time are not known */
    out->peak_step = walked == out->peak_allocated ? step : -1;
    out->peak_time_us = 0;
    out->n_steps = 0;
    for (int k = 0; k < RS_SUMMARY_MAX_STEPS; k++) out->step_peak[k] = RS_SUMMARY_NO_DATA;
    out->n_sites = n;
    memcpy(out->sites, top, (size_t)n * sizeof *top);
    if (sites) { /* the comparison takes the summary's sites (site_delta.c), with these paths */
        free(sites->sites);
        free(sites->paths);
        sites->sites = NULL;
        sites->paths = paths;
        sites->n = 0;
        sites->ok = 0;
    }
}

void rs_summary_of_sites(const rs_snap *s, rs_summary *out, rs_summary_sites *sites)
{
    memset(out, 0, sizeof *out);
    if (sites) memset(sites, 0, sizeof *sites);
    const rs_snap_totals *t = &s->totals;
    out->rank = s->rank;
    out->world_size = s->world_size;
    out->complete = s->complete;
    /* ring_decode.c names the backend of what it rebuilds so */
    out->recovered = s->backend && strcmp(s->backend, "recovered ring") == 0;
    out->oom = s->has_oom;
    out->comms_unreadable = s->comms_error[0] != '\0';
    out->end = s->end;
    out->driver = s->recorder.driver;
    out->totals_only = s->totals_only;
    rs_text_copy_head(out->host, sizeof out->host, s->host ? s->host : "");
    rs_text_copy_head(out->job, sizeof out->job, s->job ? s->job : "");
    copy_steps_from(out->steps_from, sizeof out->steps_from, s->time.steps_from ? s->time.steps_from : "");
    rs_text_copy_head(out->recorded_by, sizeof out->recorded_by, s->time.recorded_by ? s->time.recorded_by : "");
    out->peak_allocated = t->allocated_bytes_peak;
    out->peak_reserved = t->reserved_bytes_peak;
    out->reserved_at_peak = t->reserved_bytes_peak;
    out->outside_peak = t->outside_bytes_peak;
    out->outside_end = t->outside_bytes_end;
    summarize_outside_labels(t, out);
    summarize_device_share(s, out);
    out->peak_step = t->peak_step;
    out->clock_offset_us = s->time.clock_offset_us;
    out->device_total = t->device_total_bytes ? t->device_total_bytes : s->device.total_bytes;
    out->memory_limit = t->memory_limit_bytes ? t->memory_limit_bytes : s->allocator.memory_limit;
    out->peak_time_us = t->peak_time_us
                            ? rs_sat_add_i64(rs_sat_i64(t->peak_time_us), s->time.clock_offset_us)
                            : 0;
    out->events = s->history.count;
    out->dropped = s->history.dropped > t->events_dropped ? s->history.dropped : t->events_dropped;
    for (int k = 0; k < RS_SUMMARY_MAX_STEPS; k++) out->step_peak[k] = RS_SUMMARY_NO_DATA;
    out->step_stride = 1;
    if (s->has_oom) {
        out->oom_requested = s->oom.requested;
        out->oom_device_free = s->oom.device_free;
        out->oom_device_total = s->oom.device_total;
        out->oom_allocated = s->oom.allocated;
        out->oom_reserved = s->oom.reserved;
        out->oom_memory_limit = s->oom.memory_limit;
        out->oom_step = s->oom.step;
    }

    if (s->totals_only) { /* no history, no frames: the totals are all there is */
        summarize_async_pool(s, NULL, out, sites);
        return;
    }
    /* one classification of the frames for the OOM's site and the sites at the peak */
    rs_site_picker pk;
    rs_site_picker_init(&pk, s);
    if (s->has_oom)
        rs_site_pick_path(&pk, s->oom.stack, &out->oom_site, sites ? &sites->oom_path : NULL);
    if (sites) sites->has_pool = rs_pools_site(s, &pk, &sites->pool);
    rs_outside_sites_at_peak(s, &pk, 0, &out->recorded_outside_peak, out->outside_sites,
                             out->outside_site_owners, RS_SUMMARY_MAX_OUTSIDE_SITES,
                             &out->n_outside_sites, NULL, NULL);
    /* Without memory for the walk the summary keeps the totals: still a fair summary. */
    rs_walk w;
    if (rs_walk_init(&w, s) == RANKSNAP_OK) {
        step_series(&w, out);
        pools_at_peak(&w, out);
        rs_site *list = NULL;
        rs_site_path *paths = NULL;
        size_t n = 0;
        if (rs_site_list_at_moment_by(&w, &pk, &list, sites ? &paths : NULL, &n) == RANKSNAP_OK) {
            out->n_sites = (int32_t)(n < RS_SUMMARY_MAX_SITES ? n : RS_SUMMARY_MAX_SITES);
            memcpy(out->sites, list, (size_t)out->n_sites * sizeof *list);
            if (sites) {
                sites->ok = 1;
                sites->n = n;
                sites->sites = list;
                sites->paths = paths;
                list = NULL;
            }
        }
        free(list);
        rs_walk_free(&w);
    }
    summarize_async_pool(s, &pk, out, sites);
    rs_site_picker_free(&pk);
}
