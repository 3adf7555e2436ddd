/*
 * pickle.c — decodes Python pickles (protocols 2 to 5) into the value tree of pickle.h, running
 * nothing that the pickle names.
 *
 * How it works: the pickle is a program for a small stack machine (Python's Lib/pickle.py is
 * the reference; pickletools documents every opcode). This file runs the subset that builds
 * plain data — the value stack, the MARK stack and the memo — exactly as CPython's _pickle.c
 * does, including its checks: a pop never crosses the innermost MARK (CPython's "fence"), an
 * APPEND needs a list under its item, a GET needs a key that a PUT stored. Opcodes that import or
 * call (GLOBAL, REDUCE, ...) are refused by name; protocol 0/1 text opcodes and out-of-band
 * buffers, which pickle.dump never writes at protocol 2 or later for plain data, are refused as
 * unsupported. There is no recursion, so deep nesting costs stack array slots, never C stack.
 *
 * Memory: every value and every container's item array comes from one arena (freed at once by
 * rs_pickle_free; a container that grows leaves its old array behind, at most doubling what it uses).
 * Each opcode adds at most one value or one item slot, and each needs at least one input byte,
 * so the arena is bounded by a small multiple of the input size; lengths read from the input
 * are checked against the bytes that remain before anything is allocated for them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr_hash.h"
#include "errors.h"
#include "pickle.h"
#include "pickle_ops.h"

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
    size_t batch_memo;    /* memo.count when it opened, or after the last entry fused_entry
                           * handed over with nothing of the batch before it in the memo: the
                           * keys from there on may hold its values */
    rs_pickle_value *batch_list; /* the list root[key][batch_index] its items go to */
    size_t batch_index;
    size_t batch_direct;  /* its entries fused_entry handed over, or the reader read, as they
                           * came */
    size_t read_end;      /* where the item the stream's reader read ends (rs_pickle_read_done) */
    ranksnap_status fused_err; /* why fused_entry returned -1 */
    uint64_t *batch_keys; /* keys PUT, BINPUT or LONG_BINPUT stored one of its values under */
    size_t n_batch_keys, batch_keys_cap;
    /* copies out of the batch while it ends: scratch value -> copy (open addressing) */
    u64map fwd;
    rs_pickle_value **work; /* copies whose items still point into the batch */
    size_t n_work, work_cap;
    struct shared_items *shared; /* fused_entry's frames lists by content (NULL until used) */
    struct span_memo *spans;     /* fused_entry's frames lists by their bytes (NULL until used) */
    struct span_memo *span_last; /* the slot of the frames list met last */
    uint64_t memo_gen;           /* bumped when a memo key that held a value is given another */
} dec;

/* A frames list's item array, for the next list fused_entry makes with the same items: PyTorch
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

/* ---- errors -------------------------------------------------------------------------------- */

static ranksnap_status fail_at(const dec *d, size_t offset, const char *fmt, ...) RS_PRINTF(3, 4);

static ranksnap_status fail_at(const dec *d, size_t offset, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rs_error(RANKSNAP_ERR_FORMAT, "%s: offset %zu: %s", d->name, offset, msg);
}

#define FAIL(d, ...) fail_at((d), (d)->op_at, __VA_ARGS__)

static ranksnap_status no_memory(const dec *d, size_t bytes)
{
    return rs_error(RANKSNAP_ERR_HOST_MEMORY,
                    "%s: offset %zu: no memory for %zu more bytes of decoded values", d->name,
                    d->op_at, bytes);
}

/* The array `p` of *cap elements of `elem` bytes, doubled (or `first` long when empty); *cap is
 * updated. NULL, with `p` and *cap untouched, when out of memory. */
static void *doubled(void *p, size_t *cap, size_t elem, size_t first)
{
    size_t c = *cap ? 2 * *cap : first;
    void *q = c <= SIZE_MAX / elem ? realloc(p, c * elem) : NULL;
    if (q) *cap = c;
    return q;
}

const char *rs_pickle_opcode_name(unsigned char op)
{
    switch (op) {
    case 0x28: return "MARK";
    case 0x2e: return "STOP";
    case 0x30: return "POP";
    case 0x31: return "POP_MARK";
    case 0x32: return "DUP";
    case 0x46: return "FLOAT";
    case 0x49: return "INT";
    case 0x4a: return "BININT";
    case 0x4b: return "BININT1";
    case 0x4c: return "LONG";
    case 0x4d: return "BININT2";
    case 0x4e: return "NONE";
    case 0x50: return "PERSID";
    case 0x51: return "BINPERSID";
    case 0x52: return "REDUCE";
    case 0x53: return "STRING";
    case 0x54: return "BINSTRING";
    case 0x55: return "SHORT_BINSTRING";
    case 0x56: return "UNICODE";
    case 0x58: return "BINUNICODE";
    case 0x61: return "APPEND";
    case 0x62: return "BUILD";
    case 0x63: return "GLOBAL";
    case 0x64: return "DICT";
    case 0x7d: return "EMPTY_DICT";
    case 0x65: return "APPENDS";
    case 0x67: return "GET";
    case 0x68: return "BINGET";
    case 0x69: return "INST";
    case 0x6a: return "LONG_BINGET";
    case 0x6c: return "LIST";
    case 0x5d: return "EMPTY_LIST";
    case 0x6f: return "OBJ";
    case 0x70: return "PUT";
    case 0x71: return "BINPUT";
    case 0x72: return "LONG_BINPUT";
    case 0x73: return "SETITEM";
    case 0x74: return "TUPLE";
    case 0x29: return "EMPTY_TUPLE";
    case 0x75: return "SETITEMS";
    case 0x47: return "BINFLOAT";
    case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 0x42: return "BINBYTES";
    case 0x43: return "SHORT_BINBYTES";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    }
    return "unknown";
}

const char *rs_pickle_kind_name(unsigned kind)
{
    static const char *const names[RS_PICKLE_KIND_COUNT_] = {
        "None", "a bool", "an int", "an int wider than 64 bits", "a float", "a str", "bytes",
        "a list", "a tuple", "a set", "a frozenset", "a dict"};
    return kind < RS_PICKLE_KIND_COUNT_ ? names[kind] : "an unknown value";
}

/* ---- arena --------------------------------------------------------------------------------- */

static void *arena_alloc_slow(arena *a, size_t n);

/* Bump allocation from the arena's current chunk, `n` rounded up to ALIGN. */
static inline void *arena_alloc_in(arena *a, size_t n)
{
    chunk *c = a->chunks;
    n = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    if (c && n && c->cap - c->used >= n) {
        void *p = (unsigned char *)c + CHUNK_HDR + c->used;
        c->used += n;
        return p;
    }
    return arena_alloc_slow(a, n);
}

static void *arena_alloc_slow(arena *a, size_t n)
{
    if (n > SIZE_MAX / 2) return NULL;
    n = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    chunk *c = a->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = a->next_chunk;
        if (cap < n) cap = n;
        chunk *nc = malloc(CHUNK_HDR + cap);
        if (!nc) return NULL;
        nc->used = 0;
        nc->cap = cap;
        if (c && n > a->next_chunk / 2) {
            /* A large array gets a chunk of its own behind the current one, which keeps
             * serving the small values. */
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            a->chunks = nc;
            if (a->next_chunk < CHUNK_MAX) a->next_chunk *= 2;
        }
        c = nc;
    }
    void *p = (unsigned char *)c + CHUNK_HDR + c->used;
    c->used += n;
    return p;
}

static void arena_free(arena *a)
{
    chunk *c = a->chunks;
    while (c) {
        chunk *next = c->next;
        free(c);
        c = next;
    }
    a->chunks = NULL;
}

/* Empties the arena for the next batch, keeping its current chunk. */
static void arena_reset(arena *a)
{
    chunk *keep = a->chunks;
    if (!keep) return;
    a->chunks = keep->next;
    arena_free(a);
    keep->next = NULL;
    keep->used = 0;
    a->chunks = keep;
}

/* Values and arrays go to the open batch's scratch memory, else to the document's. */
static inline void *arena_alloc(dec *d, size_t n)
{
    return arena_alloc_in(d->batch ? &d->doc->scratch : &d->doc->main, n);
}

/* 1 when v was made in the open batch (and so goes when it ends). */
static inline int in_batch(const dec *d, const rs_pickle_value *v)
{
    return d->batch && (v->batch == d->batch || v->batch == BATCH_TAKEN);
}

static inline rs_pickle_value *new_value(dec *d, rs_pickle_kind kind)
{
    rs_pickle_value *v = arena_alloc(d, sizeof *v);
    if (!v) return NULL;
    v->kind = (uint8_t)kind;
    v->is_u64 = 0;
    v->shared = 0;
    v->batch = d->batch;
    v->offset = d->op_at;
    v->v.seq.items = NULL; /* the union's 16 bytes, zeroed */
    v->v.seq.n = v->v.seq.cap = 0;
    return v;
}

static rs_pickle_value *evacuate(dec *d, rs_pickle_value *v);

/* A sequence or dict whose items are `items[0..n)` (copied). */
static rs_pickle_value *new_container(dec *d, rs_pickle_kind kind, rs_pickle_value *const *items, size_t n)
{
    rs_pickle_value *v = new_value(d, kind);
    if (!v) return NULL;
    if (n > UINT32_MAX) return NULL;
    if (n > 0) {
        v->v.seq.items = arena_alloc(d, n * sizeof *items);
        if (!v->v.seq.items) return NULL;
        memcpy(v->v.seq.items, items, n * sizeof *items);
    }
    v->v.seq.n = v->v.seq.cap = (uint32_t)n;
    return v;
}

