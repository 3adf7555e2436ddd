/*
 * pickle_batch.c — streamed batches (pickle.h: rs_pickle_stream): a MARK that starts the items
 * of a streamed list opens a batch built in scratch memory; its APPENDS hands the items to the
 * reader, copies out what the memo keeps (Cheney's way, no recursion) and empties the scratch
 * memory for the next batch; a MARK closed otherwise seals it into the document.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle_batch.h"
#include "pickle_mem.h"
#include "pickle_names.h"
#include "pickle_value.h"

ranksnap_status rs_pk_batch_seal(dec *d)
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

static int is_container(const rs_pickle_value *v)
{
    return v->kind == RS_PICKLE_DICT || rs_pickle_is_sequence(v);
}

/* A copy of scratch value v in the document's memory (its items still to be looked at). */
static rs_pickle_value *copy_out(dec *d, rs_pickle_value *v)
{
    rs_pickle_value *c = rs_pk_u64map_get(&d->fwd, (uintptr_t)v);
    if (c) return c;
    c = arena_alloc_in(&d->doc->main, sizeof *c);
    if (!c || rs_pk_u64map_put(&d->fwd, (uintptr_t)v, c) < 0) return NULL;
    *c = *v;
    c->batch = 0;
    if (!is_container(c) || c->v.seq.n == 0) return c;
    c->v.seq.items = arena_alloc_in(&d->doc->main, c->v.seq.n * sizeof *c->v.seq.items);
    if (!c->v.seq.items) return NULL;
    memcpy(c->v.seq.items, v->v.seq.items, c->v.seq.n * sizeof *c->v.seq.items);
    c->v.seq.cap = c->v.seq.n;
    if (d->n_work == d->work_cap) {
        rs_pickle_value **w = rs_pk_doubled(d->work, &d->work_cap, sizeof *w, 64);
        if (!w) return NULL;
        d->work = w;
    }
    d->work[d->n_work++] = c;
    return c;
}

rs_pickle_value *rs_pk_evacuate(dec *d, rs_pickle_value *v)
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

int64_t rs_pk_stream_index_of(const dec *d, size_t pos)
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

void rs_pk_batch_open(dec *d)
{
    if (d->batch || d->batches == BATCH_TAKEN - 1 || d->sp == 0 ||
        rs_pk_stream_index_of(d, d->sp - 1) < 0)
        return;
    d->batch = ++d->batches;
    d->batch_level = d->n_marks + 1; /* with the MARK about to be pushed */
    d->batch_memo = d->memo.count;
    d->n_batch_keys = 0;
    d->batch_list = d->stack[d->sp - 1];
    d->batch_index = (size_t)rs_pk_stream_index_of(d, d->sp - 1);
    d->batch_direct = 0;
}

/* The memo keys of the ending batch get its values' copies, or the taken mark. */
static ranksnap_status batch_memo_out(dec *d)
{
    for (size_t k = 0, n = d->memo.count - d->batch_memo + d->n_batch_keys; k < n; k++) {
        uint64_t key = k < d->memo.count - d->batch_memo ? d->batch_memo + k
                                                         : d->batch_keys[k - (d->memo.count - d->batch_memo)];
        rs_pickle_value **slot = rs_pk_memo_slot(d, key);
        if (!slot || !memo_is_value(*slot) || !in_batch(d, *slot)) continue;
        if ((*slot)->batch == BATCH_TAKEN) {
            *slot = TAKEN_MARK;
            continue;
        }
        rs_pickle_value *c = rs_pk_evacuate(d, *slot);
        if (!c) return rs_pk_no_memory(d, sizeof *c);
        *slot = c;
    }
    return RANKSNAP_OK;
}

ranksnap_status rs_pk_stream_take(dec *d, rs_pickle_value *l, int64_t index,
                                   rs_pickle_value *const *items, size_t n)
{
    return d->stream->take(d->stream->ctx, (rs_pickle_taker *)d, l, (size_t)index,
                           (const rs_pickle_value *const *)items, n);
}

ranksnap_status rs_pk_batch_end(dec *d, rs_pickle_value *l, int64_t index, size_t start)
{
    for (size_t i = start; i < d->sp; i++)
        if (d->stack[i]->batch == d->batch) d->stack[i]->batch = BATCH_TAKEN;
    ranksnap_status st = batch_memo_out(d);
    if (st == RANKSNAP_OK) st = rs_pk_stream_take(d, l, index, d->stack + start, d->sp - start);
    if (st != RANKSNAP_OK) return st;
    d->sp = start;
    d->batch = 0;
    rs_pk_u64map_clear(&d->fwd);
    rs_pk_arena_reset(&d->doc->scratch);
    return RANKSNAP_OK;
}

int rs_pk_batch_flush(dec *d, size_t *sp)
{
    size_t start = d->marks[d->batch_level - 1], taken = *sp - start;
    d->sp = *sp;
    ranksnap_status st = d->batches == BATCH_TAKEN - 1
                             ? FAIL(d, "more than %u batches of items of %s", BATCH_TAKEN - 2,
                                    d->stream->key)
                             : rs_pk_batch_end(d, d->batch_list, (int64_t)d->batch_index, start);
    if (st != RANKSNAP_OK) {
        d->flush_err = st;
        return -1;
    }
    *sp = d->sp;
    d->batch = ++d->batches;
    d->batch_memo = d->memo.count;
    d->n_batch_keys = 0;
    d->batch_direct += taken;
    return 0;
}
