/*
 * torch_meta.c — the "ranksnap" key of a PyTorch snapshot dumped by ranksnap's glue, applied to
 * the decoded snapshot (torch_meta.h).
 *
 * PyTorch records neither the rank nor the steps; ranksnap knew both when it asked for the
 * snapshot, so they travel in the file. The rank and job make `ranksnap report DIR` work without
 * --rank-from-name; the step times replace the inference of steps_infer.c, which a history of a
 * few steps may not allow; the outside bytes are what the rank's process held on its device
 * beyond PyTorch's reserved bytes (NCCL, the CUDA context; the device's whole use where the
 * process's own was not known, said so), with the other processes NVML listed there, which the
 * pickle alone cannot tell; the
 * communicators (the DeviceMesh dimensions and process groups the rank was in) let the report
 * group the ranks into roles with no --groups.
 *
 * The key is as untrusted as the rest of the file: every field's type is checked and a wrong one
 * is an error naming it; missing fields keep what torch_decode.c set.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "step_events.h"
#include "torch_meta.h"

typedef struct meta_ctx {
    const char *name;
} meta_ctx;

static ranksnap_status meta_bad(const meta_ctx *c, const rs_pickle_value *at, const char *field,
                                const char *fmt, ...) RS_PRINTF(4, 5);

static ranksnap_status meta_bad(const meta_ctx *c, const rs_pickle_value *at, const char *field,
                                const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rs_error(RANKSNAP_ERR_FORMAT, "%s: offset %zu: ranksnap.%s: %s", c->name,
                    at ? at->offset : 0, field, msg);
}

/* An integer field within [lo, hi]; 0 when present (and stored), 1 when absent (or None). */
static ranksnap_status meta_int(const meta_ctx *c, const rs_pickle_value *dict, const char *key,
                                int64_t lo, int64_t hi, int64_t *out, int *absent)
{
    const rs_pickle_value *v = rs_pickle_dict_get(dict, key);
    *absent = !v || v->kind == RS_PICKLE_NONE;
    if (*absent) return RANKSNAP_OK;
    int64_t x;
    if (rs_pickle_get_i64(v, &x) != 0 || x < lo || x > hi)
        return meta_bad(c, v, key, "expected an integer from %lld to %lld, found %s",
                        (long long)lo, (long long)hi, rs_pickle_kind_name(v->kind));
    *out = x;
    return RANKSNAP_OK;
}

static ranksnap_status meta_u64(const meta_ctx *c, const rs_pickle_value *dict, const char *key,
                                uint64_t *out)
{
    const rs_pickle_value *v = rs_pickle_dict_get(dict, key);
    if (!v || v->kind == RS_PICKLE_NONE) return RANKSNAP_OK;
    if (rs_pickle_get_u64(v, out) != 0)
        return meta_bad(c, v, key, "expected a non-negative integer, found %s",
                        rs_pickle_kind_name(v->kind));
    return RANKSNAP_OK;
}

/* Replaces *dst (malloc'ed, or NULL) with the str field `key`, when present. */
static ranksnap_status meta_str(const meta_ctx *c, const rs_pickle_value *dict, const char *key,
                                char **dst)
{
    const rs_pickle_value *v = rs_pickle_dict_get(dict, key);
    if (!v || v->kind == RS_PICKLE_NONE) return RANKSNAP_OK;
    if (v->kind != RS_PICKLE_STR)
        return meta_bad(c, v, key, "expected a str, found %s", rs_pickle_kind_name(v->kind));
    char *s = malloc(v->v.str.n + 1);
    if (!s) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory for ranksnap.%s", c->name, key);
    memcpy(s, v->v.str.p, v->v.str.n);
    s[v->v.str.n] = '\0';
    free(*dst);
    *dst = s;
    return RANKSNAP_OK;
}

static ranksnap_status meta_seq(const meta_ctx *c, const rs_pickle_value *v, const char *key)
{
    if (v->kind != RS_PICKLE_LIST && v->kind != RS_PICKLE_TUPLE)
        return meta_bad(c, v, key, "expected a list, found %s", rs_pickle_kind_name(v->kind));
    return RANKSNAP_OK;
}