/* Appends items to a container's array, doubling it in the arena when full. */
static ranksnap_status container_add(dec *d, rs_pickle_value *c, rs_pickle_value *const *items, size_t n)
{
    if (n == 0) return RANKSNAP_OK; /* APPENDS of nothing: an empty list has no array yet */
    if (c->shared)
        return FAIL(d, "%s adds to a frames list the reader shares with the lists of the same "
                       "bytes (made at offset %zu): a layout this reader does not take",
                    rs_pickle_opcode_name(d->op), c->offset);
    size_t need = (size_t)c->v.seq.n + n;
    if (need > UINT32_MAX)
        return FAIL(d, "%s makes a container of more than %u items, which this reader does not "
                       "take", rs_pickle_opcode_name(d->op), UINT32_MAX);
    int outside = d->batch && !in_batch(d, c);
    if (need > c->v.seq.cap) {
        /* A container filled once (a dict by one SETITEMS) gets exactly its size; one that
         * keeps growing (APPENDS batches of 1,000) doubles. Its array lives where it does.
         * Items are only ever added past n, into an array of the container's own: a frames
         * list's array may be another list's too (shared_list), with cap == n. */
        size_t cap = c->v.seq.cap ? c->v.seq.cap : need;
        while (cap < need) cap *= 2;
        if (cap > UINT32_MAX) cap = UINT32_MAX;
        arena *where = d->batch && !outside ? &d->doc->scratch : &d->doc->main;
        rs_pickle_value **a = arena_alloc_in(where, cap * sizeof *a);
        if (!a) return no_memory(d, cap * sizeof *a);
        if (c->v.seq.n) memcpy(a, c->v.seq.items, c->v.seq.n * sizeof *a);
        c->v.seq.items = a;
        c->v.seq.cap = (uint32_t)cap;
    }
    memcpy(c->v.seq.items + c->v.seq.n, items, n * sizeof *items);
    if (outside) {
        /* a container older than the batch keeps no pointer into it: copies of what it gets */
        for (size_t i = c->v.seq.n; i < need; i++) {
            if (!in_batch(d, c->v.seq.items[i])) continue;
            rs_pickle_value *x = evacuate(d, c->v.seq.items[i]);
            if (!x) return no_memory(d, sizeof *x);
            c->v.seq.items[i] = x;
        }
    }
    c->v.seq.n = (uint32_t)need;
    return RANKSNAP_OK;
}

/* ---- input --------------------------------------------------------------------------------- */

/* Fails unless `n` more bytes (the current opcode's argument) are there. */
static ranksnap_status truncated_arg(const dec *d, uint64_t n)
{
    return FAIL(d, "truncated: %s needs %llu bytes after it, only %zu remain",
                rs_pickle_opcode_name(d->op), (unsigned long long)n, d->len - d->pos);
}

static inline ranksnap_status need(const dec *d, uint64_t n)
{
    if (n <= d->len - d->pos) return RANKSNAP_OK;
    return truncated_arg(d, n);
}

/* `n` (1, 2, 4 or 8) little-endian bytes at the position, which need() has checked. */
static inline uint64_t read_le(dec *d, unsigned n)
{
    const unsigned char *p = d->buf + d->pos;
    uint64_t x;
    d->pos += n;
    switch (n) {
    case 1: return p[0];
    case 2: return (uint64_t)p[0] | (uint64_t)p[1] << 8;
    case 4: return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
    default:
        x = 0;
        for (unsigned i = 0; i < n; i++) x |= (uint64_t)p[i] << (8 * i);
        return x;
    }
}

/* An `n`-byte little-endian count, checked against what remains after it. */
static ranksnap_status read_count(dec *d, unsigned n, uint64_t *count)
{
    RS_CHECK(need(d, n));
    *count = read_le(d, n);
    return need(d, *count);
}

/* The decimal argument of the text memo opcodes PUT and GET, up to its newline. */
static ranksnap_status read_decimal_line(dec *d, uint64_t *out)
{
    uint64_t x = 0;
    size_t digits = 0;
    for (;;) {
        if (d->pos >= d->len)
            return FAIL(d, "truncated: %s's decimal argument has no newline",
                        rs_pickle_opcode_name(d->op));
        unsigned char c = d->buf[d->pos++];
        if (c == '\n') break;
        if (c < '0' || c > '9' || x > (UINT64_MAX - 9) / 10)
            return FAIL(d, "%s expects a decimal memo key and a newline, found byte 0x%02x at "
                           "offset %zu",
                        rs_pickle_opcode_name(d->op), c, d->pos - 1);
        x = x * 10 + (uint64_t)(c - '0');
        digits++;
    }
    if (digits == 0) return FAIL(d, "%s has an empty memo key", rs_pickle_opcode_name(d->op));
    *out = x;
    return RANKSNAP_OK;
}

/* UTF-8 as Python's "utf-8" codec with "surrogatepass" accepts it (what pickle uses for str):
 * no overlong forms, nothing above U+10FFFF, encoded surrogates allowed. Returns the offset of
 * the first bad byte within p, or n when all is well. */
size_t rs_pickle_utf8_bad_at(const unsigned char *p, size_t n)
{
    size_t i = 0;
    /* file paths and function names: ASCII, eight bytes at a time */
    while (n - i >= 8) {
        uint64_t x;
        memcpy(&x, p + i, 8);
        if (x & 0x8080808080808080ull) break;
        i += 8;
    }
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        unsigned lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) {
            k = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
            k = 2;
            if (c == 0xe0) lo = 0xa0;
        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 3;
            if (c == 0xf0) lo = 0x90;
            if (c == 0xf4) hi = 0x8f;
        } else {
            return i;
        }
        if (k > n - i - 1) return i;
        if (p[i + 1] < lo || p[i + 1] > hi) return i;
        for (size_t j = 2; j <= k; j++)
            if ((p[i + j] & 0xc0) != 0x80) return i;
        i += k + 1;
    }
    return n;
}

/* ---- the stack ----------------------------------------------------------------------------- */

static size_t fence(const dec *d)
{
    return d->n_marks ? d->marks[d->n_marks - 1] : 0;
}

static ranksnap_status push_slow(dec *d, rs_pickle_value *v)
{
    if (!v) return no_memory(d, sizeof *v);
    rs_pickle_value **s = doubled(d->stack, &d->stack_cap, sizeof *s, 64);
    if (!s) return no_memory(d, 2 * d->stack_cap * sizeof *s);
    d->stack = s;
    d->stack[d->sp++] = v;
    return RANKSNAP_OK;
}

/* Pushes v; a NULL v is an allocation that failed. */
static inline ranksnap_status push(dec *d, rs_pickle_value *v)
{
    if (!v || d->sp == d->stack_cap) return push_slow(d, v);
    d->stack[d->sp++] = v;
    return RANKSNAP_OK;
}

static ranksnap_status underflow(const dec *d, size_t wanted)
{
    size_t have = d->sp - fence(d);
    if (d->n_marks)
        return FAIL(d, "%s needs %zu value%s on the stack above the last MARK, found %zu",
                    rs_pickle_opcode_name(d->op), wanted, wanted == 1 ? "" : "s", have);
    return FAIL(d, "%s needs %zu value%s on the stack, found %zu", rs_pickle_opcode_name(d->op), wanted,
                wanted == 1 ? "" : "s", have);
}

/* The top value (above the fence) without popping it. */
static ranksnap_status top(dec *d, rs_pickle_value **v)
{
    if (d->sp <= fence(d)) return underflow(d, 1);
    *v = d->stack[d->sp - 1];
    return RANKSNAP_OK;
}

/* Pops the items above the innermost MARK and the MARK itself: they are stack[*start..sp). The
 * caller sets sp = *start once it has taken them. */
static ranksnap_status batch_seal(dec *d);

static ranksnap_status pop_mark(dec *d, size_t *start)
{
    if (d->n_marks == 0) return FAIL(d, "%s needs a MARK before it, there is none",
                                     rs_pickle_opcode_name(d->op));
    *start = d->marks[--d->n_marks];
    if (d->batch && d->n_marks < d->batch_level) return batch_seal(d);
    return RANKSNAP_OK;
}

/* For APPENDS, SETITEMS, ADDITEMS: the container just under the MARK, which must be above the
 * enclosing MARK, of kind `kind`. */
static ranksnap_status container_under_mark(dec *d, size_t start, rs_pickle_kind kind, rs_pickle_value **c)
{
    if (start == 0 || start - 1 < fence(d))
        return FAIL(d, "%s needs %s under its MARK, there is nothing there",
                    rs_pickle_opcode_name(d->op), rs_pickle_kind_name(kind));
    *c = d->stack[start - 1];
    if ((*c)->kind != kind)
        return FAIL(d, "%s needs %s under its MARK, found %s (made at offset %zu)",
                    rs_pickle_opcode_name(d->op), rs_pickle_kind_name(kind), rs_pickle_kind_name((*c)->kind),
                    (*c)->offset);
    return RANKSNAP_OK;
}

/* Python raises TypeError for a dict key or set item it cannot hash; so do we, for the
 * containers that are never hashable (a tuple holding one is not looked into). */
static ranksnap_status unhashable(const dec *d, const rs_pickle_value *v)
{
    return FAIL(d, "%s: a dict key or set item must be hashable, found %s (made at offset %zu)",
                rs_pickle_opcode_name(d->op), rs_pickle_kind_name(v->kind), v->offset);
}

static inline ranksnap_status check_hashable(const dec *d, const rs_pickle_value *v)
{
    if (v->kind == RS_PICKLE_LIST || v->kind == RS_PICKLE_DICT || v->kind == RS_PICKLE_SET)
        return unhashable(d, v);
    return RANKSNAP_OK;
}

/* ---- the memo ------------------------------------------------------------------------------ */

/* Where `key` is in the map, or the empty slot where it belongs (the map has one). */
static size_t u64map_find(const u64map *m, uint64_t key)
{
    size_t i = rs_addr_hash(key, m->seed) & m->mask;
    while (m->vals[i] && m->keys[i] != key) i = (i + 1) & m->mask;
    return i;
}

static rs_pickle_value *u64map_get(const u64map *m, uint64_t key)
{
    return m->mask ? m->vals[u64map_find(m, key)] : NULL;
}

/* -1 when out of memory; 1 when the key is new. */
static int u64map_put(u64map *m, uint64_t key, rs_pickle_value *v)
{
    if (m->mask == 0 || 2 * (m->n + 1) > m->mask + 1) {
        u64map g = {NULL, NULL, m->mask ? 2 * m->mask + 1 : 63, 0, rs_addr_hash_seed()};
        g.keys = malloc((g.mask + 1) * sizeof *g.keys);
        g.vals = calloc(g.mask + 1, sizeof *g.vals);
        if (!g.keys || !g.vals) {
            free(g.keys);
            free(g.vals);
            return -1;
        }
        for (size_t i = 0; m->mask && i <= m->mask; i++) {
            if (!m->vals[i]) continue;
            size_t j = u64map_find(&g, m->keys[i]);
            g.keys[j] = m->keys[i];
            g.vals[j] = m->vals[i];
        }
        g.n = m->n;
        free(m->keys);
        free(m->vals);
        *m = g;
    }
    size_t i = u64map_find(m, key);
    int added = !m->vals[i];
    m->n += (size_t)added;
    m->keys[i] = key;
    m->vals[i] = v;
    return added;
}

/* Empty again. A large table is given back rather than cleared: a batch flushed at every entry
 * (batch_flush) would otherwise clear the whole table each time for the few keys it holds. */
