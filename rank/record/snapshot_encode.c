/*
 * snapshot_encode.c — encodes a rank's snapshot as one msgpack map (docs/FORMAT.md).
 *
 * Everything is packed straight into a msgpack_sbuffer, arrays element by element, so that a
 * snapshot of a million events needs no intermediate objects. The history is columnar (one array
 * per field) with time and address delta-encoded: consecutive events are microseconds apart and
 * mostly inside the same 20 MiB segment, so msgpack's variable-width integers shrink them to one to
 * five bytes each.
 *
 * The encoder guarantees that every index it writes is in range for the reader (collector/
 * rsnap_decode.c rejects anything else): stack ids without a stack table become 0, pcs missing from
 * the resolved symbols get an unresolved frame of their own, streams that are not in the
 * recorder's table are appended to the file's stream table.
 *
 * Packing errors can only be a failed realloc of the buffer; they are latched in `enc.failed` so
 * that each call site stays one line, and turned into RANKSNAP_ERR_HOST_MEMORY at the end.
 */
#include <inttypes.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "format.h"
#include "snapshot_encode.h"
#include "symbols.h"

typedef struct enc {
    msgpack_sbuffer sbuf;
    msgpack_packer pk;
    int failed;
} enc;

static void put_u64(enc *e, uint64_t v)
{
    if (msgpack_pack_uint64(&e->pk, v) != 0) e->failed = 1;
}

static void put_i64(enc *e, int64_t v)
{
    if (msgpack_pack_int64(&e->pk, v) != 0) e->failed = 1;
}

static void put_nil(enc *e)
{
    if (msgpack_pack_nil(&e->pk) != 0) e->failed = 1;
}

static void put_bool(enc *e, int v)
{
    if ((v ? msgpack_pack_true(&e->pk) : msgpack_pack_false(&e->pk)) != 0) e->failed = 1;
}

static void put_strn(enc *e, const char *s, size_t n)
{
    if (msgpack_pack_str_with_body(&e->pk, s, n) != 0) e->failed = 1;
}

static void put_str(enc *e, const char *s)
{
    if (!s) s = "";
    put_strn(e, s, strlen(s));
}

static void put_array(enc *e, size_t n)
{
    if (msgpack_pack_array(&e->pk, n) != 0) e->failed = 1;
}

static void put_map(enc *e, size_t n)
{
    if (msgpack_pack_map(&e->pk, n) != 0) e->failed = 1;
}

static void key(enc *e, const char *k)
{
    put_str(e, k);
}

static void kv_u64(enc *e, const char *k, uint64_t v)
{
    key(e, k);
    put_u64(e, v);
}

static void kv_i64(enc *e, const char *k, int64_t v)
{
    key(e, k);
    put_i64(e, v);
}

static void kv_str(enc *e, const char *k, const char *v)
{
    key(e, k);
    put_str(e, v);
}

/* The difference b - a as the signed number msgpack packs smallest, computed without relying on
 * implementation-defined unsigned-to-signed conversion. */
static int64_t delta(uint64_t a, uint64_t b)
{
    uint64_t d = b - a;
    if (d <= (uint64_t)INT64_MAX) return (int64_t)d;
    return -(int64_t)(~d) - 1;
}

/* The file's stream table: the recorder's streams first (history.stream indexes them as they
 * are), then any other stream a segment or the OOM record names, then RSNAP_STREAM_OTHER if an
 * event's stream could not be interned. */
typedef struct stream_table {
    size_t n, cap;
    uint64_t *v;
} stream_table;

static size_t stream_index(stream_table *t, const void *stream)
{
    uint64_t h = (uint64_t)(uintptr_t)stream;
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i] == h) return i;
    /* cap was sized for every stream that can be added (see build_streams) */
    t->v[t->n] = h;
    return t->n++;
}

