/*
 * torch_fields.h — reading PyTorch's dicts (torch_fields.c): typed field access that names the
 * field and the byte offset of a wrong value, the dicts read in one pass over their keys, the
 * identity caches, and the growth of the mapper's arrays.
 */
#ifndef RANKSNAP_TORCH_FIELDS_H
#define RANKSNAP_TORCH_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "torch_mapper.h"

loc rs_tm_loc_down(const loc *up, const char *part, size_t idx);

/* The cached value, 0 when absent. */
uint32_t rs_tm_idcache_get(const idcache *t, uintptr_t a, uintptr_t b, int64_t c);

void rs_tm_idcache_free(idcache *t);

/* -1 when out of memory (the cache is only a shortcut: callers go on without it). */
int rs_tm_idcache_put(idcache *t, uintptr_t a, uintptr_t b, int64_t c, uint32_t val);

/* A slot of a cache of `size` entries (a power of two) for the value at `v`: values sit 32
 * bytes apart in the decoder's memory, so the address is mixed before it is cut. */
size_t rs_tm_addr_slot(const void *v, size_t size);

uint32_t rs_tm_ptr_get(const ptr_cache *c, const void *v);

void rs_tm_ptr_put(ptr_cache *c, const void *v, uint32_t val);

/* An empty cache, cleared by a write: memory calloc leaves to the kernel would be read before it
 * is written, which maps the zero page and then copies it with a TLB flush on every core. */
ptr_cache *rs_tm_ptr_cache_new(void);

/* "NAME: offset N: segments[3].blocks[0].state: MESSAGE". */
ranksnap_status rs_tm_bad(const mapper *m, const rs_pickle_value *at, const loc *l, const char *field,
                           const char *fmt, ...) RS_PRINTF(5, 6);

ranksnap_status rs_tm_no_memory(const mapper *m, const char *what);

/* val_u64 for all but a small int: absent, wide, negative or not an int. */
ranksnap_status rs_tm_val_u64_rest(const mapper *m, const rs_pickle_value *v,
                                    const rs_pickle_value *dict, const char *key, const loc *l,
                                    int required, uint64_t *out);

/* An optional list: NULL when absent (or None, which PyTorch writes for "no frames"). */
ranksnap_status rs_tm_val_list(const mapper *m, const rs_pickle_value *v, const char *key,
                                const loc *l, const rs_pickle_value **out);

ranksnap_status rs_tm_read_fields(mapper *m, const rs_pickle_value *dict, const loc *l, fields *f);

ranksnap_status rs_tm_f_str(const mapper *m, const fields *f, int id, const loc *l,
                             const rs_pickle_value **out);

ranksnap_status rs_tm_f_list(const mapper *m, const fields *f, int id, const loc *l,
                              const rs_pickle_value **out);

char *rs_tm_copy_str(const rs_pickle_value *v, const char *fallback);

/* Names, stream handles and frame indexes come from the file: seeded hashes (addr_hash.h). */
uint64_t rs_tm_mix(const mapper *m, uint64_t x);

/* Grows a table of `elem` bytes each to hold `need` entries. */
int rs_tm_grow(void **p, size_t *cap, size_t need, size_t elem);

/* A non-negative integer; `*out` keeps its default when absent and not required. Inline for the
 * small ints of nearly every field of every trace entry. */
static inline ranksnap_status val_u64(const mapper *m, const rs_pickle_value *v,
                                      const rs_pickle_value *dict, const char *key, const loc *l,
                                      int required, uint64_t *out)
{
    if (v && v->kind == RS_PICKLE_INT && !v->is_u64 && v->v.i >= 0) {
        *out = (uint64_t)v->v.i;
        return RANKSNAP_OK;
    }
    return rs_tm_val_u64_rest(m, v, dict, key, l, required, out);
}

static inline const rs_pickle_value *field_of(const fields *f, int id)
{
    return f->present >> id & 1 ? f->v[id] : NULL;
}

static inline ranksnap_status f_u64(const mapper *m, const fields *f, int id, const loc *l,
                                    int required, uint64_t *out)
{
    return val_u64(m, field_of(f, id), f->dict, rs_torch_field_name(id), l, required, out);
}

#endif
