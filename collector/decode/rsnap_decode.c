/*
 * rsnap_decode.c — decodes .rsnap files (docs/FORMAT.md) into rs_snap, trusting nothing.
 *
 * Two passes. The first (scan) walks the raw msgpack bytes without allocating: it finds where the
 * top-level map ends (so that truncation and trailing bytes get their own messages) and checks
 * that every array or map count could fit in the bytes that remain. msgpack-c allocates a
 * container's element table as soon as it reads the count, so without this pass a 5-byte array
 * header claiming 4 billion elements would ask for 96 GiB; after it, msgpack_unpack_next's zone
 * is bounded by a small multiple of the input. The second pass walks the msgpack_object tree and
 * checks every type, every column length and every cross-reference (streams, strings, stacks,
 * frames, modules) before anything downstream can index with it.
 *
 * Errors are RANKSNAP_ERR_FORMAT with "NAME: what was wrong", naming fields by their path in the
 * file ("segments[3].blocks[0]"). The model is filled as decoding goes (arrays zeroed first), so
 * rs_snap_free cleans up a half-built snapshot on every error path.
 */
#include <errno.h>
#include <inttypes.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "file_read.h"
#include "rsnap_decode.h"
#include "snap_check.h"

/* Our format nests five deep; unknown keys from newer writers get room to nest further. */
#define RSNAP_MAX_DEPTH 24
#define RSNAP_PATH 192

typedef struct dec {
    const char *name;
    const unsigned char *buf;
    size_t len;
} dec;

static ranksnap_status fail(const dec *d, const char *fmt, ...) RS_PRINTF(2, 3);

static ranksnap_status fail(const dec *d, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rs_error(RANKSNAP_ERR_FORMAT, "%s: %s", d->name, msg);
}

static ranksnap_status no_memory(const dec *d, const char *what, size_t n)
{
    return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory for %zu entries of %s", d->name, n,
                    what);
}

/* ---- pass 1: structure -------------------------------------------------------------------- */

static const char *type_of_byte(unsigned char b)
{
    if (b <= 0x7f || b >= 0xe0) return "a msgpack integer";
    if (b <= 0x8f || b == 0xde || b == 0xdf) return "a msgpack map";
    if (b <= 0x9f || b == 0xdc || b == 0xdd) return "a msgpack array";
    if (b <= 0xbf || (b >= 0xd9 && b <= 0xdb)) return "a msgpack string";
    switch (b) {
    case 0xc0: return "msgpack nil";
    case 0xc2:
    case 0xc3: return "a msgpack boolean";
    case 0xc4:
    case 0xc5:
    case 0xc6: return "msgpack binary";
    case 0xca:
    case 0xcb: return "a msgpack float";
    }
    if (b >= 0xcc && b <= 0xd3) return "a msgpack integer";
    if (b == 0xc1) return "the byte 0xc1 (never valid in msgpack)";
    return "a msgpack extension";
}

static ranksnap_status truncated(const dec *d)
{
    return fail(d, "truncated: %zu bytes, the msgpack map ends beyond the end of the file",
                d->len);
}

/* Big-endian length prefix of `n` bytes at *pos. */
static int read_be(const dec *d, size_t *pos, unsigned n, uint64_t *v)
{
    if (n > d->len - *pos) return -1;
    uint64_t x = 0;
    for (unsigned i = 0; i < n; i++) x = (x << 8) | d->buf[*pos + i];
    *pos += n;
    *v = x;
    return 0;
}

/* Sets *end to one past the top-level object. `pending` counts the objects still to read, each
 * of which needs at least one byte: a count beyond the remaining bytes is a truncation (or a
 * lie) caught before msgpack-c allocates anything for it. */