static ranksnap_status build_streams(const rs_snapshot_src *src, stream_table *t)
{
    size_t n_rec = src->recorder ? rs_recorder_n_streams(src->recorder) : 0;
    size_t n_seg = src->state ? src->state->n_segments : 0;
    /* recorder streams + one per segment + the OOM stream + the default stream or the
     * RSNAP_STREAM_OTHER sentinel */
    t->cap = n_rec + n_seg + 2;
    t->n = 0;
    t->v = malloc(t->cap * sizeof *t->v);
    if (!t->v)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "snapshot: no memory for a stream table of %zu",
                        t->cap);
    for (size_t i = 0; i < n_rec; i++)
        t->v[t->n++] = (uint64_t)(uintptr_t)rs_recorder_stream(src->recorder, i);
    if (!src->recorder) (void)stream_index(t, NULL);
    for (size_t i = 0; i < n_seg; i++) (void)stream_index(t, src->state->segments[i].stream);
    if (src->has_oom) (void)stream_index(t, src->oom.stream);
    return RANKSNAP_OK;
}

/* Stacks are written only when both the interned stacks and their resolution are at hand. */
typedef struct stack_view {
    const rs_stacks *stacks;
    const rs_symbols *sym;
    size_t n; /* ids 1..n are valid in the file */
} stack_view;

static uint32_t stack_id(const stack_view *sv, uint32_t id)
{
    return id <= sv->n ? id : 0;
}

static const char *stacks_mode_name(rs_stacks_mode m)
{
    switch (m) {
    case RS_STACKS_NATIVE: return "native";
    case RS_STACKS_FP: return "fp";
    case RS_STACKS_NONE: return "none";
    /* PyTorch's stacks (torch mode), whose snapshots are PyTorch's pickles, not .rsnap */
    case RS_STACKS_PYTHON: return "python";
    case RS_STACKS_ALL: return "all";
    }
    return "none";
}

/* A device's four identity keys, in `device` and in each of `devices`. */
static void put_device_identity(enc *e, const rs_device_info *d)
{
    kv_i64(e, "index", d->index);
    key(e, "name");
    put_strn(e, d->name, strnlen(d->name, sizeof d->name));
    key(e, "uuid");
    put_strn(e, d->uuid, strnlen(d->uuid, sizeof d->uuid));
    kv_u64(e, "total_bytes", d->total_bytes);
}

static void write_identity(enc *e, const rs_snapshot_src *src)
{
    kv_str(e, "format", RSNAP_FORMAT_NAME);
    kv_u64(e, "version", RSNAP_FORMAT_VERSION);
    kv_i64(e, "rank", src->rank);
    kv_i64(e, "world_size", src->world_size);
    kv_str(e, "host", src->host);
    kv_i64(e, "pid", src->pid);
    kv_str(e, "job", src->job);
    key(e, "complete");
    put_bool(e, src->complete);
    kv_u64(e, "time_us", src->time_us);

    /* what NVML listed on it, where it did (docs/FORMAT.md, "device") */
    const rs_device_share *sh = &src->share;
    key(e, "device");
    put_map(e, 4 + (sh->listed ? 2 + (sh->others_unknown > 0) + sh->own_known : 0));
    put_device_identity(e, &src->device);
    if (sh->listed) {
        kv_u64(e, "processes", sh->processes);
        kv_u64(e, "others_bytes", sh->others_bytes);
        if (sh->others_unknown) kv_u64(e, "others_unknown", sh->others_unknown);
        if (sh->own_known) kv_u64(e, "own_bytes", sh->own_bytes);
    }

    kv_str(e, "backend", src->backend);
}

/* Every device the rank allocated on, each with its allocator's own totals: a rank that used two
 * shows both, and the top-level totals are their sums. */
static void write_devices(enc *e, const rs_snapshot_src *src)
{
    key(e, "devices");
    put_array(e, src->n_devices);
    for (size_t i = 0; i < src->n_devices; i++) {
        const rs_snapshot_device *d = &src->devices[i];
        put_map(e, 11);
        put_device_identity(e, &d->info);
        kv_u64(e, "memory_limit", d->memory_limit);
        kv_u64(e, "allocated_bytes_current", d->stats.allocated_bytes);
        kv_u64(e, "allocated_bytes_peak", d->stats.allocated_bytes_peak);
        kv_u64(e, "reserved_bytes_current", d->stats.reserved_bytes);
        kv_u64(e, "reserved_bytes_peak", d->stats.reserved_bytes_peak);
        kv_u64(e, "num_allocs", d->stats.num_allocs);
        kv_u64(e, "num_ooms", d->stats.num_ooms);
    }
}