static void u64map_clear(u64map *m)
{
    if (m->n == 0) return;
    if (m->mask >= 4095) {
        free(m->keys);
        free(m->vals);
        m->keys = NULL;
        m->vals = NULL;
        m->mask = 0;
    } else {
        memset(m->vals, 0, (m->mask + 1) * sizeof *m->vals);
    }
    m->n = 0;
}

static void u64map_free(u64map *m)
{
    free(m->keys);
    free(m->vals);
}

/* A memo key that holds a value of the open batch: when the batch ends, the key gets the
 * value's copy (or the taken mark). MEMOIZE's own keys are known without this list. */
static ranksnap_status note_batch_key(dec *d, uint64_t key, rs_pickle_value *v)
{
    if (!in_batch(d, v)) return RANKSNAP_OK;
    if (d->n_batch_keys == d->batch_keys_cap) {
        uint64_t *k = doubled(d->batch_keys, &d->batch_keys_cap, sizeof *k, 64);
        if (!k) return no_memory(d, 2 * d->batch_keys_cap * sizeof *k);
        d->batch_keys = k;
    }
    d->batch_keys[d->n_batch_keys++] = key;
    return RANKSNAP_OK;
}

/* Where the memo keeps `key`: NULL when it does not. */
static rs_pickle_value **memo_slot(dec *d, uint64_t key)
{
    memo *m = &d->memo;
    if (key < m->dense_cap) return m->dense[key] ? &m->dense[key] : NULL;
    if (key > d->len && m->sparse.mask) {
        size_t i = u64map_find(&m->sparse, key);
        if (m->sparse.vals[i]) return &m->sparse.vals[i];
    }
    return NULL;
}

/* A memo slot may hold, instead of a value, the place of a str fused_entry made (its opcode's
 * offset, shifted, with the low bit set: values are aligned): PyTorch 2.11 memoizes a new "N/A"
 * in every trace entry and never fetches one, so the value a GET needs is made when one does
 * (memo_lazy), not a copy per entry kept in the document's memory. */
static inline int memo_is_lazy(const rs_pickle_value *v)
{
    return ((uintptr_t)v & 1) != 0;
}

/* 1 for a value (or NULL), 0 for TAKEN_MARK or a lazy str's tag. */
static inline int memo_is_value(const rs_pickle_value *v)
{
    return ((uintptr_t)v & 3) == 0;
}

static inline rs_pickle_value *memo_lazy_tag(size_t at)
{
    return (rs_pickle_value *)(((uintptr_t)at << 1) | 1);
}

/* The str whose opcode (SHORT_BINUNICODE or BINUNICODE, checked when it was read) is at the
 * tag's offset, made in the document's memory and put in the slot. NULL when out of memory. */
static rs_pickle_value *memo_lazy(dec *d, rs_pickle_value **slot)
{
    size_t at = (uintptr_t)*slot >> 1;
    const unsigned char *b = d->buf + at;
    size_t head = b[0] == 0x8c ? 2 : 5;
    size_t n = b[0] == 0x8c ? b[1]
                            : (size_t)b[1] | (size_t)b[2] << 8 | (size_t)b[3] << 16 | (size_t)b[4] << 24;
    uint32_t batch = d->batch;
    size_t op_at = d->op_at;
    d->batch = 0;
    d->op_at = at;
    rs_pickle_value *v = new_value(d, RS_PICKLE_STR);
    d->batch = batch;
    d->op_at = op_at;
    if (!v) return NULL;
    v->v.str.p = (const char *)b + head;
    v->v.str.n = n;
    *slot = v;
    return v;
}

static ranksnap_status memo_put(dec *d, uint64_t key, rs_pickle_value *v)
{
    memo *m = &d->memo;
    if (key >= m->put_top) m->put_top = (size_t)key + 1;
    if (key <= d->len) {
        if (key >= m->dense_cap) {
            /* Allocated once for a key per 32 bytes (PyTorch's pickles have one per 64) and
             * cleared as the keys reach it, 64 KB at a time: doubling would copy and clear each
             * size on the way (a megabyte of new memory for a 2.5 MB pickle), and memory that
             * calloc leaves to the kernel would be read before it is written, which maps the
             * zero page and then copies it, with a TLB flush on every core the report runs on. */
            size_t want = key + 1 > m->dense_cap + 8192 ? key + 1 : m->dense_cap + 8192;
            if (want > m->dense_alloc) {
                size_t cap = m->dense_alloc ? 2 * m->dense_alloc : d->len / 32 > 256 ? d->len / 32 : 256;
                while (cap < want) cap *= 2;
                if (cap > d->len + 1) cap = (size_t)d->len + 1;
                rs_pickle_value **a = realloc(m->dense, cap * sizeof *a);
                if (!a) return no_memory(d, cap * sizeof *a);
                m->dense = a;
                m->dense_alloc = cap;
            }
            if (want > m->dense_alloc) want = m->dense_alloc;
            memset(m->dense + m->dense_cap, 0, (want - m->dense_cap) * sizeof *m->dense);
            m->dense_cap = want;
        }
        if (!m->dense[key]) m->count++;
        else d->memo_gen++;
        m->dense[key] = v;
        return note_batch_key(d, key, v);
    }
    int added = u64map_put(&m->sparse, key, v);
    if (added < 0) return no_memory(d, 2 * (m->sparse.mask + 1) * sizeof *m->sparse.vals);
    m->count += (size_t)added;
    return note_batch_key(d, key, v);
}

static ranksnap_status memo_taken(const dec *d, uint64_t key)
{
    return FAIL(d, "%s of memo key %llu, an item the reader took as it streamed (PyTorch never "
                   "refers to a trace entry twice)", rs_pickle_opcode_name(d->op),
                (unsigned long long)key);
}

static inline ranksnap_status memo_get(dec *d, uint64_t key)
{
    memo *m = &d->memo;
    if (key < m->dense_cap && m->dense[key] == TAKEN_MARK) return memo_taken(d, key);
    if (key < m->dense_cap && memo_is_lazy(m->dense[key]) && !memo_lazy(d, &m->dense[key]))
        return no_memory(d, sizeof(rs_pickle_value));
    if (key < m->dense_cap && m->dense[key]) return push(d, m->dense[key]);
    rs_pickle_value *v = key > d->len ? u64map_get(&m->sparse, key) : NULL;
    if (v == TAKEN_MARK) return memo_taken(d, key);
    if (v) return push(d, v);
    return FAIL(d, "%s of memo key %llu, which no PUT or MEMOIZE stored", rs_pickle_opcode_name(d->op),
                (unsigned long long)key);
}

static ranksnap_status memo_store_top(dec *d, uint64_t key)
{
    rs_pickle_value *v = NULL;
    RS_CHECK(top(d, &v));
    return memo_put(d, key, v);
}

/* ---- streaming (pickle.h) ------------------------------------------------------------------ */

static int is_container(const rs_pickle_value *v)
{
    return v->kind == RS_PICKLE_DICT || rs_pickle_is_sequence(v);
}

/* A copy of scratch value v in the document's memory (its items still to be looked at). */
static rs_pickle_value *copy_out(dec *d, rs_pickle_value *v)
{
    rs_pickle_value *c = u64map_get(&d->fwd, (uintptr_t)v);
    if (c) return c;
    c = arena_alloc_in(&d->doc->main, sizeof *c);
    if (!c || u64map_put(&d->fwd, (uintptr_t)v, c) < 0) return NULL;
    *c = *v;
    c->batch = 0;
    if (!is_container(c) || c->v.seq.n == 0) return c;
    c->v.seq.items = arena_alloc_in(&d->doc->main, c->v.seq.n * sizeof *c->v.seq.items);
    if (!c->v.seq.items) return NULL;
    memcpy(c->v.seq.items, v->v.seq.items, c->v.seq.n * sizeof *c->v.seq.items);
    c->v.seq.cap = c->v.seq.n;
    if (d->n_work == d->work_cap) {
        rs_pickle_value **w = doubled(d->work, &d->work_cap, sizeof *w, 64);
        if (!w) return NULL;
        d->work = w;
    }
    d->work[d->n_work++] = c;
    return c;
}

/* v and everything in it that the open batch made, copied out of its scratch memory (Cheney's
 * way: no recursion, and each value copied once, shared values staying shared). NULL when out
 * of memory. */
static rs_pickle_value *evacuate(dec *d, rs_pickle_value *v)
{
    rs_pickle_value *c = copy_out(d, v);
    while (c && d->n_work) {
        rs_pickle_value *w = d->work[--d->n_work];
        for (uint32_t i = 0; i < w->v.seq.n; i++) {
            if (!in_batch(d, w->v.seq.items[i])) continue;
            rs_pickle_value *x = copy_out(d, w->v.seq.items[i]);
            if (!x) return NULL;
            w->v.seq.items[i] = x;
        }
    }
    return c;
}

const rs_pickle_value *rs_pickle_keep(rs_pickle_taker *t, const rs_pickle_value *v)
{
    dec *d = (dec *)t;
    return v && in_batch(d, v) ? evacuate(d, (rs_pickle_value *)v) : v;
}

/* Which list of root[stream key] the list at stack position `pos` is, when the stack is laid
 * out as pickle.dump leaves it while it writes that list: the root dict at the bottom, the MARK
 * of its batch of items, the key, then the list of lists and either the list itself (one list:
 * pickle.dump appends a single item without a MARK) or a MARK and the lists before it. -1
 * otherwise (nothing is streamed from a pickle laid out differently). */
static int64_t stream_index_of(const dec *d, size_t pos)
{
    if (!d->stream || d->n_marks < 1 || d->n_marks > 2 || d->marks[0] != 1 || pos < 3) return -1;
    if (d->stack[0]->kind != RS_PICKLE_DICT || d->stack[pos]->kind != RS_PICKLE_LIST) return -1;
    size_t lists_at = pos - 1, first = pos;
    if (d->n_marks == 2) {
        first = d->marks[1];
        if (first < 3 || pos < first) return -1;
        lists_at = first - 1;
    }
    /* the list of lists is a value of the root's batch: key, value, key, value from marks[0] */
    if ((lists_at - 1) % 2 != 1) return -1;
    const rs_pickle_value *lists = d->stack[lists_at];
    if (lists->kind != RS_PICKLE_LIST || !rs_pickle_str_is(d->stack[lists_at - 1], d->stream->key))
        return -1;
    return (int64_t)(lists->v.seq.n + (pos - first));
}

