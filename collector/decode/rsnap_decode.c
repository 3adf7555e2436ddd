/*
 * rsnap_decode.c — decodes .rsnap files (docs/FORMAT.md) into rs_snap, trusting nothing.
 *
 * Two passes over the bytes, neither of which builds a tree of objects.
 *
 * The first (scan) walks the raw msgpack structure: it finds where the top-level map ends (so
 * that truncation and trailing bytes get their own messages), checks that every array or map
 * count could fit in the bytes that remain and bounds the nesting, and on the way notes where
 * each map entry starts (each map's entries in one piece) and where each map ends. After it, every value the second pass reads
 * lies inside the buffer, and no count can make it allocate more than the input describes.
 *
 * The second pass reads the values where they are: a map's fields are found through the entries
 * the scan noted, arrays are read front to back, and the history's columns — nearly all of a
 * file — are decoded in bulk, one tight loop per column straight into the model's arrays. It
 * checks every type, column length and cross-reference (streams, strings, stacks, frames,
 * modules) before anything downstream can index with it. msgpack-c's unpacker would build a
 * 24-byte msgpack_object for every element first (25 MB for 100,000 events) and this file
 * formatted each element's name for a message that is almost never printed: both are gone, and
 * a message — "NAME: field 'history.stack[7]' is 9, but stacks has 4 entries (offset 1234)" —
 * is made only when something is wrong. The offset is that of the value.
 *
 * The model is filled as decoding goes (arrays zeroed first), so rs_snap_free cleans up a
 * half-built snapshot on every error path. Memory: the model (33 bytes per event) plus 16 bytes
 * per map entry of the file while decoding.
 *
 * The parts: rsnap_scan.c (the first pass), rsnap_values.c (the second pass's reads of one
 * value); the state they share is in rsnap_state.h. This file reads the sections and the
 * history's columns, and is the entry point.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "file_read.h"
#include "rsnap_decode.h"
#include "snap_check.h"
#include "rsnap_scan.h"
#include "rsnap_values.h"

/* A zeroed array of n elements (never a zero-byte request, so NULL always means failure). The
 * caller has checked that n came from an array the input holds. */
#define ALLOC_ARRAY(d, ptr, n, what)                                                               \
    do {                                                                                           \
        (ptr) = calloc((n) ? (size_t)(n) : 1, sizeof *(ptr));                                      \
        if (!(ptr)) return rs_rd_no_memory((d), (what), (size_t)(n));                                    \
    } while (0)

#define ALLOC_COLUMN(d, ptr, n, what)                                                              \
    do {                                                                                           \
        (ptr) = malloc(((n) ? (size_t)(n) : 1) * sizeof *(ptr));                                   \
        if (!(ptr)) return rs_rd_no_memory((d), (what), (size_t)(n));                                    \
    } while (0)

#define MAP_GETTER(fn, type, conv)                                                                 \
    static ranksnap_status fn(const mapv *mv, const char *key, type *v)                           \
    {                                                                                              \
        size_t at = 0;                                                                             \
        RS_CHECK(rs_rd_lookup(mv, key, 1, &at));                                                         \
        where w = rs_rd_field_of(mv, key);                                                               \
        return conv(mv->d, at, &w, v);                                                             \
    }

MAP_GETTER(m_u64, uint64_t, rs_rd_as_u64)
MAP_GETTER(m_i64, int64_t, rs_rd_as_i64)
MAP_GETTER(m_str, char *, rs_rd_as_str)
MAP_GETTER(m_map, mapv, rs_rd_as_map)

/* An array field: its count and the offset of its first element. */
static ranksnap_status m_array(const mapv *mv, const char *key, uint64_t *count, size_t *first)
{
    size_t at = 0;
    RS_CHECK(rs_rd_lookup(mv, key, 1, &at));
    where w = rs_rd_field_of(mv, key);
    return rs_rd_as_array(mv->d, at, &w, count, first);
}

static ranksnap_status m_int(const mapv *mv, const char *key, int64_t lo, int64_t hi, int *v)
{
    size_t at = 0;
    int64_t x = 0;
    RS_CHECK(rs_rd_lookup(mv, key, 1, &at));
    where w = rs_rd_field_of(mv, key);
    RS_CHECK(rs_rd_as_int_range(mv->d, at, &w, lo, hi, &x));
    *v = (int)x;
    return RANKSNAP_OK;
}

static ranksnap_status m_bool(const mapv *mv, const char *key, int *v)
{
    size_t at = 0;
    RS_CHECK(rs_rd_lookup(mv, key, 1, &at));
    unsigned char b = mv->d->buf[at];
    if (b != 0xc2 && b != 0xc3) {
        where w = rs_rd_field_of(mv, key);
        return rs_rd_bad_value(mv->d, &w, at, "must be a boolean, not %s", rs_rd_type_name(b));
    }
    *v = b == 0xc3;
    return RANKSNAP_OK;
}

/* An optional uint field: 0 when the file has no such key (written before it existed). */
static ranksnap_status m_u64_opt(const mapv *mv, const char *key, uint64_t *v)
{
    size_t at = 0;
    RS_CHECK(rs_rd_lookup(mv, key, 0, &at));
    if (!at) {
        *v = 0;
        return RANKSNAP_OK;
    }
    return m_u64(mv, key, v);
}

/* An optional integer field: `dflt` when the file has no such key (written before it existed). */
static ranksnap_status m_int_opt(const mapv *mv, const char *key, int64_t lo, int64_t hi, int dflt,
                                 int *v)
{
    size_t at = 0;
    RS_CHECK(rs_rd_lookup(mv, key, 0, &at));
    if (!at) {
        *v = dflt;
        return RANKSNAP_OK;
    }
    return m_int(mv, key, lo, hi, v);
}

/* An optional boolean field: `dflt` when the file has no such key. */
static ranksnap_status m_bool_opt(const mapv *mv, const char *key, int dflt, int *v)
{
    size_t at = 0;
    RS_CHECK(rs_rd_lookup(mv, key, 0, &at));
    if (!at) {
        *v = dflt;
        return RANKSNAP_OK;
    }
    return m_bool(mv, key, v);
}

/* An index into a table of n entries; stack ids are 1-based (0 = none), so their bound is n
 * inclusive. */
static ranksnap_status check_index(const dec *d, const where *w, size_t at, uint64_t v, size_t n,
                                   const char *table, int one_based)
{
    if (one_based ? v <= n : v < n) return RANKSNAP_OK;
    return rs_rd_bad_value(d, w, at, "is %" PRIu64 ", but %s has %zu entries", v, table, n);
}