static void write_settings(enc *e, const rs_snapshot_src *src)
{
    const rs_options *o = src->options;
    const rs_alloc_conf *c = &o->alloc_conf;
    char conf[RS_CONF_TEXT_MAX];
    rs_alloc_conf_describe(c, NULL, conf, sizeof conf);
    key(e, "allocator_settings");
    put_map(e, 10);
    kv_u64(e, "memory_limit", src->memory_limit);
    key(e, "max_split_size");
    if (rs_alloc_conf_max_split(c) == UINT64_MAX)
        put_nil(e);
    else
        put_u64(e, rs_alloc_conf_max_split(c));
    kv_u64(e, "min_block_size", RS_MIN_BLOCK_SIZE);
    kv_u64(e, "small_size", RS_SMALL_SIZE);
    kv_u64(e, "small_buffer", RS_SMALL_BUFFER);
    kv_u64(e, "large_buffer", rs_alloc_conf_large_segment(c));
    kv_u64(e, "min_large_alloc", RS_MIN_LARGE_ALLOC);
    kv_u64(e, "round_large", RS_ROUND_LARGE);
    /* every setting in force, in PyTorch's syntax, for the one parser the readers share */
    kv_str(e, "alloc_conf", conf);
    kv_str(e, "alloc_conf_given", c->text);

    key(e, "recorder_settings");
    put_map(e, 4);
    kv_u64(e, "max_entries", o->max_entries);
    kv_str(e, "stacks", stacks_mode_name(o->stacks));
    kv_i64(e, "stack_depth", o->stack_depth);
    /* a rank that recorded nothing may owe it to this setting: the report says so */
    key(e, "driver");
    put_bool(e, o->driver);
}

static void write_time(enc *e, const rs_snapshot_src *src)
{
    /* steps_from only where something numbered the steps: a file without it reads as before */
    int how = src->steps_from && src->steps_from[0];
    int by = src->recorded_by && src->recorded_by[0]; /* the same: only where it is said */
    key(e, "time");
    put_map(e, 4 + (uint32_t)how + (uint32_t)by);
    kv_i64(e, "clock_offset_us", src->clock_offset_us);
    kv_i64(e, "clock_uncertainty_us", src->clock_uncertainty_us);
    key(e, "ranges");
    size_t n = src->ranges ? src->n_ranges : 0;
    put_array(e, n);
    for (size_t i = 0; i < n; i++) {
        put_array(e, 2);
        put_i64(e, src->ranges[i].begin);
        if (src->ranges[i].end < 0)
            put_nil(e);
        else
            put_i64(e, src->ranges[i].end);
    }
    kv_i64(e, "current_step", src->current_step);
    if (how) kv_str(e, "steps_from", src->steps_from);
    if (by) kv_str(e, "recorded_by", src->recorded_by);
}