/* MARK: when it starts the items of a streamed list, what follows is built in scratch memory. */
static void batch_open(dec *d)
{
    if (d->batch || d->batches == BATCH_TAKEN - 1 || d->sp == 0 ||
        stream_index_of(d, d->sp - 1) < 0)
        return;
    d->batch = ++d->batches;
    d->batch_level = d->n_marks + 1; /* with the MARK about to be pushed */
    d->batch_memo = d->memo.count;
    d->n_batch_keys = 0;
    d->batch_list = d->stack[d->sp - 1];
    d->batch_index = (size_t)stream_index_of(d, d->sp - 1);
    d->batch_direct = 0;
}

/* The batch's MARK went another way than its streamed APPENDS: what it made stays, in the
 * document's memory (its scratch chunks join the document's). Refused when entries of it were
 * handed over as they were read: the reader has them, the tree would not. */
static ranksnap_status batch_seal(dec *d)
{
    if (d->batch_direct)
        return FAIL(d, "%s closes the MARK of items of %s[%zu] otherwise than by their APPENDS, "
                       "after %zu of them were read as they came: a layout this reader does not "
                       "take", rs_pickle_opcode_name(d->op), d->stream->key, d->batch_index,
                    d->batch_direct);
    arena *m = &d->doc->main, *sc = &d->doc->scratch;
    if (sc->chunks) {
        chunk *tail = sc->chunks;
        while (tail->next) tail = tail->next;
        if (m->chunks) {
            tail->next = m->chunks->next;
            m->chunks->next = sc->chunks;
        } else {
            m->chunks = sc->chunks;
        }
        sc->chunks = NULL;
    }
    d->batch = 0;
    return RANKSNAP_OK;
}

/* The memo keys of the ending batch get its values' copies, or the taken mark. */
static ranksnap_status batch_memo_out(dec *d)
{
    for (size_t k = 0, n = d->memo.count - d->batch_memo + d->n_batch_keys; k < n; k++) {
        uint64_t key = k < d->memo.count - d->batch_memo ? d->batch_memo + k
                                                         : d->batch_keys[k - (d->memo.count - d->batch_memo)];
        rs_pickle_value **slot = memo_slot(d, key);
        if (!slot || !memo_is_value(*slot) || !in_batch(d, *slot)) continue;
        if ((*slot)->batch == BATCH_TAKEN) {
            *slot = TAKEN_MARK;
            continue;
        }
        rs_pickle_value *c = evacuate(d, *slot);
        if (!c) return no_memory(d, sizeof *c);
        *slot = c;
    }
    return RANKSNAP_OK;
}

/* Hands items[0..n) appended to list `l` (root[key][index]) to the reader. */
static ranksnap_status stream_take(dec *d, rs_pickle_value *l, int64_t index,
                                   rs_pickle_value *const *items, size_t n)
{
    return d->stream->take(d->stream->ctx, (rs_pickle_taker *)d, l, (size_t)index,
                           (const rs_pickle_value *const *)items, n);
}

/* The streamed batch's APPENDS (its MARK popped: the items are stack[start..sp)): the memo's
 * values copied out, the items handed over, the scratch memory emptied for the next batch. */
static ranksnap_status batch_end(dec *d, rs_pickle_value *l, int64_t index, size_t start)
{
    for (size_t i = start; i < d->sp; i++)
        if (d->stack[i]->batch == d->batch) d->stack[i]->batch = BATCH_TAKEN;
    ranksnap_status st = batch_memo_out(d);
    if (st == RANKSNAP_OK) st = stream_take(d, l, index, d->stack + start, d->sp - start);
    if (st != RANKSNAP_OK) return st;
    d->sp = start;
    d->batch = 0;
    u64map_clear(&d->fwd);
    arena_reset(&d->doc->scratch);
    return RANKSNAP_OK;
}

/* The open batch's items so far (stack[mark..*sp), *sp the machine's) handed over as its APPENDS
 * would, and a new batch opened at the same MARK for the rest: what fused_entry does before it
 * hands over an entry of its own, when entries the machine ran wait before it. 0, or -1 with
 * d->fused_err. */
static int batch_flush(dec *d, size_t *sp)
{
    size_t start = d->marks[d->batch_level - 1], taken = *sp - start;
    d->sp = *sp;
    ranksnap_status st = d->batches == BATCH_TAKEN - 1
                             ? FAIL(d, "more than %u batches of items of %s", BATCH_TAKEN - 2,
                                    d->stream->key)
                             : batch_end(d, d->batch_list, (int64_t)d->batch_index, start);
    if (st != RANKSNAP_OK) {
        d->fused_err = st;
        return -1;
    }
    *sp = d->sp;
    d->batch = ++d->batches;
    d->batch_memo = d->memo.count;
    d->n_batch_keys = 0;
    d->batch_direct += taken;
    return 0;
}

/* ---- values -------------------------------------------------------------------------------- */

static ranksnap_status push_int(dec *d, int64_t x)
{
    rs_pickle_value *v = new_value(d, RS_PICKLE_INT);
    if (v) v->v.i = x;
    return push(d, v);
}

/* LONG1/LONG4: `n` bytes of little-endian two's complement. Values that fit in 64 bits (signed,
 * or unsigned above INT64_MAX: a size_t such as SIZE_MAX) keep their value; wider ones become a
 * RS_PICKLE_BIGINT, so that one irrelevant huge number does not make a whole snapshot unreadable. */
static ranksnap_status push_long(dec *d, const unsigned char *p, uint64_t n)
{
    rs_pickle_value *v = new_value(d, RS_PICKLE_INT);
    if (!v) return no_memory(d, sizeof *v);
    if (n == 0) return push(d, v); /* LONG1 with no bytes is 0 */
    int negative = (p[n - 1] & 0x80) != 0;
    if (n <= 8) { /* addresses and times: the value is the bytes, sign-extended */
        uint64_t x = 0;
        for (uint64_t i = 0; i < n; i++) x |= (uint64_t)p[i] << (8 * i);
        if (negative && n < 8) x |= ~(uint64_t)0 << (8 * n);
        memcpy(&v->v.i, &x, sizeof x);
        return push(d, v);
    }
    unsigned char fill = negative ? 0xff : 0x00;
    uint64_t m = n;
    while (m > 0 && p[m - 1] == fill) m--; /* redundant sign bytes */
    uint64_t x = 0;
    if (!negative) {
        if (m > 8) {
            v->kind = RS_PICKLE_BIGINT;
            return push(d, v);
        }
        for (uint64_t i = 0; i < m; i++) x |= (uint64_t)p[i] << (8 * i);
        if (x > (uint64_t)INT64_MAX) {
            v->is_u64 = 1;
            v->v.u = x;
        } else {
            v->v.i = (int64_t)x;
        }
        return push(d, v);
    }
    /* Negative: the stripped bytes were 0xff. With 8 significant bytes the top one must carry
     * the sign itself, or the number is below INT64_MIN. */
    if (m > 8 || (m == 8 && !(p[7] & 0x80))) {
        v->kind = RS_PICKLE_BIGINT;
        return push(d, v);
    }
    x = UINT64_MAX;
    for (uint64_t i = 0; i < m; i++) {
        x &= ~((uint64_t)0xff << (8 * i));
        x |= (uint64_t)p[i] << (8 * i);
    }
    memcpy(&v->v.i, &x, sizeof x);
    return push(d, v);
}

static ranksnap_status push_text(dec *d, rs_pickle_kind kind, uint64_t n)
{
    const unsigned char *p = d->buf + d->pos;
    if (kind == RS_PICKLE_STR) {
        size_t bad = rs_pk_utf8_ok(p, (size_t)n, d->len - d->pos) ? (size_t)n
                                                                   : rs_pickle_utf8_bad_at(p, (size_t)n);
        if (bad != n)
            return fail_at(d, d->pos + bad,
                           "%s (at offset %zu) holds invalid UTF-8: byte 0x%02x",
                           rs_pickle_opcode_name(d->op), d->op_at, p[bad]);
    }
    rs_pickle_value *v = new_value(d, kind);
    if (v) {
        v->v.str.p = (const char *)p;
        v->v.str.n = (size_t)n;
    }
    d->pos += (size_t)n;
    return push(d, v);
}

/* TUPLE1/2/3 and EMPTY_TUPLE: the top n values. */
static ranksnap_status push_tuple_of_top(dec *d, size_t n)
{
    if (d->sp - fence(d) < n) return underflow(d, n);
    rs_pickle_value *t = new_container(d, RS_PICKLE_TUPLE, d->stack + d->sp - n, n);
    if (!t) return no_memory(d, sizeof *t);
    d->sp -= n;
    return push(d, t);
}

/* TUPLE, LIST, FROZENSET, DICT: everything above the MARK. */
static ranksnap_status push_from_mark(dec *d, rs_pickle_kind kind)
{
    size_t start = 0;
    RS_CHECK(pop_mark(d, &start));
    size_t n = d->sp - start;
    if (kind == RS_PICKLE_DICT && n % 2 != 0)
        return FAIL(d, "DICT needs key/value pairs above its MARK, found %zu values", n);
    if (kind == RS_PICKLE_DICT || kind == RS_PICKLE_FROZENSET)
        for (size_t i = start; i < d->sp; i += kind == RS_PICKLE_DICT ? 2 : 1)
            RS_CHECK(check_hashable(d, d->stack[i]));
    rs_pickle_value *c = new_container(d, kind, d->stack + start, n);
    if (!c) return no_memory(d, n * sizeof(rs_pickle_value *));
    d->sp = start;
    return push(d, c);
}

/* APPENDS, SETITEMS, ADDITEMS. */
static ranksnap_status add_from_mark(dec *d, rs_pickle_kind kind)
{
    size_t start = 0;
    if (kind == RS_PICKLE_LIST && d->batch && d->n_marks == d->batch_level) {
        /* the streamed batch's own APPENDS */
        start = d->marks[d->n_marks - 1];
        d->n_marks--;
        int64_t index = start > 0 ? stream_index_of(d, start - 1) : -1;
        if (index >= 0) return batch_end(d, d->stack[start - 1], index, start);
        d->n_marks++; /* laid out otherwise after all: the general way, which seals it */
    }
    RS_CHECK(pop_mark(d, &start));
    rs_pickle_value *c = NULL;
    RS_CHECK(container_under_mark(d, start, kind, &c));
    if (kind == RS_PICKLE_LIST && d->stream) {
        int64_t index = stream_index_of(d, start - 1);
        if (index >= 0) { /* a streamed list's items, built outside a batch */
            RS_CHECK(stream_take(d, c, index, d->stack + start, d->sp - start));
            d->sp = start;
            return RANKSNAP_OK;
        }
    }
    size_t n = d->sp - start;
    if (kind == RS_PICKLE_DICT && n % 2 != 0)
        return FAIL(d, "SETITEMS needs key/value pairs above its MARK, found %zu values", n);
    if (kind != RS_PICKLE_LIST)
        for (size_t i = start; i < d->sp; i += kind == RS_PICKLE_DICT ? 2 : 1)
            RS_CHECK(check_hashable(d, d->stack[i]));
    RS_CHECK(container_add(d, c, d->stack + start, n));
    d->sp = start;
    return RANKSNAP_OK;
}

