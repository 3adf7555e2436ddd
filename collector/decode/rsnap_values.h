/*
 * rsnap_values.h — the .rsnap decoder's second pass, value by value (rsnap_values.c): typed
 * reads where the values are, map fields found through the entries the scan noted, and the
 * messages that name a wrong value. read_int, which the history's columns run, is inline
 * here.
 */
#ifndef RANKSNAP_RSNAP_VALUES_H
#define RANKSNAP_RSNAP_VALUES_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "rsnap_state.h"

where rs_rd_at_top(const char *key);

/* "NAME: field 'segments[3].stream' MESSAGE (offset N)". */
ranksnap_status rs_rd_bad_value(const dec *d, const where *w, size_t at, const char *fmt, ...) RS_PRINTF(4, 5);

/* A string from the file, shortened and with control bytes replaced, for an error message. */
void rs_rd_printable(const unsigned char *p, size_t n, char *dst, size_t dn);

ranksnap_status rs_rd_as_u64(const dec *d, size_t at, const where *w, uint64_t *v);

ranksnap_status rs_rd_as_i64(const dec *d, size_t at, const where *w, int64_t *v);

ranksnap_status rs_rd_as_int_range(const dec *d, size_t at, const where *w, int64_t lo,
                                    int64_t hi, int64_t *v);

/* A string's bytes: *p and *n. -1 when the value at `at` is no string. */
int rs_rd_str_at(const dec *d, size_t at, const unsigned char **p, size_t *n);

int rs_rd_str_is(const dec *d, size_t at, const char *s);

ranksnap_status rs_rd_as_str(const dec *d, size_t at, const where *w, char **out);

ranksnap_status rs_rd_as_array(const dec *d, size_t at, const where *w, uint64_t *count,
                                size_t *first);

ranksnap_status rs_rd_as_tuple(const dec *d, size_t at, const where *w, uint64_t n, size_t *first);

/* One past the scalar or string at `at` (never called on a container). */
size_t rs_rd_after_scalar(const dec *d, size_t at);

const map_rec *rs_rd_find_map(const dec *d, size_t at);

/* The name of field `key` of the map; valid while the mapv is. */
where rs_rd_field_of(const mapv *mv, const char *key);

/* Finds `key`; *at = 0 when absent and optional (no value sits at offset 0: the top map does).
 * A key given twice is an error: which one a reader picks would otherwise be a guess. */
ranksnap_status rs_rd_lookup(const mapv *mv, const char *key, int required, size_t *at);

ranksnap_status rs_rd_as_map(const dec *d, size_t at, const where *w, mapv *out);

static inline uint64_t be(const unsigned char *p, unsigned n)
{
    uint64_t hi, lo;
    switch (n) {
    case 2: return (uint64_t)p[0] << 8 | p[1];
    case 4: return (uint64_t)p[0] << 24 | (uint64_t)p[1] << 16 | (uint64_t)p[2] << 8 | p[3];
    default:
        hi = (uint64_t)p[0] << 24 | (uint64_t)p[1] << 16 | (uint64_t)p[2] << 8 | p[3];
        lo = (uint64_t)p[4] << 24 | (uint64_t)p[5] << 16 | (uint64_t)p[6] << 8 | p[7];
        return hi << 32 | lo;
    }
}

/* An integer at *p (inside [p, e)): its 64-bit pattern and whether msgpack-c would call it
 * negative (signed encodings of values >= 0 are positive integers, as msgpack-c reads them).
 * Advances *p; -1 when it is not an integer or runs past e. */
static inline __attribute__((always_inline)) int read_int(const unsigned char **pp,
                                                          const unsigned char *e, uint64_t *bits,
                           int *negative)
{
    const unsigned char *p = *pp;
    size_t left = (size_t)(e - p);
    uint64_t v;
    *negative = 0;
    switch (*p) {
    case 0xcc: if (left < 2) return -1; v = p[1]; *pp = p + 2; break;
    case 0xcd: if (left < 3) return -1; v = be(p + 1, 2); *pp = p + 3; break;
    case 0xce: if (left < 5) return -1; v = be(p + 1, 4); *pp = p + 5; break;
    case 0xcf: if (left < 9) return -1; v = be(p + 1, 8); *pp = p + 9; break;
    case 0xd0: if (left < 2) return -1; v = (uint64_t)(int64_t)(int8_t)p[1]; *pp = p + 2; break;
    case 0xd1: if (left < 3) return -1; v = (uint64_t)(int64_t)(int16_t)be(p + 1, 2); *pp = p + 3; break;
    case 0xd2: if (left < 5) return -1; v = (uint64_t)(int64_t)(int32_t)be(p + 1, 4); *pp = p + 5; break;
    case 0xd3: if (left < 9) return -1; v = be(p + 1, 8); *pp = p + 9; break;
    default:
        if (*p <= 0x7f) {
            v = *p;
        } else if (*p >= 0xe0) {
            v = (uint64_t)(int64_t)(int8_t)*p;
        } else {
            return -1;
        }
        *pp = p + 1;
        break;
    }
    *negative = (int64_t)v < 0 && (*p >= 0xd0 || *p >= 0xe0);
    *bits = v;
    return 0;
}

#endif
