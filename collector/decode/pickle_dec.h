/*
 * pickle_dec.h — the pickle decoder's state, which the files of the machine share: the arenas,
 * the memo, the stack, the open streamed batch and the tables of frames lists. Types only: each
 * part's functions are in its own file's header (pickle_mem.h, pickle_batch.h,
 * pickle_frames.h).
 */
#ifndef RANKSNAP_PICKLE_DEC_H
#define RANKSNAP_PICKLE_DEC_H

#include <stddef.h>
#include <stdint.h>

#include "pickle.h"

/* Arena chunks start small (most pickles in tests are tiny) and double up to this size. */
#define CHUNK_MIN ((size_t)4096)

#define CHUNK_MAX ((size_t)1 << 20)

#define ALIGN 8 /* every member of rs_pickle_value and of its arrays is 8-byte aligned at most */

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
} chunk;

#define CHUNK_HDR ((sizeof(chunk) + ALIGN - 1) & ~(size_t)(ALIGN - 1))

typedef struct arena {
    chunk *chunks; /* the current chunk first */
    size_t next_chunk;
} arena;

struct rs_pickle_doc {
    arena main;
    arena scratch; /* the streamed batch being built: reset when it has been taken */
    const rs_pickle_value *root;
    int protocol;
};

/* 64-bit keys to values, open addressing, doubled when half full: the memo's large keys, and the
 * copies a streamed batch's end makes (keyed by the scratch value's address). NULL = no value. */
typedef struct u64map {
    uint64_t *keys;
    rs_pickle_value **vals;
    size_t mask; /* capacity - 1, 0 before the first key */
    size_t n;
    uint64_t seed; /* the process's (addr_hash.h), read once: a pickle chooses its keys */
} u64map;

/* The memo: key -> value. Python's memo is a dict of arbitrary int keys; pickle.dump numbers
 * them 0, 1, 2, ..., and a GET is most of a PyTorch snapshot's opcodes, so keys up to the input
 * length (which no pickle.dump output can exceed: one key per opcode) index an array, and
 * larger ones, which only a hand-made pickle has, go to a hash table. */
typedef struct memo {
    rs_pickle_value **dense; /* [dense_cap], NULL = not stored */
    size_t dense_cap;        /* keys cleared so far: the part of the array in use */
    size_t dense_alloc;      /* keys allocated (memo_put clears them as keys reach them) */
    u64map sparse;           /* keys above the input length */
    size_t count;            /* distinct keys: MEMOIZE's next key, as len(memo) in Python */
    size_t put_top;          /* 1 + the highest key memo_put stored (PUT's keys are the file's) */
} memo;

/* A frames list's bytes, from its first GET to its APPENDS, for the next list written with the
 * same bytes: PyTorch writes a new list for most trace entries, but only a few distinct ones
 * (8,965 lists with 128 contents in a real 2.5 MB snapshot, half its bytes), and bytes that
 * parsed once as GETs ending in APPENDS parse the same way again, to the same values while no
 * memo key they read was given another value (memo_gen). Recorded only for lists whose frames
 * the open batch did not make, so that every value they hold is in the document's memory. Keyed
 * by a hash of the bytes, which are compared before use: a collision costs a miss. The lists
 * met again are the first one, not copies: no memory per trace entry. Python's lists are
 * distinct objects that a later APPENDS could make different, so the one value stands for them
 * only while none grows: container_add refuses to add to it (PyTorch never does). */
#define SPAN_MEMOS 512

#define SPAN_CANDIDATES 4

struct span_memo {
    size_t at;             /* where the bytes are in the input */
    uint32_t len;          /* their length, the APPENDS included */
    rs_pickle_value *list; /* the list they made, in the document's memory: every list with the
                            * same bytes is this value (marked shared: none may grow) */
    uint64_t hash, gen;
    struct span_memo *next; /* the slot of the list met after these bytes, last time: a guess */
};

typedef struct dec {
    const char *name;
    const unsigned char *buf;
    size_t len, pos;
    size_t op_at;         /* offset of the opcode being run */
    unsigned char op;
    rs_pickle_doc *doc;
    rs_pickle_value **stack;
    size_t sp, stack_cap;
    size_t *marks;        /* stack heights at each open MARK */
    size_t n_marks, marks_cap;
    memo memo;
    /* streaming (pickle.h): the batch being built in scratch memory */
    const rs_pickle_stream *stream;
    uint32_t batch;       /* its number, which the values made in it carry; 0 = none open */
    uint32_t batches;     /* batches opened so far */
    size_t batch_level;   /* n_marks while it is open: its MARK is marks[batch_level - 1] */
    size_t batch_memo;    /* memo.count when it opened, or after the last entry the stream's
                           * reader read with nothing of the batch before it in the memo: the
                           * keys from there on may hold its values */
    rs_pickle_value *batch_list; /* the list root[key][batch_index] its items go to */
    size_t batch_index;
    size_t batch_direct;  /* its entries the reader read as they came, or a flush handed over */
    size_t read_end;      /* where the item the stream's reader read ends (rs_pickle_read_done) */
    ranksnap_status flush_err; /* why batch_flush returned -1 */
    uint64_t *batch_keys; /* keys PUT, BINPUT or LONG_BINPUT stored one of its values under */
    size_t n_batch_keys, batch_keys_cap;
    /* copies out of the batch while it ends: scratch value -> copy (open addressing) */
    u64map fwd;
    rs_pickle_value **work; /* copies whose items still point into the batch */
    size_t n_work, work_cap;
    struct shared_items *shared; /* frames lists by content (NULL until used) */
    struct span_memo *spans;     /* frames lists by their bytes (NULL until used) */
    struct span_memo *span_last; /* the slot of the frames list met last */
    uint64_t memo_gen;           /* bumped when a memo key that held a value is given another */
} dec;

/* A frames list's item array, for the next list rs_pk_gets_list makes with the same items: PyTorch
 * 2.11 writes a new list for most trace entries (3,986 lists of 123 contents in a real trace),
 * and lists with equal items can share one array, since none is ever written in place (a list
 * that grows gets a new one: its capacity is its length). A fixed table of two-way buckets: a
 * miss costs only the array it would have saved. */
#define SHARED_ITEMS 1024

struct shared_items {
    rs_pickle_value **items;
    uint32_t n;
    uint64_t hash;
};

/* The taken items' mark in `batch`; and what the memo holds in their place afterwards, a mark
 * that is no value's address (values are 8-byte aligned, and the low bit is memo_lazy_tag's), so
 * that a GET tells a value from a mark or a lazy str with one test (memo_is_value). */
#define BATCH_TAKEN UINT32_MAX

#define TAKEN_MARK ((rs_pickle_value *)(uintptr_t)2)

#endif
