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

/* Arena chunks start small (most pickles in tests are tiny) and double up to this size. */
#define CHUNK_MIN ((size_t)4096)
#define CHUNK_MAX ((size_t)1 << 20)
#define ALIGN 8 /* every member of rs_pickle_value and of its arrays is 8-byte aligned at most */

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
} chunk;

#define CHUNK_HDR ((sizeof(chunk) + ALIGN - 1) & ~(size_t)(ALIGN - 1))

struct rs_pickle_doc {
    chunk *chunks;
    size_t next_chunk;
    const rs_pickle_value *root;
    int protocol;
};

/* The memo: key -> value. Python's memo is a dict of arbitrary int keys; pickle.dump numbers
 * them 0, 1, 2, ..., and a GET is most of a PyTorch snapshot's opcodes, so keys up to the input
 * length (which no pickle.dump output can exceed: one key per opcode) index an array, and
 * larger ones, which only a hand-made pickle has, go to a hash table. */
typedef struct memo {
    rs_pickle_value **dense; /* [dense_cap], NULL = not stored */
    size_t dense_cap;
    uint64_t *keys;   /* keys above the input length: open addressing */
    rs_pickle_value **vals;  /* NULL = empty slot */
    size_t mask;      /* capacity - 1, 0 before the first such key */
    size_t sparse;    /* keys in the hash table */
    size_t count;     /* distinct keys: MEMOIZE's next key, as len(memo) in Python */
} memo;

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
} dec;

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

static void *arena_alloc(dec *d, size_t n)
{
    rs_pickle_doc *doc = d->doc;
    if (n > SIZE_MAX / 2) return NULL;
    n = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    chunk *c = doc->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = doc->next_chunk;
        if (cap < n) cap = n;
        chunk *nc = malloc(CHUNK_HDR + cap);
        if (!nc) return NULL;
        nc->used = 0;
        nc->cap = cap;
        if (c && n > doc->next_chunk / 2) {
            /* A large array gets a chunk of its own behind the current one, which keeps
             * serving the small values. */
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            doc->chunks = nc;
            if (doc->next_chunk < CHUNK_MAX) doc->next_chunk *= 2;
        }
        c = nc;
    }
    void *p = (unsigned char *)c + CHUNK_HDR + c->used;
    c->used += n;
    return p;
}

static rs_pickle_value *new_value(dec *d, rs_pickle_kind kind)
{
    rs_pickle_value *v = arena_alloc(d, sizeof *v);
    if (!v) return NULL;
    memset(v, 0, sizeof *v);
    v->kind = (uint8_t)kind;
    v->offset = d->op_at;
    return v;
}

/* A sequence or dict whose items are `items[0..n)` (copied). */
static rs_pickle_value *new_container(dec *d, rs_pickle_kind kind, rs_pickle_value *const *items, size_t n)
{
    rs_pickle_value *v = new_value(d, kind);
    if (!v) return NULL;
    if (n > 0) {
        v->v.seq.items = arena_alloc(d, n * sizeof *items);
        if (!v->v.seq.items) return NULL;
        memcpy(v->v.seq.items, items, n * sizeof *items);
    }
    v->v.seq.n = v->v.seq.cap = n;
    return v;
}

/* Appends items to a container's array, doubling it in the arena when full. */
static ranksnap_status container_add(dec *d, rs_pickle_value *c, rs_pickle_value *const *items, size_t n)
{
    if (n == 0) return RANKSNAP_OK; /* APPENDS of nothing: an empty list has no array yet */
    size_t need = c->v.seq.n + n;
    if (need > c->v.seq.cap) {
        /* A container filled once (a dict by one SETITEMS) gets exactly its size; one that
         * keeps growing (APPENDS batches of 1,000) doubles. */
        size_t cap = c->v.seq.cap ? c->v.seq.cap : need;
        while (cap < need) cap *= 2;
        rs_pickle_value **a = arena_alloc(d, cap * sizeof *a);
        if (!a) return no_memory(d, cap * sizeof *a);
        if (c->v.seq.n) memcpy(a, c->v.seq.items, c->v.seq.n * sizeof *a);
        c->v.seq.items = a;
        c->v.seq.cap = cap;
    }
    memcpy(c->v.seq.items + c->v.seq.n, items, n * sizeof *items);
    c->v.seq.n = need;
    return RANKSNAP_OK;
}

/* ---- input --------------------------------------------------------------------------------- */

/* Fails unless `n` more bytes (the current opcode's argument) are there. */
static ranksnap_status need(const dec *d, uint64_t n)
{
    if (n <= d->len - d->pos) return RANKSNAP_OK;
    return FAIL(d, "truncated: %s needs %llu bytes after it, only %zu remain",
                rs_pickle_opcode_name(d->op), (unsigned long long)n, d->len - d->pos);
}

