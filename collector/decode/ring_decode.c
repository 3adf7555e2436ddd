/*
 * ring_decode.c — recovering a rank from the ring file it left behind (common/ring_format.h).
 *
 * A ring file outlives its process: after SIGKILL, or the kernel's OOM killer, it is all that is
 * left. It holds the events still in the ring, the segment table and the identity of the rank,
 * but no stack table (that lived in the process's heap): the recovered snapshot has the history,
 * the segments with the blocks the history shows alive, totals from the one history walk
 * (collector/model/walk.h), and is marked complete: false. Every field is checked against the
 * file's size before it is used; a torn or foreign file is an error naming the file and what was
 * wrong. Annotations (indexes into a table of names the process kept in its heap) are left out,
 * and what is handed out passes the model's one check (collector/model/snap_check.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc_conf.h"
#include "errors.h"
#include "file_map.h"
#include "file_read.h"
#include "ring_decode.h"
#include "ring_format.h"
#include "rsnap_decode.h"
#include "sat.h"
#include "snap_check.h"
#include "walk.h"

static char *rs_dup_n(const char *s, size_t max)
{
    size_t n = strnlen(s, max);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static int rs_cmp_seg(const void *a, const void *b)
{
    const rs_snap_segment *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int rs_cmp_block(const void *a, const void *b)
{
    const rs_snap_block *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The recorder keeps a free_requested and the free_completed that followed at once as one event
 * (flag 1, RS_EV_COMPLETED): the history gets both back, at the same time, as in a snapshot. */
static int rs_ring_expand(rs_snap *s, const rs_ring_event *ev, uint64_t first, uint64_t cap,
                          uint64_t completed)
{
    rs_snap_history *hi = &s->history;
    uint64_t raw = hi->count, n = raw + completed;
    uint64_t *t = malloc(n * sizeof *t), *a = malloc(n * sizeof *a), *z = malloc(n * sizeof *z);
    uint8_t *act = malloc(n);
    uint32_t *st = malloc(n * sizeof *st), *sk = calloc(n, sizeof *sk);
    if (!t || !a || !z || !act || !st || !sk) {
        free(t), free(a), free(z), free(act), free(st), free(sk);
        return -1;
    }
    uint64_t j = 0;
    for (uint64_t i = 0; i < raw; i++) {
        int two = hi->action[i] == RS_ACT_FREE_REQUESTED && (ev[(first + i) % cap].flags & 1u);
        for (int k = 0; k <= two; k++, j++) {
            t[j] = hi->time_us[i];
            a[j] = hi->addr[i];
            z[j] = hi->size[i];
            st[j] = hi->stream[i];
            act[j] = k ? RS_ACT_FREE_COMPLETED : hi->action[i];
        }
    }
    free(hi->time_us), free(hi->addr), free(hi->size), free(hi->stream), free(hi->action), free(hi->stack);
    hi->time_us = t, hi->addr = a, hi->size = z, hi->stream = st, hi->action = act, hi->stack = sk;
    hi->count = n;
    return 0;
}

/* The ring keeps annotations as an index into the process's table of names, which died with the
 * process: an index into nothing, so the recovered history goes without them. */
static void rs_ring_drop_annotations(rs_snap_history *hi)
{
    uint64_t w = 0;
    for (uint64_t i = 0; i < hi->count; i++) {
        if (hi->action[i] == RS_ACT_ANNOTATION_BEGIN || hi->action[i] == RS_ACT_ANNOTATION_END) continue;
        hi->time_us[w] = hi->time_us[i];
        hi->action[w] = hi->action[i];
        hi->addr[w] = hi->addr[i];
        hi->size[w] = hi->size[i];
        hi->stream[w] = hi->stream[i];
        hi->stack[w] = hi->stack[i];
        w++;
    }
    hi->count = w;
}