static ranksnap_status m_index(const mapv *mv, const char *key, size_t n, const char *table,
                               int one_based, uint32_t *v)
{
    size_t at = 0;
    uint64_t x = 0;
    RS_CHECK(rs_rd_lookup(mv, key, 1, &at));
    where w = rs_rd_field_of(mv, key);
    RS_CHECK(rs_rd_as_u64(mv->d, at, &w, &x));
    RS_CHECK(check_index(mv->d, &w, at, x, n, table, one_based));
    *v = (uint32_t)x;
    return RANKSNAP_OK;
}

static ranksnap_status read_format(const mapv *top, unsigned *version)
{
    const dec *d = top->d;
    size_t at = 0;
    RS_CHECK(rs_rd_lookup(top, "format", 0, &at));
    if (!at) return rs_rd_fail(d, "not a ranksnap snapshot (no 'format' field)");
    const unsigned char *p;
    size_t n;
    if (rs_rd_str_at(d, at, &p, &n) != 0)
        return rs_rd_fail(d, "not a ranksnap snapshot (format is %s, expected \"%s\")",
                    rs_rd_type_name(d->buf[at]), RSNAP_FORMAT_NAME);
    if (!rs_rd_str_is(d, at, RSNAP_FORMAT_NAME)) {
        char shown[64];
        rs_rd_printable(p, n, shown, sizeof shown);
        return rs_rd_fail(d, "not a ranksnap snapshot (format is \"%s\", expected \"%s\")", shown,
                    RSNAP_FORMAT_NAME);
    }
    RS_CHECK(rs_rd_lookup(top, "version", 1, &at));
    uint64_t v = 0;
    where w = rs_rd_at_top("version");
    RS_CHECK(rs_rd_as_u64(d, at, &w, &v));
    if (v > RSNAP_FORMAT_VERSION)
        return rs_rd_fail(d, "version %" PRIu64 " is newer than this reader (%d)", v,
                    RSNAP_FORMAT_VERSION);
    if (v == 0) return rs_rd_fail(d, "version 0 is not a valid version (expected 1 to %d)",
                            RSNAP_FORMAT_VERSION);
    *version = (unsigned)v;
    return RANKSNAP_OK;
}

static ranksnap_status read_identity(const mapv *top, rs_snap *s)
{
    RS_CHECK(m_int(top, "world_size", 1, INT32_MAX, &s->world_size));
    RS_CHECK(m_int(top, "rank", 0, INT32_MAX, &s->rank));
    if (s->rank >= s->world_size)
        return rs_rd_fail(top->d, "field 'rank' is %d, but world_size is %d", s->rank, s->world_size);
    RS_CHECK(m_str(top, "host", &s->host));
    RS_CHECK(m_i64(top, "pid", &s->pid));
    RS_CHECK(m_str(top, "job", &s->job));
    RS_CHECK(m_bool(top, "complete", &s->complete));
    RS_CHECK(m_u64(top, "time_us", &s->time_us));
    RS_CHECK(m_str(top, "backend", &s->backend));

    mapv dev;
    RS_CHECK(m_map(top, "device", &dev));
    RS_CHECK(m_int(&dev, "index", -1, INT32_MAX, &s->device.index));
    RS_CHECK(m_str(&dev, "name", &s->device.name));
    RS_CHECK(m_str(&dev, "uuid", &s->device.uuid));
    RS_CHECK(m_u64(&dev, "total_bytes", &s->device.total_bytes));
    /* what NVML listed on it: optional (older files, and where it listed nothing) */
    uint64_t processes = 0, unknown = 0;
    RS_CHECK(m_u64_opt(&dev, "processes", &processes));
    RS_CHECK(m_u64_opt(&dev, "others_unknown", &unknown));
    if (processes > UINT32_MAX || unknown > processes)
        return rs_rd_fail(top->d, "field 'device.others_unknown' is %" PRIu64 ", but "
                          "'device.processes' is %" PRIu64 " (expected others_unknown <= processes "
                          "<= 4294967295)", unknown, processes);
    s->device.processes = (uint32_t)processes;
    s->device.others_unknown = (uint32_t)unknown;
    RS_CHECK(m_u64_opt(&dev, "others_bytes", &s->device.others_bytes));
    RS_CHECK(m_u64_opt(&dev, "own_bytes", &s->device.own_bytes));
    return RANKSNAP_OK;
}

/* devices: optional (files before it had one device, `device`), an array of maps. */
static ranksnap_status read_devices(const mapv *top, rs_snap *s)
{
    const dec *d = top->d;
    size_t at = 0;
    uint64_t n = 0;
    RS_CHECK(rs_rd_lookup(top, "devices", 0, &at));
    if (!at) return RANKSNAP_OK;
    RS_CHECK(m_array(top, "devices", &n, &at));
    ALLOC_ARRAY(d, s->devices, n, "devices");
    for (uint64_t i = 0; i < n; i++) {
        rs_snap_used_device *u = &s->devices[i];
        mapv m;
        where w = {"devices", (int64_t)i, NULL, -1};
        RS_CHECK(rs_rd_as_map(d, at, &w, &m));
        RS_CHECK(m_int(&m, "index", 0, INT32_MAX, &u->index));
        RS_CHECK(m_str(&m, "name", &u->name));
        s->n_devices = (size_t)i + 1; /* owned from here on, for rs_snap_free */
        RS_CHECK(m_str(&m, "uuid", &u->uuid));
        RS_CHECK(m_u64(&m, "total_bytes", &u->total_bytes));
        RS_CHECK(m_u64(&m, "memory_limit", &u->memory_limit));
        RS_CHECK(m_u64(&m, "allocated_bytes_peak", &u->allocated_bytes_peak));
        RS_CHECK(m_u64(&m, "reserved_bytes_peak", &u->reserved_bytes_peak));
        RS_CHECK(m_u64(&m, "num_allocs", &u->num_allocs));
        RS_CHECK(m_u64(&m, "num_ooms", &u->num_ooms));
        at = m.m->end;
    }
    return RANKSNAP_OK;
}

/* PyTorch's settings (alloc_conf, in PYTORCH_CUDA_ALLOC_CONF's syntax; absent before the field
 * existed), onto what the older fields say. A key a newer ranksnap writes is skipped. */
