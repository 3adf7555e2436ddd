/*
 * torch_decode.c — maps PyTorch's memory snapshot (the dict torch.cuda.memory._dump_snapshot
 * pickles) onto rs_snap, the model the comparison and the reports read.
 *
 * The pickle is decoded by pickle.c into a value tree; this file walks the fixed shape PyTorch
 * writes (docs/PYTORCH.md has the field by field mapping) and checks the type of every field it
 * reads, naming the field and the byte offset of the value when one is wrong. Fields it does not
 * use (segment_pool_id, is_expandable, compile_context, user_metadata, external_annotations,
 * most of allocator_settings) are not looked at, so newer PyTorch versions that add fields still
 * read. Trace actions it does not know are skipped rather than refused, for the same reason.
 *
 * What PyTorch does not record is derived: frames are interned into the frame and stack tables
 * (the trace repeats the same stacks thousands of times); the totals come from the final state
 * (current values) and a replay of the trace (peaks, the levels at the OOM); the rank comes from
 * the caller; and training steps are inferred from the repeating allocation pattern
 * (steps_infer.c). The snapshot is marked so that sites skip torch's and Python's own frames.
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

/* PyTorch's CUDACachingAllocator constants (c10/cuda/CUDACachingAllocator.cpp), which a
 * snapshot does not carry: the replay rounds trace sizes with the first. */
#define TORCH_MIN_BLOCK 512u
#define TORCH_SMALL_SIZE ((uint64_t)1 << 20)
#define TORCH_SMALL_BUFFER ((uint64_t)2 << 20)
#define TORCH_LARGE_BUFFER ((uint64_t)20 << 20)
#define TORCH_MIN_LARGE_ALLOC ((uint64_t)10 << 20)
#define TORCH_ROUND_LARGE ((uint64_t)2 << 20)

void rs_torch_opts_default(rs_torch_opts *o)
{
    o->rank = 0;
    o->device = -1;
    o->infer_steps = 1;
    o->stream = 1;
    o->read_entries = 1;
    o->read_count = NULL;
}

int rs_torch_is_pickle(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    return len >= 2 && p[0] == 0x80 && p[1] >= 2 && p[1] <= 5;
}

/* ---- where in the snapshot: "device_traces[0][12].frames[3]" -------------------------------- */

#define LOC_DEPTH 8

/* A chain of (name, index) on the C stack, built as the walk descends (three stores per level)
 * and turned into text only for an error message. */
typedef struct loc {
    const struct loc *up;
    const char *part; /* "segments", ".blocks", "" (an index right after an index) */
    size_t idx;
} loc;

static loc loc_down(const loc *up, const char *part, size_t idx)
{
    return (loc){up, part, idx};
}

/* Identity caches: PyTorch's pickles share (memoize) strings, frame dicts and frame lists, and
 * the tree is immutable once decoded, so a value already seen maps to the same frame or stack
 * without hashing its text again. Keys are (pointer, pointer, number); values index + 1. */
typedef struct idcache {
    uintptr_t *a, *b;
    int64_t *c;
    uint32_t *val; /* 0 = empty */
    size_t mask, n;
    uint64_t seed; /* the process's (addr_hash.h), read once */
} idcache;

static size_t idcache_slot(const idcache *t, uintptr_t a, uintptr_t b, int64_t c)
{
    /* seeded (addr_hash.h): the file chooses `c`, a line number, and any fixed mix of it can be
     * aimed at. `a` and `b` are this process's addresses; for one (a, b) the finalisers are
     * bijections, so distinct lines never share a hash and the seed hides which slot they get. */
    return rs_addr_hash(a ^ rs_addr_hash(b * 0x9e3779b97f4a7c15ull ^ (uint64_t)c, t->seed), t->seed) &
           t->mask;
}

/* The cached value, 0 when absent. */
static uint32_t idcache_get(const idcache *t, uintptr_t a, uintptr_t b, int64_t c)
{
    if (!t->mask) return 0;
    for (size_t i = idcache_slot(t, a, b, c); t->val[i]; i = (i + 1) & t->mask)
        if (t->a[i] == a && t->b[i] == b && t->c[i] == c) return t->val[i];
    return 0;
}

static void idcache_free(idcache *t)
{
    free(t->a);
    free(t->b);
    free(t->c);
    free(t->val);
}