/* Fills the model from a validated file image. */
static ranksnap_status rs_ring_model(const char *path, const unsigned char *img, size_t len,
                                     rs_snap **out)
{
    const rs_ring_header *h = (const rs_ring_header *)img;
    const rs_ring_segment *segs = (const rs_ring_segment *)(img + h->header_size);
    const rs_ring_event *ev = (const rs_ring_event *)(img + h->header_size + h->max_segments * sizeof(rs_ring_segment));
    uint64_t count = h->total < h->capacity ? h->total : h->capacity;
    uint64_t first = h->total < h->capacity ? 0 : h->total % h->capacity;
    (void)len;
    /* the settings the rank ran under, so that its replay is under them too */
    char text[RS_RING_ALLOC_CONF_MAX + 1], why[256];
    memcpy(text, h->alloc_conf, sizeof h->alloc_conf);
    text[sizeof h->alloc_conf] = '\0';
    rs_alloc_conf conf;
    rs_alloc_conf_reset(&conf);
    if (rs_alloc_conf_parse(&conf, text, RS_CONF_LENIENT, why, sizeof why) != 0)
        return rs_error(RANKSNAP_ERR_FORMAT, "%s: the allocator settings in the ring's header "
                        "(\"%.200s\") do not parse: %s", path, text, why);

    rs_snap *s = calloc(1, sizeof *s);
    if (!s) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: out of host memory", path);
    s->version = 1;
    s->rank = h->rank;
    s->world_size = h->world_size;
    s->pid = h->pid;
    s->complete = 0;
    s->host = rs_dup_n(h->host, sizeof h->host);
    s->job = rs_dup_n(h->job, sizeof h->job);
    s->backend = rs_dup_n("recovered ring", 32);
    s->device.name = rs_dup_n(h->device_name, sizeof h->device_name);
    s->device.uuid = rs_dup_n("", 1);
    s->device.total_bytes = h->device_total;
    s->recorder.stacks = rs_dup_n("none", 8);
    s->recorder.driver = -1;
    s->recorder.max_entries = h->capacity;
    s->allocator.memory_limit = h->memory_limit;
    s->allocator.conf = conf;
    s->allocator.max_split_size = rs_alloc_conf_max_split(&conf);
    s->allocator.large_buffer = rs_alloc_conf_large_segment(&conf);
    s->allocator.min_block_size = 512;
    s->time.clock_offset_us = h->clock_offset_us;
    s->time.current_step = h->step;
    if (h->steps_from[0]) s->time.steps_from = rs_dup_n(h->steps_from, sizeof h->steps_from);
    s->end = h->end;
    s->end.flags &= RS_END_KNOWN_;
    s->n_streams = h->n_streams ? (size_t)h->n_streams : 1;
    s->streams = calloc(s->n_streams, sizeof *s->streams);
    rs_snap_history *hi = &s->history;
    hi->count = count;
    hi->capacity = h->capacity;
    hi->dropped = h->total - count;
    size_t n = count ? (size_t)count : 1;
    hi->time_us = calloc(n, sizeof *hi->time_us);
    hi->action = calloc(n, sizeof *hi->action);
    hi->addr = calloc(n, sizeof *hi->addr);
    hi->size = calloc(n, sizeof *hi->size);
    hi->stream = calloc(n, sizeof *hi->stream);
    hi->stack = calloc(n, sizeof *hi->stack);
    if (!s->host || !s->job || !s->backend || !s->device.name || !s->device.uuid ||
        (h->steps_from[0] && !s->time.steps_from) ||
        !s->recorder.stacks || !s->streams || !hi->time_us || !hi->action || !hi->addr ||
        !hi->size || !hi->stream || !hi->stack) {
        rs_snap_free(s);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: out of host memory", path);
    }
    for (size_t i = 0; i < s->n_streams && h->n_streams; i++) s->streams[i] = h->streams[i];
    uint64_t completed = 0; /* free_requested events flagged RS_EV_COMPLETED (rank/recorder.h) */

    /* events, oldest first */
    int64_t step = -1;
    for (uint64_t i = 0; i < count; i++) {
        const rs_ring_event *e = &ev[(first + i) % h->capacity];
        hi->time_us[i] = e->time_us;
        hi->action[i] = e->action;
        hi->addr[i] = e->addr;
        hi->size[i] = e->size;
        hi->stream[i] = e->stream < s->n_streams ? e->stream : 0;
        hi->stack[i] = 0; /* the stack table died with the process */
        if (e->action == RS_ACT_FREE_REQUESTED && (e->flags & 1u)) completed++;
        switch (e->action) {
        case RS_ACT_ALLOC: s->totals.num_allocs++; break;
        case RS_ACT_FREE_REQUESTED: s->totals.num_frees++; break;
        case RS_ACT_SEGMENT_ALLOC: s->totals.num_segment_allocs++; break;
        case RS_ACT_SEGMENT_FREE: s->totals.num_segment_frees++; break;
        case RS_ACT_STEP: step = rs_sat_i64(e->size); break;
        case RS_ACT_OOM:
            s->has_oom = 1;
            s->totals.num_ooms++;
            s->oom.requested = e->size;
            s->oom.device_free = e->addr;
            s->oom.time_us = e->time_us;
            s->oom.step = step;
            s->oom.stream = hi->stream[i];
            break;
        default: break;
        }
        s->time_us = e->time_us;
    }

    /* segments, from the segment table */
    size_t nseg = 0;
    for (uint64_t i = 0; i < h->max_segments; i++)
        if (segs[i].addr && segs[i].addr != UINT64_MAX) nseg++;
    s->segments = calloc(nseg ? nseg : 1, sizeof *s->segments);
    if (!s->segments) {
        rs_snap_free(s);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: out of host memory", path);
    }
    for (uint64_t i = 0; i < h->max_segments; i++) {
        if (!segs[i].addr || segs[i].addr == UINT64_MAX) continue;
        rs_snap_segment *g = &s->segments[s->n_segments++];
        g->addr = segs[i].addr;
        g->total_size = segs[i].size;
        g->stream = segs[i].stream < s->n_streams ? segs[i].stream : 0;
        g->is_small = segs[i].is_small != 0;
    }
    qsort(s->segments, s->n_segments, sizeof *s->segments, rs_cmp_seg);

    /* The one history walk (walk.h), over segments that have no blocks yet: the blocks it leaves
     * live are those the history shows alive at the end; its levels, relative to the window's
     * start, are all the ring says about allocated bytes. */
    rs_walk w;
    if (rs_walk_init(&w, s) != RANKSNAP_OK) {
        rs_snap_free(s);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: out of host memory", path);
    }
    uint64_t window_start = h->total - count;
    /* the allocator's totals at the last step boundary anchor the levels when that step is
     * inside the window */
    int anchored = h->step_total >= window_start && h->step_total <= h->total &&
                   h->allocated_peak_at_step;
    uint64_t at = anchored ? h->step_total - window_start : 0;
    int64_t alloc_min = 0, alloc_peak = 0, reserved_min = 0, reserved_peak = 0;
    int64_t at_level = 0, after_peak = 0; /* relative levels at event `at`, and the highest since */
    uint64_t peak_time = count ? hi->time_us[0] : 0;
    int64_t peak_step = -1;
    step = -1;
    rs_walk_change c;
    for (uint64_t i = 0; i < count; i++) {
        if (i == at) at_level = after_peak = w.rel_allocated;
        rs_walk_event(&w, &c);
        if (hi->action[i] == RS_ACT_STEP) step = rs_sat_i64(hi->size[i]);
        int64_t la = w.rel_allocated, lr = w.rel_reserved;
        if (la < alloc_min) alloc_min = la;
        if (lr < reserved_min) reserved_min = lr;
        if (la > alloc_peak) {
            alloc_peak = la;
            peak_time = hi->time_us[i];
            peak_step = step;
        }
        if (lr > reserved_peak) reserved_peak = lr;
        if (i >= at && la > after_peak) after_peak = la;
    }
    int64_t alloc_delta = w.rel_allocated, reserved_delta = w.rel_reserved;

    /* the blocks alive at the end, into the segments that hold them */
    uint64_t live_bytes = 0;
    size_t it = 0;
    ranksnap_status st = RANKSNAP_OK;
    for (const rs_walk_block *b; st == RANKSNAP_OK && (b = rs_walk_next_live(&w, &it));) {
        size_t lo = 0, hi_i = s->n_segments;
        while (lo < hi_i) {
            size_t mid = (lo + hi_i) / 2;
            if (rs_sat_add_u64(s->segments[mid].addr, s->segments[mid].total_size) <= b->addr)
                lo = mid + 1;
            else
                hi_i = mid;
        }
        if (lo == s->n_segments || s->segments[lo].addr > b->addr) continue;
        rs_snap_segment *g = &s->segments[lo];
        rs_snap_block *nb = realloc(g->blocks, (g->n_blocks + 1) * sizeof *nb);
        if (!nb) {
            st = RANKSNAP_ERR_HOST_MEMORY;
            break;
        }
        g->blocks = nb;
        uint64_t req = rs_walk_request(&w, b);
        nb[g->n_blocks++] = (rs_snap_block){b->addr, b->size, req, 0, RS_BLOCK_ACTIVE_ALLOCATED};
        g->allocated_size = rs_sat_add_u64(g->allocated_size, b->size);
        g->active_size = rs_sat_add_u64(g->active_size, b->size);
        g->requested_size = rs_sat_add_u64(g->requested_size, req);
        live_bytes = rs_sat_add_u64(live_bytes, b->size);
    }
    rs_walk_free(&w);
    if (st != RANKSNAP_OK) {
        rs_snap_free(s);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: out of host memory", path);
    }
    /* blocks found in the order of the table: the model wants them in address order */
    for (size_t i = 0; i < s->n_segments; i++)
        if (s->segments[i].n_blocks > 1) /* none: blocks is NULL, which qsort may not be given */
            qsort(s->segments[i].blocks, s->segments[i].n_blocks, sizeof(rs_snap_block), rs_cmp_block);

    /* Levels at the window's start are unknown when the ring wrapped. The allocator's totals at
     * the last step boundary anchor them when that step is inside the window; otherwise they are
     * at least what makes every walked level non-negative, and the live blocks found above. All
     * in saturating arithmetic: every number here comes from the file. */
    int64_t alloc_base = rs_sat_neg_i64(alloc_min);
    int64_t reserved_base = rs_sat_add_i64(rs_sat_i64(h->reserved_bytes), rs_sat_neg_i64(reserved_delta));
    if (rs_sat_add_i64(alloc_base, alloc_delta) < rs_sat_i64(live_bytes))
        alloc_base = rs_sat_add_i64(rs_sat_i64(live_bytes), rs_sat_neg_i64(alloc_delta));
    if (anchored) {
        /* the change since the step, and the highest level since */
        int64_t since = rs_sat_add_i64(alloc_delta, rs_sat_neg_i64(at_level));
        int64_t rise = rs_sat_add_i64(after_peak, rs_sat_neg_i64(at_level));
        if (at >= count) since = rise = 0;
        int64_t cur = rs_sat_add_i64(rs_sat_i64(h->allocated_at_step), since);
        int64_t peak = rs_sat_i64(h->allocated_peak_at_step);
        int64_t after = rs_sat_add_i64(rs_sat_i64(h->allocated_at_step), rise);
        if (after > peak) peak = after;
        alloc_base = rs_sat_add_i64(cur, rs_sat_neg_i64(alloc_delta));
        if (peak > rs_sat_add_i64(alloc_base, alloc_peak))
            alloc_peak = rs_sat_add_i64(peak, rs_sat_neg_i64(alloc_base));
        int64_t rpeak = rs_sat_i64(h->reserved_peak_at_step);
        if (rpeak > rs_sat_add_i64(reserved_base, reserved_peak))
            reserved_peak = rs_sat_add_i64(rpeak, rs_sat_neg_i64(reserved_base));
    }
    if (reserved_base < rs_sat_neg_i64(reserved_min)) reserved_base = rs_sat_neg_i64(reserved_min);
    rs_snap_totals *t = &s->totals;
    t->allocated_bytes_current = rs_sat_apply(0, rs_sat_add_i64(alloc_base, alloc_delta));
    t->allocated_bytes_peak = rs_sat_apply(0, rs_sat_add_i64(alloc_base, alloc_peak));
    t->reserved_bytes_current = h->reserved_bytes;
    t->reserved_bytes_peak = rs_sat_apply(0, rs_sat_add_i64(reserved_base, reserved_peak));
    if (t->reserved_bytes_peak < t->reserved_bytes_current) t->reserved_bytes_peak = t->reserved_bytes_current;
    t->active_bytes_current = t->allocated_bytes_current;
    t->active_bytes_peak = t->allocated_bytes_peak;
    t->requested_bytes_current = t->allocated_bytes_current;
    t->requested_bytes_peak = t->allocated_bytes_peak;
    t->peak_time_us = peak_time;
    t->peak_step = peak_step;
    t->events_recorded = h->total;
    t->events_dropped = hi->dropped;
    t->device_total_bytes = h->device_total;
    t->memory_limit_bytes = h->memory_limit;
    if (s->has_oom) {
        s->oom.device_total = h->device_total;
        s->oom.memory_limit = h->memory_limit;
        s->oom.allocated = t->allocated_bytes_current;
        s->oom.reserved = t->reserved_bytes_current;
    }
    if (!s->time_us) s->time_us = h->created_us;
    if (completed && rs_ring_expand(s, ev, first, h->capacity, completed) != 0) {
        rs_snap_free(s);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: out of host memory", path);
    }
    rs_ring_drop_annotations(hi);
    /* what every decoder promises (collector/model/snap_check.h) */
    ranksnap_status cst = rs_snap_check(s, path);
    if (cst != RANKSNAP_OK) {
        rs_snap_free(s);
        return cst;
    }
    *out = s;
    return RANKSNAP_OK;
}