static void write_totals(enc *e, const rs_snapshot_src *src)
{
    const ranksnap_stats *s = &src->stats;
    const char *of = rs_outside_of_name(src->outside_of);
    int why = src->outside_of == RS_OUTSIDE_DEVICE && src->outside_why != RS_OUTSIDE_WHY_UNSAID;
    int detail = why && src->outside_why_detail && src->outside_why_detail[0];
    key(e, "totals");
    put_map(e, 26 + (of != NULL) + why + detail + (src->async_bytes_peak != 0));
    kv_u64(e, "allocated_bytes_current", s->allocated_bytes);
    kv_u64(e, "allocated_bytes_peak", s->allocated_bytes_peak);
    kv_u64(e, "reserved_bytes_current", s->reserved_bytes);
    kv_u64(e, "reserved_bytes_peak", s->reserved_bytes_peak);
    kv_u64(e, "active_bytes_current", s->active_bytes);
    kv_u64(e, "active_bytes_peak", s->active_bytes_peak);
    kv_u64(e, "requested_bytes_current", s->requested_bytes);
    kv_u64(e, "requested_bytes_peak", s->requested_bytes_peak);
    kv_u64(e, "inactive_split_bytes", s->inactive_split_bytes);
    kv_u64(e, "num_allocs", s->num_allocs);
    kv_u64(e, "num_frees", s->num_frees);
    kv_u64(e, "num_alloc_retries", s->num_alloc_retries);
    kv_u64(e, "num_ooms", s->num_ooms);
    kv_u64(e, "num_segment_allocs", s->num_segment_allocs);
    kv_u64(e, "num_segment_frees", s->num_segment_frees);
    kv_u64(e, "num_sync_all_streams", s->num_sync_all_streams);
    kv_u64(e, "peak_time_us", s->peak_time_us);
    kv_i64(e, "peak_step", s->peak_step);
    kv_u64(e, "events_recorded", s->events_recorded);
    kv_u64(e, "events_dropped", s->events_dropped);
    kv_u64(e, "device_total_bytes", s->device_total_bytes);
    kv_u64(e, "device_used_bytes", src->device_used_bytes);
    kv_u64(e, "memory_limit_bytes", s->memory_limit_bytes);
    kv_u64(e, "outside_bytes_peak", src->outside_bytes_peak);
    kv_u64(e, "outside_bytes_end", src->outside_bytes_end);
    if (of) kv_str(e, "outside_of", of);
    if (why) kv_str(e, "outside_why", rs_outside_why_name((unsigned)src->outside_why));
    if (detail) kv_str(e, "outside_why_detail", src->outside_why_detail);
    if (src->async_bytes_peak) {
        key(e, "async_pool");
        put_map(e, 1 + (src->async_reserved_at_peak != 0));
        kv_u64(e, "bytes_peak", src->async_bytes_peak);
        if (src->async_reserved_at_peak) kv_u64(e, "reserved_at_peak", src->async_reserved_at_peak);
    }
    key(e, "outside_labels");
    put_map(e, src->n_outside_labels);
    for (size_t i = 0; i < src->n_outside_labels; i++)
        kv_u64(e, src->outside_labels[i].label, src->outside_labels[i].bytes);
}

static void write_streams(enc *e, const stream_table *t)
{
    key(e, "streams");
    put_array(e, t->n);
    for (size_t i = 0; i < t->n; i++) put_u64(e, t->v[i]);
}

static void write_segments(enc *e, const rs_snapshot_src *src, stream_table *t,
                           const stack_view *sv)
{
    size_t n = src->state ? src->state->n_segments : 0;
    key(e, "segments");
    put_array(e, n);
    for (size_t i = 0; i < n; i++) {
        const rs_segment_info *g = &src->state->segments[i];
        put_map(e, 10);
        kv_u64(e, "address", g->addr);
        kv_i64(e, "device", g->device);
        kv_u64(e, "total_size", g->total_size);
        kv_u64(e, "allocated_size", g->allocated_size);
        kv_u64(e, "active_size", g->active_size);
        kv_u64(e, "requested_size", g->requested_size);
        kv_u64(e, "stream", stream_index(t, g->stream));
        kv_str(e, "segment_type", g->is_small ? "small" : "large");
        kv_u64(e, "stack", stack_id(sv, g->stack_id));
        key(e, "blocks");
        size_t nb = g->blocks ? g->n_blocks : 0;
        put_array(e, nb);
        for (size_t j = 0; j < nb; j++) {
            const rs_block_info *b = &g->blocks[j];
            put_array(e, 5);
            put_u64(e, b->addr);
            put_u64(e, b->size);
            put_u64(e, b->requested_size);
            /* an out-of-range state cannot come from the allocator; keep the file readable */
            put_u64(e, b->state < RS_BLOCK_STATE_COUNT_ ? b->state : RS_BLOCK_INACTIVE);
            put_u64(e, stack_id(sv, b->stack_id));
        }
    }
}

/* A ring event flagged RS_EV_COMPLETED stands for two: free_requested, then free_completed. */
static int completes(const rs_event *ev)
{
    return ev->action == RS_ACT_FREE_REQUESTED && (ev->flags & RS_EV_COMPLETED);
}