static ranksnap_status scan(const dec *d, size_t *end)
{
    uint64_t left[RSNAP_MAX_DEPTH + 1];
    size_t depth = 0, pos = 0;
    uint64_t pending = 1;
    left[0] = 1;
    while (pending > 0) {
        while (left[depth] == 0) depth--;
        if (pos >= d->len) return truncated(d);
        size_t at = pos;
        unsigned char b = d->buf[pos++];
        uint64_t skip = 0, items = 0, x = 0;
        int container = 0, bad = 0;
        left[depth]--;
        pending--;
        if (b <= 0x7f || b >= 0xe0) {
            /* fixint */
        } else if (b <= 0x8f) {
            items = 2u * (b & 0x0fu);
            container = 1;
        } else if (b <= 0x9f) {
            items = b & 0x0fu;
            container = 1;
        } else if (b <= 0xbf) {
            skip = b & 0x1fu;
        } else {
            switch (b) {
            case 0xc0: case 0xc2: case 0xc3: break;
            case 0xc1:
                return fail(d, "byte 0xc1 at offset %zu is not valid msgpack", at);
            case 0xc4: case 0xd9: bad = read_be(d, &pos, 1, &skip); break;
            case 0xc5: case 0xda: bad = read_be(d, &pos, 2, &skip); break;
            case 0xc6: case 0xdb: bad = read_be(d, &pos, 4, &skip); break;
            case 0xc7: bad = read_be(d, &pos, 1, &x); skip = x + 1; break;
            case 0xc8: bad = read_be(d, &pos, 2, &x); skip = x + 1; break;
            case 0xc9: bad = read_be(d, &pos, 4, &x); skip = x + 1; break;
            case 0xca: skip = 4; break;
            case 0xcb: skip = 8; break;
            case 0xcc: case 0xd0: skip = 1; break;
            case 0xcd: case 0xd1: skip = 2; break;
            case 0xce: case 0xd2: skip = 4; break;
            case 0xcf: case 0xd3: skip = 8; break;
            case 0xd4: skip = 2; break;
            case 0xd5: skip = 3; break;
            case 0xd6: skip = 5; break;
            case 0xd7: skip = 9; break;
            case 0xd8: skip = 17; break;
            case 0xdc: bad = read_be(d, &pos, 2, &items); container = 1; break;
            case 0xdd: bad = read_be(d, &pos, 4, &items); container = 1; break;
            case 0xde: bad = read_be(d, &pos, 2, &items); items *= 2; container = 1; break;
            case 0xdf: bad = read_be(d, &pos, 4, &items); items *= 2; container = 1; break;
            }
        }
        if (bad || skip > d->len - pos) return truncated(d);
        pos += skip;
        if (container && items > 0) {
            if (items > d->len - pos || pending + items > d->len - pos) return truncated(d);
            if (depth == RSNAP_MAX_DEPTH)
                return fail(d, "msgpack nested deeper than %d levels at offset %zu",
                            RSNAP_MAX_DEPTH, at);
            pending += items;
            left[++depth] = items;
        }
    }
    *end = pos;
    return RANKSNAP_OK;
}

/* ---- pass 2: values ----------------------------------------------------------------------- */

static const char *type_name(const msgpack_object *o)
{
    switch (o->type) {
    case MSGPACK_OBJECT_NIL: return "nil";
    case MSGPACK_OBJECT_BOOLEAN: return "a boolean";
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "an integer";
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return "a float";
    case MSGPACK_OBJECT_STR: return "a string";
    case MSGPACK_OBJECT_ARRAY: return "an array";
    case MSGPACK_OBJECT_MAP: return "a map";
    case MSGPACK_OBJECT_BIN: return "binary";
    case MSGPACK_OBJECT_EXT: return "an extension";
    }
    return "unknown";
}

/* A string from the file, shortened and with control bytes replaced, for an error message. */
static void printable(const char *p, size_t n, char *dst, size_t dn)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < dn; i++)
        dst[k++] = (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"') ? p[i] : '?';
    if (n > 0 && k < n && k + 4 <= dn) {
        memcpy(dst + k, "...", 3);
        k += 3;
    }
    dst[k] = '\0';
}

static int str_is(const msgpack_object *o, const char *s)
{
    size_t n = strlen(s);
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
           memcmp(o->via.str.ptr, s, n) == 0;
}

static ranksnap_status as_u64(const dec *d, const msgpack_object *o, const char *name,
                              uint64_t *v)
{
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return fail(d, "field '%s' must be an unsigned integer, not %s", name, type_name(o));
    *v = o->via.u64;
    return RANKSNAP_OK;
}

static ranksnap_status as_i64(const dec *d, const msgpack_object *o, const char *name, int64_t *v)
{
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *v = o->via.i64;
        return RANKSNAP_OK;
    }
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        if (o->via.u64 > (uint64_t)INT64_MAX)
            return fail(d, "field '%s' (%" PRIu64 ") does not fit a signed 64-bit integer", name,
                        o->via.u64);
        *v = (int64_t)o->via.u64;
        return RANKSNAP_OK;
    }
    return fail(d, "field '%s' must be an integer", name);
}

static ranksnap_status as_int_range(const dec *d, const msgpack_object *o, const char *name,
                                    int64_t lo, int64_t hi, int64_t *v)
{
    RS_CHECK(as_i64(d, o, name, v));
    if (*v < lo || *v > hi)
        return fail(d, "field '%s' is %" PRId64 ", expected %" PRId64 " to %" PRId64, name, *v, lo,
                    hi);
    return RANKSNAP_OK;
}

/* An integer as its 64-bit pattern: deltas are written as the smallest signed or unsigned int
 * and added modulo 2^64. */
static ranksnap_status as_bits(const dec *d, const msgpack_object *o, const char *name,
                               uint64_t *v)
{
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        *v = o->via.u64;
    else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        *v = (uint64_t)o->via.i64;
    else
        return fail(d, "field '%s' must be an integer", name);
    return RANKSNAP_OK;
}