static ranksnap_status refuse_code(const dec *d)
{
    return FAIL(d, "opcode %s (0x%02x) is refused: a snapshot never needs code execution",
                rs_pickle_opcode_name(d->op), d->op);
}

/* ---- the machine --------------------------------------------------------------------------- */

/* Runs one opcode; sets *done at STOP. */
static ranksnap_status step(dec *d, int *done)
{
    uint64_t n = 0;
    rs_pickle_value *v = NULL, *w = NULL;
    switch (d->op) {
    case 0x80: /* PROTO */
        RS_CHECK(need(d, 1));
        n = d->buf[d->pos++];
        if (n > 5)
            return FAIL(d, "pickle protocol %llu is not supported (5 is the highest)",
                        (unsigned long long)n);
        d->doc->protocol = (int)n;
        return RANKSNAP_OK;
    case 0x95: /* FRAME: a length hint; the frame's bytes must be there */
        RS_CHECK(read_count(d, 8, &n));
        return RANKSNAP_OK;
    case 0x2e: /* STOP */
        RS_CHECK(top(d, &v));
        if (d->batch) RS_CHECK(batch_seal(d)); /* what the open batch made is the document's now */
        d->doc->root = v;
        d->sp--;
        *done = 1;
        return RANKSNAP_OK;
    case 0x28: /* MARK */
        if (d->stream && !d->batch) batch_open(d);
        if (d->n_marks == d->marks_cap) {
            size_t *m = doubled(d->marks, &d->marks_cap, sizeof *m, 16);
            if (!m) return no_memory(d, 2 * d->marks_cap * sizeof *m);
            d->marks = m;
        }
        d->marks[d->n_marks++] = d->sp;
        return RANKSNAP_OK;
    case 0x30: /* POP: the top value, or the innermost MARK when nothing is above it */
        if (d->sp > fence(d)) {
            d->sp--;
        } else if (d->n_marks) {
            d->sp = d->marks[--d->n_marks];
            if (d->batch && d->n_marks < d->batch_level) RS_CHECK(batch_seal(d));
        } else {
            return underflow(d, 1);
        }
        return RANKSNAP_OK;
    case 0x31: { /* POP_MARK */
        size_t start = 0;
        RS_CHECK(pop_mark(d, &start));
        d->sp = start;
        return RANKSNAP_OK;
    }
    case 0x32: /* DUP */
        RS_CHECK(top(d, &v));
        return push(d, v);

    case 0x4e: return push(d, new_value(d, RS_PICKLE_NONE)); /* NONE */
    case 0x88: /* NEWTRUE */
    case 0x89: /* NEWFALSE */
        v = new_value(d, RS_PICKLE_BOOL);
        if (v) v->v.b = d->op == 0x88;
        return push(d, v);
    case 0x4a: /* BININT: 4 bytes, signed */
        RS_CHECK(need(d, 4));
        n = read_le(d, 4);
        return push_int(d, (int64_t)(int32_t)(uint32_t)n);
    case 0x4b: /* BININT1 */
        RS_CHECK(need(d, 1));
        return push_int(d, (int64_t)read_le(d, 1));
    case 0x4d: /* BININT2 */
        RS_CHECK(need(d, 2));
        return push_int(d, (int64_t)read_le(d, 2));
    case 0x8a: /* LONG1 */
        RS_CHECK(read_count(d, 1, &n));
        d->pos += (size_t)n;
        return push_long(d, d->buf + d->pos - n, n);
    case 0x8b: /* LONG4: the count is signed */
        RS_CHECK(need(d, 4));
        n = read_le(d, 4);
        if (n & 0x80000000u) return FAIL(d, "LONG4 has a negative byte count");
        RS_CHECK(need(d, n));
        d->pos += (size_t)n;
        return push_long(d, d->buf + d->pos - n, n);
    case 0x47: { /* BINFLOAT: 8 bytes, big-endian IEEE 754 */
        RS_CHECK(need(d, 8));
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++) bits = (bits << 8) | d->buf[d->pos + (size_t)i];
        d->pos += 8;
        v = new_value(d, RS_PICKLE_FLOAT);
        if (v) memcpy(&v->v.f, &bits, sizeof bits);
        return push(d, v);
    }

    case 0x8c: RS_CHECK(read_count(d, 1, &n)); return push_text(d, RS_PICKLE_STR, n);   /* SHORT_BINUNICODE */
    case 0x58: RS_CHECK(read_count(d, 4, &n)); return push_text(d, RS_PICKLE_STR, n);   /* BINUNICODE */
    case 0x8d: RS_CHECK(read_count(d, 8, &n)); return push_text(d, RS_PICKLE_STR, n);   /* BINUNICODE8 */
    case 0x43: RS_CHECK(read_count(d, 1, &n)); return push_text(d, RS_PICKLE_BYTES, n); /* SHORT_BINBYTES */
    case 0x42: RS_CHECK(read_count(d, 4, &n)); return push_text(d, RS_PICKLE_BYTES, n); /* BINBYTES */
    case 0x8e: /* BINBYTES8 */
    case 0x96: /* BYTEARRAY8 */
        RS_CHECK(read_count(d, 8, &n));
        return push_text(d, RS_PICKLE_BYTES, n);

    case 0x5d: return push(d, new_container(d, RS_PICKLE_LIST, NULL, 0)); /* EMPTY_LIST */
    case 0x7d: return push(d, new_container(d, RS_PICKLE_DICT, NULL, 0)); /* EMPTY_DICT */
    case 0x8f: return push(d, new_container(d, RS_PICKLE_SET, NULL, 0));  /* EMPTY_SET */
    case 0x29: return push_tuple_of_top(d, 0);                      /* EMPTY_TUPLE */
    case 0x85: return push_tuple_of_top(d, 1);                      /* TUPLE1 */
    case 0x86: return push_tuple_of_top(d, 2);                      /* TUPLE2 */
    case 0x87: return push_tuple_of_top(d, 3);                      /* TUPLE3 */
    case 0x74: return push_from_mark(d, RS_PICKLE_TUPLE);                  /* TUPLE */
    case 0x6c: return push_from_mark(d, RS_PICKLE_LIST);                   /* LIST */
    case 0x64: return push_from_mark(d, RS_PICKLE_DICT);                   /* DICT */
    case 0x91: return push_from_mark(d, RS_PICKLE_FROZENSET);              /* FROZENSET */
    case 0x65: return add_from_mark(d, RS_PICKLE_LIST);                    /* APPENDS */
    case 0x75: return add_from_mark(d, RS_PICKLE_DICT);                    /* SETITEMS */
    case 0x90: return add_from_mark(d, RS_PICKLE_SET);                     /* ADDITEMS */
    case 0x61: /* APPEND */
        if (d->sp - fence(d) < 2) return underflow(d, 2);
        v = d->stack[d->sp - 2];
        if (v->kind != RS_PICKLE_LIST)
            return FAIL(d, "APPEND needs a list under its item, found %s (made at offset %zu)",
                        rs_pickle_kind_name(v->kind), v->offset);
        if (d->stream && stream_index_of(d, d->sp - 2) >= 0)
            RS_CHECK(stream_take(d, v, stream_index_of(d, d->sp - 2), d->stack + d->sp - 1, 1));
        else
            RS_CHECK(container_add(d, v, d->stack + d->sp - 1, 1));
        d->sp--;
        return RANKSNAP_OK;
    case 0x73: /* SETITEM */
        if (d->sp - fence(d) < 3) return underflow(d, 3);
        v = d->stack[d->sp - 3];
        w = d->stack[d->sp - 2];
        if (v->kind != RS_PICKLE_DICT)
            return FAIL(d, "SETITEM needs a dict under its key and value, found %s (made at "
                           "offset %zu)",
                        rs_pickle_kind_name(v->kind), v->offset);
        RS_CHECK(check_hashable(d, w));
        RS_CHECK(container_add(d, v, d->stack + d->sp - 2, 2));
        d->sp -= 2;
        return RANKSNAP_OK;

    case 0x94: return memo_store_top(d, d->memo.count); /* MEMOIZE */
    case 0x71: /* BINPUT */
        RS_CHECK(need(d, 1));
        return memo_store_top(d, read_le(d, 1));
    case 0x72: /* LONG_BINPUT */
        RS_CHECK(need(d, 4));
        return memo_store_top(d, read_le(d, 4));
    case 0x70: /* PUT */
        RS_CHECK(read_decimal_line(d, &n));
        return memo_store_top(d, n);
    case 0x68: /* BINGET */
        RS_CHECK(need(d, 1));
        return memo_get(d, read_le(d, 1));
    case 0x6a: /* LONG_BINGET */
        RS_CHECK(need(d, 4));
        return memo_get(d, read_le(d, 4));
    case 0x67: /* GET */
        RS_CHECK(read_decimal_line(d, &n));
        return memo_get(d, n);

    case 0x63: /* GLOBAL */
    case 0x93: /* STACK_GLOBAL */
    case 0x52: /* REDUCE */
    case 0x62: /* BUILD */
    case 0x69: /* INST */
    case 0x6f: /* OBJ */
    case 0x81: /* NEWOBJ */
    case 0x92: /* NEWOBJ_EX */
    case 0x82: /* EXT1 */
    case 0x83: /* EXT2 */
    case 0x84: /* EXT4 */
    case 0x50: /* PERSID */
    case 0x51: /* BINPERSID */
        return refuse_code(d);

    case 0x46: /* FLOAT */
    case 0x49: /* INT */
    case 0x4c: /* LONG */
    case 0x53: /* STRING */
    case 0x54: /* BINSTRING */
    case 0x55: /* SHORT_BINSTRING */
    case 0x56: /* UNICODE */
        return FAIL(d, "opcode %s (0x%02x) is not supported: a protocol 0/1 opcode, which "
                       "pickle.dump does not write for this data at protocol 2 or later",
                    rs_pickle_opcode_name(d->op), d->op);
    case 0x97: /* NEXT_BUFFER */
    case 0x98: /* READONLY_BUFFER */
        return FAIL(d, "opcode %s (0x%02x) is not supported: out-of-band buffers",
                    rs_pickle_opcode_name(d->op), d->op);
    }
    return FAIL(d, "byte 0x%02x is not a pickle opcode", d->op);
}

/* ---- a trace entry in one step ---------------------------------------------------------------- */

