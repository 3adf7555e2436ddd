/*
 * torch_fields.c — reading PyTorch's dicts: where in the snapshot a value is
 * ("device_traces[0][12].frames[3]", for messages), the identity caches (a value already seen
 * maps to the same frame or stack without hashing its text again), typed field access that
 * names the field and the byte offset of a wrong value, and the dicts PyTorch writes read in
 * one pass over their keys.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "addr_hash.h"
#include "errors.h"
#include "file_read.h"
#include "pickle.h"
#include "rsnap_decode.h"
#include "sat.h"
#include "snap_check.h"
#include "steps_infer.h"
#include "torch_decode.h"
#include "torch_meta.h"
#include "torch_trace.h"
#include "walk.h"
#include "torch_fields.h"

loc rs_tm_loc_down(const loc *up, const char *part, size_t idx)
{
    return (loc){up, part, idx};
}

static size_t idcache_slot(const idcache *t, uintptr_t a, uintptr_t b, int64_t c)
{
    /* seeded (addr_hash.h): the file chooses `c`, a line number, and any fixed mix of it can be
     * aimed at. `a` and `b` are this process's addresses; for one (a, b) the finalisers are
     * bijections, so distinct lines never share a hash and the seed hides which slot they get. */
    return rs_addr_hash(a ^ rs_addr_hash(b * 0x9e3779b97f4a7c15ull ^ (uint64_t)c, t->seed), t->seed) &
           t->mask;
}

uint32_t rs_tm_idcache_get(const idcache *t, uintptr_t a, uintptr_t b, int64_t c)
{
    if (!t->mask) return 0;
    for (size_t i = idcache_slot(t, a, b, c); t->val[i]; i = (i + 1) & t->mask)
        if (t->a[i] == a && t->b[i] == b && t->c[i] == c) return t->val[i];
    return 0;
}

void rs_tm_idcache_free(idcache *t)
{
    free(t->a);
    free(t->b);
    free(t->c);
    free(t->val);
}

int rs_tm_idcache_put(idcache *t, uintptr_t a, uintptr_t b, int64_t c, uint32_t val)
{
    if (t->mask == 0 || 2 * (t->n + 1) > t->mask + 1) {
        idcache g = {NULL, NULL, NULL, NULL, t->mask ? 2 * t->mask + 1 : 255, 0, rs_addr_hash_seed()};
        g.a = malloc((g.mask + 1) * sizeof *g.a);
        g.b = malloc((g.mask + 1) * sizeof *g.b);
        g.c = malloc((g.mask + 1) * sizeof *g.c);
        g.val = calloc(g.mask + 1, sizeof *g.val);
        if (!g.a || !g.b || !g.c || !g.val) {
            rs_tm_idcache_free(&g);
            return -1;
        }
        for (size_t i = 0; t->mask && i <= t->mask; i++)
            if (t->val[i]) (void)rs_tm_idcache_put(&g, t->a[i], t->b[i], t->c[i], t->val[i]);
        rs_tm_idcache_free(t);
        *t = g;
    }
    size_t i = idcache_slot(t, a, b, c);
    while (t->val[i]) i = (i + 1) & t->mask;
    t->a[i] = a;
    t->b[i] = b;
    t->c[i] = c;
    t->val[i] = val;
    t->n++;
    return 0;
}

size_t rs_tm_addr_slot(const void *v, size_t size)
{
    return (size_t)(((uintptr_t)v * 0x9e3779b97f4a7c15ull) >> 40) & (size - 1);
}

static size_t ptr_slot(const void *v)
{
    return rs_tm_addr_slot(v, PTR_CACHE);
}

uint32_t rs_tm_ptr_get(const ptr_cache *c, const void *v)
{
    size_t i = ptr_slot(v);
    return c->key[i] == v ? c->val[i] : 0;
}

void rs_tm_ptr_put(ptr_cache *c, const void *v, uint32_t val)
{
    size_t i = ptr_slot(v);
    c->key[i] = v;
    c->val[i] = val;
}

ptr_cache *rs_tm_ptr_cache_new(void)
{
    ptr_cache *c = malloc(sizeof *c);
    if (c) memset(c, 0, sizeof *c);
    return c;
}

ranksnap_status rs_tm_bad(const mapper *m, const rs_pickle_value *at, const loc *l, const char *field,
                           const char *fmt, ...)
{
    char where[256], msg[384];
    const loc *chain[LOC_DEPTH];
    int depth = 0;
    for (; l && depth < LOC_DEPTH; l = l->up) chain[depth++] = l;
    size_t k = 0;
    where[0] = '\0';
    for (int i = depth - 1; i >= 0 && k < sizeof where; i--)
        k += (size_t)snprintf(where + k, sizeof where - k, "%s[%zu]", chain[i]->part,
                              chain[i]->idx);
    if (field && k < sizeof where)
        snprintf(where + k, sizeof where - k, "%s%s", k ? "." : "", field);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rs_error(RANKSNAP_ERR_FORMAT, "%s: offset %zu: %s%s%s", m->name, at ? at->offset : 0,
                    where, where[0] ? ": " : "", msg);
}

ranksnap_status rs_tm_no_memory(const mapper *m, const char *what)
{
    return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory for %s", m->name, what);
}