static void write_history(enc *e, const rs_snapshot_src *src, size_t other,
                          const stack_view *sv)
{
    const rs_recorder *r = src->recorder;
    uint64_t raw = r ? rs_recorder_count(r) : 0;
    size_t n_rec_streams = r ? rs_recorder_n_streams(r) : 0;
    size_t n_strings = r ? rs_recorder_n_strings(r) : 0;
    uint64_t n = raw;
    for (uint64_t i = 0; i < raw; i++) n += completes(rs_recorder_at(r, i));

    /* events carry their device only when some are not on `device` (0 when that is -1) */
    int home = src->device.index < 0 ? 0 : src->device.index;
    int with_device = src->n_devices > 1;
    for (uint64_t i = 0; i < raw && !with_device; i++) {
        const rs_event *ev = rs_recorder_at(r, i);
        with_device = ev->action != RS_ACT_STEP && ev->action != RS_ACT_ANNOTATION_BEGIN &&
                      ev->action != RS_ACT_ANNOTATION_END && rs_event_device(ev) != home;
    }
    key(e, "history");
    put_map(e, with_device ? 11 : 10);
    kv_u64(e, "count", n);
    kv_u64(e, "dropped", r ? rs_recorder_dropped(r) : 0);
    kv_u64(e, "capacity", r ? rs_recorder_capacity(r) : 0);
    /* the first events: what the rank held when the range began (held events are allocations,
     * never the two-event frees, so ring entries and events count the same) */
    kv_u64(e, "held", r ? rs_recorder_held(r) : 0);

    key(e, "time_us");
    put_array(e, n);
    uint64_t prev = 0;
    int first = 1;
    for (uint64_t i = 0; i < raw; i++) {
        const rs_event *ev = rs_recorder_at(r, i);
        for (int k = 0; k <= completes(ev); k++) {
            if (first)
                put_u64(e, ev->time_us);
            else
                put_i64(e, delta(prev, ev->time_us));
            prev = ev->time_us;
            first = 0;
        }
    }

    key(e, "action");
    put_array(e, n);
    for (uint64_t i = 0; i < raw; i++) {
        const rs_event *ev = rs_recorder_at(r, i);
        put_u64(e, ev->action);
        if (completes(ev)) put_u64(e, RS_ACT_FREE_COMPLETED);
    }

    key(e, "addr");
    put_array(e, n);
    prev = 0;
    first = 1;
    for (uint64_t i = 0; i < raw; i++) {
        const rs_event *ev = rs_recorder_at(r, i);
        uint64_t v = ev->addr;
        /* an annotation's addr indexes history.strings; the reader checks it */
        if ((ev->action == RS_ACT_ANNOTATION_BEGIN || ev->action == RS_ACT_ANNOTATION_END) &&
            v >= n_strings)
            v = 0;
        for (int k = 0; k <= completes(ev); k++) {
            if (first)
                put_u64(e, v);
            else
                put_i64(e, delta(prev, v));
            prev = v;
            first = 0;
        }
    }

    key(e, "size");
    put_array(e, n);
    for (uint64_t i = 0; i < raw; i++) {
        const rs_event *ev = rs_recorder_at(r, i);
        for (int k = 0; k <= completes(ev); k++) put_u64(e, ev->size);
    }

    key(e, "stream");
    put_array(e, n);
    for (uint64_t i = 0; i < raw; i++) {
        const rs_event *ev = rs_recorder_at(r, i);
        for (int k = 0; k <= completes(ev); k++) put_u64(e, ev->stream < n_rec_streams ? ev->stream : other);
    }

    key(e, "stack");
    put_array(e, n);
    for (uint64_t i = 0; i < raw; i++) {
        const rs_event *ev = rs_recorder_at(r, i);
        for (int k = 0; k <= completes(ev); k++) put_u64(e, stack_id(sv, ev->stack_id));
    }

    if (!with_device) return;
    key(e, "device");
    put_array(e, n);
    for (uint64_t i = 0; i < raw; i++) {
        const rs_event *ev = rs_recorder_at(r, i);
        for (int k = 0; k <= completes(ev); k++) put_u64(e, (uint64_t)rs_event_device(ev));
    }
}

