/*
 * pickle.h — a bounds-checked decoder for Python pickles (protocols 2 to 5) into a small value
 * tree: None, bool, int, float, str, bytes, list, tuple, dict, set and frozenset.
 *
 * It reads what `pickle.dump` writes for plain data — PyTorch's memory snapshot dict is the case
 * it exists for — and refuses every opcode that would make Python import or call something
 * (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, EXT1/2/4, PERSID,
 * BINPERSID) instead of emulating it: nothing in a snapshot needs code, and a reader that runs
 * none cannot be tricked into running any. Input is untrusted: every length is checked against
 * the bytes that remain, every pop against the stack and its current MARK, and the memory used is
 * bounded by a small multiple of the input size (each opcode adds at most one value or one
 * container slot).
 *
 * Values live in one arena owned by the pk_doc and are freed together by pk_free. Shared
 * references stay shared, as in Python: a memo GET pushes the same pk_value, so a list fetched
 * from the memo and then appended to is one list everywhere it appears, and a container may
 * contain itself. Code that walks a tree must therefore not recurse without a depth bound.
 * Strings and bytes are not copied: pk_value.str points into the input buffer, so the buffer
 * given to pk_decode must outlive the pk_doc.
 */
#ifndef RANKSNAP_PICKLE_H
#define RANKSNAP_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"

typedef enum pk_kind {
    PK_NONE = 0,
    PK_BOOL,
    PK_INT,       /* fits in int64 (.i), or in uint64 when .is_u64 (.u)                       */
    PK_BIGINT,    /* an int wider than 64 bits: kept (so that the rest decodes), value unknown */
    PK_FLOAT,
    PK_STR,       /* UTF-8 (as Python accepts it: surrogates pass), not NUL-terminated        */
    PK_BYTES,     /* bytes and bytearray                                                       */
    PK_LIST,
    PK_TUPLE,
    PK_SET,
    PK_FROZENSET,
    PK_DICT,
    PK_KIND_COUNT_
} pk_kind;

typedef struct pk_value pk_value;

struct pk_value {
    uint8_t kind;    /* pk_kind */
    uint8_t is_u64;  /* PK_INT: the value is .u, above INT64_MAX */
    size_t offset;   /* byte offset of the opcode that made the value, for error messages */
    union {
        int b;       /* PK_BOOL */
        int64_t i;   /* PK_INT */
        uint64_t u;  /* PK_INT with is_u64 */
        double f;    /* PK_FLOAT */
        struct {
            const char *p; /* into the input buffer */
            size_t n;
        } str;       /* PK_STR, PK_BYTES */
        struct {
            pk_value **items; /* lists, tuples, sets: items; dicts: key, value, key, value... */
            size_t n;         /* items; for a dict, 2 * the number of pairs                     */
            size_t cap;
        } seq;
    } v;
};

typedef struct pk_doc pk_doc;

/* Decodes `len` bytes up to the STOP opcode (bytes after STOP are ignored, as pickle.loads
 * does). `name` (a path, "fuzz") starts every error message, which then says the byte offset and
 * what was expected there, e.g. "snap.pickle: offset 1234: opcode GLOBAL (0x63) is refused: a
 * snapshot never needs code execution". Errors are RANKSNAP_ERR_FORMAT, or
 * RANKSNAP_ERR_HOST_MEMORY. On success *out is a new document the caller frees with pk_free; it
 * borrows `buf` (see above). On failure *out is NULL. */
ranksnap_status pk_decode(const void *buf, size_t len, const char *name, pk_doc **out);

/* The object STOP returned. */
const pk_value *pk_root(const pk_doc *doc);

/* The protocol the PROTO opcode named (2..5), or 0 when the pickle had none. */
int pk_protocol(const pk_doc *doc);

/* Frees the document and every value in it; NULL is a no-op. */
void pk_free(pk_doc *doc);

/* "a str", "a dict", ...: for messages saying what was found instead of what was expected. */
const char *pk_kind_name(unsigned kind);

/* The opcode's name as pickletools spells it ("SHORT_BINUNICODE"), "unknown" when not one. */
const char *pk_opcode_name(unsigned char op);

/* 1 for a list, tuple, set or frozenset (whose items are v.seq.items[0..n)). */
int pk_is_sequence(const pk_value *v);

/* Number of items of a sequence, of pairs of a dict; 0 for anything else. */
size_t pk_len(const pk_value *v);

/* Item i of a sequence, NULL when out of range or not a sequence. */
const pk_value *pk_item(const pk_value *v, size_t i);

/* The value of the str key `key` of a dict, NULL when absent or when `dict` is not a dict. When
 * a key was set twice the last value wins, as in Python. */
const pk_value *pk_dict_get(const pk_value *dict, const char *key);

/* 1 when v is a str equal to the NUL-terminated `s`. */
int pk_str_is(const pk_value *v, const char *s);

/* Integer values: 0 on success; -1 when v is not an int (bool counts, as in Python) or the value
 * does not fit the type (negative for uint64, above INT64_MAX for int64, a PK_BIGINT). */
int pk_get_i64(const pk_value *v, int64_t *out);
int pk_get_u64(const pk_value *v, uint64_t *out);

#endif