static ranksnap_status read_alloc_conf(const mapv *a, rs_snap_allocator *al)
{
    const dec *d = a->d;
    size_t at = 0, given = 0;
    rs_alloc_conf *c = &al->conf;
    rs_alloc_conf_reset(c);
    if (al->max_split_size != UINT64_MAX) c->max_split_size = al->max_split_size;
    if (al->large_buffer && al->large_buffer != RS_CONF_LARGE_BUFFER)
        c->large_segment_size = al->large_buffer;
    RS_CHECK(rs_rd_lookup(a, "alloc_conf", 0, &at));
    RS_CHECK(rs_rd_lookup(a, "alloc_conf_given", 0, &given));
    if (!at) return RANKSNAP_OK;
    char text[RS_CONF_TEXT_MAX], why[256];
    const unsigned char *p;
    size_t n;
    if (rs_rd_str_at(d, at, &p, &n) != 0 || n >= sizeof text)
        return rs_rd_fail(d, "field 'allocator_settings.alloc_conf' must be a string shorter than "
                       "%d bytes, not %s (offset %zu)", RS_CONF_TEXT_MAX, rs_rd_type_name(d->buf[at]), at);
    memcpy(text, p, n);
    text[n] = '\0';
    if (rs_alloc_conf_parse(c, text, RS_CONF_LENIENT, why, sizeof why) != 0)
        return rs_rd_fail(d, "field 'allocator_settings.alloc_conf' (\"%.200s\"): %s", text, why);
    c->text[0] = '\0';
    if (given && rs_rd_str_at(d, given, &p, &n) == 0 && n < sizeof c->text) {
        memcpy(c->text, p, n);
        c->text[n] = '\0';
    }
    al->max_split_size = rs_alloc_conf_max_split(c);
    return RANKSNAP_OK;
}

static ranksnap_status read_settings(const mapv *top, rs_snap *s)
{
    mapv a, r;
    size_t at = 0;
    rs_snap_allocator *al = &s->allocator;
    RS_CHECK(m_map(top, "allocator_settings", &a));
    RS_CHECK(m_u64(&a, "memory_limit", &al->memory_limit));
    RS_CHECK(rs_rd_lookup(&a, "max_split_size", 1, &at));
    if (top->d->buf[at] == 0xc0) {
        al->max_split_size = UINT64_MAX;
    } else {
        where w = rs_rd_field_of(&a, "max_split_size");
        if (rs_rd_as_u64(top->d, at, &w, &al->max_split_size) != RANKSNAP_OK)
            return rs_rd_fail(top->d, "field 'allocator_settings.max_split_size' must be an unsigned "
                                "integer or nil (unlimited), not %s (offset %zu)",
                        rs_rd_type_name(top->d->buf[at]), at);
    }
    RS_CHECK(m_u64(&a, "min_block_size", &al->min_block_size));
    RS_CHECK(m_u64(&a, "small_size", &al->small_size));
    RS_CHECK(m_u64(&a, "small_buffer", &al->small_buffer));
    RS_CHECK(m_u64(&a, "large_buffer", &al->large_buffer));
    RS_CHECK(m_u64(&a, "min_large_alloc", &al->min_large_alloc));
    RS_CHECK(m_u64(&a, "round_large", &al->round_large));
    RS_CHECK(read_alloc_conf(&a, al));

    RS_CHECK(m_map(top, "recorder_settings", &r));
    RS_CHECK(m_u64(&r, "max_entries", &s->recorder.max_entries));
    RS_CHECK(m_str(&r, "stacks", &s->recorder.stacks));
    RS_CHECK(m_int(&r, "stack_depth", 0, INT32_MAX, &s->recorder.stack_depth));
    RS_CHECK(m_bool_opt(&r, "driver", -1, &s->recorder.driver));
    return RANKSNAP_OK;
}

static ranksnap_status read_time(const mapv *top, rs_snap *s)
{
    const dec *d = top->d;
    mapv t;
    uint64_t n = 0;
    size_t at = 0;
    RS_CHECK(m_map(top, "time", &t));
    RS_CHECK(m_i64(&t, "clock_offset_us", &s->time.clock_offset_us));
    RS_CHECK(m_i64(&t, "clock_uncertainty_us", &s->time.clock_uncertainty_us));
    RS_CHECK(m_i64(&t, "current_step", &s->time.current_step));
    size_t how = 0; /* optional: older files and ranks whose steps nothing numbered lack it */
    RS_CHECK(rs_rd_lookup(&t, "steps_from", 0, &how));
    if (how) {
        where w = rs_rd_field_of(&t, "steps_from");
        RS_CHECK(rs_rd_as_str(d, how, &w, &s->time.steps_from));
    }
    size_t by = 0; /* optional: only a framework's rank recorded by ranksnap itself has it */
    RS_CHECK(rs_rd_lookup(&t, "recorded_by", 0, &by));
    if (by) {
        where w = rs_rd_field_of(&t, "recorded_by");
        RS_CHECK(rs_rd_as_str(d, by, &w, &s->time.recorded_by));
    }
    RS_CHECK(m_array(&t, "ranges", &n, &at));
    ALLOC_ARRAY(d, s->time.ranges, n, "time.ranges");
    s->time.n_ranges = (size_t)n;
    for (uint64_t i = 0; i < n; i++) {
        where w = {"time.ranges", (int64_t)i, NULL, -1};
        rs_snap_range *rg = &s->time.ranges[i];
        size_t e = 0;
        RS_CHECK(rs_rd_as_tuple(d, at, &w, 2, &e));
        RS_CHECK(rs_rd_as_i64(d, e, &w, &rg->begin));
        e = rs_rd_after_scalar(d, e);
        if (d->buf[e] == 0xc0) {
            rg->end = -1;
        } else {
            RS_CHECK(rs_rd_as_i64(d, e, &w, &rg->end));
            if (rg->end < rg->begin)
                return rs_rd_bad_value(d, &w, e, "ends (%" PRId64 ") before it begins (%" PRId64 ")",
                                 rg->end, rg->begin);
        }
        at = rs_rd_after_scalar(d, e);
    }
    return RANKSNAP_OK;
}

/* totals.outside_labels: optional (older files lack it), a map of label -> uint. */
static ranksnap_status read_outside_labels(const mapv *m, rs_snap_totals *t)
{
    const dec *d = m->d;
    size_t at = 0;
    mapv lm;
    RS_CHECK(rs_rd_lookup(m, "outside_labels", 0, &at));
    if (!at) return RANKSNAP_OK;
    where w = {"totals.outside_labels", -1, NULL, -1};
    RS_CHECK(rs_rd_as_map(d, at, &w, &lm));
    ALLOC_ARRAY(d, t->outside_labels, lm.m->n, "totals.outside_labels");
    for (uint32_t i = 0; i < lm.m->n; i++) {
        where e = {"totals.outside_labels", i, NULL, -1};
        rs_snap_outside_label *l = &t->outside_labels[i];
        RS_CHECK(rs_rd_as_str(d, d->ents[lm.m->first + 2 * (size_t)i], &e, &l->label));
        t->n_outside_labels = (size_t)i + 1; /* owned from here on, for rs_snap_free */
        RS_CHECK(rs_rd_as_u64(d, d->ents[lm.m->first + 2 * (size_t)i + 1], &e, &l->bytes));
    }
    return RANKSNAP_OK;
}