static ranksnap_status as_str(const dec *d, const msgpack_object *o, const char *name, char **out)
{
    if (o->type != MSGPACK_OBJECT_STR)
        return fail(d, "field '%s' must be a string, not %s", name, type_name(o));
    char *s = malloc((size_t)o->via.str.size + 1);
    if (!s) return no_memory(d, name, o->via.str.size);
    if (o->via.str.size) memcpy(s, o->via.str.ptr, o->via.str.size);
    s[o->via.str.size] = '\0';
    *out = s;
    return RANKSNAP_OK;
}

static ranksnap_status as_array(const dec *d, const msgpack_object *o, const char *name,
                                const msgpack_object_array **out)
{
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return fail(d, "field '%s' must be an array, not %s", name, type_name(o));
    *out = &o->via.array;
    return RANKSNAP_OK;
}

static ranksnap_status as_tuple(const dec *d, const msgpack_object *o, const char *name,
                                uint32_t n, const msgpack_object **out)
{
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != n)
        return fail(d, "field '%s' must be an array of %u elements", name, n);
    *out = o->via.array.ptr;
    return RANKSNAP_OK;
}

/* A zeroed array of n elements (never a zero-byte request, so NULL always means failure). The
 * caller has checked that n came from an array the input holds. */
#define ALLOC_ARRAY(d, ptr, n, what)                                                               \
    do {                                                                                           \
        (ptr) = calloc((n) ? (size_t)(n) : 1, sizeof *(ptr));                                      \
        if (!(ptr)) return no_memory((d), (what), (size_t)(n));                                    \
    } while (0)

/* A map being read, with its path in the file for messages. */
typedef struct mapv {
    const dec *d;
    const msgpack_object_map *m;
    char path[RSNAP_PATH];
} mapv;

/* Names only feed messages, so a long one is cut (the return value is checked only to say so
 * to the compiler). */
static void field_name(const mapv *mv, const char *key, char *out, size_t n)
{
    int r = mv->path[0] ? snprintf(out, n, "%s.%s", mv->path, key) : snprintf(out, n, "%s", key);
    if (r < 0) out[0] = '\0';
}

/* Finds `key`; *out = NULL when absent and optional. A key given twice is an error: which one a
 * reader picks would otherwise be a guess. */
static ranksnap_status lookup(const mapv *mv, const char *key, int required,
                              const msgpack_object **out)
{
    const msgpack_object *found = NULL;
    for (uint32_t i = 0; i < mv->m->size; i++) {
        if (!str_is(&mv->m->ptr[i].key, key)) continue;
        if (found) {
            char name[RSNAP_PATH];
            field_name(mv, key, name, sizeof name);
            return fail(mv->d, "field '%s' appears twice", name);
        }
        found = &mv->m->ptr[i].val;
    }
    if (!found && required) {
        char name[RSNAP_PATH];
        field_name(mv, key, name, sizeof name);
        return fail(mv->d, "missing field '%s'", name);
    }
    *out = found;
    return RANKSNAP_OK;
}

static ranksnap_status as_map(const dec *d, const msgpack_object *o, const char *name, mapv *out)
{
    if (o->type != MSGPACK_OBJECT_MAP)
        return fail(d, "field '%s' must be a map, not %s", name, type_name(o));
    out->d = d;
    out->m = &o->via.map;
    if (snprintf(out->path, sizeof out->path, "%s", name) < 0) out->path[0] = '\0';
    return RANKSNAP_OK;
}

#define MAP_GETTER(fn, type, conv)                                                                 \
    static ranksnap_status fn(const mapv *mv, const char *key, type *v)                           \
    {                                                                                              \
        const msgpack_object *o = NULL;                                                            \
        char name[RSNAP_PATH];                                                                       \
        RS_CHECK(lookup(mv, key, 1, &o));                                                          \
        field_name(mv, key, name, sizeof name);                                                    \
        return conv(mv->d, o, name, v);                                                            \
    }

MAP_GETTER(m_u64, uint64_t, as_u64)
MAP_GETTER(m_i64, int64_t, as_i64)
MAP_GETTER(m_str, char *, as_str)
MAP_GETTER(m_array, const msgpack_object_array *, as_array)
MAP_GETTER(m_map, mapv, as_map)

static ranksnap_status m_int(const mapv *mv, const char *key, int64_t lo, int64_t hi, int *v)
{
    const msgpack_object *o = NULL;
    char name[RSNAP_PATH];
    int64_t x = 0;
    RS_CHECK(lookup(mv, key, 1, &o));
    field_name(mv, key, name, sizeof name);
    RS_CHECK(as_int_range(mv->d, o, name, lo, hi, &x));
    *v = (int)x;
    return RANKSNAP_OK;
}

static ranksnap_status m_bool(const mapv *mv, const char *key, int *v)
{
    const msgpack_object *o = NULL;
    char name[RSNAP_PATH];
    RS_CHECK(lookup(mv, key, 1, &o));
    field_name(mv, key, name, sizeof name);
    if (o->type != MSGPACK_OBJECT_BOOLEAN)
        return fail(mv->d, "field '%s' must be a boolean, not %s", name, type_name(o));
    *v = o->via.boolean ? 1 : 0;
    return RANKSNAP_OK;
}

