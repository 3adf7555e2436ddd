/*
 * pickler.h — a small writer of Python pickles (protocol 4 opcodes), for the torch export.
 *
 * It emits only what PyTorch's own snapshot pickles use and what both readers of them accept:
 * Python's pickle module and the JavaScript unpickler inside pytorch.org/memory_viz
 * (torch/utils/viz/MemoryViz.js), which knows a fixed list of opcodes, reads BINGET's index as one
 * byte, turns LONG1 integers of more than 8 bytes into BigInt (which its arithmetic rejects) and
 * spreads each APPENDS batch into one function call. Hence: memo references go through MEMOIZE
 * and BINGET/LONG_BINGET only, containers are filled in batches of at most RS_PICKLER_BATCH items,
 * and integers are written in the narrowest of BININT1, BININT2, BININT and LONG1.
 *
 * The writer owns a growing buffer. Every call appends; a failed allocation latches an error
 * that rs_pickler_finish reports once, so a caller writes a whole document and checks one status.
 * Strings that repeat (dict keys, action names, file names) go through rs_pickler_str_shared: the
 * first use writes and memoizes the string, later uses write a 2 or 5 byte memo reference.
 */
#ifndef RANKSNAP_PICKLER_H
#define RANKSNAP_PICKLER_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"

/* Items per MARK ... APPENDS/SETITEMS batch, as Python's own pickler does. */
#define RS_PICKLER_BATCH 1000

typedef struct rs_pickler_str_slot {
    char *s;          /* owned copy; NULL = empty slot */
    size_t len;
    uint32_t memo;
} rs_pickler_str_slot;

typedef struct rs_pickler {
    unsigned char *buf;
    size_t len, cap;
    int failed;               /* an allocation failed: the document is incomplete */
    uint32_t memo_next;       /* index the next MEMOIZE assigns                    */
    rs_pickler_str_slot *strs;     /* shared strings, open addressing                   */
    size_t n_strs, mask;
} rs_pickler;

/* A list or dict being filled: counts items to open and close batches. */
typedef struct rs_pickler_seq {
    size_t n;
    int is_dict;
} rs_pickler_seq;

void rs_pickler_init(rs_pickler *w);
/* Frees the buffer and the string table (also after rs_pickler_finish handed the buffer out). */
void rs_pickler_free(rs_pickler *w);

void rs_pickler_proto(rs_pickler *w);            /* PROTO 4 */
void rs_pickler_stop(rs_pickler *w);             /* STOP    */
void rs_pickler_none(rs_pickler *w);
void rs_pickler_bool(rs_pickler *w, int v);
void rs_pickler_int(rs_pickler *w, int64_t v);
/* Values above INT64_MAX become 9-byte LONG1 integers (exact in Python, BigInt in MemoryViz.js). */
void rs_pickler_uint(rs_pickler *w, uint64_t v);
void rs_pickler_float(rs_pickler *w, double v);
/* A str object; `s` must be UTF-8 (bytes that are not become U+FFFD, so Python can decode it). */
void rs_pickler_str(rs_pickler *w, const char *s);
/* As rs_pickler_str, but memoized: the first call for a given string writes it, later calls refer to it. */
void rs_pickler_str_shared(rs_pickler *w, const char *s);
void rs_pickler_tuple2(rs_pickler *w);           /* the two items above become a tuple */

/* MEMOIZE: the object on top of the stack gets the next memo index, which is returned. */
uint32_t rs_pickler_memoize(rs_pickler *w);
/* Pushes memo entry `idx` (BINGET below 256, else LONG_BINGET). */
void rs_pickler_get(rs_pickler *w, uint32_t idx);

/* Containers: open, then for each item rs_pickler_item (before a list item, or before a dict key),
 * then the item (a key and its value for a dict), then close. */
void rs_pickler_list_open(rs_pickler *w, rs_pickler_seq *q);
void rs_pickler_dict_open(rs_pickler *w, rs_pickler_seq *q);
void rs_pickler_item(rs_pickler *w, rs_pickler_seq *q);
void rs_pickler_close(rs_pickler *w, rs_pickler_seq *q);

/* Hands out the bytes (malloc'ed, the caller frees them) or RANKSNAP_ERR_HOST_MEMORY. The writer
 * must still be freed with rs_pickler_free. */
ranksnap_status rs_pickler_finish(rs_pickler *w, unsigned char **buf, size_t *len);

#endif