/* totals.async_pool: optional (a rank recorded natively that allocated from a stream-ordered
 * pool; older files lack it). reserved_at_peak, when there, is never below bytes_peak. */
static ranksnap_status read_async_pool(const mapv *m, rs_snap_totals *t)
{
    size_t at = 0;
    mapv am;
    RS_CHECK(rs_rd_lookup(m, "async_pool", 0, &at));
    if (!at) return RANKSNAP_OK;
    RS_CHECK(m_map(m, "async_pool", &am));
    RS_CHECK(m_u64(&am, "bytes_peak", &t->async_bytes_peak));
    RS_CHECK(m_u64_opt(&am, "reserved_at_peak", &t->async_reserved_at_peak));
    if (t->async_reserved_at_peak && t->async_reserved_at_peak < t->async_bytes_peak) {
        RS_CHECK(rs_rd_lookup(&am, "reserved_at_peak", 1, &at));
        where w = rs_rd_field_of(&am, "reserved_at_peak");
        return rs_rd_bad_value(m->d, &w, at, "is below bytes_peak (%" PRIu64 ")", t->async_bytes_peak);
    }
    return RANKSNAP_OK;
}

/* totals.outside_of, outside_why and outside_why_detail: optional (older files lack them: what
 * they measured is not said). A reason this reader does not know is "other". */
static ranksnap_status read_outside_of(const mapv *m, rs_snap_totals *t)
{
    const dec *d = m->d;
    size_t at = 0;
    const unsigned char *p;
    size_t n;
    RS_CHECK(rs_rd_lookup(m, "outside_of", 0, &at));
    if (at) {
        where w = rs_rd_field_of(m, "outside_of");
        if (rs_rd_str_at(d, at, &p, &n) != 0 || !(t->outside_of = rs_outside_of_parse(p, n)))
            return rs_rd_bad_value(d, &w, at, "must be \"process\" or \"device\"");
    }
    RS_CHECK(rs_rd_lookup(m, "outside_why", 0, &at));
    if (at) {
        where w = rs_rd_field_of(m, "outside_why");
        if (rs_rd_str_at(d, at, &p, &n) != 0)
            return rs_rd_bad_value(d, &w, at, "must be a string, not %s", rs_rd_type_name(d->buf[at]));
        t->outside_why = rs_outside_why_parse(p, n);
    }
    RS_CHECK(rs_rd_lookup(m, "outside_why_detail", 0, &at));
    if (!at) return RANKSNAP_OK;
    where w = rs_rd_field_of(m, "outside_why_detail");
    return rs_rd_as_str(d, at, &w, &t->outside_why_detail);
}

static ranksnap_status read_totals(const mapv *top, rs_snap_totals *t)
{
    mapv m;
    RS_CHECK(m_map(top, "totals", &m));
    RS_CHECK(m_u64(&m, "allocated_bytes_current", &t->allocated_bytes_current));
    RS_CHECK(m_u64(&m, "allocated_bytes_peak", &t->allocated_bytes_peak));
    RS_CHECK(m_u64(&m, "reserved_bytes_current", &t->reserved_bytes_current));
    RS_CHECK(m_u64(&m, "reserved_bytes_peak", &t->reserved_bytes_peak));
    RS_CHECK(m_u64(&m, "active_bytes_current", &t->active_bytes_current));
    RS_CHECK(m_u64(&m, "active_bytes_peak", &t->active_bytes_peak));
    RS_CHECK(m_u64(&m, "requested_bytes_current", &t->requested_bytes_current));
    RS_CHECK(m_u64(&m, "requested_bytes_peak", &t->requested_bytes_peak));
    RS_CHECK(m_u64(&m, "inactive_split_bytes", &t->inactive_split_bytes));
    RS_CHECK(m_u64(&m, "num_allocs", &t->num_allocs));
    RS_CHECK(m_u64(&m, "num_frees", &t->num_frees));
    RS_CHECK(m_u64(&m, "num_alloc_retries", &t->num_alloc_retries));
    RS_CHECK(m_u64(&m, "num_ooms", &t->num_ooms));
    RS_CHECK(m_u64(&m, "num_segment_allocs", &t->num_segment_allocs));
    RS_CHECK(m_u64(&m, "num_segment_frees", &t->num_segment_frees));
    RS_CHECK(m_u64(&m, "num_sync_all_streams", &t->num_sync_all_streams));
    RS_CHECK(m_u64(&m, "peak_time_us", &t->peak_time_us));
    RS_CHECK(m_i64(&m, "peak_step", &t->peak_step));
    RS_CHECK(m_u64(&m, "events_recorded", &t->events_recorded));
    RS_CHECK(m_u64(&m, "events_dropped", &t->events_dropped));
    RS_CHECK(m_u64(&m, "device_total_bytes", &t->device_total_bytes));
    RS_CHECK(m_u64(&m, "device_used_bytes", &t->device_used_bytes));
    RS_CHECK(m_u64(&m, "memory_limit_bytes", &t->memory_limit_bytes));
    RS_CHECK(m_u64(&m, "outside_bytes_peak", &t->outside_bytes_peak));
    RS_CHECK(m_u64(&m, "outside_bytes_end", &t->outside_bytes_end));
    RS_CHECK(read_outside_of(&m, t));
    RS_CHECK(read_async_pool(&m, t));
    RS_CHECK(read_outside_labels(&m, t));
    return RANKSNAP_OK;
}

static ranksnap_status read_streams_strings(const mapv *top, rs_snap *s)
{
    const dec *d = top->d;
    uint64_t n = 0;
    size_t at = 0;

    RS_CHECK(m_array(top, "streams", &n, &at));
    ALLOC_ARRAY(d, s->streams, n, "streams");
    s->n_streams = (size_t)n;
    for (uint64_t i = 0; i < n; i++) {
        where w = {"streams", (int64_t)i, NULL, -1};
        RS_CHECK(rs_rd_as_u64(d, at, &w, &s->streams[i]));
        at = rs_rd_after_scalar(d, at);
    }

    RS_CHECK(m_array(top, "strings", &n, &at));
    ALLOC_ARRAY(d, s->strings, n, "strings");
    s->n_strings = (size_t)n;
    for (uint64_t i = 0; i < n; i++) {
        where w = {"strings", (int64_t)i, NULL, -1};
        RS_CHECK(rs_rd_as_str(d, at, &w, &s->strings[i]));
        at = rs_rd_after_scalar(d, at);
    }
    return RANKSNAP_OK;
}