static ranksnap_status meta_identity(const meta_ctx *c, const rs_pickle_value *m, rs_snap *s)
{
    int64_t v = 0;
    int absent;
    RS_CHECK(meta_int(c, m, "rank", 0, INT32_MAX - 1, &v, &absent));
    if (!absent) s->rank = (int)v;
    RS_CHECK(meta_int(c, m, "world_size", 1, INT32_MAX, &v, &absent));
    if (!absent) {
        if (v <= s->rank)
            return meta_bad(c, rs_pickle_dict_get(m, "world_size"), "world_size",
                            "%lld ranks cannot hold rank %d", (long long)v, s->rank);
        s->world_size = (int)v;
    } else if (s->world_size <= s->rank) {
        s->world_size = s->rank + 1;
    }
    RS_CHECK(meta_int(c, m, "pid", 0, INT64_MAX, &v, &absent));
    if (!absent) s->pid = v;
    RS_CHECK(meta_str(c, m, "host", &s->host));
    RS_CHECK(meta_str(c, m, "job", &s->job));
    const rs_pickle_value *done = rs_pickle_dict_get(m, "complete");
    if (done && done->kind != RS_PICKLE_BOOL)
        return meta_bad(c, done, "complete", "expected a bool, found %s", rs_pickle_kind_name(done->kind));
    if (done) s->complete = done->v.b != 0;
    RS_CHECK(meta_u64(c, m, "time_us", &s->time_us));
    RS_CHECK(meta_int(c, m, "clock_offset_us", INT64_MIN, INT64_MAX, &s->time.clock_offset_us, &absent));
    RS_CHECK(meta_int(c, m, "clock_uncertainty_us", 0, INT64_MAX, &s->time.clock_uncertainty_us, &absent));
    RS_CHECK(meta_int(c, m, "current_step", -1, INT64_MAX, &s->time.current_step, &absent));
    RS_CHECK(meta_str(c, m, "steps_from", &s->time.steps_from));
    return RANKSNAP_OK;
}

static ranksnap_status meta_device(const meta_ctx *c, const rs_pickle_value *m, rs_snap *s)
{
    const rs_pickle_value *d = rs_pickle_dict_get(m, "device");
    if (d && d->kind != RS_PICKLE_DICT)
        return meta_bad(c, d, "device", "expected a dict, found %s", rs_pickle_kind_name(d->kind));
    if (d) {
        int64_t v = 0;
        int absent;
        RS_CHECK(meta_int(c, d, "index", -1, INT32_MAX, &v, &absent));
        if (!absent) s->device.index = (int)v;
        RS_CHECK(meta_str(c, d, "name", &s->device.name));
        RS_CHECK(meta_str(c, d, "uuid", &s->device.uuid));
        RS_CHECK(meta_u64(c, d, "total_bytes", &s->device.total_bytes));
        /* what NVML listed on it (absent where it listed nothing, and in older files) */
        RS_CHECK(meta_int(c, d, "processes", 0, UINT32_MAX, &v, &absent));
        if (!absent) s->device.processes = (uint32_t)v;
        RS_CHECK(meta_int(c, d, "others_unknown", 0, s->device.processes, &v, &absent));
        if (!absent) s->device.others_unknown = (uint32_t)v;
        RS_CHECK(meta_u64(c, d, "others_bytes", &s->device.others_bytes));
        RS_CHECK(meta_u64(c, d, "own_bytes", &s->device.own_bytes));
    }
    rs_snap_totals *t = &s->totals;
    t->device_total_bytes = s->device.total_bytes;
    RS_CHECK(meta_u64(c, m, "device_used_bytes", &t->device_used_bytes));
    RS_CHECK(meta_u64(c, m, "outside_bytes_peak", &t->outside_bytes_peak));
    RS_CHECK(meta_u64(c, m, "outside_bytes_end", &t->outside_bytes_end));
    /* what they are measured against (absent in older files: unsaid) */
    const rs_pickle_value *of = rs_pickle_dict_get(m, "outside_of");
    if (of && of->kind != RS_PICKLE_NONE) {
        if (of->kind != RS_PICKLE_STR || !(t->outside_of = rs_outside_of_parse(of->v.str.p, of->v.str.n)))
            return meta_bad(c, of, "outside_of", "expected \"process\" or \"device\"");
    }
    const rs_pickle_value *why = rs_pickle_dict_get(m, "outside_why");
    if (why && why->kind != RS_PICKLE_NONE) {
        if (why->kind != RS_PICKLE_STR)
            return meta_bad(c, why, "outside_why", "expected a str, found %s", rs_pickle_kind_name(why->kind));
        t->outside_why = rs_outside_why_parse(why->v.str.p, why->v.str.n);
    }
    RS_CHECK(meta_str(c, m, "outside_why_detail", &t->outside_why_detail));
    RS_CHECK(meta_u64(c, m, "memory_limit_bytes", &t->memory_limit_bytes));
    s->allocator.memory_limit = t->memory_limit_bytes;
    /* the OOM record's device, for the sentence "with X free of Y" (the trace has the rest) */
    s->oom.device_total = s->device.total_bytes;
    s->oom.memory_limit = t->memory_limit_bytes;
    return RANKSNAP_OK;
}