/* An index into a table of n entries; stack ids are 1-based (0 = none), so their bound is n
 * inclusive. */
static ranksnap_status check_index(const dec *d, const char *name, uint64_t v, size_t n,
                                   const char *table, int one_based)
{
    if (one_based ? v <= n : v < n) return RANKSNAP_OK;
    return fail(d, "field '%s' is %" PRIu64 ", but %s has %zu entries", name, v, table, n);
}

static ranksnap_status m_index(const mapv *mv, const char *key, size_t n, const char *table,
                               int one_based, uint32_t *v)
{
    uint64_t x = 0;
    char name[RSNAP_PATH];
    RS_CHECK(m_u64(mv, key, &x));
    field_name(mv, key, name, sizeof name);
    RS_CHECK(check_index(mv->d, name, x, n, table, one_based));
    *v = (uint32_t)x;
    return RANKSNAP_OK;
}

/* ---- sections ----------------------------------------------------------------------------- */

static ranksnap_status read_format(const mapv *top, unsigned *version)
{
    const dec *d = top->d;
    const msgpack_object *o = NULL;
    RS_CHECK(lookup(top, "format", 0, &o));
    if (!o) return fail(d, "not a ranksnap snapshot (no 'format' field)");
    if (o->type != MSGPACK_OBJECT_STR)
        return fail(d, "not a ranksnap snapshot (format is %s, expected \"%s\")", type_name(o),
                    RSNAP_FORMAT_NAME);
    if (!str_is(o, RSNAP_FORMAT_NAME)) {
        char shown[64];
        printable(o->via.str.ptr, o->via.str.size, shown, sizeof shown);
        return fail(d, "not a ranksnap snapshot (format is \"%s\", expected \"%s\")", shown,
                    RSNAP_FORMAT_NAME);
    }
    RS_CHECK(lookup(top, "version", 1, &o));
    uint64_t v = 0;
    RS_CHECK(as_u64(d, o, "version", &v));
    if (v > RSNAP_FORMAT_VERSION)
        return fail(d, "version %" PRIu64 " is newer than this reader (%d)", v,
                    RSNAP_FORMAT_VERSION);
    if (v == 0) return fail(d, "version 0 is not a valid version (expected 1 to %d)",
                            RSNAP_FORMAT_VERSION);
    *version = (unsigned)v;
    return RANKSNAP_OK;
}

static ranksnap_status read_identity(const mapv *top, rs_snap *s)
{
    RS_CHECK(m_int(top, "world_size", 1, INT32_MAX, &s->world_size));
    RS_CHECK(m_int(top, "rank", 0, INT32_MAX, &s->rank));
    if (s->rank >= s->world_size)
        return fail(top->d, "field 'rank' is %d, but world_size is %d", s->rank, s->world_size);
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
    return RANKSNAP_OK;
}

/* PyTorch's settings (alloc_conf, in PYTORCH_CUDA_ALLOC_CONF's syntax; absent before the field
 * existed), onto what the older fields say. A key a newer ranksnap writes is skipped. */
static ranksnap_status read_alloc_conf(const mapv *a, rs_snap_allocator *al)
{
    const msgpack_object *o = NULL, *given = NULL;
    rs_alloc_conf *c = &al->conf;
    rs_alloc_conf_reset(c);
    if (al->max_split_size != UINT64_MAX) c->max_split_size = al->max_split_size;
    if (al->large_buffer && al->large_buffer != RS_CONF_LARGE_BUFFER)
        c->large_segment_size = al->large_buffer;
    RS_CHECK(lookup(a, "alloc_conf", 0, &o));
    RS_CHECK(lookup(a, "alloc_conf_given", 0, &given));
    if (!o) return RANKSNAP_OK;
    char text[RS_CONF_TEXT_MAX], why[256];
    if (o->type != MSGPACK_OBJECT_STR || o->via.str.size >= sizeof text)
        return fail(a->d, "field 'allocator_settings.alloc_conf' must be a string shorter than "
                          "%d bytes, not %s", RS_CONF_TEXT_MAX, type_name(o));
    memcpy(text, o->via.str.ptr, o->via.str.size);
    text[o->via.str.size] = '\0';
    if (rs_alloc_conf_parse(c, text, RS_CONF_LENIENT, why, sizeof why) != 0)
        return fail(a->d, "field 'allocator_settings.alloc_conf' (\"%.200s\"): %s", text, why);
    c->text[0] = '\0';
    if (given && given->type == MSGPACK_OBJECT_STR && given->via.str.size < sizeof c->text) {
        memcpy(c->text, given->via.str.ptr, given->via.str.size);
        c->text[given->via.str.size] = '\0';
    }
    al->max_split_size = rs_alloc_conf_max_split(c);
    return RANKSNAP_OK;
}