static ranksnap_status expect_kind(const mapper *m, const rs_pickle_value *v, rs_pickle_kind kind,
                                   const loc *l, const char *field)
{
    if (v->kind == kind) return RANKSNAP_OK;
    return rs_tm_bad(m, v, l, field, "expected %s, found %s", rs_pickle_kind_name(kind), rs_pickle_kind_name(v->kind));
}

ranksnap_status rs_tm_val_u64_rest(const mapper *m, const rs_pickle_value *v,
                                    const rs_pickle_value *dict, const char *key, const loc *l,
                                    int required, uint64_t *out)
{
    if (!v) {
        if (required) return rs_tm_bad(m, dict, l, key, "missing (PyTorch always writes it)");
        return RANKSNAP_OK;
    }
    if (rs_pickle_get_u64(v, out) == 0) return RANKSNAP_OK;
    if (v->kind == RS_PICKLE_INT) return rs_tm_bad(m, v, l, key, "expected a non-negative integer, found %lld",
                                      (long long)v->v.i);
    if (v->kind == RS_PICKLE_BIGINT)
        return rs_tm_bad(m, v, l, key, "expected an integer of at most 64 bits, found a wider one");
    return rs_tm_bad(m, v, l, key, "expected an int, found %s", rs_pickle_kind_name(v->kind));
}

/* An optional str: NULL when absent. */
static ranksnap_status val_str(const mapper *m, const rs_pickle_value *v, const char *key,
                               const loc *l, const rs_pickle_value **out)
{
    *out = v;
    if (v && v->kind != RS_PICKLE_STR)
        return rs_tm_bad(m, v, l, key, "expected a str, found %s", rs_pickle_kind_name(v->kind));
    return RANKSNAP_OK;
}

ranksnap_status rs_tm_val_list(const mapper *m, const rs_pickle_value *v, const char *key,
                                const loc *l, const rs_pickle_value **out)
{
    *out = v && v->kind != RS_PICKLE_NONE ? v : NULL;
    if (*out && (*out)->kind != RS_PICKLE_LIST && (*out)->kind != RS_PICKLE_TUPLE)
        return rs_tm_bad(m, *out, l, key, "expected a list, found %s", rs_pickle_kind_name((*out)->kind));
    return RANKSNAP_OK;
}

/* Which key a str is: PyTorch memoizes its key strings, so each distinct value is compared with
 * the names once and then found by its address (a small cache; a miss only costs a compare). */
static int key_id(mapper *m, const rs_pickle_value *k)
{
    if (k->kind != RS_PICKLE_STR) return F_OTHER;
    size_t h = rs_tm_addr_slot(k, KEY_CACHE);
    if (m->key_ptr[h] == k) return m->key_id[h];
    int id = rs_torch_field(k->v.str.p, k->v.str.n);
    m->key_ptr[h] = rs_pickle_lasting(k) ? k : NULL; /* a batch's str: its address is reused */
    m->key_id[h] = (uint8_t)id;
    return id;
}

ranksnap_status rs_tm_read_fields(mapper *m, const rs_pickle_value *dict, const loc *l, fields *f)
{
    /* set on every path, failures too: what GCC inlines with the decoders' profile (pgo.cmake)
     * it cannot always follow to the caller's check of the status */
    f->dict = dict;
    f->present = 0;
    RS_CHECK(expect_kind(m, dict, RS_PICKLE_DICT, l, NULL));
    size_t n = rs_pickle_len(dict);
    if (n > MAX_KEYS)
        return rs_tm_bad(m, dict, l, NULL, "a dict of %zu keys, expected at most %d (PyTorch writes 3 to 12)",
                   n, MAX_KEYS);
    rs_pickle_value *const *it = dict->v.seq.items;
    size_t same = n == m->shape_n;
    for (size_t i = 0; same && i < n; i++) same = it[2 * i] == m->shape_key[i];
    if (same) {
        for (size_t i = 0; i < n; i++) f->v[m->shape_id[i]] = it[2 * i + 1];
        f->present = m->shape_present;
        return RANKSNAP_OK;
    }
    int lasting = 1;
    for (size_t i = 0; i < n; i++) {
        int id = key_id(m, it[2 * i]);
        f->v[id] = it[2 * i + 1];
        f->present |= (uint32_t)1 << id;
        m->shape_key[i] = it[2 * i];
        m->shape_id[i] = (uint8_t)id;
        lasting &= rs_pickle_lasting(it[2 * i]);
    }
    m->shape_n = lasting ? n : SIZE_MAX; /* keys known by their addresses only when those last */
    m->shape_present = f->present;
    return RANKSNAP_OK;
}

ranksnap_status rs_tm_f_str(const mapper *m, const fields *f, int id, const loc *l,
                             const rs_pickle_value **out)
{
    return val_str(m, field_of(f, id), rs_torch_field_name(id), l, out);
}

ranksnap_status rs_tm_f_list(const mapper *m, const fields *f, int id, const loc *l,
                              const rs_pickle_value **out)
{
    return rs_tm_val_list(m, field_of(f, id), rs_torch_field_name(id), l, out);
}

char *rs_tm_copy_str(const rs_pickle_value *v, const char *fallback)
{
    const char *p = v ? v->v.str.p : fallback;
    size_t n = v ? v->v.str.n : strlen(fallback);
    char *s = malloc(n + 1);
    if (!s) return NULL;
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

uint64_t rs_tm_mix(const mapper *m, uint64_t x)
{
    return rs_addr_hash(x, m->seed);
}

int rs_tm_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem) return -1;
        c *= 2;
    }
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}
