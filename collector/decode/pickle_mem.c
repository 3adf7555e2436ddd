/*
 * pickle_mem.c — the pickle decoder's memory and input: errors at an offset, the arenas (every
 * value and every container's item array comes from one, freed at once by rs_pickle_free), the
 * bounds-checked reads of an opcode's argument, the value stack and its fence, and the memo
 * (a dense array for pickle.dump's keys, a hash table for the rest).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr_hash.h"
#include "errors.h"
#include "pickle_mem.h"
#include "pickle_names.h"

ranksnap_status rs_pk_fail_at(const dec *d, size_t offset, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rs_error(RANKSNAP_ERR_FORMAT, "%s: offset %zu: %s", d->name, offset, msg);
}

ranksnap_status rs_pk_no_memory(const dec *d, size_t bytes)
{
    return rs_error(RANKSNAP_ERR_HOST_MEMORY,
                    "%s: offset %zu: no memory for %zu more bytes of decoded values", d->name,
                    d->op_at, bytes);
}

void *rs_pk_doubled(void *p, size_t *cap, size_t elem, size_t first)
{
    size_t c = *cap ? 2 * *cap : first;
    void *q = c <= SIZE_MAX / elem ? realloc(p, c * elem) : NULL;
    if (q) *cap = c;
    return q;
}

void *rs_pk_arena_alloc_slow(arena *a, size_t n)
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

void rs_pk_arena_free(arena *a)
{
    chunk *c = a->chunks;
    while (c) {
        chunk *next = c->next;
        free(c);
        c = next;
    }
    a->chunks = NULL;
}

void rs_pk_arena_reset(arena *a)
{
    chunk *keep = a->chunks;
    if (!keep) return;
    a->chunks = keep->next;
    rs_pk_arena_free(a);
    keep->next = NULL;
    keep->used = 0;
    a->chunks = keep;
}

rs_pickle_value *rs_pk_new_container(dec *d, rs_pickle_kind kind, rs_pickle_value *const *items, size_t n)
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

ranksnap_status rs_pk_truncated_arg(const dec *d, uint64_t n)
{
    return FAIL(d, "truncated: %s needs %llu bytes after it, only %zu remain",
                rs_pickle_opcode_name(d->op), (unsigned long long)n, d->len - d->pos);
}

ranksnap_status rs_pk_read_count(dec *d, unsigned n, uint64_t *count)
{
    RS_CHECK(need(d, n));
    *count = read_le(d, n);
    return need(d, *count);
}

ranksnap_status rs_pk_read_decimal_line(dec *d, uint64_t *out)
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

ranksnap_status rs_pk_push_slow(dec *d, rs_pickle_value *v)
{
    if (!v) return rs_pk_no_memory(d, sizeof *v);
    rs_pickle_value **s = rs_pk_doubled(d->stack, &d->stack_cap, sizeof *s, 64);
    if (!s) return rs_pk_no_memory(d, 2 * d->stack_cap * sizeof *s);
    d->stack = s;
    d->stack[d->sp++] = v;
    return RANKSNAP_OK;
}

ranksnap_status rs_pk_underflow(const dec *d, size_t wanted)
{
    size_t have = d->sp - fence(d);
    if (d->n_marks)
        return FAIL(d, "%s needs %zu value%s on the stack above the last MARK, found %zu",
                    rs_pickle_opcode_name(d->op), wanted, wanted == 1 ? "" : "s", have);
    return FAIL(d, "%s needs %zu value%s on the stack, found %zu", rs_pickle_opcode_name(d->op), wanted,
                wanted == 1 ? "" : "s", have);
}

ranksnap_status rs_pk_top(dec *d, rs_pickle_value **v)
{
    if (d->sp <= fence(d)) return rs_pk_underflow(d, 1);
    *v = d->stack[d->sp - 1];
    return RANKSNAP_OK;
}

/* Where `key` is in the map, or the empty slot where it belongs (the map has one). */
static size_t u64map_find(const u64map *m, uint64_t key)
{
    size_t i = rs_addr_hash(key, m->seed) & m->mask;
    while (m->vals[i] && m->keys[i] != key) i = (i + 1) & m->mask;
    return i;
}

rs_pickle_value *rs_pk_u64map_get(const u64map *m, uint64_t key)
{
    return m->mask ? m->vals[u64map_find(m, key)] : NULL;
}

int rs_pk_u64map_put(u64map *m, uint64_t key, rs_pickle_value *v)
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

void rs_pk_u64map_clear(u64map *m)
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

void rs_pk_u64map_free(u64map *m)
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
        uint64_t *k = rs_pk_doubled(d->batch_keys, &d->batch_keys_cap, sizeof *k, 64);
        if (!k) return rs_pk_no_memory(d, 2 * d->batch_keys_cap * sizeof *k);
        d->batch_keys = k;
    }
    d->batch_keys[d->n_batch_keys++] = key;
    return RANKSNAP_OK;
}

rs_pickle_value **rs_pk_memo_slot(dec *d, uint64_t key)
{
    memo *m = &d->memo;
    if (key < m->dense_cap) return m->dense[key] ? &m->dense[key] : NULL;
    if (key > d->len && m->sparse.mask) {
        size_t i = u64map_find(&m->sparse, key);
        if (m->sparse.vals[i]) return &m->sparse.vals[i];
    }
    return NULL;
}

rs_pickle_value *rs_pk_memo_lazy(dec *d, rs_pickle_value **slot)
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
                if (!a) return rs_pk_no_memory(d, cap * sizeof *a);
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
    int added = rs_pk_u64map_put(&m->sparse, key, v);
    if (added < 0) return rs_pk_no_memory(d, 2 * (m->sparse.mask + 1) * sizeof *m->sparse.vals);
    m->count += (size_t)added;
    return note_batch_key(d, key, v);
}

ranksnap_status rs_pk_memo_taken(const dec *d, uint64_t key)
{
    return FAIL(d, "%s of memo key %llu, an item the reader took as it streamed (PyTorch never "
                   "refers to a trace entry twice)", rs_pickle_opcode_name(d->op),
                (unsigned long long)key);
}

ranksnap_status rs_pk_memo_store_top(dec *d, uint64_t key)
{
    rs_pickle_value *v = NULL;
    RS_CHECK(rs_pk_top(d, &v));
    return memo_put(d, key, v);
}