static ranksnap_status meta_labels(const meta_ctx *c, const rs_pickle_value *m, rs_snap *s)
{
    const rs_pickle_value *l = rs_pickle_dict_get(m, "outside_labels");
    if (!l || l->kind == RS_PICKLE_NONE) return RANKSNAP_OK;
    if (l->kind != RS_PICKLE_DICT)
        return meta_bad(c, l, "outside_labels", "expected a dict, found %s", rs_pickle_kind_name(l->kind));
    size_t n = rs_pickle_len(l);
    rs_snap_totals *t = &s->totals;
    for (size_t i = 0; i < t->n_outside_labels; i++) free(t->outside_labels[i].label);
    free(t->outside_labels);
    t->n_outside_labels = 0;
    t->outside_labels = calloc(n ? n : 1, sizeof *t->outside_labels);
    if (!t->outside_labels)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory for ranksnap.outside_labels", c->name);
    for (size_t i = 0; i < n; i++) {
        const rs_pickle_value *k = l->v.seq.items[2 * i], *v = l->v.seq.items[2 * i + 1];
        uint64_t bytes = 0;
        if (k->kind != RS_PICKLE_STR || rs_pickle_get_u64(v, &bytes) != 0)
            return meta_bad(c, k, "outside_labels", "expected str keys and byte counts");
        char *label = malloc(k->v.str.n + 1);
        if (!label)
            return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory for ranksnap.outside_labels", c->name);
        memcpy(label, k->v.str.p, k->v.str.n);
        label[k->v.str.n] = '\0';
        t->outside_labels[t->n_outside_labels].label = label;
        t->outside_labels[t->n_outside_labels++].bytes = bytes;
    }
    return RANKSNAP_OK;
}

static ranksnap_status meta_ranges(const meta_ctx *c, const rs_pickle_value *m, rs_snap *s)
{
    const rs_pickle_value *r = rs_pickle_dict_get(m, "ranges");
    if (!r) return RANKSNAP_OK;
    RS_CHECK(meta_seq(c, r, "ranges"));
    size_t n = rs_pickle_len(r);
    rs_snap_range *v = calloc(n ? n : 1, sizeof *v);
    if (!v) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory for ranksnap.ranges", c->name);
    for (size_t i = 0; i < n; i++) {
        const rs_pickle_value *p = rs_pickle_item(r, i);
        const rs_pickle_value *e = rs_pickle_len(p) == 2 ? rs_pickle_item(p, 1) : NULL;
        int64_t b = 0, en = -1;
        int ok = rs_pickle_is_sequence(p) && rs_pickle_len(p) == 2 &&
                 rs_pickle_get_i64(rs_pickle_item(p, 0), &b) == 0 && b >= 0 &&
                 (e->kind == RS_PICKLE_NONE || (rs_pickle_get_i64(e, &en) == 0 && en >= b));
        if (!ok) {
            free(v);
            return meta_bad(c, p, "ranges", "expected [begin, end or None] pairs with end >= begin >= 0");
        }
        v[i].begin = b;
        v[i].end = e->kind == RS_PICKLE_NONE ? -1 : en;
    }
    free(s->time.ranges);
    s->time.ranges = v;
    s->time.n_ranges = n;
    return RANKSNAP_OK;
}

