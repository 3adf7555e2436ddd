/*
 * pickle_entry.c — a PyTorch trace entry in one step (fused_entry), beside the general machine
 * of pickle.c, and the frames lists it shares: lists with the same bytes are one value
 * (struct span_memo), lists with the same items share one item array (struct shared_items).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle_batch.h"
#include "pickle_entry.h"
#include "pickle_mem.h"
#include "pickle_ops.h"

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
    if (n == 0) return rs_pk_new_container(d, RS_PICKLE_LIST, frames, n);
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
    rs_pickle_value *v = rs_pk_new_container(d, RS_PICKLE_LIST, frames, n);
    if (v && e) {
        e[1] = e[0];
        e[0].items = v->v.seq.items;
        e[0].n = (uint32_t)n;
        e[0].hash = h;
    }
    return v;
}

rs_pickle_value *rs_pk_gets_list(dec *d, size_t list_at, size_t p, size_t *end)
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
        if (in_batch(d, frames[f]) && !(frames[f] = rs_pk_evacuate(d, frames[f]))) return NULL;
    uint32_t batch = d->batch;
    d->batch = 0;
    d->op_at = list_at;
    rs_pickle_value *list = known ? known->list : shared_list(d, frames, n_frames);
    d->batch = batch;
    if (list && !known && span_at && n_frames && !any_fresh) span_note(d, span_at, p, list);
    *end = p;
    return list;
}

int rs_pk_memo_next_free(const dec *d, size_t n)
{
    size_t key = d->memo.count;
    if (key + n > d->memo.dense_cap) return 0;
    for (size_t i = 0; d->memo.put_top > key && i < n; i++)
        if (d->memo.dense[key + i]) return 0;
    return 1;
}

void rs_pk_memo_direct(dec *d, size_t n)
{
    const int clean = d->batch_memo == d->memo.count && d->n_batch_keys == 0;
    d->memo.count += n;
    if (clean) d->batch_memo = d->memo.count;
    d->batch_direct++;
}

/* Values an entry memoizes, in the order of their MEMOIZEs: its dict, the strings it makes
 * (PyTorch 2.11 writes a new "N/A" for compile_context in every entry), its frames list. */
#define FUSED_MAX_MEMO (2 * FUSED_MAX_PAIRS + 2)

int rs_pk_fused_entry(dec *d, size_t at, size_t *pos, size_t *sp)
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
    if (direct && *sp > d->marks[d->batch_level - 1] && rs_pk_batch_flush(d, sp) != 0) return -1;
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
            if (!(list = v = rs_pk_gets_list(d, list_at, p, &p))) return 0;
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
    if (!rs_pk_memo_next_free(d, n_memo)) return 0;
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
        rs_pk_memo_direct(d, n_memo);
        *pos = p + 1;
        ranksnap_status st = rs_pk_stream_take(d, d->batch_list, (int64_t)d->batch_index, &dp, 1);
        /* what the reader kept was copied by address (copy_out), and the next entry's dict and
         * ints are at the same addresses: forgotten (the flush left nothing else there) */
        if (d->fwd.n) rs_pk_u64map_clear(&d->fwd);
        if (st == RANKSNAP_OK) return 1;
        d->fused_err = st;
        return -1;
    }
    rs_pickle_value *dict = rs_pk_new_container(d, RS_PICKLE_DICT, items, n_items);
    if (!dict) return 0;
    for (size_t i = 0; i < n_memo; i++) d->memo.dense[key + i] = memo_new[i] ? memo_new[i] : dict;
    d->memo.count += n_memo;
    d->stack[(*sp)++] = dict;
    *pos = p + 1;
    return 1;
}
