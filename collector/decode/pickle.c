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
 *
 * The parts: pickle_mem.c (arenas, input, stack, memo), pickle_batch.c (streamed batches),
 * pickle_frames.c (the frames lists and memo keys of the entries the stream's reader reads from
 * their bytes), pickle_value.c (reading the tree), pickle_names.c and pickle_ops.c. This file
 * holds the opcodes themselves (step, and run's loop) and the decoder's entry points. It is the
 * one general machine: the one fast path for PyTorch's trace entries is the stream's reader
 * (torch_trace.c), asked at each entry of a streamed batch.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "pickle.h"
#include "pickle_batch.h"
#include "pickle_frames.h"
#include "pickle_mem.h"
#include "pickle_ops.h"

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
        if (!a) return rs_pk_no_memory(d, cap * sizeof *a);
        if (c->v.seq.n) memcpy(a, c->v.seq.items, c->v.seq.n * sizeof *a);
        c->v.seq.items = a;
        c->v.seq.cap = (uint32_t)cap;
    }
    memcpy(c->v.seq.items + c->v.seq.n, items, n * sizeof *items);
    if (outside) {
        /* a container older than the batch keeps no pointer into it: copies of what it gets */
        for (size_t i = c->v.seq.n; i < need; i++) {
            if (!in_batch(d, c->v.seq.items[i])) continue;
            rs_pickle_value *x = rs_pk_evacuate(d, c->v.seq.items[i]);
            if (!x) return rs_pk_no_memory(d, sizeof *x);
            c->v.seq.items[i] = x;
        }
    }
    c->v.seq.n = (uint32_t)need;
    return RANKSNAP_OK;
}

/* Pops the items above the innermost MARK and the MARK itself: they are stack[*start..sp). The
 * caller sets sp = *start once it has taken them. */
