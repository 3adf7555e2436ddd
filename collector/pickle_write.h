/*
 * pickle_write.h — a small writer of Python pickles (protocol 4 opcodes), for the torch export.
 *
 * It emits only what PyTorch's own snapshot pickles use and what both readers of them accept:
 * Python's pickle module and the JavaScript unpickler inside pytorch.org/memory_viz
 * (torch/utils/viz/MemoryViz.js), which knows a fixed list of opcodes, reads BINGET's index as one
 * byte, turns LONG1 integers of more than 8 bytes into BigInt (which its arithmetic rejects) and
 * spreads each APPENDS batch into one function call. Hence: memo references go through MEMOIZE
 * and BINGET/LONG_BINGET only, containers are filled in batches of at most RS_PW_BATCH items,
 * and integers are written in the narrowest of BININT1, BININT2, BININT and LONG1.
 *
 * The writer owns a growing buffer. Every call appends; a failed allocation latches an error
 * that rs_pw_finish reports once, so a caller writes a whole document and checks one status.
 * Strings that repeat (dict keys, action names, file names) go through rs_pw_str_shared: the
 * first use writes and memoizes the string, later uses write a 2 or 5 byte memo reference.
 */
#ifndef RANKSNAP_PICKLE_WRITE_H
#define RANKSNAP_PICKLE_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"

/* Items per MARK ... APPENDS/SETITEMS batch, as Python's own pickler does. */
#define RS_PW_BATCH 1000

typedef struct rs_pw_str_slot {
    char *s;          /* owned copy; NULL = empty slot */
    size_t len;
    uint32_t memo;
} rs_pw_str_slot;

typedef struct rs_pw {
    unsigned char *buf;
    size_t len, cap;
    int failed;               /* an allocation failed: the document is incomplete */
    uint32_t memo_next;       /* index the next MEMOIZE assigns                    */
    rs_pw_str_slot *strs;     /* shared strings, open addressing                   */
    size_t n_strs, mask;
} rs_pw;

/* A list or dict being filled: counts items to open and close batches. */
typedef struct rs_pw_seq {
    size_t n;
    int is_dict;
} rs_pw_seq;

void rs_pw_init(rs_pw *w);
/* Frees the buffer and the string table (also after rs_pw_finish handed the buffer out). */
void rs_pw_free(rs_pw *w);

void rs_pw_proto(rs_pw *w);            /* PROTO 4 */
void rs_pw_stop(rs_pw *w);             /* STOP    */
void rs_pw_none(rs_pw *w);
void rs_pw_bool(rs_pw *w, int v);
void rs_pw_int(rs_pw *w, int64_t v);
/* Values above INT64_MAX become 9-byte LONG1 integers (exact in Python, BigInt in MemoryViz.js). */
void rs_pw_uint(rs_pw *w, uint64_t v);
void rs_pw_float(rs_pw *w, double v);
/* A str object; `s` must be UTF-8 (bytes that are not become U+FFFD, so Python can decode it). */
void rs_pw_str(rs_pw *w, const char *s);
/* As rs_pw_str, but memoized: the first call for a given string writes it, later calls refer to it. */
void rs_pw_str_shared(rs_pw *w, const char *s);
void rs_pw_tuple2(rs_pw *w);           /* the two items above become a tuple */

/* MEMOIZE: the object on top of the stack gets the next memo index, which is returned. */
uint32_t rs_pw_memoize(rs_pw *w);
/* Pushes memo entry `idx` (BINGET below 256, else LONG_BINGET). */
void rs_pw_get(rs_pw *w, uint32_t idx);

/* Containers: open, then for each item rs_pw_item (before a list item, or before a dict key),
 * then the item (a key and its value for a dict), then close. */
void rs_pw_list_open(rs_pw *w, rs_pw_seq *q);
void rs_pw_dict_open(rs_pw *w, rs_pw_seq *q);
void rs_pw_item(rs_pw *w, rs_pw_seq *q);
void rs_pw_close(rs_pw *w, rs_pw_seq *q);

/* Hands out the bytes (malloc'ed, the caller frees them) or RANKSNAP_ERR_HOST_MEMORY. The writer
 * must still be freed with rs_pw_free. */
ranksnap_status rs_pw_finish(rs_pw *w, unsigned char **buf, size_t *len);

#endif
