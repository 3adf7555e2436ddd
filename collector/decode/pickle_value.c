/*
 * pickle_value.c — reading the value tree a decode made (pickle_value.h): lengths, items, dict
 * keys, ints.
 */
#include <string.h>

#include "pickle_value.h"

int rs_pickle_lasting(const rs_pickle_value *v)
{
    return v->batch == 0;
}

int rs_pickle_is_sequence(const rs_pickle_value *v)
{
    return v && (v->kind == RS_PICKLE_LIST || v->kind == RS_PICKLE_TUPLE || v->kind == RS_PICKLE_SET ||
                 v->kind == RS_PICKLE_FROZENSET);
}

size_t rs_pickle_len(const rs_pickle_value *v)
{
    if (rs_pickle_is_sequence(v)) return v->v.seq.n;
    if (v && v->kind == RS_PICKLE_DICT) return v->v.seq.n / 2;
    return 0;
}

const rs_pickle_value *rs_pickle_item(const rs_pickle_value *v, size_t i)
{
    return rs_pickle_is_sequence(v) && i < v->v.seq.n ? v->v.seq.items[i] : NULL;
}

int rs_pickle_str_is(const rs_pickle_value *v, const char *s)
{
    if (!v || v->kind != RS_PICKLE_STR) return 0;
    size_t n = strlen(s);
    return v->v.str.n == n && memcmp(v->v.str.p, s, n) == 0;
}

const rs_pickle_value *rs_pickle_dict_get(const rs_pickle_value *dict, const char *key)
{
    if (!dict || dict->kind != RS_PICKLE_DICT) return NULL;
    for (size_t i = dict->v.seq.n; i >= 2; i -= 2)
        if (rs_pickle_str_is(dict->v.seq.items[i - 2], key)) return dict->v.seq.items[i - 1];
    return NULL;
}

int rs_pickle_get_i64(const rs_pickle_value *v, int64_t *out)
{
    if (!v) return -1;
    if (v->kind == RS_PICKLE_BOOL) {
        *out = v->v.b;
        return 0;
    }
    if (v->kind != RS_PICKLE_INT || v->is_u64) return -1;
    *out = v->v.i;
    return 0;
}

int rs_pickle_get_u64(const rs_pickle_value *v, uint64_t *out)
{
    if (!v) return -1;
    if (v->kind == RS_PICKLE_BOOL) {
        *out = (uint64_t)v->v.b;
        return 0;
    }
    if (v->kind != RS_PICKLE_INT) return -1;
    if (v->is_u64) {
        *out = v->v.u;
        return 0;
    }
    if (v->v.i < 0) return -1;
    *out = (uint64_t)v->v.i;
    return 0;
}