/* One step event before the first event at or after each step's start; the history keeps its
 * order by time. Stream index 0 exists (torch_decode.c makes one when none does). */
static ranksnap_status meta_steps(const meta_ctx *c, const rs_pickle_value *m, rs_snap *s)
{
    const rs_pickle_value *st = rs_pickle_dict_get(m, "steps");
    if (!st) return RANKSNAP_OK;
    RS_CHECK(meta_seq(c, st, "steps"));
    size_t n = rs_pickle_len(st);
    if (n == 0) return RANKSNAP_OK;
    const rs_snap_history *h = &s->history;
    for (uint64_t i = 0; i < h->count; i++)
        if (h->action[i] == RS_ACT_STEP) return RANKSNAP_OK; /* already marked */
    rs_step_event *ev = malloc(n * sizeof *ev);
    if (!ev) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory for the step events", c->name);
    uint64_t at = 0, prev_t = 0;
    for (size_t k = 0; k < n; k++) {
        const rs_pickle_value *p = rs_pickle_item(st, k);
        int64_t step = 0;
        uint64_t t = 0;
        if (!rs_pickle_is_sequence(p) || rs_pickle_len(p) != 2 ||
            rs_pickle_get_i64(rs_pickle_item(p, 0), &step) != 0 || step < 0 ||
            rs_pickle_get_u64(rs_pickle_item(p, 1), &t) != 0 || t < prev_t) {
            free(ev);
            return meta_bad(c, p, "steps", "expected [step, time_us] pairs in time order");
        }
        prev_t = t;
        while (at < h->count && h->time_us[at] < t) at++;
        ev[k] = (rs_step_event){at, step, t, 0};
    }
    ranksnap_status rc = rs_step_events_insert(s, ev, n);
    free(ev);
    return rc;
}

static ranksnap_status meta_recorder(const meta_ctx *c, const rs_pickle_value *m, rs_snap *s)
{
    const rs_pickle_value *r = rs_pickle_dict_get(m, "recorder");
    if (!r) return RANKSNAP_OK;
    if (r->kind != RS_PICKLE_DICT)
        return meta_bad(c, r, "recorder", "expected a dict, found %s", rs_pickle_kind_name(r->kind));
    RS_CHECK(meta_u64(c, r, "max_entries", &s->recorder.max_entries));
    return meta_str(c, r, "stacks", &s->recorder.stacks);
}

/* Copies the str field `key` of `dict` into dst[cap], cut to cap - 1 bytes (a name longer than
 * the model keeps still groups its ranks alike: every member's file cuts it the same way). */
static ranksnap_status meta_name(const meta_ctx *c, const rs_pickle_value *dict, const char *key,
                                 const char *field, char *dst, size_t cap)
{
    const rs_pickle_value *v = rs_pickle_dict_get(dict, key);
    if (!v || v->kind == RS_PICKLE_NONE) return RANKSNAP_OK;
    if (v->kind != RS_PICKLE_STR)
        return meta_bad(c, v, field, "expected a str, found %s", rs_pickle_kind_name(v->kind));
    size_t n = v->v.str.n < cap - 1 ? v->v.str.n : cap - 1;
    memcpy(dst, v->v.str.p, n);
    dst[n] = '\0';
    return RANKSNAP_OK;
}