/* modules, then frames (which name modules), then stacks (which name frames). */
static ranksnap_status read_symbol_tables(const mapv *top, rs_snap *s)
{
    const dec *d = top->d;
    uint64_t n = 0;
    size_t at = 0, e = 0;

    RS_CHECK(m_array(top, "modules", &n, &at));
    ALLOC_ARRAY(d, s->modules, n, "modules");
    s->n_modules = (size_t)n;
    for (uint64_t i = 0; i < n; i++) {
        rs_snap_module *m = &s->modules[i];
        where w = {"modules", (int64_t)i, NULL, -1};
        RS_CHECK(rs_rd_as_tuple(d, at, &w, 3, &e));
        RS_CHECK(rs_rd_as_str(d, e, &w, &m->path));
        e = rs_rd_after_scalar(d, e);
        RS_CHECK(rs_rd_as_u64(d, e, &w, &m->base));
        e = rs_rd_after_scalar(d, e);
        RS_CHECK(rs_rd_as_str(d, e, &w, &m->build_id));
        at = rs_rd_after_scalar(d, e);
    }

    RS_CHECK(m_array(top, "frames", &n, &at));
    ALLOC_ARRAY(d, s->frames, n, "frames");
    s->n_frames = (size_t)n;
    for (uint64_t i = 0; i < n; i++) {
        rs_snap_frame *f = &s->frames[i];
        int64_t x = 0;
        where w = {"frames", (int64_t)i, NULL, -1};
        RS_CHECK(rs_rd_as_tuple(d, at, &w, 5, &e));
        RS_CHECK(rs_rd_as_u64(d, e, &w, &f->pc));
        e = rs_rd_after_scalar(d, e);
        RS_CHECK(rs_rd_as_i64(d, e, &w, &x));
        if (x < -1 || x >= (int64_t)s->n_modules)
            return rs_rd_bad_value(d, &w, e, "names module %" PRId64 ", but modules has %zu entries", x,
                             s->n_modules);
        f->module = (int32_t)x;
        e = rs_rd_after_scalar(d, e);
        RS_CHECK(rs_rd_as_str(d, e, &w, &f->function));
        e = rs_rd_after_scalar(d, e);
        RS_CHECK(rs_rd_as_str(d, e, &w, &f->file));
        e = rs_rd_after_scalar(d, e);
        RS_CHECK(rs_rd_as_int_range(d, e, &w, INT32_MIN, INT32_MAX, &x));
        f->line = (int32_t)x;
        at = rs_rd_after_scalar(d, e);
    }

    RS_CHECK(m_array(top, "stacks", &n, &at));
    if (n >= UINT32_MAX) return rs_rd_fail(d, "stacks has %" PRIu64 " entries, too many", n);
    ALLOC_ARRAY(d, s->stacks, n, "stacks");
    s->n_stacks = (size_t)n;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t nf = 0;
        rs_snap_stack *st = &s->stacks[i];
        where w = {"stacks", (int64_t)i, NULL, -1};
        RS_CHECK(rs_rd_as_array(d, at, &w, &nf, &e));
        ALLOC_ARRAY(d, st->frames, nf, "a stack");
        st->n_frames = (size_t)nf;
        for (uint64_t k = 0; k < nf; k++) {
            uint64_t v = 0;
            w.elem = (int64_t)k;
            RS_CHECK(rs_rd_as_u64(d, e, &w, &v));
            RS_CHECK(check_index(d, &w, e, v, s->n_frames, "frames", 0));
            st->frames[k] = (uint32_t)v;
            e = rs_rd_after_scalar(d, e);
        }
        at = e;
    }
    return RANKSNAP_OK;
}

static ranksnap_status read_segments(const mapv *top, rs_snap *s)
{
    const dec *d = top->d;
    uint64_t n = 0;
    size_t at = 0;
    RS_CHECK(m_array(top, "segments", &n, &at));
    ALLOC_ARRAY(d, s->segments, n, "segments");
    s->n_segments = (size_t)n;
    for (uint64_t i = 0; i < n; i++) {
        rs_snap_segment *g = &s->segments[i];
        uint64_t nb = 0;
        size_t e = 0, ty = 0;
        mapv m;
        where w = {"segments", (int64_t)i, NULL, -1};
        RS_CHECK(rs_rd_as_map(d, at, &w, &m));
        RS_CHECK(m_u64(&m, "address", &g->addr));
        RS_CHECK(m_u64(&m, "total_size", &g->total_size));
        RS_CHECK(m_u64(&m, "allocated_size", &g->allocated_size));
        RS_CHECK(m_u64(&m, "active_size", &g->active_size));
        RS_CHECK(m_u64(&m, "requested_size", &g->requested_size));
        RS_CHECK(m_index(&m, "stream", s->n_streams, "streams", 0, &g->stream));
        RS_CHECK(m_index(&m, "stack", s->n_stacks, "stacks", 1, &g->stack));
        RS_CHECK(m_int_opt(&m, "device", 0, INT32_MAX, s->device.index, &g->device));
        RS_CHECK(rs_rd_lookup(&m, "segment_type", 1, &ty));
        int small = rs_rd_str_is(d, ty, "small"), large = rs_rd_str_is(d, ty, "large");
        if (!small && !large) {
            where tw = rs_rd_field_of(&m, "segment_type");
            return rs_rd_bad_value(d, &tw, ty, "must be \"small\" or \"large\"");
        }
        g->is_small = small;

        RS_CHECK(m_array(&m, "blocks", &nb, &e));
        ALLOC_ARRAY(d, g->blocks, nb, "blocks");
        g->n_blocks = (size_t)nb;
        for (uint64_t k = 0; k < nb; k++) {
            rs_snap_block *b = &g->blocks[k];
            uint64_t state = 0, stack = 0;
            size_t f = 0;
            where bw = {"segments", (int64_t)i, "blocks", (int64_t)k};
            RS_CHECK(rs_rd_as_tuple(d, e, &bw, 5, &f));
            RS_CHECK(rs_rd_as_u64(d, f, &bw, &b->addr));
            f = rs_rd_after_scalar(d, f);
            RS_CHECK(rs_rd_as_u64(d, f, &bw, &b->size));
            f = rs_rd_after_scalar(d, f);
            RS_CHECK(rs_rd_as_u64(d, f, &bw, &b->requested_size));
            f = rs_rd_after_scalar(d, f);
            RS_CHECK(rs_rd_as_u64(d, f, &bw, &state));
            if (state >= RS_BLOCK_STATE_COUNT_)
                return rs_rd_bad_value(d, &bw, f, "has block state %" PRIu64 ", expected 0 to %d",
                                 state, RS_BLOCK_STATE_COUNT_ - 1);
            f = rs_rd_after_scalar(d, f);
            RS_CHECK(rs_rd_as_u64(d, f, &bw, &stack));
            RS_CHECK(check_index(d, &bw, f, stack, s->n_stacks, "stacks", 1));
            b->state = (uint8_t)state;
            b->stack = (uint32_t)stack;
            e = rs_rd_after_scalar(d, f);
        }
        at = m.m->end;
    }
    return RANKSNAP_OK;
}