static ranksnap_status pop_mark(dec *d, size_t *start)
{
    if (d->n_marks == 0) return FAIL(d, "%s needs a MARK before it, there is none",
                                     rs_pickle_opcode_name(d->op));
    *start = d->marks[--d->n_marks];
    if (d->batch && d->n_marks < d->batch_level) return rs_pk_batch_seal(d);
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

const rs_pickle_value *rs_pickle_keep(rs_pickle_taker *t, const rs_pickle_value *v)
{
    dec *d = (dec *)t;
    return v && in_batch(d, v) ? rs_pk_evacuate(d, (rs_pickle_value *)v) : v;
}

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
    if (!v) return rs_pk_no_memory(d, sizeof *v);
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
            return rs_pk_fail_at(d, d->pos + bad,
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
    if (d->sp - fence(d) < n) return rs_pk_underflow(d, n);
    rs_pickle_value *t = rs_pk_new_container(d, RS_PICKLE_TUPLE, d->stack + d->sp - n, n);
    if (!t) return rs_pk_no_memory(d, sizeof *t);
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
    rs_pickle_value *c = rs_pk_new_container(d, kind, d->stack + start, n);
    if (!c) return rs_pk_no_memory(d, n * sizeof(rs_pickle_value *));
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
        int64_t index = start > 0 ? rs_pk_stream_index_of(d, start - 1) : -1;
        if (index >= 0) return rs_pk_batch_end(d, d->stack[start - 1], index, start);
        d->n_marks++; /* laid out otherwise after all: the general way, which seals it */
    }
    RS_CHECK(pop_mark(d, &start));
    rs_pickle_value *c = NULL;
    RS_CHECK(container_under_mark(d, start, kind, &c));
    if (kind == RS_PICKLE_LIST && d->stream) {
        int64_t index = rs_pk_stream_index_of(d, start - 1);
        if (index >= 0) { /* a streamed list's items, built outside a batch */
            RS_CHECK(rs_pk_stream_take(d, c, index, d->stack + start, d->sp - start));
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
        RS_CHECK(rs_pk_read_count(d, 8, &n));
        return RANKSNAP_OK;
    case 0x2e: /* STOP */
        RS_CHECK(rs_pk_top(d, &v));
        if (d->batch) RS_CHECK(rs_pk_batch_seal(d)); /* what the open batch made is the document's now */
        d->doc->root = v;
        d->sp--;
        *done = 1;
        return RANKSNAP_OK;
    case 0x28: /* MARK */
        if (d->stream && !d->batch) rs_pk_batch_open(d);
        if (d->n_marks == d->marks_cap) {
            size_t *m = rs_pk_doubled(d->marks, &d->marks_cap, sizeof *m, 16);
            if (!m) return rs_pk_no_memory(d, 2 * d->marks_cap * sizeof *m);
            d->marks = m;
        }
        d->marks[d->n_marks++] = d->sp;
        return RANKSNAP_OK;
    case 0x30: /* POP: the top value, or the innermost MARK when nothing is above it */
        if (d->sp > fence(d)) {
            d->sp--;
        } else if (d->n_marks) {
            d->sp = d->marks[--d->n_marks];
            if (d->batch && d->n_marks < d->batch_level) RS_CHECK(rs_pk_batch_seal(d));
        } else {
            return rs_pk_underflow(d, 1);
        }
        return RANKSNAP_OK;
    case 0x31: { /* POP_MARK */
        size_t start = 0;
        RS_CHECK(pop_mark(d, &start));
        d->sp = start;
        return RANKSNAP_OK;
    }
    case 0x32: /* DUP */
        RS_CHECK(rs_pk_top(d, &v));
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
        RS_CHECK(rs_pk_read_count(d, 1, &n));
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

    case 0x8c: RS_CHECK(rs_pk_read_count(d, 1, &n)); return push_text(d, RS_PICKLE_STR, n);   /* SHORT_BINUNICODE */
    case 0x58: RS_CHECK(rs_pk_read_count(d, 4, &n)); return push_text(d, RS_PICKLE_STR, n);   /* BINUNICODE */
    case 0x8d: RS_CHECK(rs_pk_read_count(d, 8, &n)); return push_text(d, RS_PICKLE_STR, n);   /* BINUNICODE8 */
    case 0x43: RS_CHECK(rs_pk_read_count(d, 1, &n)); return push_text(d, RS_PICKLE_BYTES, n); /* SHORT_BINBYTES */
    case 0x42: RS_CHECK(rs_pk_read_count(d, 4, &n)); return push_text(d, RS_PICKLE_BYTES, n); /* BINBYTES */
    case 0x8e: /* BINBYTES8 */
    case 0x96: /* BYTEARRAY8 */
        RS_CHECK(rs_pk_read_count(d, 8, &n));
        return push_text(d, RS_PICKLE_BYTES, n);

    case 0x5d: return push(d, rs_pk_new_container(d, RS_PICKLE_LIST, NULL, 0)); /* EMPTY_LIST */
    case 0x7d: return push(d, rs_pk_new_container(d, RS_PICKLE_DICT, NULL, 0)); /* EMPTY_DICT */
    case 0x8f: return push(d, rs_pk_new_container(d, RS_PICKLE_SET, NULL, 0));  /* EMPTY_SET */
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
        if (d->sp - fence(d) < 2) return rs_pk_underflow(d, 2);
        v = d->stack[d->sp - 2];
        if (v->kind != RS_PICKLE_LIST)
            return FAIL(d, "APPEND needs a list under its item, found %s (made at offset %zu)",
                        rs_pickle_kind_name(v->kind), v->offset);
        if (d->stream && rs_pk_stream_index_of(d, d->sp - 2) >= 0)
            RS_CHECK(rs_pk_stream_take(d, v, rs_pk_stream_index_of(d, d->sp - 2), d->stack + d->sp - 1, 1));
        else
            RS_CHECK(container_add(d, v, d->stack + d->sp - 1, 1));
        d->sp--;
        return RANKSNAP_OK;
    case 0x73: /* SETITEM */
        if (d->sp - fence(d) < 3) return rs_pk_underflow(d, 3);
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

    case 0x94: return rs_pk_memo_store_top(d, d->memo.count); /* MEMOIZE */
    case 0x71: /* BINPUT */
        RS_CHECK(need(d, 1));
        return rs_pk_memo_store_top(d, read_le(d, 1));
    case 0x72: /* LONG_BINPUT */
        RS_CHECK(need(d, 4));
        return rs_pk_memo_store_top(d, read_le(d, 4));
    case 0x70: /* PUT */
        RS_CHECK(rs_pk_read_decimal_line(d, &n));
        return rs_pk_memo_store_top(d, n);
    case 0x68: /* BINGET */
        RS_CHECK(need(d, 1));
        return memo_get(d, read_le(d, 1));
    case 0x6a: /* LONG_BINGET */
        RS_CHECK(need(d, 4));
        return memo_get(d, read_le(d, 4));
    case 0x67: /* GET */
        RS_CHECK(rs_pk_read_decimal_line(d, &n));
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

const unsigned char *rs_pickle_read_input(const rs_pickle_reader *r, size_t *len)
{
    const dec *d = (const dec *)r;
    *len = d->len;
    return d->buf;
}

const rs_pickle_value *rs_pickle_read_memo(rs_pickle_reader *r, uint64_t key)
{
    dec *d = (dec *)r;
    rs_pickle_value **slot = rs_pk_memo_slot(d, key);
    if (!slot || *slot == TAKEN_MARK || (memo_is_lazy(*slot) && !rs_pk_memo_lazy(d, slot))) return NULL;
    return in_batch(d, *slot) ? rs_pk_evacuate(d, *slot) : *slot;
}

uint64_t rs_pickle_read_memo_gen(const rs_pickle_reader *r)
{
    return ((const dec *)r)->memo_gen;
}

const rs_pickle_value *rs_pickle_read_gets(rs_pickle_reader *r, size_t list_at, size_t items_at,
                                           size_t *end)
{
    return rs_pk_gets_list((dec *)r, list_at, items_at, end);
}

int rs_pickle_read_done(rs_pickle_reader *r, size_t at, size_t end, const rs_pickle_memo_new *put,
                        size_t n)
{
    dec *d = (dec *)r;
    size_t key = d->memo.count;
    if (end > d->len || end <= at || !rs_pk_memo_next_free(d, n)) return -1;
    for (size_t i = 0; i < n; i++)
        d->memo.dense[key + i] = put[i].value ? (rs_pickle_value *)put[i].value
                                 : put[i].at == SIZE_MAX ? TAKEN_MARK
                                                          : memo_lazy_tag(put[i].at);
    rs_pk_memo_direct(d, n);
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
            return rs_pk_fail_at(d, len, "truncated: the pickle ends without a STOP opcode");
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
            /* a trace entry in a streamed batch: the batch's items before it handed over
             * first, so that each entry is taken as it comes whichever way it is read (the same
             * memo, the same messages), and then read by the stream's reader from its bytes */
            if (d->batch && d->n_marks == d->batch_level) {
                if (sp > d->marks[d->batch_level - 1] && rs_pk_batch_flush(d, &sp) != 0) {
                    d->pos = pos;
                    d->sp = sp;
                    return d->flush_err;
                }
            }
            if (d->batch && d->stream->read && d->n_marks == d->batch_level) {
                d->pos = pos;
                d->sp = sp;
                int read = d->stream->read(d->stream->ctx, (rs_pickle_reader *)d, d->batch_list,
                                           d->batch_index, at);
                /* what it kept was copied by address (copy_out) */
                if (d->fwd.n) rs_pk_u64map_clear(&d->fwd);
                if (read > 0) {
                    pos = d->read_end;
                    continue;
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
        return rs_pk_no_memory(&d, d.stack_cap * sizeof *d.stack);
    }
    d.doc->main.next_chunk = CHUNK_MIN;
    d.doc->scratch.next_chunk = CHUNK_MIN;
    d.stream = stream;

    ranksnap_status st = run(&d);
    free(d.stack);
    free(d.marks);
    free(d.memo.dense);
    rs_pk_u64map_free(&d.memo.sparse);
    free(d.batch_keys);
    rs_pk_u64map_free(&d.fwd);
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
    rs_pk_arena_free(&doc->main);
    rs_pk_arena_free(&doc->scratch);
    free(doc);
}