/* Most of a PyTorch snapshot is trace entries, which pickle.dump writes as the same run of
 * opcodes every time: EMPTY_DICT MEMOIZE MARK, then key/value pairs whose keys are memo GETs of
 * strings and whose values are memo GETs, small ints, LONG1s of up to 8 bytes or the `frames`
 * list (EMPTY_LIST MEMOIZE, then MARK GET... APPENDS, one GET and APPEND, or nothing), then
 * SETITEMS; keys and values may also be new strings, each followed by its MEMOIZE. Inside a
 * streamed batch, fused_entry runs such a run of opcodes as one step: the same values at the
 * same offsets, the same memo keys, the same dict left on the stack as the opcodes one by one
 * would give, without their dispatch. Anything else in the bytes (a FRAME, a missing memo key, a
 * new frame dict, another opcode) and it returns 0 having changed nothing but scratch memory
 * (and the frames list it made, and the tables that remember frames lists), for the machine to
 * run the opcodes itself. A frames list whose bytes were met before is not read GET by GET
 * (struct span_memo). */
#define FUSED_MAX_PAIRS 32
#define FUSED_MAX_FRAMES 256

/* The lowest memo key that may hold a value the open batch made: batch_memo, or 0 once PUT
 * stored one of its values under any key (note_batch_key). A GET of a lower key (a frame dict
 * of an earlier batch) is known not to be the batch's without reading the value. */
static inline uint64_t batch_key_floor(const dec *d)
{
    return d->n_batch_keys ? 0 : d->batch_memo;
}

/* The value a memo GET at buf[p] fetches (BINGET or LONG_BINGET), NULL when it is none of
 * those, misses, or refers to a taken entry. *n is the GET's length; *fresh (when not NULL) is
 * whether its key is at least `floor` (batch_key_floor). */
static inline rs_pickle_value *fused_get_key(const dec *d, size_t p, size_t *n, uint64_t floor,
                                             int *fresh)
{
    uint64_t key;
    if (!(*n = rs_pk_get(d->buf + p, d->len - p, &key))) return NULL;
    rs_pickle_value *v = key < d->memo.dense_cap ? d->memo.dense[key] : NULL;
    if (fresh) *fresh = key >= floor;
    return memo_is_value(v) ? v : NULL; /* the machine makes a lazy str */
}

static inline rs_pickle_value *fused_get(const dec *d, size_t p, size_t *n)
{
    return fused_get_key(d, p, n, 0, NULL);
}

/* An int value made at `at` (rs_pk_int), NULL when the opcode is none of those; *n its length. In
 * `into` when not NULL, else in the arena. */
static rs_pickle_value *fused_int(dec *d, size_t at, size_t *n, rs_pickle_value *into)
{
    uint64_t x = 0;
    if (!(*n = rs_pk_int(d->buf + at, d->len - at, &x))) return NULL;
    d->op_at = at;
    rs_pickle_value *v = into;
    if (v) {
        v->kind = RS_PICKLE_INT;
        v->is_u64 = v->shared = 0;
        v->batch = d->batch;
        v->offset = at;
    } else if (!(v = new_value(d, RS_PICKLE_INT))) {
        return NULL;
    }
    memcpy(&v->v.i, &x, sizeof x);
    return v;
}

/* A str made at `at` (SHORT_BINUNICODE or BINUNICODE), NULL when the opcode is none of those or
 * its text is not UTF-8 (the machine then says so); *n its length. It is made in scratch
 * memory: fused_entry moves the ones it memoizes to the document's when it commits. */
static rs_pickle_value *fused_str(dec *d, size_t at, size_t *n)
{
    const char *text;
    size_t size;
    if (!(*n = rs_pk_str(d->buf + at, d->len - at, &text, &size))) return NULL;
    d->op_at = at;
    rs_pickle_value *v = new_value(d, RS_PICKLE_STR);
    if (!v) return NULL;
    v->v.str.p = text;
    v->v.str.n = size;
    return v;
}

/* A list whose item array is `items` (n of them), an array no list writes in place. */
static rs_pickle_value *list_sharing(dec *d, rs_pickle_value **items, size_t n)
{
    rs_pickle_value *v = new_value(d, RS_PICKLE_LIST);
    if (!v) return NULL;
    v->v.seq.items = items;
    v->v.seq.n = v->v.seq.cap = (uint32_t)n;
    return v;
}

/* A hash of n bytes: four chains of eight-byte words, so that their multiplies overlap; the
 * last word read where it ends, overlapping the one before (n is hashed too); finished with
 * splitmix64's mixer. */
static uint64_t span_hash(const unsigned char *p, size_t n)
{
    const uint64_t k = 0x9e3779b97f4a7c15ull;
    uint64_t l0 = n, l1 = 1, l2 = 2, l3 = 3, w0, w1, w2, w3;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        memcpy(&w0, p + i, 8);
        memcpy(&w1, p + i + 8, 8);
        memcpy(&w2, p + i + 16, 8);
        memcpy(&w3, p + i + 24, 8);
        l0 = (l0 ^ w0) * k;
        l1 = (l1 ^ w1) * k;
        l2 = (l2 ^ w2) * k;
        l3 = (l3 ^ w3) * k;
    }
    if (n >= 8) {
        for (; i + 8 <= n; i += 8) {
            memcpy(&w0, p + i, 8);
            l1 = (l1 ^ w0) * k;
            uint64_t t = l1;
            l1 = l2;
            l2 = l3;
            l3 = t;
        }
        memcpy(&w0, p + n - 8, 8);
    } else {
        for (w0 = 0; i < n; i++) w0 = w0 << 8 | p[i];
    }
    l0 = (l0 ^ w0) * k;
    uint64_t h = (l0 ^ l1 >> 7 ^ l2 >> 13 ^ l3 >> 19) * k;
    h = (h ^ h >> 30) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ h >> 27) * 0x94d049bb133111ebull;
    return h ^ h >> 31;
}

/* Slot s holds the frames list met now, after the one in d->span_last. */
static void span_met(dec *d, struct span_memo *s)
{
    if (d->span_last) d->span_last->next = s;
    d->span_last = s;
}

/* The recorded frames list whose bytes start at `at` (a list's first GET), NULL when none; *end
 * is then where they end (after the APPENDS). Its end is one of the next APPENDS bytes (a GET's
 * argument may hold the same byte: a few are tried). */
static const struct span_memo *span_find(dec *d, size_t at, size_t *end)
{
    if (!d->spans) return NULL;
    const unsigned char *b = d->buf + at;
    size_t left = d->len - at, from = 0;
    if (left > FUSED_MAX_FRAMES * 5 + 1) left = FUSED_MAX_FRAMES * 5 + 1;
    /* the list that followed the last one, last time, first: a training loop allocates from
     * the same lines in the same order every step (the guess is right for 73 to 79% of a real
     * trace's lists), and bytes equal to its need neither their end found nor a hash. Equal
     * bytes from the same start parse the same: the APPENDS that ended the one ends these. */
    struct span_memo *g = d->span_last ? d->span_last->next : NULL;
    if (g && g->list && g->len <= left && b[g->len - 1] == 0x65 && g->gen == d->memo_gen &&
        memcmp(b, d->buf + g->at, g->len) == 0) {
        *end = at + g->len;
        d->span_last = g;
        return g;
    }
    for (int tries = 0; tries < SPAN_CANDIDATES && from < left; tries++) {
        const unsigned char *e = memchr(b + from, 0x65, left - from);
        if (!e) return NULL;
        size_t n = (size_t)(e - b) + 1;
        uint64_t h = span_hash(b, n);
        struct span_memo *s = &d->spans[(h & (SPAN_MEMOS / 2 - 1)) * 2];
        for (int way = 0; way < 2; way++, s++)
            if (s->list && s->hash == h && s->len == n && s->gen == d->memo_gen &&
                memcmp(b, d->buf + s->at, n) == 0) {
                *end = at + n;
                span_met(d, s);
                return s;
            }
        from = n;
    }
    return NULL;
}

/* Records the list `list` whose bytes are buf[at..end). */
static void span_note(dec *d, size_t at, size_t end, rs_pickle_value *list)
{
    if (!d->spans && !(d->spans = calloc(SPAN_MEMOS, sizeof *d->spans))) return;
    uint64_t h = span_hash(d->buf + at, end - at);
    struct span_memo *s = &d->spans[(h & (SPAN_MEMOS / 2 - 1)) * 2];
    s[1] = s[0];
    s[0] = (struct span_memo){at, (uint32_t)(end - at), list, h, d->memo_gen, NULL};
    list->shared = 1;
    span_met(d, &s[0]);
}

/* A list of frames[0..n) in the document's memory, its item array shared with an earlier list
 * of the same items when the table has one (struct shared_items). */
static rs_pickle_value *shared_list(dec *d, rs_pickle_value *const *frames, size_t n)
{
    if (n == 0) return new_container(d, RS_PICKLE_LIST, frames, n);
    if (!d->shared) d->shared = calloc(SHARED_ITEMS, sizeof *d->shared);
    /* the items are this process's addresses, which no file chooses: a multiply a word mixes
     * them, in four chains that overlap (a list has 30 to 40 frames with stacks="all") */
    const uint64_t k = 0x9e3779b97f4a7c15ull;
    uint64_t l0 = n, l1 = 1, l2 = 2, l3 = 3; /* in registers: an array was kept in memory */
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        l0 = (l0 ^ (uintptr_t)frames[i]) * k;
        l1 = (l1 ^ (uintptr_t)frames[i + 1]) * k;
        l2 = (l2 ^ (uintptr_t)frames[i + 2]) * k;
        l3 = (l3 ^ (uintptr_t)frames[i + 3]) * k;
    }
    if (i < n) l0 = (l0 ^ (uintptr_t)frames[i++]) * k;
    if (i < n) l1 = (l1 ^ (uintptr_t)frames[i++]) * k;
    if (i < n) l2 = (l2 ^ (uintptr_t)frames[i++]) * k;
    /* splitmix64's finish: a product's low bits depend only on its factors' low bits */
    uint64_t h = (l0 ^ l1 >> 7 ^ l2 >> 13 ^ l3 >> 19) * k;
    h = (h ^ h >> 30) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ h >> 27) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    /* two ways a bucket, the one last used first: a trace alternates between a few stacks (an
     * allocation's and its free's), and two of them in one slot would evict each other for ever */
    struct shared_items *e = d->shared ? &d->shared[(h & (SHARED_ITEMS / 2 - 1)) * 2] : NULL;
    for (int way = 0; e && way < 2; way++) {
        struct shared_items *w = &e[way];
        if (!w->items || w->hash != h || w->n != n || memcmp(w->items, frames, n * sizeof *frames))
            continue;
        rs_pickle_value *v = list_sharing(d, w->items, n);
        if (!v) return NULL;
        if (way) {
            struct shared_items t = e[0];
            e[0] = e[1];
            e[1] = t;
        }
        return v;
    }
    rs_pickle_value *v = new_container(d, RS_PICKLE_LIST, frames, n);
    if (v && e) {
        e[1] = e[0];
        e[0].items = v->v.seq.items;
        e[0].n = (uint32_t)n;
        e[0].hash = h;
    }
    return v;
}