/* The communicators the rank belonged to (the glue's DeviceMesh dimensions and process groups):
 * each {id, size, rank, kind, name, allreduces}, id, size and rank required. */
static ranksnap_status meta_comms_list(const meta_ctx *c, const rs_pickle_value *m, rs_snap *s)
{
    const rs_pickle_value *l = rs_pickle_dict_get(m, "communicators");
    if (!l || l->kind == RS_PICKLE_NONE) return RANKSNAP_OK;
    RS_CHECK(meta_seq(c, l, "communicators"));
    size_t n = rs_pickle_len(l);
    rs_snap_comm *v = calloc(n ? n : 1, sizeof *v);
    if (!v) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory for ranksnap.communicators", c->name);
    ranksnap_status rc = RANKSNAP_OK;
    for (size_t i = 0; i < n && rc == RANKSNAP_OK; i++) {
        const rs_pickle_value *d = rs_pickle_item(l, i);
        int64_t size = 0, rank = 0;
        if (d->kind != RS_PICKLE_DICT) {
            rc = meta_bad(c, d, "communicators", "expected dicts, found %s", rs_pickle_kind_name(d->kind));
            break;
        }
        const rs_pickle_value *id = rs_pickle_dict_get(d, "id");
        const rs_pickle_value *sz = rs_pickle_dict_get(d, "size"), *rk = rs_pickle_dict_get(d, "rank");
        if (!id || rs_pickle_get_u64(id, &v[i].id) != 0) {
            rc = meta_bad(c, id ? id : d, "communicators.id", "expected a non-negative integer");
            break;
        }
        if (!sz || !rk || rs_pickle_get_i64(sz, &size) != 0 || rs_pickle_get_i64(rk, &rank) != 0 ||
            size < 1 || size > INT32_MAX || rank < 0 || rank >= size) {
            rc = meta_bad(c, d, "communicators", "expected a size from 1 and a rank below it");
            break;
        }
        v[i].size = (int32_t)size;
        v[i].rank = (int32_t)rank;
        if ((rc = meta_name(c, d, "kind", "communicators.kind", v[i].kind, sizeof v[i].kind)) != RANKSNAP_OK ||
            (rc = meta_name(c, d, "name", "communicators.name", v[i].name, sizeof v[i].name)) != RANKSNAP_OK)
            break;
        rc = meta_u64(c, d, "allreduces", &v[i].allreduces);
    }
    if (rc != RANKSNAP_OK) {
        free(v);
        return rc;
    }
    free(s->comms);
    s->comms = v;
    s->n_comms = n;
    return RANKSNAP_OK;
}

/* As for a .rsnap: a malformed list costs the rank its communicators, not the file. */
static ranksnap_status meta_comms(const meta_ctx *c, const rs_pickle_value *m, rs_snap *s)
{
    ranksnap_status st = meta_comms_list(c, m, s);
    if (st != RANKSNAP_ERR_FORMAT) return st;
    snprintf(s->comms_error, sizeof s->comms_error, "%s", ranksnap_last_error());
    rs_error_clear();
    return RANKSNAP_OK;
}

ranksnap_status rs_torch_meta_apply(const rs_pickle_value *meta, const char *name, rs_snap *s)
{
    if (!meta) return RANKSNAP_OK;
    meta_ctx c = {name ? name : "pickle"};
    if (meta->kind != RS_PICKLE_DICT)
        return rs_error(RANKSNAP_ERR_FORMAT, "%s: offset %zu: ranksnap: expected a dict, found %s",
                        c.name, meta->offset, rs_pickle_kind_name(meta->kind));
    RS_CHECK(meta_identity(&c, meta, s));
    RS_CHECK(meta_device(&c, meta, s));
    RS_CHECK(meta_labels(&c, meta, s));
    RS_CHECK(meta_ranges(&c, meta, s));
    RS_CHECK(meta_recorder(&c, meta, s));
    RS_CHECK(meta_comms(&c, meta, s));
    return meta_steps(&c, meta, s);
}