static void write_strings(enc *e, const rs_recorder *r)
{
    size_t n = r ? rs_recorder_n_strings(r) : 0;
    key(e, "strings");
    put_array(e, n);
    for (size_t i = 0; i < n; i++) put_str(e, rs_recorder_string(r, i));
}

/* stacks: id i+1 is element i, an array of indexes into `frames`, each pc contributing its inline
 * levels (symbols.h). A pc the symbols do not know (a stack interned after resolution) gets an
 * unresolved frame after the resolved ones; both loops below visit the misses in the same order
 * so that their indexes agree. */
static void write_stack_tables(enc *e, const stack_view *sv)
{
    size_t n_sym = sv->n ? sv->sym->n_frames : 0;
    size_t misses = 0;

    key(e, "stacks");
    put_array(e, sv->n);
    for (uint32_t id = 1; id <= sv->n; id++) {
        int depth = 0, levels;
        const uintptr_t *pcs = rs_stacks_get(sv->stacks, id, &depth);
        if (!pcs || depth < 0) depth = 0;
        size_t n_frames = 0;
        for (int k = 0; k < depth; k++) {
            long f = rs_symbols_find(sv->sym, pcs[k], &levels);
            n_frames += f >= 0 ? (size_t)levels : 1;
        }
        put_array(e, n_frames);
        for (int k = 0; k < depth; k++) {
            long f = rs_symbols_find(sv->sym, pcs[k], &levels);
            if (f >= 0 && (size_t)f + (size_t)levels <= n_sym)
                for (int l = 0; l < levels; l++) put_u64(e, (uint64_t)f + (uint64_t)l);
            else
                put_u64(e, n_sym + misses++);
        }
    }

    key(e, "frames");
    put_array(e, n_sym + misses);
    size_t n_mod = sv->n ? sv->sym->n_modules : 0;
    for (size_t i = 0; i < n_sym; i++) {
        const rs_frame_info *f = &sv->sym->frames[i];
        put_array(e, 5);
        put_u64(e, f->pc);
        put_i64(e, f->module >= 0 && (size_t)f->module < n_mod ? f->module : -1);
        put_str(e, f->function ? f->function : "??");
        put_str(e, f->file ? f->file : "??");
        put_i64(e, f->line);
    }
    for (uint32_t id = 1; id <= sv->n; id++) {
        int depth = 0, levels;
        const uintptr_t *pcs = rs_stacks_get(sv->stacks, id, &depth);
        if (!pcs || depth < 0) depth = 0;
        for (int k = 0; k < depth; k++) {
            long f = rs_symbols_find(sv->sym, pcs[k], &levels);
            if (f >= 0 && (size_t)f + (size_t)levels <= n_sym) continue;
            put_array(e, 5);
            put_u64(e, pcs[k]);
            put_i64(e, -1);
            put_str(e, "??");
            put_str(e, "??");
            put_i64(e, 0);
        }
    }

    key(e, "modules");
    put_array(e, n_mod);
    for (size_t i = 0; i < n_mod; i++) {
        const rs_module_info *m = &sv->sym->modules[i];
        put_array(e, 3);
        put_str(e, m->path);
        put_u64(e, m->base);
        put_strn(e, m->build_id, strnlen(m->build_id, sizeof m->build_id));
    }
}

static void write_oom(enc *e, const rs_snapshot_src *src, stream_table *t, const stack_view *sv)
{
    key(e, "oom");
    if (!src->has_oom) {
        put_nil(e);
        return;
    }
    const rs_oom_info *o = &src->oom;
    put_map(e, 12);
    kv_i64(e, "device", src->oom_device);
    kv_u64(e, "requested", o->requested);
    kv_u64(e, "rounded", o->rounded);
    kv_u64(e, "device_free", o->device_free);
    kv_u64(e, "device_total", o->device_total);
    kv_u64(e, "allocated", o->allocated);
    kv_u64(e, "reserved", o->reserved);
    kv_u64(e, "memory_limit", o->memory_limit);
    kv_u64(e, "time_us", o->time_us);
    kv_u64(e, "stream", stream_index(t, o->stream));
    kv_u64(e, "stack", stack_id(sv, src->oom_stack_id));
    kv_i64(e, "step", src->oom_step);
}