/* The history's columns, decoded in bulk: one loop per column type, straight into the model's
 * array. The one-byte integers most elements are take the first branch; a wider one goes
 * through read_int. Each returns the offset after the last element, or 0 with *bad (the index
 * of the element) and *bad_at (its offset) set when an element is not an integer of the column's
 * kind or exceeds `max`. */
#define COLUMN_DECODER(fn, type, signed_ok)                                                        \
    static size_t fn(const dec *d, size_t at, size_t n, uint64_t max, type *out, size_t *bad,     \
                     size_t *bad_at)                                                               \
    {                                                                                              \
        const unsigned char *p = d->buf + at, *e = d->buf + d->len;                                \
        for (size_t i = 0; i < n; i++) {                                                           \
            const unsigned char *start = p;                                                        \
            uint64_t v;                                                                            \
            int neg = 0;                                                                           \
            if (p < e && *p <= 0x7f) {                                                             \
                v = *p++;                                                                          \
            } else if (p >= e || read_int(&p, e, &v, &neg) != 0 || (!(signed_ok) && neg) ||       \
                       (!(signed_ok) && v > max)) {                                                \
                *bad = i;                                                                          \
                *bad_at = (size_t)(start - d->buf);                                                \
                return 0;                                                                          \
            }                                                                                      \
            if (!(signed_ok) && v > max) {                                                         \
                *bad = i;                                                                          \
                *bad_at = (size_t)(start - d->buf);                                                \
                return 0;                                                                          \
            }                                                                                      \
            out[i] = (type)v;                                                                      \
        }                                                                                          \
        return (size_t)(p - d->buf);                                                               \
    }

COLUMN_DECODER(column_u8, uint8_t, 0)
COLUMN_DECODER(column_u32, uint32_t, 0)
COLUMN_DECODER(column_u64, uint64_t, 0)
COLUMN_DECODER(column_bits, uint64_t, 1)

/* One history column: present, an array, exactly `count` long; *first is its first element. */
static ranksnap_status column(const mapv *h, const char *key, uint64_t count, size_t *first)
{
    uint64_t n = 0;
    RS_CHECK(m_array(h, key, &n, first));
    if (n != count) {
        size_t at = 0;
        RS_CHECK(rs_rd_lookup(h, key, 1, &at));
        return rs_rd_fail(h->d, "history.%s has %" PRIu64 " entries, history.count says %" PRIu64
                          " (offset %zu)", key, n, count, at);
    }
    return RANKSNAP_OK;
}

/* What was wrong with element `i` of a column (at offset `at`): its type, its sign, or its value
 * (an index into `table` of `table_n` entries, or an action code when table is NULL). */
static ranksnap_status column_error(const dec *d, const char *key, size_t i, size_t at,
                                    int unsigned_only, const char *table, size_t table_n)
{
    where w = {"history", -1, key, (int64_t)i};
    const unsigned char *p = d->buf + at;
    uint64_t v = 0;
    int neg = 0;
    int is_int = read_int(&p, d->buf + d->len, &v, &neg) == 0;
    if (!unsigned_only && !is_int) return rs_rd_bad_value(d, &w, at, "must be an integer");
    if (!is_int || neg)
        return rs_rd_bad_value(d, &w, at, "must be an unsigned integer, not %s", rs_rd_type_name(d->buf[at]));
    if (table) return rs_rd_bad_value(d, &w, at, "is %" PRIu64 ", but %s has %zu entries", v, table, table_n);
    return rs_rd_bad_value(d, &w, at, "is %" PRIu64 ", expected an action code below 256", v);
}

/* A delta column: element 0 absolute (unsigned), the others differences modulo 2^64. */
static ranksnap_status delta_column(const dec *d, const char *key, size_t at, size_t n,
                                    uint64_t *out)
{
    size_t bad = 0, bad_at = 0;
    if (n == 0) return RANKSNAP_OK;
    if (column_u64(d, at, 1, UINT64_MAX, out, &bad, &bad_at) == 0)
        return column_error(d, key, 0, bad_at, 1, NULL, 0);
    size_t next = rs_rd_after_scalar(d, at);
    if (n > 1 && column_bits(d, next, n - 1, UINT64_MAX, out + 1, &bad, &bad_at) == 0)
        return column_error(d, key, bad + 1, bad_at, 0, NULL, 0);
    uint64_t v = out[0];
    for (size_t i = 1; i < n; i++) out[i] = v += out[i];
    return RANKSNAP_OK;
}