static uint64_t read_le(dec *d, unsigned n)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < n; i++) x |= (uint64_t)d->buf[d->pos + i] << (8 * i);
    d->pos += n;
    return x;
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
static size_t utf8_bad_at(const unsigned char *p, size_t n)
{
    size_t i = 0;
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

static ranksnap_status push(dec *d, rs_pickle_value *v)
{
    if (!v) return no_memory(d, sizeof *v);
    if (d->sp == d->stack_cap) {
        size_t cap = d->stack_cap ? 2 * d->stack_cap : 64;
        rs_pickle_value **s = realloc(d->stack, cap * sizeof *s);
        if (!s) return no_memory(d, cap * sizeof *s);
        d->stack = s;
        d->stack_cap = cap;
    }
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
static ranksnap_status pop_mark(dec *d, size_t *start)
{
    if (d->n_marks == 0) return FAIL(d, "%s needs a MARK before it, there is none",
                                     rs_pickle_opcode_name(d->op));
    *start = d->marks[--d->n_marks];
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
static ranksnap_status check_hashable(const dec *d, const rs_pickle_value *v)
{
    if (v->kind == RS_PICKLE_LIST || v->kind == RS_PICKLE_DICT || v->kind == RS_PICKLE_SET)
        return FAIL(d, "%s: a dict key or set item must be hashable, found %s (made at offset "
                       "%zu)",
                    rs_pickle_opcode_name(d->op), rs_pickle_kind_name(v->kind), v->offset);
    return RANKSNAP_OK;
}

/* ---- the memo ------------------------------------------------------------------------------ */

static size_t hash_key(uint64_t k)
{
    return rs_addr_hash(k, rs_addr_hash_seed()); /* seeded: a pickle chooses its keys (addr_hash.h) */
}

static ranksnap_status memo_put(dec *d, uint64_t key, rs_pickle_value *v)
{
    memo *m = &d->memo;
    if (key <= d->len) {
        if (key >= m->dense_cap) {
            size_t cap = m->dense_cap ? 2 * m->dense_cap : 256;
            while (cap <= key) cap *= 2;
            if (cap > d->len + 1) cap = (size_t)d->len + 1;
            rs_pickle_value **a = realloc(m->dense, cap * sizeof *a);
            if (!a) return no_memory(d, cap * sizeof *a);
            memset(a + m->dense_cap, 0, (cap - m->dense_cap) * sizeof *a);
            m->dense = a;
            m->dense_cap = cap;
        }
        if (!m->dense[key]) m->count++;
        m->dense[key] = v;
        return RANKSNAP_OK;
    }
    if (m->mask == 0 || 2 * (m->sparse + 1) > m->mask + 1) {
        size_t cap = m->mask ? 2 * (m->mask + 1) : 64;
        uint64_t *keys = malloc(cap * sizeof *keys);
        rs_pickle_value **vals = calloc(cap, sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return no_memory(d, cap * (sizeof *keys + sizeof *vals));
        }
        for (size_t i = 0; m->mask && i <= m->mask; i++) {
            if (!m->vals[i]) continue;
            size_t j = hash_key(m->keys[i]) & (cap - 1);
            while (vals[j]) j = (j + 1) & (cap - 1);
            keys[j] = m->keys[i];
            vals[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->mask = cap - 1;
    }
    size_t i = hash_key(key) & m->mask;
    while (m->vals[i] && m->keys[i] != key) i = (i + 1) & m->mask;
    if (!m->vals[i]) {
        m->count++;
        m->sparse++;
    }
    m->keys[i] = key;
    m->vals[i] = v;
    return RANKSNAP_OK;
}

static ranksnap_status memo_get(dec *d, uint64_t key)
{
    const memo *m = &d->memo;
    if (key < m->dense_cap && m->dense[key]) return push(d, m->dense[key]);
    if (key > d->len && m->mask) {
        size_t i = hash_key(key) & m->mask;
        while (m->vals[i]) {
            if (m->keys[i] == key) return push(d, m->vals[i]);
            i = (i + 1) & m->mask;
        }
    }
    return FAIL(d, "%s of memo key %llu, which no PUT or MEMOIZE stored", rs_pickle_opcode_name(d->op),
                (unsigned long long)key);
}

static ranksnap_status memo_store_top(dec *d, uint64_t key)
{
    rs_pickle_value *v = NULL;
    RS_CHECK(top(d, &v));
    return memo_put(d, key, v);
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
        size_t bad = utf8_bad_at(p, (size_t)n);
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
    RS_CHECK(pop_mark(d, &start));
    rs_pickle_value *c = NULL;
    RS_CHECK(container_under_mark(d, start, kind, &c));
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
        d->doc->root = v;
        d->sp--;
        *done = 1;
        return RANKSNAP_OK;
    case 0x28: /* MARK */
        if (d->n_marks == d->marks_cap) {
            size_t cap = d->marks_cap ? 2 * d->marks_cap : 16;
            size_t *m = realloc(d->marks, cap * sizeof *m);
            if (!m) return no_memory(d, cap * sizeof *m);
            d->marks = m;
            d->marks_cap = cap;
        }
        d->marks[d->n_marks++] = d->sp;
        return RANKSNAP_OK;
    case 0x30: /* POP: the top value, or the innermost MARK when nothing is above it */
        if (d->sp > fence(d))
            d->sp--;
        else if (d->n_marks)
            d->sp = d->marks[--d->n_marks];
        else
            return underflow(d, 1);
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

ranksnap_status rs_pickle_decode(const void *buf, size_t len, const char *name, rs_pickle_doc **out)
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
    d.doc->next_chunk = CHUNK_MIN;

    ranksnap_status st = RANKSNAP_OK;
    int done = 0;
    while (st == RANKSNAP_OK && !done) {
        if (d.pos >= d.len) {
            st = fail_at(&d, d.len, "truncated: the pickle ends without a STOP opcode");
            break;
        }
        d.op_at = d.pos;
        d.op = d.buf[d.pos++];
        st = step(&d, &done);
    }
    free(d.stack);
    free(d.marks);
    free(d.memo.dense);
    free(d.memo.keys);
    free(d.memo.vals);
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
    chunk *c = doc->chunks;
    while (c) {
        chunk *next = c->next;
        free(c);
        c = next;
    }
    free(doc);
}

/* ---- access -------------------------------------------------------------------------------- */

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
