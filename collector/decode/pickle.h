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
 * Values live in one arena owned by the rs_pickle_doc and are freed together by rs_pickle_free. Shared
 * references stay shared, as in Python: a memo GET pushes the same rs_pickle_value, so a list fetched
 * from the memo and then appended to is one list everywhere it appears, and a container may
 * contain itself. Code that walks a tree must therefore not recurse without a depth bound.
 * Strings and bytes are not copied: rs_pickle_value.str points into the input buffer, so the buffer
 * given to rs_pickle_decode must outlive the rs_pickle_doc.
 */
#ifndef RANKSNAP_PICKLE_H
#define RANKSNAP_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "pickle_names.h"
#include "pickle_value.h"
#include "ranksnap.h"

typedef struct rs_pickle_doc rs_pickle_doc;

/* Decodes `len` bytes up to the STOP opcode (bytes after STOP are ignored, as pickle.loads
 * does). `name` (a path, "fuzz") starts every error message, which then says the byte offset and
 * what was expected there, e.g. "snap.pickle: offset 1234: opcode GLOBAL (0x63) is refused: a
 * snapshot never needs code execution". Errors are RANKSNAP_ERR_FORMAT, or
 * RANKSNAP_ERR_HOST_MEMORY. On success *out is a new document the caller frees with rs_pickle_free; it
 * borrows `buf` (see above). On failure *out is NULL. */
ranksnap_status rs_pickle_decode(const void *buf, size_t len, const char *name, rs_pickle_doc **out);

/* Streaming: the trace of a PyTorch snapshot is most of its bytes, and a reader needs each of
 * its entries once. With a stream, the items appended to each list of the list root[key] (the
 * root a dict, key "device_traces") are handed to `take` as the pickle appends them instead of
 * being stored in the list, which stays empty. When the pickle is laid out as pickle.dump writes
 * it (the root's items in MARK ... SETITEMS batches, lists filled by MARK ... APPENDS), each
 * batch of items is built in scratch memory that is reused for the next batch once `take`
 * returns: memory then holds one batch of entries, not all of them. What `take` wants beyond the
 * call it passes to rs_pickle_keep; values stored in the memo survive on their own, except the
 * items taken, which a later memo GET refuses (PyTorch never refers to an entry twice). */
typedef struct rs_pickle_taker rs_pickle_taker;

typedef struct rs_pickle_reader rs_pickle_reader;

typedef struct rs_pickle_stream {
    const char *key;
    /* The items `items[0..n)` appended to root[key][index] (`list`), in order. An error stops
     * the decode with it. */
    ranksnap_status (*take)(void *ctx, rs_pickle_taker *t, const rs_pickle_value *list,
                            size_t index, const rs_pickle_value *const *items, size_t n);
    /* Optional: the item of root[key][index] whose first opcode (EMPTY_DICT) is at `at`, read
     * from its bytes by a reader that knows its layout (below) instead of being made and handed
     * to `take`. 1 when it read the item (rs_pickle_read_done said so), 0 when it leaves the
     * item to the machine, having stored nothing. Asked at each item of a streamed batch, once
     * the items of the batch before it were handed to `take`, so that items arrive in order
     * either way. */
    int (*read)(void *ctx, rs_pickle_reader *r, const rs_pickle_value *list, size_t index,
                size_t at);
    void *ctx;
} rs_pickle_stream;

/* rs_pickle_decode with a stream (NULL: none). */
ranksnap_status rs_pickle_decode_stream(const void *buf, size_t len, const char *name,
                                        const rs_pickle_stream *stream, rs_pickle_doc **out);

/* During take: `v` (and all it holds) as it will be after the call — the same value, or a copy
 * out of the scratch memory. NULL when there is no memory for the copy. */
const rs_pickle_value *rs_pickle_keep(rs_pickle_taker *t, const rs_pickle_value *v);

/* ---- reading a streamed item from its bytes (rs_pickle_stream.read) ---- */

/* The input, and its length in *len. */
const unsigned char *rs_pickle_read_input(const rs_pickle_reader *r, size_t *len);

/* The value memo key `key` holds, in memory that outlives the batch; NULL when it holds none
 * (never stored, or an item taken) or there is no memory for it. */
const rs_pickle_value *rs_pickle_read_memo(rs_pickle_reader *r, uint64_t key);

/* Changes whenever a memo key that held a value is given another (PUT): what a reader learnt of
 * the memo's values holds while this stays the same. */
uint64_t rs_pickle_read_memo_gen(const rs_pickle_reader *r);

/* The list whose EMPTY_LIST is at `list_at`, when its items follow from `items_at` as memo GETs
 * (MARK GET... APPENDS, one GET and APPEND, or none), as the machine would make it; *end is
 * after them. NULL when they are laid out otherwise, or no memory. */
const rs_pickle_value *rs_pickle_read_gets(rs_pickle_reader *r, size_t list_at, size_t items_at,
                                           size_t *end);

/* What one MEMOIZE of the item stored: a value (from the two calls above), else (NULL) the str
 * whose opcode is at `at` (rs_pk_str accepted it: pickle_ops.h), or with `at` SIZE_MAX the item
 * itself, which a later GET refuses (as a taken item). */
typedef struct rs_pickle_memo_new {
    const rs_pickle_value *value;
    size_t at;
} rs_pickle_memo_new;

/* The item that started at `at` ends before `end`, its MEMOIZEs having stored put[0..n) in
 * order. 0; -1 when the memo cannot take them as they are (its array must grow first, or a PUT
 * stored one of their keys): nothing changed then, and `read` leaves the item to the machine. */
int rs_pickle_read_done(rs_pickle_reader *r, size_t at, size_t end, const rs_pickle_memo_new *put,
                        size_t n);

/* The object STOP returned. */
const rs_pickle_value *rs_pickle_root(const rs_pickle_doc *doc);

/* The protocol the PROTO opcode named (2..5), or 0 when the pickle had none. */
int rs_pickle_protocol(const rs_pickle_doc *doc);

/* Frees the document and every value in it; NULL is a no-op. */
void rs_pickle_free(rs_pickle_doc *doc);

#endif