/* The list made by the EMPTY_LIST at `list_at` whose items follow from buf[p] as memo GETs of
 * values (MARK GET... APPENDS, one GET and APPEND, or none: an empty list), NULL when they are
 * laid out otherwise or there is no memory; *end is then after them. The list outlives the
 * batch (a reader keeps an entry's frames, and the memo holds it): made in the document's
 * memory, it needs no copy when the batch ends; frame dicts the open batch made are copied out
 * to go in it (the first entries'). Bytes met before give the list they gave (struct span_memo). */
static rs_pickle_value *gets_list(dec *d, size_t list_at, size_t p, size_t *end)
{
    const unsigned char *b = d->buf;
    rs_pickle_value *frames[FUSED_MAX_FRAMES], *v;
    size_t n_frames = 0, n = 0, span_at = 0;
    int fresh = 0, any_fresh = 0;
    uint64_t floor = batch_key_floor(d);
    const struct span_memo *known = NULL;
    if (p < d->len && b[p] == 0x28 && (known = span_find(d, span_at = p + 1, &p)) != NULL) {
        /* bytes met before: the same GETs of the same values */
    } else if (p < d->len && b[p] == 0x28) {
        for (p++; p < d->len && b[p] != 0x65; p += n) {
            rs_pickle_value *f = fused_get_key(d, p, &n, floor, &fresh);
            if (!f || n_frames == FUSED_MAX_FRAMES) return NULL;
            frames[n_frames++] = f;
            any_fresh |= fresh;
        }
        if (p >= d->len) return NULL;
        p++;
    } else if ((v = fused_get_key(d, p, &n, floor, &fresh)) != NULL && p + n < d->len &&
               b[p + n] == 0x61) {
        frames[n_frames++] = v;
        any_fresh = fresh;
        p += n + 1;
    }
    for (size_t f = 0; any_fresh && f < n_frames; f++)
        if (in_batch(d, frames[f]) && !(frames[f] = evacuate(d, frames[f]))) return NULL;
    uint32_t batch = d->batch;
    d->batch = 0;
    d->op_at = list_at;
    rs_pickle_value *list = known ? known->list : shared_list(d, frames, n_frames);
    d->batch = batch;
    if (list && !known && span_at && n_frames && !any_fresh) span_note(d, span_at, p, list);
    *end = p;
    return list;
}

/* MEMOIZE's next n keys, from memo.count on, free in the memo's array (it goes that far): they
 * are unless a PUT stored a key there (PyTorch's pickles have none). */
static int memo_next_free(const dec *d, size_t n)
{
    size_t key = d->memo.count;
    if (key + n > d->memo.dense_cap) return 0;
    for (size_t i = 0; d->memo.put_top > key && i < n; i++)
        if (d->memo.dense[key + i]) return 0;
    return 1;
}

/* The n keys from memo.count on were just given the values of an item handed over (or read)
 * as it came, all of which outlive the batch. When nothing of the batch waits in the memo
 * before them (handed over by the flush, or by the item before), the batch's end need not look
 * at them (38,850 keys a 2.5 MB pickle, 3% of its decode). */
static void memo_direct(dec *d, size_t n)
{
    const int clean = d->batch_memo == d->memo.count && d->n_batch_keys == 0;
    d->memo.count += n;
    if (clean) d->batch_memo = d->memo.count;
    d->batch_direct++;
}

/* Values an entry memoizes, in the order of their MEMOIZEs: its dict, the strings it makes
 * (PyTorch 2.11 writes a new "N/A" for compile_context in every entry), its frames list. */
#define FUSED_MAX_MEMO (2 * FUSED_MAX_PAIRS + 2)

/* The run of opcodes of a trace entry at the EMPTY_DICT at `at`; 1 when done (*pos after its
 * SETITEMS, the dict pushed at *sp, or handed over: see below), 0 when the bytes are laid out
 * otherwise, -1 when the reader's take failed (d->fused_err).
 *
 * While nothing of the batch waits on the stack, the entry goes to the reader at once, in
 * order, as a dict and ints that live on this function's stack (rs_pickle_keep copies what the
 * reader keeps), and its memo key gets the taken mark now rather than at the batch's end: no
 * memory per entry, and nothing for the batch's end to do. */
static int fused_entry(dec *d, size_t at, size_t *pos, size_t *sp)
{
    const unsigned char *b = d->buf;
    size_t p = at + 1, n = 0;
    /* in order: the batch's items before it go first (batch_flush) */
    const int direct = d->n_marks == d->batch_level;
    rs_pickle_value ints[FUSED_MAX_PAIRS];
    size_t n_ints = 0;
    rs_pickle_value *items[2 * FUSED_MAX_PAIRS];
    rs_pickle_value *memo_new[FUSED_MAX_MEMO]; /* NULL: the dict, made last */
    size_t memo_at[FUSED_MAX_MEMO];            /* a str's place in items */
    size_t memo_str_at[FUSED_MAX_MEMO];        /* a str value's opcode (memoized lazily) */
    rs_pickle_value *list = NULL;
    size_t n_items = 0, list_at = 0, n_memo = 0;
    if (*sp + 1 > d->stack_cap || d->len - p < 2) return 0;
    /* before this entry's values are made in the scratch memory the flush empties */
    if (direct && *sp > d->marks[d->batch_level - 1] && batch_flush(d, sp) != 0) return -1;
    if (b[p] == 0x94) { /* MEMOIZE (PyTorch: yes; ranksnap's export: no) */
        memo_new[n_memo++] = NULL;
        p++;
    }
    if (p >= d->len || b[p] != 0x28) return 0;
    for (p++; p < d->len && b[p] != 0x75; ) {
        rs_pickle_value *k = fused_get(d, p, &n), *v;
        int new_key = !k;
        if (new_key) k = fused_str(d, p, &n);
        if (!k || k->kind != RS_PICKLE_STR || n_items == 2 * FUSED_MAX_PAIRS) return 0;
        p += n;
        if (new_key && p < d->len && b[p] == 0x94) { /* a new key, memoized */
            memo_at[n_memo] = n_items;
            memo_str_at[n_memo] = SIZE_MAX;
            memo_new[n_memo++] = k;
            p++;
        }
        if (p >= d->len) return 0;
        if (b[p] == 0x5d) { /* EMPTY_LIST (MEMOIZE), then its items */
            if (list) return 0;
            list_at = p++;
            size_t list_memo = SIZE_MAX;
            if (p < d->len && b[p] == 0x94) {
                list_memo = n_memo++;
                p++;
            }
            if (!(list = v = gets_list(d, list_at, p, &p))) return 0;
            if (list_memo != SIZE_MAX) memo_new[list_memo] = list;
        } else if ((v = fused_get(d, p, &n)) != NULL ||
                   (v = fused_int(d, p, &n, direct ? &ints[n_ints] : NULL)) != NULL) {
            n_ints += v == &ints[n_ints];
            p += n;
        } else if ((v = fused_str(d, p, &n)) != NULL) {
            p += n;
            if (p < d->len && b[p] == 0x94) { /* a new str value, memoized */
                memo_at[n_memo] = n_items + 1;
                memo_str_at[n_memo] = p - n;
                memo_new[n_memo++] = v;
                p++;
            }
        }
        if (!v) return 0;
        items[n_items++] = k;
        items[n_items++] = v;
    }
    if (p >= d->len) return 0;
    size_t key = d->memo.count;
    if (!memo_next_free(d, n_memo)) return 0;
    /* A memoized str outlives the batch (a later entry may GET it): a key goes to the
     * document's memory now, which the batch's end would otherwise do (evacuate); the memo
     * keeps where a value is, for the GET that may come (memo_lazy) */
    for (size_t i = 0; i < n_memo; i++) {
        rs_pickle_value *v = memo_new[i];
        if (!v || v->kind != RS_PICKLE_STR) continue;
        if (memo_str_at[i] != SIZE_MAX) {
            memo_new[i] = memo_lazy_tag(memo_str_at[i]);
            continue;
        }
        rs_pickle_value *c = arena_alloc_in(&d->doc->main, sizeof *c);
        if (!c) return 0;
        *c = *v;
        c->batch = 0;
        items[memo_at[i]] = c;
        memo_new[i] = c;
    }
    d->op_at = at;
    if (direct) {
        rs_pickle_value dict, *dp = &dict;
        memset(&dict, 0, sizeof dict);
        dict.kind = RS_PICKLE_DICT;
        dict.batch = d->batch;
        dict.offset = at;
        dict.v.seq.items = items;
        dict.v.seq.n = dict.v.seq.cap = (uint32_t)n_items;
        for (size_t i = 0; i < n_memo; i++)
            d->memo.dense[key + i] = memo_new[i] ? memo_new[i] : TAKEN_MARK;
        memo_direct(d, n_memo);
        *pos = p + 1;
        ranksnap_status st = stream_take(d, d->batch_list, (int64_t)d->batch_index, &dp, 1);
        /* what the reader kept was copied by address (copy_out), and the next entry's dict and
         * ints are at the same addresses: forgotten (the flush left nothing else there) */
        if (d->fwd.n) u64map_clear(&d->fwd);
        if (st == RANKSNAP_OK) return 1;
        d->fused_err = st;
        return -1;
    }
    rs_pickle_value *dict = new_container(d, RS_PICKLE_DICT, items, n_items);
    if (!dict) return 0;
    for (size_t i = 0; i < n_memo; i++) d->memo.dense[key + i] = memo_new[i] ? memo_new[i] : dict;
    d->memo.count += n_memo;
    d->stack[(*sp)++] = dict;
    *pos = p + 1;
    return 1;
}

/* ---- a streamed item read from its bytes (pickle.h: rs_pickle_stream.read) ---------------- */

const unsigned char *rs_pickle_read_input(const rs_pickle_reader *r, size_t *len)
{
    const dec *d = (const dec *)r;
    *len = d->len;
    return d->buf;
}