static ranksnap_status read_history(const mapv *top, rs_snap *s)
{
    const dec *d = top->d;
    rs_snap_history *hs = &s->history;
    size_t ct = 0, ca = 0, cd = 0, cs = 0, cst = 0, csk = 0, bad = 0, bad_at = 0;
    mapv h;

    RS_CHECK(m_map(top, "history", &h));
    RS_CHECK(m_u64(&h, "count", &hs->count));
    RS_CHECK(m_u64(&h, "dropped", &hs->dropped));
    RS_CHECK(m_u64(&h, "capacity", &hs->capacity));
    /* optional: files written before it held none */
    size_t held_at = 0;
    RS_CHECK(rs_rd_lookup(&h, "held", 0, &held_at));
    hs->held = 0;
    if (held_at) RS_CHECK(m_u64(&h, "held", &hs->held));
    /* a ring slot holds a free_requested and the free_completed that followed it at once
     * (rank/recorder.h, RS_EV_COMPLETED): at most two events per slot */
    if (hs->capacity > UINT64_MAX / 2 || hs->count > 2 * hs->capacity)
        return rs_rd_fail(d, "history.count (%" PRIu64 ") exceeds twice history.capacity (%" PRIu64 ")",
                    hs->count, hs->capacity);
    if (hs->held > hs->count)
        return rs_rd_fail(d, "history.held (%" PRIu64 ") exceeds history.count (%" PRIu64 ")",
                          hs->held, hs->count);
    RS_CHECK(column(&h, "time_us", hs->count, &ct));
    RS_CHECK(column(&h, "action", hs->count, &ca));
    RS_CHECK(column(&h, "addr", hs->count, &cd));
    RS_CHECK(column(&h, "size", hs->count, &cs));
    RS_CHECK(column(&h, "stream", hs->count, &cst));
    RS_CHECK(column(&h, "stack", hs->count, &csk));

    /* count equals an array's size, so it is bounded by the input; the columns are not zeroed:
     * every element is written below, or the snapshot is freed unread */
    size_t n = (size_t)hs->count;
    ALLOC_COLUMN(d, hs->time_us, n, "history.time_us");
    ALLOC_COLUMN(d, hs->action, n, "history.action");
    ALLOC_COLUMN(d, hs->addr, n, "history.addr");
    ALLOC_COLUMN(d, hs->size, n, "history.size");
    ALLOC_COLUMN(d, hs->stream, n, "history.stream");
    ALLOC_COLUMN(d, hs->stack, n, "history.stack");

    RS_CHECK(delta_column(d, "time_us", ct, n, hs->time_us));
    if (column_u8(d, ca, n, UINT8_MAX, hs->action, &bad, &bad_at) == 0 && n)
        return column_error(d, "action", bad, bad_at, 1, NULL, 0);
    RS_CHECK(delta_column(d, "addr", cd, n, hs->addr));
    for (size_t i = 0; i < n; i++) {
        uint8_t a = hs->action[i];
        if ((a == RS_ACT_ANNOTATION_BEGIN || a == RS_ACT_ANNOTATION_END) &&
            hs->addr[i] >= s->n_strings)
            return rs_rd_fail(d, "history.addr[%zu] names annotation %" PRIu64
                           ", but strings has %zu entries", i, hs->addr[i], s->n_strings);
    }
    if (column_u64(d, cs, n, UINT64_MAX, hs->size, &bad, &bad_at) == 0 && n)
        return column_error(d, "size", bad, bad_at, 1, NULL, 0);
    if (s->n_streams == 0 && n)
        return column_error(d, "stream", 0, cst, 1, "streams", 0);
    if (column_u32(d, cst, n, s->n_streams - 1, hs->stream, &bad, &bad_at) == 0 && n)
        return column_error(d, "stream", bad, bad_at, 1, "streams", s->n_streams);
    if (column_u32(d, csk, n, s->n_stacks, hs->stack, &bad, &bad_at) == 0 && n)
        return column_error(d, "stack", bad, bad_at, 1, "stacks", s->n_stacks);
    return RANKSNAP_OK;
}

static ranksnap_status read_oom(const mapv *top, rs_snap *s)
{
    size_t at = 0;
    mapv m;
    RS_CHECK(rs_rd_lookup(top, "oom", 0, &at));
    if (!at || top->d->buf[at] == 0xc0) return RANKSNAP_OK;
    where w = rs_rd_at_top("oom");
    if (!rs_rd_find_map(top->d, at))
        return rs_rd_bad_value(top->d, &w, at, "must be a map or nil, not %s",
                         rs_rd_type_name(top->d->buf[at]));
    w = (where){"oom", -1, NULL, -1};
    RS_CHECK(rs_rd_as_map(top->d, at, &w, &m));
    rs_snap_oom *x = &s->oom;
    RS_CHECK(m_int_opt(&m, "device", -1, INT32_MAX, s->device.index, &x->device));
    RS_CHECK(m_u64(&m, "requested", &x->requested));
    RS_CHECK(m_u64(&m, "rounded", &x->rounded));
    RS_CHECK(m_u64(&m, "device_free", &x->device_free));
    RS_CHECK(m_u64(&m, "device_total", &x->device_total));
    RS_CHECK(m_u64(&m, "allocated", &x->allocated));
    RS_CHECK(m_u64(&m, "reserved", &x->reserved));
    RS_CHECK(m_u64(&m, "memory_limit", &x->memory_limit));
    RS_CHECK(m_u64(&m, "time_us", &x->time_us));
    RS_CHECK(m_index(&m, "stream", s->n_streams, "streams", 0, &x->stream));
    if (s->totals_only) {
        /* the stack table was not read: its id is checked as a number and not kept */
        uint64_t stack = 0;
        RS_CHECK(m_u64(&m, "stack", &stack));
    } else {
        RS_CHECK(m_index(&m, "stack", s->n_stacks, "stacks", 1, &x->stack));
    }
    RS_CHECK(m_i64(&m, "step", &x->step));
    s->has_oom = 1;
    return RANKSNAP_OK;
}

/* end: optional, and so is each of its keys (docs/FORMAT.md): only a snapshot written on the
 * process's way out has it. */
static ranksnap_status read_end(const mapv *top, rs_snap *s)
{
    size_t at = 0;
    mapv m;
    RS_CHECK(rs_rd_lookup(top, "end", 0, &at));
    if (!at) return RANKSNAP_OK;
    where w = {"end", -1, NULL, -1};
    RS_CHECK(rs_rd_as_map(top->d, at, &w, &m));
    int sig = 0, open = 0, main_thread = 1, status = 0, code = 0;
    size_t has_status = 0, has_code = 0;
    RS_CHECK(rs_rd_lookup(&m, "exit_status", 0, &has_status));
    RS_CHECK(rs_rd_lookup(&m, "mpi_abort", 0, &has_code));
    if (has_status) RS_CHECK(m_int(&m, "exit_status", INT32_MIN, INT32_MAX, &status));
    if (has_code) RS_CHECK(m_int(&m, "mpi_abort", INT32_MIN, INT32_MAX, &code));
    RS_CHECK(m_int_opt(&m, "signal", 1, RS_END_SIGNAL_MASK, 0, &sig));
    RS_CHECK(m_bool_opt(&m, "before_mpi_finalize", 0, &open));
    RS_CHECK(m_bool_opt(&m, "main_thread", 1, &main_thread));
    s->end = rs_end_from_keys(has_status != 0, status, (uint32_t)sig, has_code != 0, code, open,
                              main_thread);
    return RANKSNAP_OK;
}

/* A string of a communicator's tuple into a fixed field, cut to fit. */
static ranksnap_status comm_str(const dec *d, size_t at, const where *w, char *dst, size_t dn)
{
    const unsigned char *p = NULL;
    size_t n = 0;
    if (rs_rd_str_at(d, at, &p, &n) != 0)
        return rs_rd_bad_value(d, w, at, "must be a string, not %s", rs_rd_type_name(d->buf[at]));
    if (n >= dn) n = dn - 1;
    memcpy(dst, p, n);
    dst[n] = '\0';
    return RANKSNAP_OK;
}

/* communicators: optional, [id, size, rank, kind, name, allreduces] each; and
 * communicators_left_out, optional: how many others the rank recorded */