static ranksnap_status read_settings(const mapv *top, rs_snap *s)
{
    mapv a, r;
    const msgpack_object *o = NULL;
    rs_snap_allocator *al = &s->allocator;
    RS_CHECK(m_map(top, "allocator_settings", &a));
    RS_CHECK(m_u64(&a, "memory_limit", &al->memory_limit));
    RS_CHECK(lookup(&a, "max_split_size", 1, &o));
    if (o->type == MSGPACK_OBJECT_NIL)
        al->max_split_size = UINT64_MAX;
    else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        al->max_split_size = o->via.u64;
    else
        return fail(top->d, "field 'allocator_settings.max_split_size' must be an unsigned "
                            "integer or nil (unlimited), not %s", type_name(o));
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
    return RANKSNAP_OK;
}

static ranksnap_status read_time(const mapv *top, rs_snap *s)
{
    const dec *d = top->d;
    mapv t;
    const msgpack_object_array *ranges = NULL;
    RS_CHECK(m_map(top, "time", &t));
    RS_CHECK(m_i64(&t, "clock_offset_us", &s->time.clock_offset_us));
    RS_CHECK(m_i64(&t, "clock_uncertainty_us", &s->time.clock_uncertainty_us));
    RS_CHECK(m_i64(&t, "current_step", &s->time.current_step));
    RS_CHECK(m_array(&t, "ranges", &ranges));
    ALLOC_ARRAY(d, s->time.ranges, ranges->size, "time.ranges");
    s->time.n_ranges = ranges->size;
    for (uint32_t i = 0; i < ranges->size; i++) {
        char name[RSNAP_PATH];
        const msgpack_object *e = NULL;
        rs_snap_range *rg = &s->time.ranges[i];
        snprintf(name, sizeof name, "time.ranges[%u]", i);
        RS_CHECK(as_tuple(d, &ranges->ptr[i], name, 2, &e));
        RS_CHECK(as_i64(d, &e[0], name, &rg->begin));
        if (e[1].type == MSGPACK_OBJECT_NIL) {
            rg->end = -1;
        } else {
            RS_CHECK(as_i64(d, &e[1], name, &rg->end));
            if (rg->end < rg->begin)
                return fail(d, "field '%s' ends (%" PRId64 ") before it begins (%" PRId64 ")",
                            name, rg->end, rg->begin);
        }
    }
    return RANKSNAP_OK;
}

/* totals.outside_labels: optional (older files lack it), a map of label -> uint. */
static ranksnap_status read_outside_labels(const mapv *m, rs_snap_totals *t)
{
    const dec *d = m->d;
    const msgpack_object *o = NULL;
    mapv lm;
    RS_CHECK(lookup(m, "outside_labels", 0, &o));
    if (!o) return RANKSNAP_OK;
    RS_CHECK(as_map(d, o, "totals.outside_labels", &lm));
    ALLOC_ARRAY(d, t->outside_labels, lm.m->size, "totals.outside_labels");
    for (uint32_t i = 0; i < lm.m->size; i++) {
        char name[RSNAP_PATH];
        snprintf(name, sizeof name, "totals.outside_labels[%u]", i);
        rs_snap_outside_label *l = &t->outside_labels[i];
        RS_CHECK(as_str(d, &lm.m->ptr[i].key, name, &l->label));
        t->n_outside_labels = (size_t)i + 1; /* owned from here on, for rs_snap_free */
        RS_CHECK(as_u64(d, &lm.m->ptr[i].val, name, &l->bytes));
    }
    return RANKSNAP_OK;
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
    RS_CHECK(read_outside_labels(&m, t));
    return RANKSNAP_OK;
}

static ranksnap_status read_streams_strings(const mapv *top, rs_snap *s)
{
    const dec *d = top->d;
    const msgpack_object_array *a = NULL;
    char name[RSNAP_PATH];

    RS_CHECK(m_array(top, "streams", &a));
    ALLOC_ARRAY(d, s->streams, a->size, "streams");
    s->n_streams = a->size;
    for (uint32_t i = 0; i < a->size; i++) {
        snprintf(name, sizeof name, "streams[%u]", i);
        RS_CHECK(as_u64(d, &a->ptr[i], name, &s->streams[i]));
    }

    RS_CHECK(m_array(top, "strings", &a));
    ALLOC_ARRAY(d, s->strings, a->size, "strings");
    s->n_strings = a->size;
    for (uint32_t i = 0; i < a->size; i++) {
        snprintf(name, sizeof name, "strings[%u]", i);
        RS_CHECK(as_str(d, &a->ptr[i], name, &s->strings[i]));
    }
    return RANKSNAP_OK;
}