ranksnap_status rs_ring_header_need(const void *buf, size_t len, const char *name, uint64_t *need)
{
    const rs_ring_header *h = buf;
    if (len < sizeof *h || memcmp(h->magic, RS_RING_MAGIC, sizeof h->magic) != 0)
        return rs_error(RANKSNAP_ERR_FORMAT, "%s: not a ranksnap ring file (no %s header)", name, RS_RING_MAGIC);
    if (h->endian != RS_RING_ENDIAN)
        return rs_error(RANKSNAP_ERR_FORMAT, "%s: written on a machine of the other byte order", name);
    if (h->version != RS_RING_VERSION)
        return rs_error(RANKSNAP_ERR_FORMAT, "%s: ring version %u, this reader knows %u", name, h->version, RS_RING_VERSION);
    if (h->header_size != RS_RING_HEADER_SIZE || h->event_size != sizeof(rs_ring_event) ||
        h->max_segments == 0 || h->max_segments > (1u << 24) || h->capacity == 0 ||
        h->capacity > (1ull << 32))
        return rs_error(RANKSNAP_ERR_FORMAT, "%s: header sizes are not a ring's (header %u, event %u, "
                        "%llu segments, capacity %llu)", name, h->header_size, h->event_size,
                        (unsigned long long)h->max_segments, (unsigned long long)h->capacity);
    *need = (uint64_t)h->header_size + h->max_segments * sizeof(rs_ring_segment) +
            h->capacity * sizeof(rs_ring_event);
    return RANKSNAP_OK;
}

