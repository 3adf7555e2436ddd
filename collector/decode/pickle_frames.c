/*
 * pickle_frames.c — the frames lists a reader of a trace entry's bytes asks for
 * (rs_pickle_read_gets), and the memo keys the entries it reads store (rs_pickle_read_done).
 * A frames list is read from its memo GETs without the machine; lists with the same bytes are
 * one value (struct span_memo), lists with the same items share one item array (struct
 * shared_items): PyTorch writes a new list for most trace entries, but only a few distinct ones.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle_batch.h"
#include "pickle_frames.h"
#include "pickle_mem.h"
#include "pickle_ops.h"

/* The most frames a list read this way may have: a longer one is left to the machine. */
#define MAX_FRAMES 256

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
static inline rs_pickle_value *get_at(const dec *d, size_t p, size_t *n, uint64_t floor,
                                      int *fresh)
{
    uint64_t key;
    if (!(*n = rs_pk_get(d->buf + p, d->len - p, &key))) return NULL;
    rs_pickle_value *v = key < d->memo.dense_cap ? d->memo.dense[key] : NULL;
    if (fresh) *fresh = key >= floor;
    return memo_is_value(v) ? v : NULL; /* the machine makes a lazy str */
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
    if (left > MAX_FRAMES * 5 + 1) left = MAX_FRAMES * 5 + 1;
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
    rs_pickle_value *frames[MAX_FRAMES], *v;
    size_t n_frames = 0, n = 0, span_at = 0;
    int fresh = 0, any_fresh = 0;
    uint64_t floor = batch_key_floor(d);
    const struct span_memo *known = NULL;
    if (p < d->len && b[p] == 0x28 && (known = span_find(d, span_at = p + 1, &p)) != NULL) {
        /* bytes met before: the same GETs of the same values */
    } else if (p < d->len && b[p] == 0x28) {
        for (p++; p < d->len && b[p] != 0x65; p += n) {
            rs_pickle_value *f = get_at(d, p, &n, floor, &fresh);
            if (!f || n_frames == MAX_FRAMES) return NULL;
            frames[n_frames++] = f;
            any_fresh |= fresh;
        }
        if (p >= d->len) return NULL;
        p++;
    } else if ((v = get_at(d, p, &n, floor, &fresh)) != NULL && p + n < d->len &&
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