/* modules, then frames (which name modules), then stacks (which name frames). */
static ranksnap_status read_symbol_tables(const mapv *top, rs_snap *s)
{
    const dec *d = top->d;
    const msgpack_object_array *a = NULL;
    const msgpack_object *e = NULL;
    char name[RSNAP_PATH];

    RS_CHECK(m_array(top, "modules", &a));
    ALLOC_ARRAY(d, s->modules, a->size, "modules");
    s->n_modules = a->size;
    for (uint32_t i = 0; i < a->size; i++) {
        rs_snap_module *m = &s->modules[i];
        snprintf(name, sizeof name, "modules[%u]", i);
        RS_CHECK(as_tuple(d, &a->ptr[i], name, 3, &e));
        RS_CHECK(as_str(d, &e[0], name, &m->path));
        RS_CHECK(as_u64(d, &e[1], name, &m->base));
        RS_CHECK(as_str(d, &e[2], name, &m->build_id));
    }

    RS_CHECK(m_array(top, "frames", &a));
    ALLOC_ARRAY(d, s->frames, a->size, "frames");
    s->n_frames = a->size;
    for (uint32_t i = 0; i < a->size; i++) {
        rs_snap_frame *f = &s->frames[i];
        int64_t x = 0;
        snprintf(name, sizeof name, "frames[%u]", i);
        RS_CHECK(as_tuple(d, &a->ptr[i], name, 5, &e));
        RS_CHECK(as_u64(d, &e[0], name, &f->pc));
        RS_CHECK(as_i64(d, &e[1], name, &x));
        if (x < -1 || x >= (int64_t)s->n_modules)
            return fail(d, "field '%s' names module %" PRId64 ", but modules has %zu entries",
                        name, x, s->n_modules);
        f->module = (int32_t)x;
        RS_CHECK(as_str(d, &e[2], name, &f->function));
        RS_CHECK(as_str(d, &e[3], name, &f->file));
        RS_CHECK(as_int_range(d, &e[4], name, INT32_MIN, INT32_MAX, &x));
        f->line = (int32_t)x;
    }

    RS_CHECK(m_array(top, "stacks", &a));
    if (a->size >= UINT32_MAX) return fail(d, "stacks has %u entries, too many", a->size);
    ALLOC_ARRAY(d, s->stacks, a->size, "stacks");
    s->n_stacks = a->size;
    for (uint32_t i = 0; i < a->size; i++) {
        const msgpack_object_array *fr = NULL;
        rs_snap_stack *st = &s->stacks[i];
        snprintf(name, sizeof name, "stacks[%u]", i);
        RS_CHECK(as_array(d, &a->ptr[i], name, &fr));
        ALLOC_ARRAY(d, st->frames, fr->size, name);
        st->n_frames = fr->size;
        for (uint32_t k = 0; k < fr->size; k++) {
            uint64_t v = 0;
            snprintf(name, sizeof name, "stacks[%u][%u]", i, k);
            RS_CHECK(as_u64(d, &fr->ptr[k], name, &v));
            RS_CHECK(check_index(d, name, v, s->n_frames, "frames", 0));
            st->frames[k] = (uint32_t)v;
        }
    }
    return RANKSNAP_OK;
}

static ranksnap_status read_segments(const mapv *top, rs_snap *s)
{
    const dec *d = top->d;
    const msgpack_object_array *a = NULL;
    RS_CHECK(m_array(top, "segments", &a));
    ALLOC_ARRAY(d, s->segments, a->size, "segments");
    s->n_segments = a->size;
    for (uint32_t i = 0; i < a->size; i++) {
        rs_snap_segment *g = &s->segments[i];
        const msgpack_object_array *blocks = NULL;
        char *type = NULL;
        char name[RSNAP_PATH];
        mapv m;
        snprintf(name, sizeof name, "segments[%u]", i);
        RS_CHECK(as_map(d, &a->ptr[i], name, &m));
        RS_CHECK(m_u64(&m, "address", &g->addr));
        RS_CHECK(m_u64(&m, "total_size", &g->total_size));
        RS_CHECK(m_u64(&m, "allocated_size", &g->allocated_size));
        RS_CHECK(m_u64(&m, "active_size", &g->active_size));
        RS_CHECK(m_u64(&m, "requested_size", &g->requested_size));
        RS_CHECK(m_index(&m, "stream", s->n_streams, "streams", 0, &g->stream));
        RS_CHECK(m_index(&m, "stack", s->n_stacks, "stacks", 1, &g->stack));
        RS_CHECK(m_str(&m, "segment_type", &type));
        int small = strcmp(type, "small") == 0, large = strcmp(type, "large") == 0;
        free(type);
        if (!small && !large)
            return fail(d, "field '%s.segment_type' must be \"small\" or \"large\"", name);
        g->is_small = small;

        RS_CHECK(m_array(&m, "blocks", &blocks));
        ALLOC_ARRAY(d, g->blocks, blocks->size, "blocks");
        g->n_blocks = blocks->size;
        for (uint32_t k = 0; k < blocks->size; k++) {
            rs_snap_block *b = &g->blocks[k];
            const msgpack_object *e = NULL;
            uint64_t state = 0, stack = 0;
            snprintf(name, sizeof name, "segments[%u].blocks[%u]", i, k);
            RS_CHECK(as_tuple(d, &blocks->ptr[k], name, 5, &e));
            RS_CHECK(as_u64(d, &e[0], name, &b->addr));
            RS_CHECK(as_u64(d, &e[1], name, &b->size));
            RS_CHECK(as_u64(d, &e[2], name, &b->requested_size));
            RS_CHECK(as_u64(d, &e[3], name, &state));
            if (state >= RS_BLOCK_STATE_COUNT_)
                return fail(d, "field '%s' has block state %" PRIu64 ", expected 0 to %d", name,
                            state, RS_BLOCK_STATE_COUNT_ - 1);
            RS_CHECK(as_u64(d, &e[4], name, &stack));
            RS_CHECK(check_index(d, name, stack, s->n_stacks, "stacks", 1));
            b->state = (uint8_t)state;
            b->stack = (uint32_t)stack;
        }
    }
    return RANKSNAP_OK;
}

