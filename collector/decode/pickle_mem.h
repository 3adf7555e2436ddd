/*
 * pickle_mem.h — the decoder's memory and input (pickle_mem.c): errors at an offset, the arenas
 * values are made in, the bounds-checked reads of an opcode's argument, the value stack and the
 * memo. The small ones every opcode runs are inline here.
 */
#ifndef RANKSNAP_PICKLE_MEM_H
#define RANKSNAP_PICKLE_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "pickle_dec.h"

/* A format error at `offset` of the input, the message made as printf would. */
ranksnap_status rs_pk_fail_at(const dec *d, size_t offset, const char *fmt, ...) RS_PRINTF(3, 4);

/* Out of memory for `bytes` more bytes of decoded values, at the opcode being run. */
ranksnap_status rs_pk_no_memory(const dec *d, size_t bytes);

/* The array `p` of *cap elements of `elem` bytes, doubled (or `first` long when empty); *cap is
 * updated. NULL, with `p` and *cap untouched, when out of memory. */
void *rs_pk_doubled(void *p, size_t *cap, size_t elem, size_t first);

void *rs_pk_arena_alloc_slow(arena *a, size_t n);

void rs_pk_arena_free(arena *a);

/* Empties the arena for the next batch, keeping its current chunk. */
void rs_pk_arena_reset(arena *a);

/* A sequence or dict whose items are `items[0..n)` (copied). */
rs_pickle_value *rs_pk_new_container(dec *d, rs_pickle_kind kind, rs_pickle_value *const *items, size_t n);

/* Fails unless `n` more bytes (the current opcode's argument) are there. */
ranksnap_status rs_pk_truncated_arg(const dec *d, uint64_t n);

/* An `n`-byte little-endian count, checked against what remains after it. */
ranksnap_status rs_pk_read_count(dec *d, unsigned n, uint64_t *count);

/* The decimal argument of the text memo opcodes PUT and GET, up to its newline. */
ranksnap_status rs_pk_read_decimal_line(dec *d, uint64_t *out);

ranksnap_status rs_pk_push_slow(dec *d, rs_pickle_value *v);

ranksnap_status rs_pk_underflow(const dec *d, size_t wanted);

/* The top value (above the fence) without popping it. */
ranksnap_status rs_pk_top(dec *d, rs_pickle_value **v);

rs_pickle_value *rs_pk_u64map_get(const u64map *m, uint64_t key);

/* -1 when out of memory; 1 when the key is new. */
int rs_pk_u64map_put(u64map *m, uint64_t key, rs_pickle_value *v);

/* Empty again. A large table is given back rather than cleared: a batch flushed at every entry
 * (batch_flush) would otherwise clear the whole table each time for the few keys it holds. */
void rs_pk_u64map_clear(u64map *m);

void rs_pk_u64map_free(u64map *m);

/* Where the memo keeps `key`: NULL when it does not. */
rs_pickle_value **rs_pk_memo_slot(dec *d, uint64_t key);

/* The str whose opcode (SHORT_BINUNICODE or BINUNICODE, checked when it was read) is at the
 * tag's offset, made in the document's memory and put in the slot. NULL when out of memory. */
rs_pickle_value *rs_pk_memo_lazy(dec *d, rs_pickle_value **slot);

ranksnap_status rs_pk_memo_taken(const dec *d, uint64_t key);

ranksnap_status rs_pk_memo_store_top(dec *d, uint64_t key);

#define FAIL(d, ...) rs_pk_fail_at((d), (d)->op_at, __VA_ARGS__)

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
    return rs_pk_arena_alloc_slow(a, n);
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

static inline ranksnap_status need(const dec *d, uint64_t n)
{
    if (n <= d->len - d->pos) return RANKSNAP_OK;
    return rs_pk_truncated_arg(d, n);
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

static inline size_t fence(const dec *d)
{
    return d->n_marks ? d->marks[d->n_marks - 1] : 0;
}

/* Pushes v; a NULL v is an allocation that failed. */
static inline ranksnap_status push(dec *d, rs_pickle_value *v)
{
    if (!v || d->sp == d->stack_cap) return rs_pk_push_slow(d, v);
    d->stack[d->sp++] = v;
    return RANKSNAP_OK;
}

/* A memo slot may hold, instead of a value, the place of a str the stream's reader met (its
 * opcode's offset, shifted, with the low bit set: values are aligned): PyTorch 2.11 memoizes a
 * new "N/A" in every trace entry and never fetches one, so the value a GET needs is made when one does
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

static inline ranksnap_status memo_get(dec *d, uint64_t key)
{
    memo *m = &d->memo;
    if (key < m->dense_cap && m->dense[key] == TAKEN_MARK) return rs_pk_memo_taken(d, key);
    if (key < m->dense_cap && memo_is_lazy(m->dense[key]) && !rs_pk_memo_lazy(d, &m->dense[key]))
        return rs_pk_no_memory(d, sizeof(rs_pickle_value));
    if (key < m->dense_cap && m->dense[key]) return push(d, m->dense[key]);
    rs_pickle_value *v = key > d->len ? rs_pk_u64map_get(&m->sparse, key) : NULL;
    if (v == TAKEN_MARK) return rs_pk_memo_taken(d, key);
    if (v) return push(d, v);
    return FAIL(d, "%s of memo key %llu, which no PUT or MEMOIZE stored", rs_pickle_opcode_name(d->op),
                (unsigned long long)key);
}

#endif