const rs_pickle_value *rs_pickle_read_memo(rs_pickle_reader *r, uint64_t key)
{
    dec *d = (dec *)r;
    rs_pickle_value **slot = memo_slot(d, key);
    if (!slot || *slot == TAKEN_MARK || (memo_is_lazy(*slot) && !memo_lazy(d, slot))) return NULL;
    return in_batch(d, *slot) ? evacuate(d, *slot) : *slot;
}

uint64_t rs_pickle_read_memo_gen(const rs_pickle_reader *r)
{
    return ((const dec *)r)->memo_gen;
}

const rs_pickle_value *rs_pickle_read_gets(rs_pickle_reader *r, size_t list_at, size_t items_at,
                                           size_t *end)
{
    return gets_list((dec *)r, list_at, items_at, end);
}

int rs_pickle_read_done(rs_pickle_reader *r, size_t at, size_t end, const rs_pickle_memo_new *put,
                        size_t n)
{
    dec *d = (dec *)r;
    size_t key = d->memo.count;
    if (end > d->len || end <= at || !memo_next_free(d, n)) return -1;
    for (size_t i = 0; i < n; i++)
        d->memo.dense[key + i] = put[i].value ? (rs_pickle_value *)put[i].value
                                 : put[i].at == SIZE_MAX ? TAKEN_MARK
                                                          : memo_lazy_tag(put[i].at);
    memo_direct(d, n);
    d->op_at = at;
    d->read_end = end;
    return 0;
}

/* The machine's loop. The opcodes a PyTorch snapshot is made of (memo gets and puts, marks,
 * empty containers, small ints, SETITEMS, APPENDS) run here with the machine's state in local
 * variables when nothing is out of the ordinary: room on the stack, a key already in the memo's
 * array, a container of the right kind under the MARK. Anything else — growth, an error and its
 * message, every other opcode — goes to step(), the one definition of each opcode, with the
 * state written back first and read again after. */
static ranksnap_status run(dec *d)
{
    const unsigned char *buf = d->buf;
    const size_t len = d->len;
    size_t pos = d->pos, sp = d->sp;
    rs_pickle_value **stack = d->stack;
    for (;;) {
        if (pos >= len) {
            d->pos = pos;
            d->sp = sp;
            return fail_at(d, len, "truncated: the pickle ends without a STOP opcode");
        }
        size_t at = pos;
        unsigned char op = buf[pos++];
        size_t left = len - pos;
        rs_pickle_value *v;
        uint64_t key;
        switch (op) {
        case 0x68: /* BINGET */
        case 0x6a: /* LONG_BINGET */
            if (left < (op == 0x68 ? 1u : 4u)) break;
            key = op == 0x68 ? buf[pos]
                             : (uint64_t)buf[pos] | (uint64_t)buf[pos + 1] << 8 |
                                   (uint64_t)buf[pos + 2] << 16 | (uint64_t)buf[pos + 3] << 24;
            if (key >= d->memo.dense_cap || !(v = d->memo.dense[key]) || !memo_is_value(v) ||
                sp == d->stack_cap)
                break;
            pos += op == 0x68 ? 1 : 4;
            stack[sp++] = v;
            continue;
        case 0x94: /* MEMOIZE */
            key = d->memo.count;
            if (sp <= (d->n_marks ? d->marks[d->n_marks - 1] : 0) || key >= d->memo.dense_cap ||
                d->memo.dense[key])
                break;
            d->memo.dense[key] = stack[sp - 1];
            d->memo.count++;
            continue;
        case 0x28: /* MARK */
            if (d->n_marks == d->marks_cap) break;
            /* one that may start a streamed list's items: step() looks */
            if (d->stream && !d->batch && d->n_marks <= 2 && sp && stack[sp - 1]->kind == RS_PICKLE_LIST)
                break;
            d->marks[d->n_marks++] = sp;
            continue;
        case 0x7d: /* EMPTY_DICT */
            /* a trace entry in a streamed batch: read by the stream's reader, or its whole
             * run of opcodes in one step */
            if (d->batch) {
                if (d->stream->read && d->n_marks == d->batch_level &&
                    sp == d->marks[d->batch_level - 1]) {
                    d->pos = pos;
                    d->sp = sp;
                    int read = d->stream->read(d->stream->ctx, (rs_pickle_reader *)d,
                                               d->batch_list, d->batch_index, at);
                    /* what it kept was copied by address (copy_out) */
                    if (d->fwd.n) u64map_clear(&d->fwd);
                    if (read > 0) {
                        pos = d->read_end;
                        continue;
                    }
                }
                int fused = fused_entry(d, at, &pos, &sp);
                if (fused > 0) continue;
                if (fused < 0) {
                    d->pos = pos;
                    d->sp = sp;
                    return d->fused_err;
                }
            }
            /* fall through */
        case 0x5d: /* EMPTY_LIST */
            if (sp == d->stack_cap) break;
            d->op_at = at;
            v = new_value(d, op == 0x7d ? RS_PICKLE_DICT : RS_PICKLE_LIST);
            if (!v) break;
            stack[sp++] = v;
            continue;
        case 0x4b: /* BININT1 */
        case 0x4d: /* BININT2 */
        case 0x4a: /* BININT */
            if (left < (op == 0x4b ? 1u : op == 0x4d ? 2u : 4u) || sp == d->stack_cap) break;
            d->op_at = at;
            if (!(v = new_value(d, RS_PICKLE_INT))) break;
            if (op == 0x4b) {
                v->v.i = buf[pos];
                pos += 1;
            } else if (op == 0x4d) {
                v->v.i = (int64_t)((uint64_t)buf[pos] | (uint64_t)buf[pos + 1] << 8);
                pos += 2;
            } else {
                v->v.i = (int32_t)((uint32_t)buf[pos] | (uint32_t)buf[pos + 1] << 8 |
                                   (uint32_t)buf[pos + 2] << 16 | (uint32_t)buf[pos + 3] << 24);
                pos += 4;
            }
            stack[sp++] = v;
            continue;
        case 0x8a: /* LONG1 of at most 8 bytes: an address or a time */
            if (left < 1 || buf[pos] == 0 || buf[pos] > 8 || left - 1 < buf[pos] ||
                sp == d->stack_cap)
                break;
            d->op_at = at;
            if (!(v = new_value(d, RS_PICKLE_INT))) break;
            key = 0;
            for (unsigned k = 0; k < buf[pos]; k++) key |= (uint64_t)buf[pos + 1 + k] << (8 * k);
            if ((buf[pos + buf[pos]] & 0x80) && buf[pos] < 8) key |= ~(uint64_t)0 << (8 * buf[pos]);
            memcpy(&v->v.i, &key, sizeof key);
            pos += 1 + (size_t)buf[pos];
            stack[sp++] = v;
            continue;
        case 0x75: /* SETITEMS */
        case 0x65: { /* APPENDS */
            if (!d->n_marks) break;
            /* the end of a batch, or the items of a streamed list: step() */
            if ((d->batch && d->n_marks <= d->batch_level) || (d->stream && op == 0x65 && d->n_marks <= 3))
                break;
            size_t start = d->marks[d->n_marks - 1];
            size_t fence = d->n_marks > 1 ? d->marks[d->n_marks - 2] : 0;
            if (start == 0 || start - 1 < fence) break;
            rs_pickle_value *c = stack[start - 1];
            size_t n = sp - start;
            if (op == 0x75) {
                if (c->kind != RS_PICKLE_DICT || n % 2) break;
                int hashable = 1;
                for (size_t k = start; k < sp; k += 2) {
                    unsigned kind = stack[k]->kind;
                    if (kind == RS_PICKLE_LIST || kind == RS_PICKLE_DICT || kind == RS_PICKLE_SET)
                        hashable = 0;
                }
                if (!hashable) break;
            } else if (c->kind != RS_PICKLE_LIST) {
                break;
            }
            d->op_at = at;
            d->op = op;
            ranksnap_status added = container_add(d, c, stack + start, n);
            if (added != RANKSNAP_OK) return added; /* it said why */
            d->n_marks--;
            sp = start;
            continue;
        }
        case 0x95: /* FRAME: a length hint; the frame's bytes must be there */
            if (left < 8) break;
            key = 0;
            for (unsigned k = 0; k < 8; k++) key |= (uint64_t)buf[pos + k] << (8 * k);
            if (key > left - 8) break;
            pos += 8;
            continue;
        }
        /* the general path: every opcode, every error */
        d->pos = pos;
        d->sp = sp;
        d->op_at = at;
        d->op = op;
        int done = 0;
        ranksnap_status st = step(d, &done);
        if (st != RANKSNAP_OK || done) return st;
        pos = d->pos;
        sp = d->sp;
        stack = d->stack;
    }
}

ranksnap_status rs_pickle_decode(const void *buf, size_t len, const char *name, rs_pickle_doc **out)
{
    return rs_pickle_decode_stream(buf, len, name, NULL, out);
}

ranksnap_status rs_pickle_decode_stream(const void *buf, size_t len, const char *name,
                                        const rs_pickle_stream *stream, rs_pickle_doc **out)
{
    if (!out || (!buf && len))
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_pickle_decode: NULL argument");
    *out = NULL;
    dec d;
    memset(&d, 0, sizeof d);
    d.name = name ? name : "pickle";
    d.buf = buf;
    d.len = len;
    d.doc = calloc(1, sizeof *d.doc);
    /* Allocated up front so that stack + index is never arithmetic on NULL. */
    d.stack_cap = 64;
    d.stack = malloc(d.stack_cap * sizeof *d.stack);
    if (!d.doc || !d.stack) {
        free(d.doc);
        free(d.stack);
        return no_memory(&d, d.stack_cap * sizeof *d.stack);
    }
    d.doc->main.next_chunk = CHUNK_MIN;
    d.doc->scratch.next_chunk = CHUNK_MIN;
    d.stream = stream;

    ranksnap_status st = run(&d);
    free(d.stack);
    free(d.marks);
    free(d.memo.dense);
    u64map_free(&d.memo.sparse);
    free(d.batch_keys);
    u64map_free(&d.fwd);
    free(d.work);
    free(d.shared);
    free(d.spans);
    if (st != RANKSNAP_OK) {
        rs_pickle_free(d.doc);
        return st;
    }
    *out = d.doc;
    return RANKSNAP_OK;
}

const rs_pickle_value *rs_pickle_root(const rs_pickle_doc *doc)
{
    return doc ? doc->root : NULL;
}

int rs_pickle_protocol(const rs_pickle_doc *doc)
{
    return doc ? doc->protocol : 0;
}

void rs_pickle_free(rs_pickle_doc *doc)
{
    if (!doc) return;
    arena_free(&doc->main);
    arena_free(&doc->scratch);
    free(doc);
}

/* ---- access -------------------------------------------------------------------------------- */

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
