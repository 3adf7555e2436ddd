/*
 * pickle_value.h — the value tree a pickle decodes to (pickle.h), and reading it
 * (pickle_value.c): lengths, items, dict keys, ints.
 */
#ifndef RANKSNAP_PICKLE_VALUE_H
#define RANKSNAP_PICKLE_VALUE_H

#include <stddef.h>
#include <stdint.h>

typedef enum rs_pickle_kind {
    RS_PICKLE_NONE = 0,
    RS_PICKLE_BOOL,
    RS_PICKLE_INT,       /* fits in int64 (.i), or in uint64 when .is_u64 (.u)                       */
    RS_PICKLE_BIGINT,    /* an int wider than 64 bits: kept (so that the rest decodes), value unknown */
    RS_PICKLE_FLOAT,
    RS_PICKLE_STR,       /* UTF-8 (as Python accepts it: surrogates pass), not NUL-terminated        */
    RS_PICKLE_BYTES,     /* bytes and bytearray                                                       */
    RS_PICKLE_LIST,
    RS_PICKLE_TUPLE,
    RS_PICKLE_SET,
    RS_PICKLE_FROZENSET,
    RS_PICKLE_DICT,
    RS_PICKLE_KIND_COUNT_
} rs_pickle_kind;

typedef struct rs_pickle_value rs_pickle_value;

struct rs_pickle_value {
    uint8_t kind;    /* rs_pickle_kind */
    uint8_t is_u64;  /* RS_PICKLE_INT: the value is .u, above INT64_MAX */
    uint8_t shared;  /* the decoder's own: one list value standing for equal frames lists */
    uint32_t batch;  /* the decoder's own: which streamed batch made it (0: none) */
    size_t offset;   /* byte offset of the opcode that made the value, for error messages */
    union {
        int b;       /* RS_PICKLE_BOOL */
        int64_t i;   /* RS_PICKLE_INT */
        uint64_t u;  /* RS_PICKLE_INT with is_u64 */
        double f;    /* RS_PICKLE_FLOAT */
        struct {
            const char *p; /* into the input buffer */
            size_t n;
        } str;       /* RS_PICKLE_STR, RS_PICKLE_BYTES */
        struct {
            rs_pickle_value **items; /* lists, tuples, sets: items; dicts: key, value, key, value... */
            uint32_t n;       /* items; for a dict, 2 * the number of pairs (at most 2^32 - 1)  */
            uint32_t cap;
        } seq;
    } v;
};

/* 1 when v lives as long as its document, so that a cache may know it by its address: not a
 * value of a streamed batch, whose memory the next batch reuses (a value handed to `take` or
 * met in one of its items may be one). */
int rs_pickle_lasting(const rs_pickle_value *v);

/* 1 for a list, tuple, set or frozenset (whose items are v.seq.items[0..n)). */
int rs_pickle_is_sequence(const rs_pickle_value *v);

/* Number of items of a sequence, of pairs of a dict; 0 for anything else. */
size_t rs_pickle_len(const rs_pickle_value *v);

/* Item i of a sequence, NULL when out of range or not a sequence. */
const rs_pickle_value *rs_pickle_item(const rs_pickle_value *v, size_t i);

/* The value of the str key `key` of a dict, NULL when absent or when `dict` is not a dict. When
 * a key was set twice the last value wins, as in Python. */
const rs_pickle_value *rs_pickle_dict_get(const rs_pickle_value *dict, const char *key);

/* 1 when v is a str equal to the NUL-terminated `s`. */
int rs_pickle_str_is(const rs_pickle_value *v, const char *s);

/* Integer values: 0 on success; -1 when v is not an int (bool counts, as in Python) or the value
 * does not fit the type (negative for uint64, above INT64_MAX for int64, a RS_PICKLE_BIGINT). */
int rs_pickle_get_i64(const rs_pickle_value *v, int64_t *out);
int rs_pickle_get_u64(const rs_pickle_value *v, uint64_t *out);

#endif