/* Only when the rank saw communicators created: a file without them reads as before. */
static void write_comms(enc *e, const rs_snapshot_src *src)
{
    if (src->comms_left_out) {
        key(e, "communicators_left_out");
        put_u64(e, src->comms_left_out);
    }
    if (!src->n_comms) return;
    key(e, "communicators");
    put_array(e, src->n_comms);
    for (size_t i = 0; i < src->n_comms; i++) {
        const rs_snapshot_comm *c = &src->comms[i];
        put_array(e, 6);
        put_u64(e, c->id);
        put_i64(e, c->size);
        put_i64(e, c->rank);
        put_strn(e, c->kind, strnlen(c->kind, sizeof c->kind));
        put_strn(e, c->name, strnlen(c->name, sizeof c->name));
        put_u64(e, c->allreduces);
    }
}

/* Only in a snapshot written on the process's way out (format.h's rs_end): each key only when
 * it is known. */
static void write_end(enc *e, const rs_snapshot_src *src)
{
    rs_end_key k[5];
    int n = rs_end_keys(&src->end, k);
    if (!n) return;
    key(e, "end");
    put_map(e, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        key(e, k[i].name);
        if (k[i].is_bool)
            put_bool(e, k[i].value != 0);
        else
            put_i64(e, k[i].value);
    }
}

/* Top-level keys: format version rank world_size host pid job complete time_us device backend
 * devices (12), allocator_settings recorder_settings (2), time totals streams segments history
 * strings (6), stacks frames modules (3), oom (1). */
#define RS_TOP_LEVEL_KEYS 24

ranksnap_status rs_snapshot_encode(const rs_snapshot_src *src, char **buf, size_t *len)
{
    if (!src || !buf || !len)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_snapshot_encode: NULL argument");
    if (!src->options)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                        "rs_snapshot_encode: src->options is NULL, the settings are needed");

    stack_view sv = {NULL, NULL, 0};
    if (src->recorder && src->symbols) {
        sv.stacks = rs_recorder_stacks(src->recorder);
        sv.sym = src->symbols;
        if (sv.stacks) sv.n = rs_stacks_count(sv.stacks);
        if (sv.n > UINT32_MAX) sv.n = UINT32_MAX;
    }

    stream_table t;
    RS_CHECK(build_streams(src, &t));
    /* events whose stream the recorder could not intern (RS_STREAM_OTHER) point at a sentinel */
    size_t other = SIZE_MAX;
    if (src->recorder) {
        uint64_t n = rs_recorder_count(src->recorder);
        size_t n_rec = rs_recorder_n_streams(src->recorder);
        for (uint64_t i = 0; i < n; i++)
            if (rs_recorder_at(src->recorder, i)->stream >= n_rec) {
                other = t.n;
                t.v[t.n++] = RSNAP_STREAM_OTHER;
                break;
            }
    }

    enc e;
    msgpack_sbuffer_init(&e.sbuf);
    msgpack_packer_init(&e.pk, &e.sbuf, msgpack_sbuffer_write);
    e.failed = 0;

    rs_end_key end_keys[5];
    put_map(&e, RS_TOP_LEVEL_KEYS + (src->n_comms > 0) + (src->comms_left_out > 0) +
                    (rs_end_keys(&src->end, end_keys) > 0));
    write_identity(&e, src);
    write_devices(&e, src);
    write_settings(&e, src);
    write_time(&e, src);
    write_totals(&e, src);
    write_streams(&e, &t);
    write_segments(&e, src, &t, &sv);
    write_history(&e, src, other, &sv);
    write_strings(&e, src->recorder);
    write_stack_tables(&e, &sv);
    write_oom(&e, src, &t, &sv);
    write_comms(&e, src);
    write_end(&e, src);
    free(t.v);

    if (e.failed) {
        size_t at = e.sbuf.size;
        msgpack_sbuffer_destroy(&e.sbuf);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY,
                        "snapshot: no memory to grow the msgpack buffer beyond %zu bytes", at);
    }
    *len = e.sbuf.size;
    *buf = msgpack_sbuffer_release(&e.sbuf);
    return RANKSNAP_OK;
}