/* One history column: present, an array, exactly `count` long. */
static ranksnap_status column(const mapv *h, const char *key, uint64_t count,
                              const msgpack_object_array **out)
{
    RS_CHECK(m_array(h, key, out));
    if ((*out)->size != count)
        return fail(h->d, "history.%s has %u entries, history.count says %" PRIu64, key,
                    (*out)->size, count);
    return RANKSNAP_OK;
}

static ranksnap_status read_history(const mapv *top, rs_snap *s)
{
    const dec *d = top->d;
    rs_snap_history *hs = &s->history;
    const msgpack_object_array *ct = NULL, *ca = NULL, *cd = NULL, *cs = NULL, *cst = NULL,
                               *csk = NULL;
    char name[RSNAP_PATH];
    mapv h;

    RS_CHECK(m_map(top, "history", &h));
    RS_CHECK(m_u64(&h, "count", &hs->count));
    RS_CHECK(m_u64(&h, "dropped", &hs->dropped));
    RS_CHECK(m_u64(&h, "capacity", &hs->capacity));
    /* a ring slot holds a free_requested and the free_completed that followed it at once
     * (rank/recorder.h, RS_EV_COMPLETED): at most two events per slot */
    if (hs->capacity > UINT64_MAX / 2 || hs->count > 2 * hs->capacity)
        return fail(d, "history.count (%" PRIu64 ") exceeds twice history.capacity (%" PRIu64 ")",
                    hs->count, hs->capacity);
    RS_CHECK(column(&h, "time_us", hs->count, &ct));
    RS_CHECK(column(&h, "action", hs->count, &ca));
    RS_CHECK(column(&h, "addr", hs->count, &cd));
    RS_CHECK(column(&h, "size", hs->count, &cs));
    RS_CHECK(column(&h, "stream", hs->count, &cst));
    RS_CHECK(column(&h, "stack", hs->count, &csk));

    /* count equals an array's size, so it is bounded by the input */
    size_t n = (size_t)hs->count;
    ALLOC_ARRAY(d, hs->time_us, n, "history.time_us");
    ALLOC_ARRAY(d, hs->action, n, "history.action");
    ALLOC_ARRAY(d, hs->addr, n, "history.addr");
    ALLOC_ARRAY(d, hs->size, n, "history.size");
    ALLOC_ARRAY(d, hs->stream, n, "history.stream");
    ALLOC_ARRAY(d, hs->stack, n, "history.stack");

    uint64_t t = 0, addr = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = 0;
        /* the first entry of a delta column is absolute, the others differences */
        snprintf(name, sizeof name, "history.time_us[%zu]", i);
        if (i == 0) {
            RS_CHECK(as_u64(d, &ct->ptr[i], name, &t));
        } else {
            RS_CHECK(as_bits(d, &ct->ptr[i], name, &v));
            t += v;
        }
        hs->time_us[i] = t;

        snprintf(name, sizeof name, "history.addr[%zu]", i);
        if (i == 0) {
            RS_CHECK(as_u64(d, &cd->ptr[i], name, &addr));
        } else {
            RS_CHECK(as_bits(d, &cd->ptr[i], name, &v));
            addr += v;
        }
        hs->addr[i] = addr;

        snprintf(name, sizeof name, "history.action[%zu]", i);
        RS_CHECK(as_u64(d, &ca->ptr[i], name, &v));
        if (v > UINT8_MAX)
            return fail(d, "field '%s' is %" PRIu64 ", expected an action code below 256", name,
                        v);
        hs->action[i] = (uint8_t)v;
        if ((v == RS_ACT_ANNOTATION_BEGIN || v == RS_ACT_ANNOTATION_END) && addr >= s->n_strings)
            return fail(d, "history.addr[%zu] names annotation %" PRIu64
                           ", but strings has %zu entries", i, addr, s->n_strings);

        snprintf(name, sizeof name, "history.size[%zu]", i);
        RS_CHECK(as_u64(d, &cs->ptr[i], name, &hs->size[i]));

        snprintf(name, sizeof name, "history.stream[%zu]", i);
        RS_CHECK(as_u64(d, &cst->ptr[i], name, &v));
        RS_CHECK(check_index(d, name, v, s->n_streams, "streams", 0));
        hs->stream[i] = (uint32_t)v;

        snprintf(name, sizeof name, "history.stack[%zu]", i);
        RS_CHECK(as_u64(d, &csk->ptr[i], name, &v));
        RS_CHECK(check_index(d, name, v, s->n_stacks, "stacks", 1));
        hs->stack[i] = (uint32_t)v;
    }
    return RANKSNAP_OK;
}

