/*
 * torch_history.c — a PyTorch snapshot's trace (device_traces) mapped onto rs_snap's history:
 * the entries handed over as the pickle streams them (or read from their bytes, torch_trace.c),
 * kept in columns, adopted as the history, and the totals the trace's replay gives (peaks, the
 * levels at the OOM).
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
#include "torch_frames.h"
#include "torch_history.h"

/* rs_torch_action of a str, remembering the last few action strings by address (PyTorch memoizes
 * them). */
static int action_of(mapper *m, const rs_pickle_value *v)
{
    size_t h = rs_tm_addr_slot(v, ACTION_CACHE);
    if (m->action_ptr[h] == v) return m->action_code[h];
    m->action_ptr[h] = rs_pickle_lasting(v) ? v : NULL; /* a batch's str: its address is reused */
    return m->action_code[h] = rs_torch_action(v->v.str.p, v->v.str.n);
}

static ranksnap_status columns_grow(mapper *m, const column *c, size_t *cap, size_t need,
                                    const char *what)
{
    if (need <= *cap) return RANKSNAP_OK;
    size_t n = *cap ? 2 * *cap : 1024;
    while (n < need) n *= 2;
    for (size_t i = 0; i < N_COLUMNS; i++) {
        void *q = realloc(*c[i].p, n * c[i].size);
        if (!q) return rs_tm_no_memory(m, what); /* the grown ones stay as they are, and are freed */
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
    RS_CHECK(rs_tm_read_fields(m, e, l, &f));
    const rs_pickle_value *av;
    RS_CHECK(rs_tm_f_str(m, &f, F_ACTION, l, &av));
    if (!av) return rs_tm_bad(m, f.dict, l, "action", "missing (PyTorch always writes it)");
    memset(r, 0, sizeof *r);
    r->action = action_of(m, av);
    if (r->action < 0) return RANKSNAP_OK;
    /* An oom entry keeps the device's free bytes where the others keep the address. */
    RS_CHECK(f_u64(m, &f, r->action == RS_ACT_OOM ? F_DEVICE_FREE : F_ADDR, l, 0, &r->addr));
    RS_CHECK(f_u64(m, &f, F_SIZE, l, 0, &r->size));
    RS_CHECK(f_u64(m, &f, F_TIME_US, l, 0, &r->time_us));
    RS_CHECK(rs_tm_f_stream_handle(m, &f, l, &r->stream));
    return rs_tm_f_list(m, &f, F_FRAMES, l, &r->frames);
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
    RS_CHECK(rs_tm_stream_index(m, r->stream, &h->stream[k]));
    RS_CHECK(rs_tm_stack_id(m, r->frames, l, &h->stack[k]));
    h->count++;
    return RANKSNAP_OK;
}

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

void rs_tm_streamed_free(streamed *sd)
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
    if (rs_tm_grow((void **)&m->streamed, &m->streamed_cap, m->n_streamed + 1, sizeof *m->streamed) != 0) {
        rs_tm_no_memory(m, "the traces");
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

ranksnap_status rs_tm_take_entries(void *ctx, rs_pickle_taker *t, const rs_pickle_value *list,
                                    size_t index, const rs_pickle_value *const *items, size_t n)
{
    mapper *m = ctx;
    streamed *sd = streamed_of(m, list, index);
    if (!sd) return RANKSNAP_ERR_HOST_MEMORY;
    if (sd->err != RANKSNAP_OK || n == 0) return RANKSNAP_OK;
    if (sd->n == 0) sd->first_at = items[0]->offset;
    RS_CHECK(streamed_room(m, sd, items[n - 1]->offset, n));
    loc base = rs_tm_loc_down(NULL, "device_traces", index);
    for (size_t i = 0; i < n; i++) {
        loc l = rs_tm_loc_down(&base, "", sd->n);
        rs_torch_entry r;
        ranksnap_status st = entry_of(m, items[i], &l, &r);
        if (st == RANKSNAP_ERR_HOST_MEMORY) return st;
        if (st != RANKSNAP_OK) {
            sd->err = st;
            sd->err_msg = strdup(ranksnap_last_error());
            return sd->err_msg ? RANKSNAP_OK : rs_tm_no_memory(m, "a message");
        }
        if (r.frames && !(r.frames = rs_pickle_keep(t, r.frames)))
            return rs_tm_no_memory(m, "the frames of the trace");
        streamed_add(sd, &r);
    }
    return RANKSNAP_OK;
}

int rs_tm_read_entry(void *ctx, rs_pickle_reader *r, const rs_pickle_value *list, size_t index,
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
        loc l = rs_tm_loc_down(base, "", r);
        uint64_t handle;
        const rs_pickle_value *frames;
        uint32_t stream, stack;
        memcpy(&handle, handles + 8 * r, 8);
        memcpy(&frames, lists + sizeof frames * r, sizeof frames);
        RS_CHECK(rs_tm_stream_index(m, handle, &stream));
        RS_CHECK(rs_tm_stack_id(m, frames, &l, &stack));
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

size_t rs_tm_trace_len(const mapper *m, const rs_pickle_value *traces, size_t i)
{
    const rs_pickle_value *t = rs_pickle_item(traces, i);
    for (size_t k = 0; k < m->n_streamed; k++)
        if (m->streamed[k].list == t && m->streamed[k].index == i) return m->streamed[k].n + rs_pickle_len(t);
    return rs_pickle_len(t);
}

ranksnap_status rs_tm_map_trace(mapper *m, const rs_pickle_value *trace, size_t device)
{
    rs_snap_history *h = &m->s->history;
    streamed *sd = NULL;
    for (size_t i = 0; i < m->n_streamed && !sd; i++)
        if (m->streamed[i].list == trace && m->streamed[i].index == device) sd = &m->streamed[i];
    loc base = rs_tm_loc_down(NULL, "device_traces", device);
    if (sd && rs_pickle_len(trace))
        return rs_tm_bad(m, trace, &base, NULL, "entries both appended as pickle.dump appends them and "
                                          "otherwise: a layout this reader does not take");
    if (sd && sd->n) {
        RS_CHECK(adopt_streamed(m, sd, &base));
    } else {
        size_t n = rs_pickle_len(trace);
        RS_CHECK(history_grow(m, n ? n : 1));
        for (size_t i = 0; i < n; i++) {
            loc l = rs_tm_loc_down(&base, "", i);
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

ranksnap_status rs_tm_totals(mapper *m)
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
    if (rs_walk_init(&w, s) != RANKSNAP_OK) return rs_tm_no_memory(m, "the walk of the trace");
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