ranksnap_status rs_ring_decode(const void *buf, size_t len, const char *name, rs_snap **out)
{
    *out = NULL;
    const unsigned char *img = buf;
    const rs_ring_header *h = buf;
    uint64_t need = 0;
    RS_CHECK(rs_ring_header_need(buf, len, name, &need));
    if (need > len)
        return rs_error(RANKSNAP_ERR_FORMAT, "%s: truncated: %zu bytes, the header describes %llu", name,
                        len, (unsigned long long)need);
    if (h->rank < 0 || h->world_size < 1 || h->rank >= h->world_size)
        return rs_error(RANKSNAP_ERR_FORMAT, "%s: rank %d of %d is not a rank", name, h->rank, h->world_size);
    if (h->n_streams > RS_RING_MAX_STREAMS)
        return rs_error(RANKSNAP_ERR_FORMAT, "%s: %llu streams, at most %u fit", name,
                        (unsigned long long)h->n_streams, RS_RING_MAX_STREAMS);
    return rs_ring_model(name, img, len, out);
}

/* A live rank may still be writing the ring: the decoder reads a copy, taken at once as read()
 * would, of the bytes its header describes (not of whatever else the file holds), after the
 * header was checked in the mapping. */
ranksnap_status rs_ring_decode_file(const char *path, rs_snap **out, int *closed)
{
    *out = NULL;
    rs_file_mapped m;
    RS_CHECK(rs_file_map(path, &m));
    uint64_t need = 0;
    char *copy = NULL;
    size_t n = 0;
    rs_file_map_begin(&m);
    ranksnap_status st = rs_ring_header_need(m.p, m.len, path, &need);
    if (st == RANKSNAP_OK) {
        n = need < m.len ? (size_t)need : m.len;
        if ((copy = malloc(n)) != NULL)
            memcpy(copy, m.p, n);
        else
            st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory for its %zu bytes", path, n);
    }
    int cut = rs_file_map_end();
    rs_file_map_close(&m);
    if (cut && st == RANKSNAP_OK)
        st = rs_error(RANKSNAP_ERR_IO, "%s: cut short while it was read (another process truncated "
                                       "it): read it again", path);
    if (st == RANKSNAP_OK) st = rs_ring_decode(copy, n, path, out);
    if (st == RANKSNAP_OK && closed) *closed = ((const rs_ring_header *)copy)->closed != 0;
    free(copy);
    return st;
}
