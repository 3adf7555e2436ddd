/*
 * sat.h — saturating arithmetic for sizes and levels read from untrusted files.
 *
 * A crafted snapshot can carry sizes near 2^64; every sum over them saturates at the integer
 * range instead of wrapping (or, for signed types, being undefined), so a bad file gives a worse
 * number, never a crash, a sanitizer abort or a negative level.
 */
#ifndef RANKSNAP_SAT_H
#define RANKSNAP_SAT_H

#include <stdint.h>

static inline int64_t rs_sat_add_i64(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}

static inline uint64_t rs_sat_add_u64(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static inline uint64_t rs_sat_sub_u64(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

/* A size as a signed delta: sizes past INT64_MAX count as INT64_MAX. */
static inline int64_t rs_sat_i64(uint64_t u)
{
    return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
}

/* a - b, saturating at the int64 range. */
static inline int64_t rs_sat_sub_i64(int64_t a, int64_t b)
{
    if (b < 0 && a > INT64_MAX + b) return INT64_MAX;
    if (b > 0 && a < INT64_MIN + b) return INT64_MIN;
    return a - b;
}

static inline int64_t rs_sat_neg_i64(int64_t v)
{
    return v == INT64_MIN ? INT64_MAX : -v;
}

/* base + rel, clamped to [0, UINT64_MAX]. */
static inline uint64_t rs_sat_apply(uint64_t base, int64_t rel)
{
    if (rel >= 0) return rs_sat_add_u64(base, (uint64_t)rel);
    uint64_t m = rel == INT64_MIN ? (uint64_t)INT64_MAX + 1 : (uint64_t)-rel;
    return base > m ? base - m : 0;
}

#endif