static ranksnap_status read_oom(const mapv *top, rs_snap *s)
{
    const msgpack_object *o = NULL;
    mapv m;
    RS_CHECK(lookup(top, "oom", 0, &o));
    if (!o || o->type == MSGPACK_OBJECT_NIL) return RANKSNAP_OK;
    if (o->type != MSGPACK_OBJECT_MAP)
        return fail(top->d, "field 'oom' must be a map or nil, not %s", type_name(o));
    RS_CHECK(as_map(top->d, o, "oom", &m));
    rs_snap_oom *x = &s->oom;
    RS_CHECK(m_u64(&m, "requested", &x->requested));
    RS_CHECK(m_u64(&m, "rounded", &x->rounded));
    RS_CHECK(m_u64(&m, "device_free", &x->device_free));
    RS_CHECK(m_u64(&m, "device_total", &x->device_total));
    RS_CHECK(m_u64(&m, "allocated", &x->allocated));
    RS_CHECK(m_u64(&m, "reserved", &x->reserved));
    RS_CHECK(m_u64(&m, "memory_limit", &x->memory_limit));
    RS_CHECK(m_u64(&m, "time_us", &x->time_us));
    RS_CHECK(m_index(&m, "stream", s->n_streams, "streams", 0, &x->stream));
    RS_CHECK(m_index(&m, "stack", s->n_stacks, "stacks", 1, &x->stack));
    RS_CHECK(m_i64(&m, "step", &x->step));
    s->has_oom = 1;
    return RANKSNAP_OK;
}

static ranksnap_status read_top(const dec *d, const msgpack_object *root, rs_snap *s)
{
    mapv top;
    RS_CHECK(as_map(d, root, "", &top));
    /* the format and version first: a foreign or newer file must say so, not "missing field" */
    RS_CHECK(read_format(&top, &s->version));
    RS_CHECK(read_identity(&top, s));
    RS_CHECK(read_settings(&top, s));
    RS_CHECK(read_time(&top, s));
    RS_CHECK(read_totals(&top, &s->totals));
    RS_CHECK(read_streams_strings(&top, s));
    RS_CHECK(read_symbol_tables(&top, s));
    RS_CHECK(read_segments(&top, s));
    RS_CHECK(read_history(&top, s));
    RS_CHECK(read_oom(&top, s));
    return RANKSNAP_OK;
}

ranksnap_status rs_rsnap_decode(const void *buf, size_t len, const char *name_for_errors,
                           rs_snap **out)
{
    dec d = {name_for_errors ? name_for_errors : "snapshot", buf, len};
    if (!out) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_rsnap_decode: out is NULL");
    *out = NULL;
    if (!buf && len) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_rsnap_decode: buf is NULL");
    if (len == 0) return fail(&d, "empty file (0 bytes), not a ranksnap snapshot");

    unsigned char b = d.buf[0];
    if (!((b >= 0x80 && b <= 0x8f) || b == 0xde || b == 0xdf))
        return fail(&d, "not a ranksnap snapshot (the top level is %s, expected a map)",
                    type_of_byte(b));
    size_t end = 0;
    RS_CHECK(scan(&d, &end));
    if (end != len)
        return fail(&d, "trailing data after the snapshot map (%zu bytes from offset %zu)",
                    len - end, end);

    msgpack_unpacked u;
    size_t off = 0;
    msgpack_unpacked_init(&u);
    msgpack_unpack_return ret = msgpack_unpack_next(&u, (const char *)buf, len, &off);
    if (ret == MSGPACK_UNPACK_NOMEM_ERROR) {
        msgpack_unpacked_destroy(&u);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory to unpack %zu bytes", d.name,
                        len);
    }
    if (ret != MSGPACK_UNPACK_SUCCESS || off != len) {
        msgpack_unpacked_destroy(&u);
        return fail(&d, "msgpack could not parse the snapshot map (error %d at offset %zu)",
                    (int)ret, off);
    }

    rs_snap *s = calloc(1, sizeof *s);
    if (!s) {
        msgpack_unpacked_destroy(&u);
        return no_memory(&d, "the snapshot", 1);
    }
    ranksnap_status st = read_top(&d, &u.data, s);
    msgpack_unpacked_destroy(&u);
    if (st == RANKSNAP_OK) st = rs_snap_check(s, d.name); /* the model's one check (snap_check.h) */
    if (st != RANKSNAP_OK) {
        rs_snap_free(s);
        return st;
    }
    *out = s;
    return RANKSNAP_OK;
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

