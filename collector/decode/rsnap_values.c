/*
 * rsnap_values.c — the .rsnap decoder's second pass, value by value: integers, strings, arrays
 * and maps read where they are (map fields through the entries the scan noted), each type
 * checked, and a message that names the value — "history.stack[7]" — made only when one is
 * wrong.
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

where rs_rd_at_top(const char *key)
{
    return (where){"", -1, key, -1};
}

/* Appends to out[n] at *k, cutting what does not fit (names only feed messages). */

static void name_add(char *out, size_t n, size_t *k, const char *fmt, ...)
{
    if (*k + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(out + *k, n - *k, fmt, ap);
    va_end(ap);
    if (r > 0) *k = (size_t)r < n - *k ? *k + (size_t)r : n - 1;
}

static void where_name(const where *w, char *out, size_t n)
{
    size_t k = 0;
    out[0] = '\0';
    name_add(out, n, &k, "%s", w->base);
    if (w->index >= 0) name_add(out, n, &k, "[%" PRId64 "]", w->index);
    if (w->key) name_add(out, n, &k, "%s%s", k ? "." : "", w->key);
    if (w->elem >= 0) name_add(out, n, &k, "[%" PRId64 "]", w->elem);
}

ranksnap_status rs_rd_bad_value(const dec *d, const where *w, size_t at, const char *fmt, ...)
{
    char name[RSNAP_NAME], msg[512];
    where_name(w, name, sizeof name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rs_rd_fail(d, "field '%s' %s (offset %zu)", name, msg, at);
}

void rs_rd_printable(const unsigned char *p, size_t n, char *dst, size_t dn)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < dn; i++)
        dst[k++] = (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"') ? (char)p[i] : '?';
    if (n > 0 && k < n && k + 4 <= dn) {
        memcpy(dst + k, "...", 3);
        k += 3;
    }
    dst[k] = '\0';
}

ranksnap_status rs_rd_as_u64(const dec *d, size_t at, const where *w, uint64_t *v)
{
    const unsigned char *p = d->buf + at;
    int neg;
    if (read_int(&p, d->buf + d->len, v, &neg) != 0 || neg)
        return rs_rd_bad_value(d, w, at, "must be an unsigned integer, not %s", rs_rd_type_name(d->buf[at]));
    return RANKSNAP_OK;
}

ranksnap_status rs_rd_as_i64(const dec *d, size_t at, const where *w, int64_t *v)
{
    const unsigned char *p = d->buf + at;
    uint64_t bits;
    int neg;
    if (read_int(&p, d->buf + d->len, &bits, &neg) != 0)
        return rs_rd_bad_value(d, w, at, "must be an integer");
    if (!neg && bits > (uint64_t)INT64_MAX)
        return rs_rd_bad_value(d, w, at, "(%" PRIu64 ") does not fit a signed 64-bit integer", bits);
    memcpy(v, &bits, sizeof *v);
    return RANKSNAP_OK;
}

ranksnap_status rs_rd_as_int_range(const dec *d, size_t at, const where *w, int64_t lo,
                                    int64_t hi, int64_t *v)
{
    RS_CHECK(rs_rd_as_i64(d, at, w, v));
    if (*v < lo || *v > hi)
        return rs_rd_bad_value(d, w, at, "is %" PRId64 ", expected %" PRId64 " to %" PRId64, *v, lo, hi);
    return RANKSNAP_OK;
}

int rs_rd_str_at(const dec *d, size_t at, const unsigned char **p, size_t *n)
{
    unsigned b = d->buf[at];
    size_t hdr;
    uint64_t len;
    if (b >= 0xa0 && b <= 0xbf) {
        hdr = 1;
        len = b & 0x1f;
    } else if (b >= 0xd9 && b <= 0xdb) {
        size_t pos = at + 1;
        if (rs_rd_read_be(d, &pos, 1u << (b - 0xd9), &len) != 0) return -1;
        hdr = pos - at;
    } else {
        return -1;
    }
    if (len > d->len - at - hdr) return -1;
    *p = d->buf + at + hdr;
    *n = (size_t)len;
    return 0;
}

int rs_rd_str_is(const dec *d, size_t at, const char *s)
{
    const unsigned char *p;
    size_t n, m = strlen(s);
    return rs_rd_str_at(d, at, &p, &n) == 0 && n == m && memcmp(p, s, m) == 0;
}

ranksnap_status rs_rd_as_str(const dec *d, size_t at, const where *w, char **out)
{
    const unsigned char *p;
    size_t n;
    if (rs_rd_str_at(d, at, &p, &n) != 0)
        return rs_rd_bad_value(d, w, at, "must be a string, not %s", rs_rd_type_name(d->buf[at]));
    char *s = malloc(n + 1);
    if (!s) return rs_rd_no_memory(d, "a string", n);
    if (n) memcpy(s, p, n);
    s[n] = '\0';
    *out = s;
    return RANKSNAP_OK;
}

/* An array's count and the offset of its first element; -1 when the value is no array. */
static int array_at(const dec *d, size_t at, uint64_t *count, size_t *first)
{
    unsigned b = d->buf[at];
    size_t pos = at + 1;
    if (b >= 0x90 && b <= 0x9f) {
        *count = b & 0x0f;
    } else if (b == 0xdc || b == 0xdd) {
        if (rs_rd_read_be(d, &pos, b == 0xdc ? 2 : 4, count) != 0) return -1;
    } else {
        return -1;
    }
    *first = pos;
    return 0;
}

ranksnap_status rs_rd_as_array(const dec *d, size_t at, const where *w, uint64_t *count,
                                size_t *first)
{
    if (array_at(d, at, count, first) != 0)
        return rs_rd_bad_value(d, w, at, "must be an array, not %s", rs_rd_type_name(d->buf[at]));
    return RANKSNAP_OK;
}

ranksnap_status rs_rd_as_tuple(const dec *d, size_t at, const where *w, uint64_t n, size_t *first)
{
    uint64_t count = 0;
    if (array_at(d, at, &count, first) != 0 || count != n)
        return rs_rd_bad_value(d, w, at, "must be an array of %u elements", (unsigned)n);
    return RANKSNAP_OK;
}

size_t rs_rd_after_scalar(const dec *d, size_t at)
{
    const unsigned char *p = d->buf + at;
    uint64_t bits;
    int neg;
    size_t n;
    if (read_int(&p, d->buf + d->len, &bits, &neg) == 0) return (size_t)(p - d->buf);
    if (rs_rd_str_at(d, at, &p, &n) == 0) return (size_t)(p - d->buf) + n;
    return at + 1; /* nil, booleans */
}

const map_rec *rs_rd_find_map(const dec *d, size_t at)
{
    size_t lo = 0, hi = d->n_maps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->maps[mid].at < at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < d->n_maps && d->maps[lo].at == at ? &d->maps[lo] : NULL;
}

where rs_rd_field_of(const mapv *mv, const char *key)
{
    where w = mv->path[0] ? (where){mv->path, -1, NULL, -1} : mv->w;
    w.key = key;
    return w;
}

ranksnap_status rs_rd_lookup(const mapv *mv, const char *key, int required, size_t *at)
{
    const dec *d = mv->d;
    size_t found = 0;
    for (uint32_t i = 0; i < mv->m->n; i++) {
        size_t k = d->ents[mv->m->first + 2 * (size_t)i];
        if (!rs_rd_str_is(d, k, key)) continue;
        if (found) {
            char name[RSNAP_NAME];
            where w = rs_rd_field_of(mv, key);
            where_name(&w, name, sizeof name);
            return rs_rd_fail(d, "field '%s' appears twice (offset %zu)", name, k);
        }
        found = d->ents[mv->m->first + 2 * (size_t)i + 1];
    }
    if (!found && required) {
        char name[RSNAP_NAME];
        where w = rs_rd_field_of(mv, key);
        where_name(&w, name, sizeof name);
        return rs_rd_fail(d, "missing field '%s' (the map at offset %zu)", name, mv->m->at);
    }
    *at = found;
    return RANKSNAP_OK;
}

ranksnap_status rs_rd_as_map(const dec *d, size_t at, const where *w, mapv *out)
{
    const map_rec *m = rs_rd_find_map(d, at);
    if (!m) return rs_rd_bad_value(d, w, at, "must be a map, not %s", rs_rd_type_name(d->buf[at]));
    out->d = d;
    out->m = m;
    out->w = *w;
    out->path[0] = '\0';
    /* a map that is itself a field ("totals") names its fields "totals.num_ooms"; the few such
     * maps of a file are named now, the many segments only if a message needs it */
    if (w->key) where_name(w, out->path, sizeof out->path);
    return RANKSNAP_OK;
}