static ranksnap_status read_comms_list(const mapv *top, rs_snap *s)
{
    const dec *d = top->d;
    size_t at = 0, e = 0;
    uint64_t n = 0;
    RS_CHECK(rs_rd_lookup(top, "communicators_left_out", 0, &at));
    if (at) RS_CHECK(m_u64(top, "communicators_left_out", &s->comms_left_out));
    RS_CHECK(rs_rd_lookup(top, "communicators", 0, &at));
    if (!at) return RANKSNAP_OK;
    RS_CHECK(m_array(top, "communicators", &n, &at));
    ALLOC_ARRAY(d, s->comms, n, "communicators");
    s->n_comms = (size_t)n;
    for (uint64_t i = 0; i < n; i++) {
        rs_snap_comm *c = &s->comms[i];
        int64_t size = 0, rank = 0;
        where w = {"communicators", (int64_t)i, NULL, -1};
        RS_CHECK(rs_rd_as_tuple(d, at, &w, 6, &e));
        RS_CHECK(rs_rd_as_u64(d, e, &w, &c->id));
        e = rs_rd_after_scalar(d, e);
        RS_CHECK(rs_rd_as_int_range(d, e, &w, 1, INT32_MAX, &size));
        e = rs_rd_after_scalar(d, e);
        RS_CHECK(rs_rd_as_int_range(d, e, &w, 0, size - 1, &rank));
        e = rs_rd_after_scalar(d, e);
        RS_CHECK(comm_str(d, e, &w, c->kind, sizeof c->kind));
        e = rs_rd_after_scalar(d, e);
        RS_CHECK(comm_str(d, e, &w, c->name, sizeof c->name));
        e = rs_rd_after_scalar(d, e);
        RS_CHECK(rs_rd_as_u64(d, e, &w, &c->allreduces));
        at = rs_rd_after_scalar(d, e);
        c->size = (int32_t)size;
        c->rank = (int32_t)rank;
    }
    return RANKSNAP_OK;
}

/* A malformed list costs the rank its communicators (its roles are found without it, or not at
 * all), not the whole file: the reason is kept for the report. */
static ranksnap_status read_comms(const mapv *top, rs_snap *s)
{
    ranksnap_status st = read_comms_list(top, s);
    if (st != RANKSNAP_ERR_FORMAT) return st;
    snprintf(s->comms_error, sizeof s->comms_error, "%s", ranksnap_last_error());
    free(s->comms);
    s->comms = NULL;
    s->n_comms = 0;
    s->comms_left_out = 0;
    rs_error_clear();
    return RANKSNAP_OK;
}

static ranksnap_status read_top(const dec *d, rs_snap *s)
{
    mapv top;
    where w = {"", -1, NULL, -1};
    RS_CHECK(rs_rd_as_map(d, 0, &w, &top));
    /* the format and version first: a foreign or newer file must say so, not "missing field" */
    RS_CHECK(read_format(&top, &s->version));
    RS_CHECK(read_identity(&top, s));
    RS_CHECK(read_devices(&top, s));
    RS_CHECK(read_settings(&top, s));
    RS_CHECK(read_time(&top, s));
    RS_CHECK(read_totals(&top, &s->totals));
    RS_CHECK(read_streams_strings(&top, s));
    if (!s->totals_only) {
        RS_CHECK(read_symbol_tables(&top, s));
        RS_CHECK(read_segments(&top, s));
        RS_CHECK(read_history(&top, s));
    }
    RS_CHECK(read_oom(&top, s));
    RS_CHECK(read_end(&top, s));
    RS_CHECK(read_comms(&top, s));
    return RANKSNAP_OK;
}

ranksnap_status rs_rsnap_check_head(const void *buf, size_t len, const char *name_for_errors)
{
    dec d;
    memset(&d, 0, sizeof d);
    d.name = name_for_errors ? name_for_errors : "snapshot";
    d.buf = buf;
    d.len = len;
    if (len == 0) return rs_rd_fail(&d, "empty file (0 bytes), not a ranksnap snapshot");
    unsigned char b = d.buf[0];
    if (!((b >= 0x80 && b <= 0x8f) || b == 0xde || b == 0xdf))
        return rs_rd_fail(&d, "not a ranksnap snapshot (the top level is %s, expected a map)",
                    rs_rd_type_of_byte(b));
    return RANKSNAP_OK;
}

/* rs_rsnap_decode, or with `totals_only` rs_rsnap_decode_totals. */
static ranksnap_status decode(const void *buf, size_t len, const char *name_for_errors,
                              int totals_only, rs_snap **out)
{
    dec d;
    memset(&d, 0, sizeof d);
    d.name = name_for_errors ? name_for_errors : "snapshot";
    d.buf = buf;
    d.len = len;
    if (!out) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_rsnap_decode: out is NULL");
    *out = NULL;
    if (!buf && len) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_rsnap_decode: buf is NULL");
    RS_CHECK(rs_rsnap_check_head(buf, len, name_for_errors));
    size_t end = 0;
    ranksnap_status st = rs_rd_scan(&d, &end);
    if (st == RANKSNAP_OK && end != len)
        st = rs_rd_fail(&d, "trailing data after the snapshot map (%zu bytes from offset %zu)",
                  len - end, end);
    rs_snap *s = NULL;
    if (st == RANKSNAP_OK) {
        s = calloc(1, sizeof *s);
        if (s) s->totals_only = totals_only;
        st = s ? read_top(&d, s) : rs_rd_no_memory(&d, "the snapshot", 1);
    }
    if (st == RANKSNAP_OK) st = rs_snap_check(s, d.name); /* the model's one check (snap_check.h) */
    free(d.maps);
    free(d.ents);
    free(d.open);
    if (st != RANKSNAP_OK) {
        rs_snap_free(s);
        return st;
    }
    *out = s;
    return RANKSNAP_OK;
}

ranksnap_status rs_rsnap_decode(const void *buf, size_t len, const char *name_for_errors,
                                rs_snap **out)
{
    return decode(buf, len, name_for_errors, 0, out);
}

ranksnap_status rs_rsnap_decode_totals(const void *buf, size_t len, const char *name_for_errors,
                                       rs_snap **out)
{
    return decode(buf, len, name_for_errors, 1, out);
}

ranksnap_status rs_rsnap_decode_file(const char *path, rs_snap **out)
{
    if (!path || !out)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_rsnap_decode_file: NULL argument");
    *out = NULL;
    char *buf;
    size_t len;
    RS_CHECK(rs_file_read(path, 0, &buf, &len));
    ranksnap_status st = rs_rsnap_decode(buf, len, path, out);
    free(buf);
    return st;
}