/* -1 when out of memory (the cache is only a shortcut: callers go on without it). */
static int idcache_put(idcache *t, uintptr_t a, uintptr_t b, int64_t c, uint32_t val)
{
    if (t->mask == 0 || 2 * (t->n + 1) > t->mask + 1) {
        idcache g = {NULL, NULL, NULL, NULL, t->mask ? 2 * t->mask + 1 : 255, 0, rs_addr_hash_seed()};
        g.a = malloc((g.mask + 1) * sizeof *g.a);
        g.b = malloc((g.mask + 1) * sizeof *g.b);
        g.c = malloc((g.mask + 1) * sizeof *g.c);
        g.val = calloc(g.mask + 1, sizeof *g.val);
        if (!g.a || !g.b || !g.c || !g.val) {
            idcache_free(&g);
            return -1;
        }
        for (size_t i = 0; t->mask && i <= t->mask; i++)
            if (t->val[i]) (void)idcache_put(&g, t->a[i], t->b[i], t->c[i], t->val[i]);
        idcache_free(t);
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

/* The frame dicts and frames lists' item arrays last met, by address: PyTorch 2.11 shares one
 * dict per distinct frame between the entries that name it, and frames lists with the same dicts
 * share one item array in the decoder (pickle.c, shared_list). A fixed
 * table (a newer entry takes an older one's place): a miss costs only the work it would save,
 * and no input can make it grow. */
#define PTR_CACHE 4096

typedef struct ptr_cache {
    const void *key[PTR_CACHE]; /* a value, or a list's item array */
    uint32_t val[PTR_CACHE]; /* 0 = none */
} ptr_cache;

/* A slot of a cache of `size` entries (a power of two) for the value at `v`: values sit 32
 * bytes apart in the decoder's memory, so the address is mixed before it is cut. */
static size_t addr_slot(const void *v, size_t size)
{
    return (size_t)(((uintptr_t)v * 0x9e3779b97f4a7c15ull) >> 40) & (size - 1);
}

static size_t ptr_slot(const void *v)
{
    return addr_slot(v, PTR_CACHE);
}

static uint32_t ptr_get(const ptr_cache *c, const void *v)
{
    size_t i = ptr_slot(v);
    return c->key[i] == v ? c->val[i] : 0;
}

static void ptr_put(ptr_cache *c, const void *v, uint32_t val)
{
    size_t i = ptr_slot(v);
    c->key[i] = v;
    c->val[i] = val;
}

/* An empty cache, cleared by a write: memory calloc leaves to the kernel would be read before it
 * is written, which maps the zero page and then copies it with a TLB flush on every core. */
static ptr_cache *ptr_cache_new(void)
{
    ptr_cache *c = malloc(sizeof *c);
    if (c) memset(c, 0, sizeof *c);
    return c;
}

/* Key and action strings remembered by address (powers of two). */
#define KEY_CACHE 256
#define ACTION_CACHE 64

/* PyTorch's dicts have 3 to 12 keys; a dict of a segment, block, trace entry or frame with more
 * than this is refused, so that a pickle that repeats one huge dict through its memo cannot make
 * the reader's work grow with the product of the two. */
#define MAX_KEYS 64

typedef struct mapper {
    const char *name;
    size_t len;        /* of the pickle, for the streamed lists' guess (streamed_want) */
    rs_snap *s;
    /* frames: (function, file, line) -> index */
    size_t *frame_slot; /* index + 1, 0 = empty */
    uint64_t *frame_hash;
    size_t frame_mask, frames_cap;
    /* stacks: frame index sequence -> id */
    uint32_t *stack_slot; /* id, 0 = empty */
    uint64_t *stack_hash;
    size_t stack_mask, stacks_cap;
    uint64_t seed;     /* the process's hash seed (addr_hash.h), read once */
    idcache frame_ids; /* (name str, filename str, line) -> index + 1 */
    ptr_cache *frame_dicts; /* frame dict -> index + 1 */
    /* frames list item arrays -> stack id: a list met again, or one whose array pickle.c shares
     * with an earlier list of the same frame dicts (3,986 lists of 123 contents in a real trace) */
    ptr_cache *stack_items;
    uint32_t *scratch; /* the frames of the stack being built */
    size_t scratch_cap;
    /* streams: handle -> index */
    uint64_t *stream_key;
    uint32_t *stream_slot; /* index + 1, 0 = empty */
    size_t stream_mask, streams_cap;
    uint64_t last_handle; /* stream_index's last answer, */
    uint32_t last_stream; /* its index + 1 (0: none yet) */
    size_t hist_cap;
    const rs_pickle_value *key_ptr[KEY_CACHE]; /* key_id's cache */
    uint8_t key_id[KEY_CACHE];
    /* the keys of the dict read last, and their ids: PyTorch's entries (and its frames, blocks)
     * repeat one dict's memoized key strings in one order */
    const rs_pickle_value *shape_key[MAX_KEYS];
    uint8_t shape_id[MAX_KEYS];
    uint32_t shape_present; /* the fields the shape has (struct fields) */
    size_t shape_n;
    idcache seen;        /* segment and block dicts mapped: (dict, 0, 1) -> 1 */
    const rs_pickle_value *action_ptr[ACTION_CACHE]; /* action_of's cache */
    int action_code[ACTION_CACHE];
    struct streamed *streamed; /* device_traces' lists as the pickle streamed them */
    size_t n_streamed, streamed_cap;
    size_t last_streamed;      /* the one an entry went to last */
    rs_torch_trace *trace;     /* what the entries read from their bytes learnt (NULL: none) */
    size_t n_read;             /* entries read from their bytes */
} mapper;

static ranksnap_status bad(const mapper *m, const rs_pickle_value *at, const loc *l, const char *field,
                           const char *fmt, ...) RS_PRINTF(5, 6);

/* "NAME: offset N: segments[3].blocks[0].state: MESSAGE". */
static ranksnap_status bad(const mapper *m, const rs_pickle_value *at, const loc *l, const char *field,
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

static ranksnap_status no_memory(const mapper *m, const char *what)
{
    return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory for %s", m->name, what);
}

/* ---- typed field access -------------------------------------------------------------------- */

static ranksnap_status expect_kind(const mapper *m, const rs_pickle_value *v, rs_pickle_kind kind,
                                   const loc *l, const char *field)
{
    if (v->kind == kind) return RANKSNAP_OK;
    return bad(m, v, l, field, "expected %s, found %s", rs_pickle_kind_name(kind), rs_pickle_kind_name(v->kind));
}

/* The value checks, on a field's value `v` (NULL when the dict has no `key`). */

/* val_u64 for all but a small int: absent, wide, negative or not an int. */
static ranksnap_status val_u64_rest(const mapper *m, const rs_pickle_value *v,
                                    const rs_pickle_value *dict, const char *key, const loc *l,
                                    int required, uint64_t *out)
{
    if (!v) {
        if (required) return bad(m, dict, l, key, "missing (PyTorch always writes it)");
        return RANKSNAP_OK;
    }
    if (rs_pickle_get_u64(v, out) == 0) return RANKSNAP_OK;
    if (v->kind == RS_PICKLE_INT) return bad(m, v, l, key, "expected a non-negative integer, found %lld",
                                      (long long)v->v.i);
    if (v->kind == RS_PICKLE_BIGINT)
        return bad(m, v, l, key, "expected an integer of at most 64 bits, found a wider one");
    return bad(m, v, l, key, "expected an int, found %s", rs_pickle_kind_name(v->kind));
}

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
    return val_u64_rest(m, v, dict, key, l, required, out);
}

/* An optional str: NULL when absent. */
static ranksnap_status val_str(const mapper *m, const rs_pickle_value *v, const char *key,
                               const loc *l, const rs_pickle_value **out)
{
    *out = v;
    if (v && v->kind != RS_PICKLE_STR)
        return bad(m, v, l, key, "expected a str, found %s", rs_pickle_kind_name(v->kind));
    return RANKSNAP_OK;
}

/* An optional list: NULL when absent (or None, which PyTorch writes for "no frames"). */
static ranksnap_status val_list(const mapper *m, const rs_pickle_value *v, const char *key,
                                const loc *l, const rs_pickle_value **out)
{
    *out = v && v->kind != RS_PICKLE_NONE ? v : NULL;
    if (*out && (*out)->kind != RS_PICKLE_LIST && (*out)->kind != RS_PICKLE_TUPLE)
        return bad(m, *out, l, key, "expected a list, found %s", rs_pickle_kind_name((*out)->kind));
    return RANKSNAP_OK;
}

/* ---- the dicts PyTorch writes, read in one pass over their keys ------------------------------ */

/* A dict's values by key, last one winning as in Python; v[F_OTHER] is unused. v[id] holds a
 * value only where `present` has bit id (field_of): cleared by one store, not by zeroing the
 * array, which a trace entry would pay for every time. */
typedef struct fields {
    const rs_pickle_value *dict;
    uint32_t present;
    const rs_pickle_value *v[F_COUNT_];
} fields;

_Static_assert(F_COUNT_ <= 32, "struct fields keeps which are there in 32 bits");

static inline const rs_pickle_value *field_of(const fields *f, int id)
{
    return f->present >> id & 1 ? f->v[id] : NULL;
}

/* Which key a str is: PyTorch memoizes its key strings, so each distinct value is compared with
 * the names once and then found by its address (a small cache; a miss only costs a compare). */
static int key_id(mapper *m, const rs_pickle_value *k)
{
    if (k->kind != RS_PICKLE_STR) return F_OTHER;
    size_t h = addr_slot(k, KEY_CACHE);
    if (m->key_ptr[h] == k) return m->key_id[h];
    int id = rs_torch_field(k->v.str.p, k->v.str.n);
    m->key_ptr[h] = rs_pickle_lasting(k) ? k : NULL; /* a batch's str: its address is reused */
    m->key_id[h] = (uint8_t)id;
    return id;
}

static ranksnap_status read_fields(mapper *m, const rs_pickle_value *dict, const loc *l, fields *f)
{
    /* set on every path, failures too: what GCC inlines with the decoders' profile (pgo.cmake)
     * it cannot always follow to the caller's check of the status */
    f->dict = dict;
    f->present = 0;
    RS_CHECK(expect_kind(m, dict, RS_PICKLE_DICT, l, NULL));
    size_t n = rs_pickle_len(dict);
    if (n > MAX_KEYS)
        return bad(m, dict, l, NULL, "a dict of %zu keys, expected at most %d (PyTorch writes 3 to 12)",
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

static inline ranksnap_status f_u64(const mapper *m, const fields *f, int id, const loc *l,
                                    int required, uint64_t *out)
{
    return val_u64(m, field_of(f, id), f->dict, rs_torch_field_name(id), l, required, out);
}

static ranksnap_status f_str(const mapper *m, const fields *f, int id, const loc *l,
                             const rs_pickle_value **out)
{
    return val_str(m, field_of(f, id), rs_torch_field_name(id), l, out);
}

static ranksnap_status f_list(const mapper *m, const fields *f, int id, const loc *l,
                              const rs_pickle_value **out)
{
    return val_list(m, field_of(f, id), rs_torch_field_name(id), l, out);
}

static char *copy_str(const rs_pickle_value *v, const char *fallback)
{
    const char *p = v ? v->v.str.p : fallback;
    size_t n = v ? v->v.str.n : strlen(fallback);
    char *s = malloc(n + 1);
    if (!s) return NULL;
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

/* Names, stream handles and frame indexes come from the file: seeded hashes (addr_hash.h). */
static uint64_t mix(const mapper *m, uint64_t x)
{
    return rs_addr_hash(x, m->seed);
}

/* Grows a table of `elem` bytes each to hold `need` entries. */
static int grow(void **p, size_t *cap, size_t need, size_t elem)
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

/* ---- streams ------------------------------------------------------------------------------- */

static ranksnap_status stream_index_find(mapper *m, uint64_t handle, uint32_t *out);

/* The index of a stream handle, the one asked last answered at once (a trace is mostly one). */
static ranksnap_status stream_index(mapper *m, uint64_t handle, uint32_t *out)
{
    if (m->last_stream && handle == m->last_handle) {
        *out = m->last_stream - 1;
        return RANKSNAP_OK;
    }
    RS_CHECK(stream_index_find(m, handle, out));
    m->last_handle = handle;
    m->last_stream = *out + 1;
    return RANKSNAP_OK;
}

static ranksnap_status stream_index_find(mapper *m, uint64_t handle, uint32_t *out)
{
    rs_snap *s = m->s;
    if (2 * (s->n_streams + 1) > m->stream_mask + 1) {
        size_t cap = m->stream_mask ? 2 * (m->stream_mask + 1) : 16;
        uint64_t *key = malloc(cap * sizeof *key);
        uint32_t *slot = calloc(cap, sizeof *slot);
        if (!key || !slot) {
            free(key);
            free(slot);
            return no_memory(m, "the stream table");
        }
        for (size_t i = 0; i < s->n_streams; i++) {
            size_t j = mix(m, s->streams[i]) & (cap - 1);
            while (slot[j]) j = (j + 1) & (cap - 1);
            key[j] = s->streams[i];
            slot[j] = (uint32_t)i + 1;
        }
        free(m->stream_key);
        free(m->stream_slot);
        m->stream_key = key;
        m->stream_slot = slot;
        m->stream_mask = cap - 1;
    }
    size_t j = mix(m, handle) & m->stream_mask;
    while (m->stream_slot[j]) {
        if (m->stream_key[j] == handle) {
            *out = m->stream_slot[j] - 1;
            return RANKSNAP_OK;
        }
        j = (j + 1) & m->stream_mask;
    }
    if (s->n_streams >= UINT32_MAX - 1 ||
        grow((void **)&s->streams, &m->streams_cap, s->n_streams + 1, sizeof *s->streams) != 0)
        return no_memory(m, "the stream table");
    m->stream_key[j] = handle;
    m->stream_slot[j] = (uint32_t)s->n_streams + 1;
    s->streams[s->n_streams] = handle;
    *out = (uint32_t)s->n_streams++;
    return RANKSNAP_OK;
}

/* The stream field of a segment or trace entry (0 when absent, as PyTorch's default stream).
 * PyTorch writes the cudaStream_t as an int64_t: a negative one is a handle all the same. */
static ranksnap_status f_stream_handle(const mapper *m, const fields *f, const loc *l,
                                       uint64_t *handle)
{
    int64_t signed_handle;
    const rs_pickle_value *v = field_of(f, F_STREAM);
    *handle = 0;
    if (v && rs_pickle_get_i64(v, &signed_handle) == 0) {
        *handle = (uint64_t)signed_handle;
        return RANKSNAP_OK;
    }
    return f_u64(m, f, F_STREAM, l, 0, handle);
}

static ranksnap_status f_stream(mapper *m, const fields *f, const loc *l, uint32_t *out)
{
    uint64_t handle = 0;
    RS_CHECK(f_stream_handle(m, f, l, &handle));
    return stream_index(m, handle, out);
}

/* ---- frames and stacks --------------------------------------------------------------------- */

static int frame_equal(const rs_snap_frame *f, const rs_pickle_value *name, const rs_pickle_value *file,
                       int32_t line)
{
    const char *n = name ? name->v.str.p : "??", *p = file ? file->v.str.p : "??";
    size_t nn = name ? name->v.str.n : 2, pn = file ? file->v.str.n : 2;
    return f->line == line && strlen(f->function) == nn && memcmp(f->function, n, nn) == 0 &&
           strlen(f->file) == pn && memcmp(f->file, p, pn) == 0;
}

/* The frame index of a frame dict not in the frame_dicts cache (stack_id looks there first):
 * by its (name, filename, line) strings' addresses, else by their text. */
static ranksnap_status frame_index(mapper *m, const rs_pickle_value *frame, const loc *l,
                                   uint32_t *out)
{
    rs_snap *s = m->s;
    fields fd;
    RS_CHECK(read_fields(m, frame, l, &fd));
    const rs_pickle_value *name, *file;
    uint64_t h;
    int64_t line = 0;
    RS_CHECK(f_str(m, &fd, F_NAME, l, &name));
    RS_CHECK(f_str(m, &fd, F_FILENAME, l, &file));
    const rs_pickle_value *lv = field_of(&fd, F_LINE);
    if (lv && rs_pickle_get_i64(lv, &line) != 0)
        return bad(m, lv, l, "line", "expected an int, found %s", rs_pickle_kind_name(lv->kind));
    int32_t line32 = line < 0 ? 0 : line > INT32_MAX ? INT32_MAX : (int32_t)line;
    uint32_t hit = idcache_get(&m->frame_ids, (uintptr_t)name, (uintptr_t)file, line32);
    if (hit) {
        *out = hit - 1;
        ptr_put(m->frame_dicts, frame, hit);
        return RANKSNAP_OK;
    }
    const rs_pickle_value *name_v = name, *file_v = file;
    /* A NUL inside a name ends the C string the frame table keeps: hash and compare that. */
    size_t nn = name ? strnlen(name->v.str.p, name->v.str.n) : 2;
    size_t fn = file ? strnlen(file->v.str.p, file->v.str.n) : 2;
    rs_pickle_value nv, fv;
    if (name) {
        nv = *name;
        nv.v.str.n = nn;
        name = &nv;
    }
    if (file) {
        fv = *file;
        fv.v.str.n = fn;
        file = &fv;
    }
    const uint64_t text = rs_snap_frame_text_hash(name ? name->v.str.p : "??", nn,
                                                  file ? file->v.str.p : "??", fn);
    h = mix(m, text ^ (uint64_t)(uint32_t)line32);

    if (2 * (s->n_frames + 1) > m->frame_mask + 1) {
        size_t cap = m->frame_mask ? 2 * (m->frame_mask + 1) : 256;
        size_t *slot = calloc(cap, sizeof *slot);
        uint64_t *hash = malloc(cap * sizeof *hash);
        if (!slot || !hash) {
            free(slot);
            free(hash);
            return no_memory(m, "the frame table");
        }
        for (size_t i = 0; m->frame_mask && i <= m->frame_mask; i++) {
            if (!m->frame_slot[i]) continue;
            size_t j = m->frame_hash[i] & (cap - 1);
            while (slot[j]) j = (j + 1) & (cap - 1);
            slot[j] = m->frame_slot[i];
            hash[j] = m->frame_hash[i];
        }
        free(m->frame_slot);
        free(m->frame_hash);
        m->frame_slot = slot;
        m->frame_hash = hash;
        m->frame_mask = cap - 1;
    }
    size_t j = h & m->frame_mask;
    while (m->frame_slot[j]) {
        if (m->frame_hash[j] == h &&
            frame_equal(&s->frames[m->frame_slot[j] - 1], name, file, line32)) {
            *out = (uint32_t)(m->frame_slot[j] - 1);
            goto cache;
        }
        j = (j + 1) & m->frame_mask;
    }
    if (s->n_frames >= UINT32_MAX - 1 ||
        grow((void **)&s->frames, &m->frames_cap, s->n_frames + 1, sizeof *s->frames) != 0)
        return no_memory(m, "the frame table");
    rs_snap_frame *f = &s->frames[s->n_frames];
    memset(f, 0, sizeof *f);
    f->module = -1;
    f->line = line32;
    f->text_hash = text;
    f->function = copy_str(name, "??");
    f->file = copy_str(file, "??");
    s->n_frames++; /* counted now so that rs_snap_free frees the strings on every path */
    if (!f->function || !f->file) return no_memory(m, "a frame's strings");
    m->frame_slot[j] = s->n_frames;
    m->frame_hash[j] = h;
    *out = (uint32_t)(s->n_frames - 1);
cache:
    (void)idcache_put(&m->frame_ids, (uintptr_t)name_v, (uintptr_t)file_v, line32, *out + 1);
    ptr_put(m->frame_dicts, frame, *out + 1);
    return RANKSNAP_OK;
}

/* Seeded hash of a stack's n frame indexes, in four chains of the mixer joined at the end: one
 * chain costs the mixer's latency per frame, four overlap (stacks are 30-40 frames with
 * stacks="all"). */
static uint64_t hash_frames(const mapper *m, const uint32_t *w, size_t n)
{
    uint64_t l0 = 0x84222325cbf29ce4ull, l1 = 0x9e3779b97f4a7c15ull, l2 = 0xc2b2ae3d27d4eb4full,
             l3 = 0x165667b19e3779f9ull;
    size_t f = 0;
    for (; f + 4 <= n; f += 4) {
        l0 = mix(m, l0 ^ w[f]) + f;
        l1 = mix(m, l1 ^ w[f + 1]) + f;
        l2 = mix(m, l2 ^ w[f + 2]) + f;
        l3 = mix(m, l3 ^ w[f + 3]) + f;
    }
    if (f < n) l0 = mix(m, l0 ^ w[f]) + f, f++;
    if (f < n) l1 = mix(m, l1 ^ w[f]) + f, f++;
    if (f < n) l2 = mix(m, l2 ^ w[f]) + f;
    return mix(m, mix(m, mix(m, mix(m, l0 ^ n) ^ l1) ^ l2) ^ l3);
}

/* The stack id of a `frames` list (innermost first, as PyTorch writes them); 0 for none. By the
 * list's item array, else frame by frame. The tree is complete when this runs (map_trace follows
 * the decode), so an array or dict met again is as it was. */
static ranksnap_status stack_id(mapper *m, const rs_pickle_value *frames, const loc *l, uint32_t *out)
{
    rs_snap *s = m->s;
    *out = 0;
    size_t n = rs_pickle_len(frames);
    if (!frames || n == 0) return RANKSNAP_OK;
    /* the same item array (the same list, or one the decoder shares) holds the same frames */
    const void *items = frames->v.seq.items;
    uint32_t hit = ptr_get(m->stack_items, items);
    if (hit && s->stacks[hit - 1].n_frames == n) {
        *out = hit;
        return RANKSNAP_OK;
    }
    if (grow((void **)&m->scratch, &m->scratch_cap, n, sizeof *m->scratch) != 0)
        return no_memory(m, "a stack");
    for (size_t i = 0; i < n; i++) {
        loc fl = loc_down(l, ".frames", i);
        const rs_pickle_value *fr = frames->v.seq.items[i];
        uint32_t known = ptr_get(m->frame_dicts, fr);
        if (known)
            m->scratch[i] = known - 1;
        else
            RS_CHECK(frame_index(m, fr, &fl, &m->scratch[i]));
    }
    uint64_t h = hash_frames(m, m->scratch, n);
    if (2 * (s->n_stacks + 1) > m->stack_mask + 1) {
        size_t cap = m->stack_mask ? 2 * (m->stack_mask + 1) : 256;
        uint32_t *slot = calloc(cap, sizeof *slot);
        uint64_t *hash = malloc(cap * sizeof *hash);
        if (!slot || !hash) {
            free(slot);
            free(hash);
            return no_memory(m, "the stack table");
        }
        for (size_t i = 0; m->stack_mask && i <= m->stack_mask; i++) {
            if (!m->stack_slot[i]) continue;
            size_t j = m->stack_hash[i] & (cap - 1);
            while (slot[j]) j = (j + 1) & (cap - 1);
            slot[j] = m->stack_slot[i];
            hash[j] = m->stack_hash[i];
        }
        free(m->stack_slot);
        free(m->stack_hash);
        m->stack_slot = slot;
        m->stack_hash = hash;
        m->stack_mask = cap - 1;
    }
    size_t j = h & m->stack_mask;
    while (m->stack_slot[j]) {
        const rs_snap_stack *st = &s->stacks[m->stack_slot[j] - 1];
        if (m->stack_hash[j] == h && st->n_frames == n &&
            memcmp(st->frames, m->scratch, n * sizeof *m->scratch) == 0) {
            *out = m->stack_slot[j];
            ptr_put(m->stack_items, items, *out);
            return RANKSNAP_OK;
        }
        j = (j + 1) & m->stack_mask;
    }
    if (s->n_stacks >= UINT32_MAX - 1 ||
        grow((void **)&s->stacks, &m->stacks_cap, s->n_stacks + 1, sizeof *s->stacks) != 0)
        return no_memory(m, "the stack table");
    rs_snap_stack *st = &s->stacks[s->n_stacks];
    st->frames = malloc(n * sizeof *st->frames);
    if (!st->frames) return no_memory(m, "a stack");
    memcpy(st->frames, m->scratch, n * sizeof *st->frames);
    st->n_frames = n;
    s->n_stacks++;
    m->stack_slot[j] = (uint32_t)s->n_stacks;
    m->stack_hash[j] = h;
    *out = (uint32_t)s->n_stacks;
    ptr_put(m->stack_items, items, *out);
    return RANKSNAP_OK;
}

static ranksnap_status f_stack(mapper *m, const fields *f, const loc *l, uint32_t *out)
{
    const rs_pickle_value *frames;
    RS_CHECK(f_list(m, f, F_FRAMES, l, &frames));
    return stack_id(m, frames, l, out);
}

/* Segment and block dicts are PyTorch's own, one per segment and block: one met twice (a pickle
 * repeating it through its memo, [S] * N) would make the model N times what the input holds. */
static ranksnap_status once(mapper *m, const rs_pickle_value *dict, const loc *l, const char *what)
{
    uint32_t first = idcache_get(&m->seen, (uintptr_t)dict, 0, 1);
    if (first)
        return bad(m, dict, l, NULL, "the same %s dict as one before it (a memo reference): "
                                     "PyTorch writes each %s once", what, what);
    if (idcache_put(&m->seen, (uintptr_t)dict, 0, 1, 1) != 0) return no_memory(m, "the segments");
    return RANKSNAP_OK;
}

/* ---- segments ------------------------------------------------------------------------------ */

static int cmp_block(const void *pa, const void *pb)
{
    const rs_snap_block *a = pa, *b = pb;
    return (a->addr > b->addr) - (a->addr < b->addr);
}

static int cmp_segment(const void *pa, const void *pb)
{
    const rs_snap_segment *a = pa, *b = pb;
    return (a->addr > b->addr) - (a->addr < b->addr);
}

static ranksnap_status block_state(const mapper *m, const fields *f, const loc *l, uint8_t *state)
{
    const rs_pickle_value *v;
    RS_CHECK(f_str(m, f, F_STATE, l, &v));
    if (!v) return bad(m, f->dict, l, "state", "missing (PyTorch always writes it)");
    for (unsigned i = 0; i < RS_BLOCK_STATE_COUNT_; i++)
        if (rs_pickle_str_is(v, rs_block_state_name(i))) {
            *state = (uint8_t)i;
            return RANKSNAP_OK;
        }
    /* What PyTorch's C++ writes (torch/csrc/cuda/Module.cpp) for a block freed while another
     * stream still uses it; its docstrings say active_awaiting_free. */
    if (rs_pickle_str_is(v, "active_pending_free")) {
        *state = RS_BLOCK_ACTIVE_AWAITING_FREE;
        return RANKSNAP_OK;
    }
    return bad(m, v, l, "state",
               "expected active_allocated, active_pending_free (or active_awaiting_free) or "
               "inactive");
}

static ranksnap_status map_segment(mapper *m, const rs_pickle_value *seg, const loc *l, rs_snap_segment *g)
{
    fields f;
    RS_CHECK(read_fields(m, seg, l, &f));
    RS_CHECK(once(m, seg, l, "segment"));
    RS_CHECK(f_u64(m, &f, F_ADDRESS, l, 1, &g->addr));
    RS_CHECK(f_u64(m, &f, F_TOTAL_SIZE, l, 1, &g->total_size));
    RS_CHECK(f_stream(m, &f, l, &g->stream));
    RS_CHECK(f_stack(m, &f, l, &g->stack));
    const rs_pickle_value *type, *blocks;
    RS_CHECK(f_str(m, &f, F_SEGMENT_TYPE, l, &type));
    g->is_small = type ? rs_pickle_str_is(type, "small") : g->total_size <= TORCH_SMALL_BUFFER;
    RS_CHECK(f_list(m, &f, F_BLOCKS, l, &blocks));
    size_t n = rs_pickle_len(blocks);
    g->blocks = calloc(n ? n : 1, sizeof *g->blocks);
    if (!g->blocks) return no_memory(m, "the blocks of a segment");
    uint64_t offset = g->addr, allocated = 0, active = 0, requested = 0;
    int sorted = 1;
    for (size_t i = 0; i < n; i++) {
        loc bl = loc_down(l, ".blocks", i);
        const rs_pickle_value *blk = rs_pickle_item(blocks, i);
        rs_snap_block *b = &g->blocks[i];
        fields bf;
        RS_CHECK(read_fields(m, blk, &bl, &bf));
        RS_CHECK(once(m, blk, &bl, "block"));
        /* PyTorch before 2.1 wrote no block address: blocks tile the segment in order. */
        b->addr = offset;
        RS_CHECK(f_u64(m, &bf, F_ADDRESS, &bl, 0, &b->addr));
        RS_CHECK(f_u64(m, &bf, F_SIZE, &bl, 1, &b->size));
        b->requested_size = b->size;
        RS_CHECK(f_u64(m, &bf, F_REQUESTED_SIZE, &bl, 0, &b->requested_size));
        RS_CHECK(block_state(m, &bf, &bl, &b->state));
        RS_CHECK(f_stack(m, &bf, &bl, &b->stack));
        offset = b->addr + b->size;
        if (i > 0 && b->addr < g->blocks[i - 1].addr) sorted = 0;
        if (b->state == RS_BLOCK_ACTIVE_ALLOCATED) {
            allocated += b->size;
            requested += b->requested_size;
        }
        if (b->state != RS_BLOCK_INACTIVE) active += b->size;
        g->n_blocks++;
    }
    if (!sorted) qsort(g->blocks, g->n_blocks, sizeof *g->blocks, cmp_block);
    g->allocated_size = allocated;
    g->active_size = active;
    g->requested_size = requested;
    RS_CHECK(f_u64(m, &f, F_ALLOCATED_SIZE, l, 0, &g->allocated_size));
    RS_CHECK(f_u64(m, &f, F_ACTIVE_SIZE, l, 0, &g->active_size));
    RS_CHECK(f_u64(m, &f, F_REQUESTED_SIZE, l, 0, &g->requested_size));
    return RANKSNAP_OK;
}

/* Devices told apart when choosing the majority; a process sees a handful. */
#define MAX_DEVICES 256

/* A segment's device (0 when absent), checked. */
static ranksnap_status device_of(mapper *m, const rs_pickle_value *seg, const loc *l, int64_t *dev)
{
    fields f;
    uint64_t d = 0;
    RS_CHECK(read_fields(m, seg, l, &f));
    RS_CHECK(f_u64(m, &f, F_DEVICE, l, 0, &d));
    *dev = d > INT32_MAX ? INT32_MAX : (int64_t)d;
    return RANKSNAP_OK;
}

/* The device most segments are on (the lowest of a tie), -1 when there are none. */
static ranksnap_status majority_device(mapper *m, const rs_pickle_value *segments, int64_t *out)
{
    int64_t dev[MAX_DEVICES];
    size_t count[MAX_DEVICES], n_dev = 0;
    *out = -1;
    for (size_t i = 0; i < rs_pickle_len(segments); i++) {
        loc l = loc_down(NULL, "segments", i);
        int64_t d = 0;
        RS_CHECK(device_of(m, rs_pickle_item(segments, i), &l, &d));
        size_t k = 0;
        while (k < n_dev && dev[k] != d) k++;
        if (k == n_dev) {
            if (n_dev == MAX_DEVICES) continue;
            dev[n_dev] = d;
            count[n_dev++] = 0;
        }
        count[k]++;
    }
    for (size_t k = 0; k < n_dev; k++)
        if (*out < 0 || count[k] > count[(size_t)*out] ||
            (count[k] == count[(size_t)*out] && dev[k] < dev[(size_t)*out]))
            *out = (int64_t)k;
    if (*out >= 0) *out = dev[(size_t)*out];
    return RANKSNAP_OK;
}

static ranksnap_status map_segments(mapper *m, const rs_pickle_value *segments, int64_t device)
{
    rs_snap *s = m->s;
    size_t n = rs_pickle_len(segments);
    s->segments = calloc(n ? n : 1, sizeof *s->segments);
    if (!s->segments) return no_memory(m, "the segments");
    for (size_t i = 0; i < n; i++) {
        loc l = loc_down(NULL, "segments", i);
        const rs_pickle_value *seg = rs_pickle_item(segments, i);
        int64_t d = 0;
        RS_CHECK(device_of(m, seg, &l, &d));
        if (d != device) continue;
        s->n_segments++; /* before filling: rs_snap_free frees its blocks on every path */
        RS_CHECK(map_segment(m, seg, &l, &s->segments[s->n_segments - 1]));
    }
    qsort(s->segments, s->n_segments, sizeof *s->segments, cmp_segment);
    return RANKSNAP_OK;
}

/* ---- the trace ----------------------------------------------------------------------------- */

/* rs_torch_action of a str, remembering the last few action strings by address (PyTorch memoizes
 * them). */
static int action_of(mapper *m, const rs_pickle_value *v)
{
    size_t h = addr_slot(v, ACTION_CACHE);
    if (m->action_ptr[h] == v) return m->action_code[h];
    m->action_ptr[h] = rs_pickle_lasting(v) ? v : NULL; /* a batch's str: its address is reused */
    return m->action_code[h] = rs_torch_action(v->v.str.p, v->v.str.n);
}

/* The six columns of a history, or of a streamed list before it becomes one: where each array
 * is and the size of its elements, grown together (doubling from 1,024) or not at all. */
typedef struct column {
    void **p;
    size_t size;
} column;

#define N_COLUMNS 6

static ranksnap_status columns_grow(mapper *m, const column *c, size_t *cap, size_t need,
                                    const char *what)
{
    if (need <= *cap) return RANKSNAP_OK;
    size_t n = *cap ? 2 * *cap : 1024;
    while (n < need) n *= 2;
    for (size_t i = 0; i < N_COLUMNS; i++) {
        void *q = realloc(*c[i].p, n * c[i].size);
        if (!q) return no_memory(m, what); /* the grown ones stay as they are, and are freed */
        *c[i].p = q;
    }
    *cap = n;
    return RANKSNAP_OK;
}

static void history_columns(rs_snap_history *h, column *c)
{
    c[0] = (column){(void **)&h->time_us, sizeof *h->time_us};
    c[1] = (column){(void **)&h->addr, sizeof *h->addr};
    c[2] = (column){(void **)&h->size, sizeof *h->size};
    c[3] = (column){(void **)&h->action, sizeof *h->action};
    c[4] = (column){(void **)&h->stream, sizeof *h->stream};
    c[5] = (column){(void **)&h->stack, sizeof *h->stack};
}

static ranksnap_status history_grow(mapper *m, uint64_t need)
{
    column c[N_COLUMNS];
    history_columns(&m->s->history, c);
    return columns_grow(m, c, &m->hist_cap, need, "the history");
}

/* The fields of entry `e`, checked in the order map_trace has always checked them (an entry
 * torch_trace.c reads from its bytes comes out the same, or is left to this). */
static ranksnap_status entry_of(mapper *m, const rs_pickle_value *e, const loc *l, rs_torch_entry *r)
{
    fields f;
    RS_CHECK(read_fields(m, e, l, &f));
    const rs_pickle_value *av;
    RS_CHECK(f_str(m, &f, F_ACTION, l, &av));
    if (!av) return bad(m, f.dict, l, "action", "missing (PyTorch always writes it)");
    memset(r, 0, sizeof *r);
    r->action = action_of(m, av);
    if (r->action < 0) return RANKSNAP_OK;
    /* An oom entry keeps the device's free bytes where the others keep the address. */
    RS_CHECK(f_u64(m, &f, r->action == RS_ACT_OOM ? F_DEVICE_FREE : F_ADDR, l, 0, &r->addr));
    RS_CHECK(f_u64(m, &f, F_SIZE, l, 0, &r->size));
    RS_CHECK(f_u64(m, &f, F_TIME_US, l, 0, &r->time_us));
    RS_CHECK(f_stream_handle(m, &f, l, &r->stream));
    return f_list(m, &f, F_FRAMES, l, &r->frames);
}

/* An entry into the history: its stream and stack interned. */
static ranksnap_status append_event(mapper *m, const rs_torch_entry *r, const loc *l)
{
    rs_snap_history *h = &m->s->history;
    if (r->action < 0) return RANKSNAP_OK;
    uint64_t k = h->count;
    h->action[k] = (uint8_t)r->action;
    h->addr[k] = r->addr;
    h->size[k] = r->size;
    h->time_us[k] = r->time_us;
    RS_CHECK(stream_index(m, r->stream, &h->stream[k]));
    RS_CHECK(stack_id(m, r->frames, l, &h->stack[k]));
    h->count++;
    return RANKSNAP_OK;
}

/* The entries of one list of device_traces as the pickle streamed them (take_entries), in the
 * history's columns: when the list is the device's trace they become the history (map_trace),
 * each stream handle and frames list replaced there, in place, by its index. Entries left out
 * (action LEFT_OUT) stay until then, so that errors name entries by their place in the list. */
#define LEFT_OUT 0xff

typedef struct streamed {
    const rs_pickle_value *list;
    size_t index;
    uint64_t *time_us, *addr, *size;
    uint8_t *action;
    unsigned char *stream; /* uint64_t handles (memcpy: they become uint32_t indexes in place) */
    unsigned char *frames; /* const rs_pickle_value * (NULL: none), then uint32_t stack ids */
    size_t n, cap;
    size_t first_at;     /* the first entry's offset in the pickle */
    ranksnap_status err; /* the first entry that is wrong stops the list: its message, kept */
    char *err_msg;       /* for when (and if) this device's trace is the one read */
} streamed;

/* Its columns (columns_grow): handles and frames lists take 8 bytes an entry until they become
 * indexes of 4. */
static void streamed_columns(streamed *sd, column *c)
{
    c[0] = (column){(void **)&sd->time_us, sizeof *sd->time_us};
    c[1] = (column){(void **)&sd->addr, sizeof *sd->addr};
    c[2] = (column){(void **)&sd->size, sizeof *sd->size};
    c[3] = (column){(void **)&sd->action, sizeof *sd->action};
    c[4] = (column){(void **)&sd->stream, sizeof(uint64_t)};
    c[5] = (column){(void **)&sd->frames, sizeof(const rs_pickle_value *)};
}

static void streamed_free(streamed *sd)
{
    column c[N_COLUMNS];
    streamed_columns(sd, c);
    for (size_t i = 0; i < N_COLUMNS; i++) free(*c[i].p);
    free(sd->err_msg);
}

static ranksnap_status streamed_grow(mapper *m, streamed *sd, size_t need)
{
    column c[N_COLUMNS];
    streamed_columns(sd, c);
    return columns_grow(m, c, &sd->cap, need, "the trace");
}

/* The room the columns of `sd` are grown to for n more entries, the last of them `last`. Past
 * its first thousand entries a list's entries are judged from the bytes they took: the rest of
 * the file holds about as many again as its size says (a twentieth more, for entries of other
 * sizes), and the columns are grown once to hold that, instead of doubled on the way (each
 * doubling a copy into new memory, which a thread's first file takes from the kernel: 1,503 ->
 * 1,263 page faults for a GPT-2 pickle of 63,000 entries). Never more than an entry per
 * MIN_ENTRY bytes left; doubled again if the guess falls short, and only doubled if memory for
 * it cannot be had (take_entries). */
#define MIN_ENTRY 16

static size_t streamed_want(const mapper *m, const streamed *sd, size_t last_at, size_t n)
{
    size_t need = sd->n + n;
    if (sd->n < 1024 || sd->cap > 1024 || last_at <= sd->first_at || last_at >= m->len)
        return need;
    size_t per = (last_at - sd->first_at) / (need - 1);
    if (per < MIN_ENTRY) per = MIN_ENTRY;
    size_t more = (m->len - last_at) / per;
    return need + more + more / 20 + 64;
}

/* The streamed list of root["device_traces"][index] (`list`), NULL when out of memory. */
static streamed *streamed_of(mapper *m, const rs_pickle_value *list, size_t index)
{
    streamed *sd = m->last_streamed < m->n_streamed ? &m->streamed[m->last_streamed] : NULL;
    if (sd && sd->list == list && sd->index == index) return sd;
    for (size_t i = 0; i < m->n_streamed; i++)
        if (m->streamed[i].list == list && m->streamed[i].index == index) {
            m->last_streamed = i;
            return &m->streamed[i];
        }
    if (grow((void **)&m->streamed, &m->streamed_cap, m->n_streamed + 1, sizeof *m->streamed) != 0) {
        no_memory(m, "the traces");
        return NULL;
    }
    sd = &m->streamed[m->last_streamed = m->n_streamed++];
    memset(sd, 0, sizeof *sd);
    sd->list = list;
    sd->index = index;
    return sd;
}

/* Room in sd's columns for n more entries, the last of them at offset `last_at`. */
static ranksnap_status streamed_room(mapper *m, streamed *sd, size_t last_at, size_t n)
{
    if (sd->n + n <= sd->cap) return RANKSNAP_OK;
    size_t want = streamed_want(m, sd, last_at, n);
    if (want == sd->n + n || streamed_grow(m, sd, want) != RANKSNAP_OK)
        return streamed_grow(m, sd, sd->n + n);
    return RANKSNAP_OK;
}

/* Entry r after sd's (room made). */
static void streamed_add(streamed *sd, const rs_torch_entry *r)
{
    size_t k = sd->n++;
    sd->time_us[k] = r->time_us;
    sd->addr[k] = r->addr;
    sd->size[k] = r->size;
    sd->action[k] = r->action < 0 ? LEFT_OUT : (uint8_t)r->action;
    memcpy(sd->stream + 8 * k, &r->stream, 8);
    memcpy(sd->frames + sizeof r->frames * k, &r->frames, sizeof r->frames);
}

static ranksnap_status take_entries(void *ctx, rs_pickle_taker *t, const rs_pickle_value *list,
                                    size_t index, const rs_pickle_value *const *items, size_t n)
{
    mapper *m = ctx;
    streamed *sd = streamed_of(m, list, index);
    if (!sd) return RANKSNAP_ERR_HOST_MEMORY;
    if (sd->err != RANKSNAP_OK || n == 0) return RANKSNAP_OK;
    if (sd->n == 0) sd->first_at = items[0]->offset;
    RS_CHECK(streamed_room(m, sd, items[n - 1]->offset, n));
    loc base = loc_down(NULL, "device_traces", index);
    for (size_t i = 0; i < n; i++) {
        loc l = loc_down(&base, "", sd->n);
        rs_torch_entry r;
        ranksnap_status st = entry_of(m, items[i], &l, &r);
        if (st == RANKSNAP_ERR_HOST_MEMORY) return st;
        if (st != RANKSNAP_OK) {
            sd->err = st;
            sd->err_msg = strdup(ranksnap_last_error());
            return sd->err_msg ? RANKSNAP_OK : no_memory(m, "a message");
        }
        if (r.frames && !(r.frames = rs_pickle_keep(t, r.frames)))
            return no_memory(m, "the frames of the trace");
        streamed_add(sd, &r);
    }
    return RANKSNAP_OK;
}

/* An entry read from its bytes (torch_trace.h) into its list's columns, as take_entries puts
 * one there; 0 leaves it to the machine (and take_entries), which also says what went wrong:
 * an entry that is not read, a list already stopped by an error, no memory. */
static int read_entry(void *ctx, rs_pickle_reader *r, const rs_pickle_value *list, size_t index,
                      size_t at)
{
    mapper *m = ctx;
    streamed *sd = streamed_of(m, list, index);
    if (!sd || sd->err != RANKSNAP_OK) return 0;
    if (sd->n == 0) sd->first_at = at;
    rs_torch_entry e;
    if (streamed_room(m, sd, at, 1) != RANKSNAP_OK || !rs_torch_trace_read(m->trace, r, at, &e))
        return 0;
    streamed_add(sd, &e);
    m->n_read++;
    return 1;
}

/* The streamed list `sd` made the history: its columns moved there, the entries left out
 * dropped, handles and frames lists turned into stream and stack indexes where they are. */
static ranksnap_status adopt_streamed(mapper *m, streamed *sd, const loc *base)
{
    rs_snap_history *h = &m->s->history;
    column hc[N_COLUMNS], sc[N_COLUMNS];
    history_columns(h, hc);
    streamed_columns(sd, sc);
    /* the snapshot owns them from here, whatever fails below */
    for (size_t i = 0; i < N_COLUMNS; i++) {
        free(*hc[i].p);
        *hc[i].p = *sc[i].p;
        *sc[i].p = NULL;
    }
    h->count = 0;
    unsigned char *handles = (unsigned char *)h->stream, *lists = (unsigned char *)h->stack;
    size_t w = 0;
    for (size_t r = 0; r < sd->n; r++) {
        if (h->action[r] == LEFT_OUT) continue;
        /* entry w's four bytes are below entry r's eight: read first, then written */
        loc l = loc_down(base, "", r);
        uint64_t handle;
        const rs_pickle_value *frames;
        uint32_t stream, stack;
        memcpy(&handle, handles + 8 * r, 8);
        memcpy(&frames, lists + sizeof frames * r, sizeof frames);
        RS_CHECK(stream_index(m, handle, &stream));
        RS_CHECK(stack_id(m, frames, &l, &stack));
        memcpy(handles + 4 * w, &stream, 4);
        memcpy(lists + 4 * w, &stack, 4);
        h->time_us[w] = h->time_us[r];
        h->addr[w] = h->addr[r];
        h->size[w] = h->size[r];
        h->action[w] = h->action[r];
        h->count = ++w;
    }
    /* shrunk to what they hold (an empty history keeps arrays of one) and room for the step
     * events steps_infer.c may find (one in a hundred events at most, commonly): put there in
     * place, not in new columns, whose pages a first file would take from the kernel */
    size_t keep = w + w / 64 + 64;
    if (keep > sd->cap) keep = sd->cap;
    if (keep < 1) keep = 1;
    for (size_t i = 0; i < N_COLUMNS; i++) {
        void *p = realloc(*hc[i].p, keep * hc[i].size);
        if (p) *hc[i].p = p;
    }
    m->hist_cap = keep;
    h->room = keep;
    return RANKSNAP_OK;
}

/* The entries of device_traces[i]: its own, and those the pickle streamed from it. */
static size_t trace_len(const mapper *m, const rs_pickle_value *traces, size_t i)
{
    const rs_pickle_value *t = rs_pickle_item(traces, i);
    for (size_t k = 0; k < m->n_streamed; k++)
        if (m->streamed[k].list == t && m->streamed[k].index == i) return m->streamed[k].n + rs_pickle_len(t);
    return rs_pickle_len(t);
}

static ranksnap_status map_trace(mapper *m, const rs_pickle_value *trace, size_t device)
{
    rs_snap_history *h = &m->s->history;
    streamed *sd = NULL;
    for (size_t i = 0; i < m->n_streamed && !sd; i++)
        if (m->streamed[i].list == trace && m->streamed[i].index == device) sd = &m->streamed[i];
    loc base = loc_down(NULL, "device_traces", device);
    if (sd && rs_pickle_len(trace))
        return bad(m, trace, &base, NULL, "entries both appended as pickle.dump appends them and "
                                          "otherwise: a layout this reader does not take");
    if (sd && sd->n) {
        RS_CHECK(adopt_streamed(m, sd, &base));
    } else {
        size_t n = rs_pickle_len(trace);
        RS_CHECK(history_grow(m, n ? n : 1));
        for (size_t i = 0; i < n; i++) {
            loc l = loc_down(&base, "", i);
            rs_torch_entry r;
            RS_CHECK(entry_of(m, rs_pickle_item(trace, i), &l, &r));
            RS_CHECK(append_event(m, &r, &l));
        }
    }
    if (sd && sd->err != RANKSNAP_OK) return rs_error(sd->err, "%s", sd->err_msg);
    h->capacity = h->count;
    return RANKSNAP_OK;
}

/* The OOM record of event i, at levels `allocated` and `reserved`, in step `step`. */
static void oom_at(rs_snap *s, const rs_walk *w, uint64_t i, uint64_t allocated, uint64_t reserved,
                   int64_t step)
{
    const rs_snap_history *h = &s->history;
    s->has_oom = 1;
    s->oom.requested = h->size[i];
    s->oom.rounded = rs_walk_round(w, h->size[i]);
    s->oom.device_free = h->addr[i];
    s->oom.allocated = allocated;
    s->oom.reserved = reserved;
    s->oom.time_us = h->time_us[i];
    s->oom.stream = h->stream[i];
    s->oom.stack = h->stack[i];
    s->oom.step = step;
}

/* The peak, its time and step, and the last OOM's record, from what the walk's first pass saw
 * (its levels are exact: rs_walk_levels_exact). */
static void peaks_of_first_pass(rs_snap *s, const rs_walk *w)
{
    rs_snap_totals *t = &s->totals;
    if (w->last_oom >= 0)
        oom_at(s, w, (uint64_t)w->last_oom, w->start_allocated + (uint64_t)w->rel_allocated_at_oom,
               w->start_reserved + (uint64_t)w->rel_reserved_at_oom, w->oom_step);
    if (w->peak_event >= 0) {
        t->allocated_bytes_peak = w->peak_allocated;
        t->peak_time_us = s->history.time_us[w->peak_event];
        t->peak_step = w->peak_step;
    }
}

/* The same by walking the history: where a level stopped at 0 or at the integer range on the
 * way (a history that frees what it did not hold), the walk's levels are not its first pass's. */
static void peaks_by_walking(rs_snap *s, rs_walk *w)
{
    rs_snap_totals *t = &s->totals;
    const rs_snap_history *h = &s->history;
    int64_t step = -1;
    rs_walk_change c;
    for (uint64_t i = 0; i < h->count; i++) {
        rs_walk_event(w, &c);
        if (h->action[i] == RS_ACT_STEP) step = rs_sat_i64(h->size[i]);
        if (h->action[i] == RS_ACT_OOM) oom_at(s, w, i, w->allocated, w->reserved, step);
        if (w->allocated > t->allocated_bytes_peak) {
            t->allocated_bytes_peak = w->allocated;
            t->peak_time_us = h->time_us[i];
            t->peak_step = step;
        }
    }
}

/* Current values from the final state; peaks, their time and step, and the OOM record from the
 * one history walk (walk.h), which ends at the current values, as every reader's walk does. Trace
 * sizes are requests, rounded there as the allocator rounds blocks. */
static ranksnap_status totals(mapper *m)
{
    rs_snap *s = m->s;
    rs_snap_totals *t = &s->totals;
    const rs_snap_history *h = &s->history;
    for (size_t i = 0; i < s->n_segments; i++) {
        const rs_snap_segment *g = &s->segments[i];
        t->reserved_bytes_current = rs_sat_add_u64(t->reserved_bytes_current, g->total_size);
        for (size_t k = 0; k < g->n_blocks; k++) {
            const rs_snap_block *b = &g->blocks[k];
            if (b->state == RS_BLOCK_ACTIVE_ALLOCATED) {
                t->allocated_bytes_current = rs_sat_add_u64(t->allocated_bytes_current, b->size);
                t->requested_bytes_current =
                    rs_sat_add_u64(t->requested_bytes_current, b->requested_size);
            }
            if (b->state != RS_BLOCK_INACTIVE)
                t->active_bytes_current = rs_sat_add_u64(t->active_bytes_current, b->size);
            /* a free piece of a segment that also holds live blocks: PyTorch's inactive_split */
            if (b->state == RS_BLOCK_INACTIVE && g->n_blocks > 1)
                t->inactive_split_bytes = rs_sat_add_u64(t->inactive_split_bytes, b->size);
        }
    }
    rs_walk w;
    if (rs_walk_init(&w, s) != RANKSNAP_OK) return no_memory(m, "the walk of the trace");
    uint64_t steps = 0;
    t->allocated_bytes_peak = w.start_allocated;
    t->reserved_bytes_peak = w.peak_reserved;
    t->peak_step = -1;
    for (uint64_t i = 0; i < h->count; i++) {
        switch (h->action[i]) {
        case RS_ACT_ALLOC: t->num_allocs++; break;
        case RS_ACT_FREE_REQUESTED: t->num_frees++; break;
        case RS_ACT_SEGMENT_ALLOC: t->num_segment_allocs++; break;
        case RS_ACT_SEGMENT_FREE: t->num_segment_frees++; break;
        case RS_ACT_STEP: steps++; break;
        case RS_ACT_OOM: t->num_ooms++; break;
        }
        if (h->time_us[i] > s->time_us) s->time_us = h->time_us[i];
    }
    if (rs_walk_levels_exact(&w))
        peaks_of_first_pass(s, &w);
    else
        peaks_by_walking(s, &w);
    rs_walk_keep(&w); /* the snapshot is finished: the summary's walk starts from this one */
    if (t->active_bytes_current > t->active_bytes_peak) t->active_bytes_peak = t->active_bytes_current;
    t->requested_bytes_peak = t->requested_bytes_current;
    t->events_recorded = h->count - steps; /* PyTorch's entries, not the inferred steps */
    return RANKSNAP_OK;
}

/* ---- the document -------------------------------------------------------------------------- */

static ranksnap_status set_identity(mapper *m, const rs_torch_opts *o, int64_t device)
{
    rs_snap *s = m->s;
    s->version = RSNAP_FORMAT_VERSION;
    s->rank = o->rank;
    /* PyTorch records no world size; the rank proves at least this many. */
    s->world_size = o->rank + 1;
    s->complete = 1;
    s->pid = 0;
    s->device.index = device < 0 ? 0 : (int)device;
    s->host = copy_str(NULL, "");
    s->job = copy_str(NULL, "");
    s->backend = copy_str(NULL, "torch");
    s->device.name = copy_str(NULL, "unknown (PyTorch snapshot)");
    s->device.uuid = copy_str(NULL, "");
    s->recorder.stacks = copy_str(NULL, "torch");
    if (!s->host || !s->job || !s->backend || !s->device.name || !s->device.uuid ||
        !s->recorder.stacks)
        return no_memory(m, "the snapshot's names");
    s->allocator.min_block_size = TORCH_MIN_BLOCK;
    s->allocator.small_size = TORCH_SMALL_SIZE;
    s->allocator.small_buffer = TORCH_SMALL_BUFFER;
    s->allocator.large_buffer = TORCH_LARGE_BUFFER;
    s->allocator.min_large_alloc = TORCH_MIN_LARGE_ALLOC;
    s->allocator.round_large = TORCH_ROUND_LARGE;
    s->allocator.max_split_size = UINT64_MAX;
    s->time.current_step = -1;
    return RANKSNAP_OK;
}

/* allocator_settings: PyTorch's settings at dump time. The string (PYTORCH_CUDA_ALLOC_CONF, the
 * last one parsed) is read first, for the keys that have no field of their own
 * (large_segment_size_mb, max_non_split_rounding_mb, per_process_memory_fraction); the fields then
 * say what was in force. max_split_size is SIZE_MAX (or -1) for "unlimited"; roundup_power2_divisions
 * a dict from each interval's start in MiB ('1' .. '32768') to its divisions. A string this parser
 * refuses is kept as text only: the fields still count. */
static void allocator_settings(rs_snap *s, const rs_pickle_value *settings)
{
    rs_alloc_conf *c = &s->allocator.conf;
    int64_t v;
    uint64_t u;
    rs_alloc_conf_reset(c);
    const rs_pickle_value *x = rs_pickle_dict_get(settings, "PYTORCH_CUDA_ALLOC_CONF");
    char text[RS_CONF_TEXT_MAX] = "", why[256];
    if (x && x->kind == RS_PICKLE_STR && x->v.str.n < sizeof text) {
        memcpy(text, x->v.str.p, x->v.str.n);
        text[x->v.str.n] = '\0';
        rs_alloc_conf tmp = *c;
        if (rs_alloc_conf_parse(&tmp, text, RS_CONF_LENIENT, why, sizeof why) == 0) *c = tmp;
        snprintf(c->text, sizeof c->text, "%s", text);
    }
    x = rs_pickle_dict_get(settings, "max_split_size");
    if (rs_pickle_get_u64(x, &u) == 0 && u > 0)
        c->max_split_size = u == UINT64_MAX ? 0 : u;
    else if (rs_pickle_get_i64(x, &v) == 0 && v < 0)
        c->max_split_size = 0;
    x = rs_pickle_dict_get(settings, "garbage_collection_threshold");
    if (x && x->kind == RS_PICKLE_FLOAT && x->v.f > 0.0 && x->v.f < 1.0)
        c->garbage_collection_threshold = x->v.f;
    else if (x && x->kind == RS_PICKLE_FLOAT && x->v.f == 0.0)
        c->garbage_collection_threshold = 0.0;
    x = rs_pickle_dict_get(settings, "expandable_segments");
    if (x && x->kind == RS_PICKLE_BOOL) c->expandable_segments = x->v.b != 0;
    x = rs_pickle_dict_get(settings, "roundup_power2_divisions");
    for (unsigned k = 0; x && k < RS_CONF_INTERVALS; k++) {
        char key[8];
        snprintf(key, sizeof key, "%u", 1u << k);
        if (rs_pickle_get_u64(rs_pickle_dict_get(x, key), &u) == 0 && u <= UINT32_MAX &&
            (u & (u - 1)) == 0)
            c->roundup_divisions[k] = (uint32_t)u;
    }
    s->allocator.max_split_size = rs_alloc_conf_max_split(c);
    s->allocator.large_buffer = rs_alloc_conf_large_segment(c);
}

static ranksnap_status map_root(mapper *m, const rs_pickle_value *root, const rs_torch_opts *o)
{
    rs_snap *s = m->s;
    if (root->kind != RS_PICKLE_DICT)
        return bad(m, root, NULL, NULL,
                   "expected a dict at the top (torch.cuda.memory._snapshot()), found %s",
                   rs_pickle_kind_name(root->kind));
    const rs_pickle_value *segments, *traces;
    RS_CHECK(val_list(m, rs_pickle_dict_get(root, "segments"), "segments", NULL, &segments));
    RS_CHECK(val_list(m, rs_pickle_dict_get(root, "device_traces"), "device_traces", NULL, &traces));
    if (!segments && !traces)
        return bad(m, root, NULL, NULL, "neither segments nor device_traces: not a PyTorch "
                                        "memory snapshot");
    for (size_t i = 0; i < rs_pickle_len(traces); i++) {
        loc l = loc_down(NULL, "device_traces", i);
        const rs_pickle_value *t = rs_pickle_item(traces, i);
        if (t->kind != RS_PICKLE_LIST && t->kind != RS_PICKLE_TUPLE)
            return bad(m, t, &l, NULL, "expected a list, found %s", rs_pickle_kind_name(t->kind));
    }
    int64_t device = o->device;
    if (device < 0) RS_CHECK(majority_device(m, segments, &device));
    if (device < 0 || (o->device < 0 && (size_t)device >= rs_pickle_len(traces) && rs_pickle_len(traces))) {
        /* No segments (or none on a device with a trace): the busiest trace. */
        size_t best = 0;
        for (size_t i = 0; i < rs_pickle_len(traces); i++)
            if (trace_len(m, traces, i) > trace_len(m, traces, best)) best = i;
        if (rs_pickle_len(traces)) device = (int64_t)best;
        if (device < 0) device = 0;
    }
    if (o->device >= 0 && traces && (size_t)o->device >= rs_pickle_len(traces))
        return bad(m, traces, NULL, "device_traces",
                   "device %d has no trace (the snapshot has %zu)", o->device, rs_pickle_len(traces));
    RS_CHECK(set_identity(m, o, device));
    RS_CHECK(map_segments(m, segments, device));
    if ((size_t)device < rs_pickle_len(traces))
        RS_CHECK(map_trace(m, rs_pickle_item(traces, (size_t)device), (size_t)device));
    allocator_settings(s, rs_pickle_dict_get(root, "allocator_settings"));
    /* Every index must be valid even with no event or segment: one stream at least. */
    if (s->n_streams == 0) {
        uint32_t unused;
        RS_CHECK(stream_index(m, 0, &unused));
    }
    /* ranksnap's PyTorch glue: identity, steps and outside memory (torch_meta.c) */
    RS_CHECK(rs_torch_meta_apply(rs_pickle_dict_get(root, "ranksnap"), m->name, s));
    if (o->infer_steps) {
        rs_steps_infer_result found;
        RS_CHECK(rs_steps_infer(s, &found));
    }
    return totals(m);
}

static void mapper_free(mapper *m)
{
    free(m->frame_slot);
    free(m->frame_hash);
    free(m->stack_slot);
    free(m->stack_hash);
    free(m->scratch);
    idcache_free(&m->frame_ids);
    free(m->frame_dicts);
    free(m->stack_items);
    for (size_t i = 0; i < m->n_streamed; i++) streamed_free(&m->streamed[i]);
    free(m->streamed);
    rs_torch_trace_free(m->trace);
    idcache_free(&m->seen);
    free(m->stream_key);
    free(m->stream_slot);
}

ranksnap_status rs_torch_decode(const void *buf, size_t len, const char *name,
                                  const rs_torch_opts *opts, rs_snap **out)
{
    if (!out || (!buf && len))
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_torch_decode: NULL argument");
    *out = NULL;
    rs_torch_opts o;
    if (opts)
        o = *opts;
    else
        rs_torch_opts_default(&o);
    if (!name) name = "pickle";
    if (o.rank < 0 || o.rank == INT32_MAX)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "%s: rank %d is not a rank", name, o.rank);
    rs_pickle_doc *doc = NULL;
    mapper m;
    memset(&m, 0, sizeof m);
    m.name = name;
    m.len = len;
    m.seed = rs_addr_hash_seed();
    m.s = calloc(1, sizeof *m.s);
    m.frame_dicts = ptr_cache_new();
    m.stack_items = ptr_cache_new();
    /* the trace's entries are read as the pickle is: they never all sit in memory as values */
    rs_pickle_stream stream = {.key = "device_traces", .take = take_entries, .ctx = &m};
    /* and each read from its bytes where it can be (torch_trace.h) */
    if (o.read_entries && (m.trace = rs_torch_trace_new()) != NULL) stream.read = read_entry;
    ranksnap_status st = m.s && m.frame_dicts && m.stack_items ? RANKSNAP_OK
                                                               : no_memory(&m, "a snapshot");
    if (st == RANKSNAP_OK) st = rs_pickle_decode_stream(buf, len, name, o.stream ? &stream : NULL, &doc);
    if (st == RANKSNAP_OK) st = map_root(&m, rs_pickle_root(doc), &o);
    if (st == RANKSNAP_OK) st = rs_snap_check(m.s, name); /* the model's one check (snap_check.h) */
    if (o.read_count) *o.read_count = m.n_read;
    mapper_free(&m);
    rs_pickle_free(doc);
    if (st != RANKSNAP_OK) {
        rs_snap_free(m.s);
        return st;
    }
    *out = m.s;
    return RANKSNAP_OK;
}

ranksnap_status rs_torch_decode_file(const char *path, int rank, rs_snap **out)
{
    if (!path || !out)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_torch_decode_file: NULL argument");
    *out = NULL;
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    o.rank = rank;
    char *buf;
    size_t len;
    RS_CHECK(rs_file_read(path, 0, &buf, &len));
    ranksnap_status st = rs_torch_decode(buf, len, path, &o, out);
    free(buf);
    return st;
}

