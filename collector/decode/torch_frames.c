/*
 * torch_frames.c — a PyTorch snapshot's streams (handle -> index) and its frames and stacks,
 * interned into the snapshot's frame and stack tables: the trace repeats the same stacks
 * thousands of times, so a frames list met again maps to its stack without reading it.
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

static ranksnap_status stream_index_find(mapper *m, uint64_t handle, uint32_t *out);

ranksnap_status rs_tm_stream_index(mapper *m, uint64_t handle, uint32_t *out)
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
            return rs_tm_no_memory(m, "the stream table");
        }
        for (size_t i = 0; i < s->n_streams; i++) {
            size_t j = rs_tm_mix(m, s->streams[i]) & (cap - 1);
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
    size_t j = rs_tm_mix(m, handle) & m->stream_mask;
    while (m->stream_slot[j]) {
        if (m->stream_key[j] == handle) {
            *out = m->stream_slot[j] - 1;
            return RANKSNAP_OK;
        }
        j = (j + 1) & m->stream_mask;
    }
    if (s->n_streams >= UINT32_MAX - 1 ||
        rs_tm_grow((void **)&s->streams, &m->streams_cap, s->n_streams + 1, sizeof *s->streams) != 0)
        return rs_tm_no_memory(m, "the stream table");
    m->stream_key[j] = handle;
    m->stream_slot[j] = (uint32_t)s->n_streams + 1;
    s->streams[s->n_streams] = handle;
    *out = (uint32_t)s->n_streams++;
    return RANKSNAP_OK;
}

ranksnap_status rs_tm_f_stream_handle(const mapper *m, const fields *f, const loc *l,
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

ranksnap_status rs_tm_f_stream(mapper *m, const fields *f, const loc *l, uint32_t *out)
{
    uint64_t handle = 0;
    RS_CHECK(rs_tm_f_stream_handle(m, f, l, &handle));
    return rs_tm_stream_index(m, handle, out);
}

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
    RS_CHECK(rs_tm_read_fields(m, frame, l, &fd));
    const rs_pickle_value *name, *file;
    uint64_t h;
    int64_t line = 0;
    RS_CHECK(rs_tm_f_str(m, &fd, F_NAME, l, &name));
    RS_CHECK(rs_tm_f_str(m, &fd, F_FILENAME, l, &file));
    const rs_pickle_value *lv = field_of(&fd, F_LINE);
    if (lv && rs_pickle_get_i64(lv, &line) != 0)
        return rs_tm_bad(m, lv, l, "line", "expected an int, found %s", rs_pickle_kind_name(lv->kind));
    int32_t line32 = line < 0 ? 0 : line > INT32_MAX ? INT32_MAX : (int32_t)line;
    uint32_t hit = rs_tm_idcache_get(&m->frame_ids, (uintptr_t)name, (uintptr_t)file, line32);
    if (hit) {
        *out = hit - 1;
        rs_tm_ptr_put(m->frame_dicts, frame, hit);
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
    h = rs_tm_mix(m, text ^ (uint64_t)(uint32_t)line32);

    if (2 * (s->n_frames + 1) > m->frame_mask + 1) {
        size_t cap = m->frame_mask ? 2 * (m->frame_mask + 1) : 256;
        size_t *slot = calloc(cap, sizeof *slot);
        uint64_t *hash = malloc(cap * sizeof *hash);
        if (!slot || !hash) {
            free(slot);
            free(hash);
            return rs_tm_no_memory(m, "the frame table");
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
        rs_tm_grow((void **)&s->frames, &m->frames_cap, s->n_frames + 1, sizeof *s->frames) != 0)
        return rs_tm_no_memory(m, "the frame table");
    rs_snap_frame *f = &s->frames[s->n_frames];
    memset(f, 0, sizeof *f);
    f->module = -1;
    f->line = line32;
    f->text_hash = text;
    f->function = rs_tm_copy_str(name, "??");
    f->file = rs_tm_copy_str(file, "??");
    s->n_frames++; /* counted now so that rs_snap_free frees the strings on every path */
    if (!f->function || !f->file) return rs_tm_no_memory(m, "a frame's strings");
    m->frame_slot[j] = s->n_frames;
    m->frame_hash[j] = h;
    *out = (uint32_t)(s->n_frames - 1);
cache:
    (void)rs_tm_idcache_put(&m->frame_ids, (uintptr_t)name_v, (uintptr_t)file_v, line32, *out + 1);
    rs_tm_ptr_put(m->frame_dicts, frame, *out + 1);
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
        l0 = rs_tm_mix(m, l0 ^ w[f]) + f;
        l1 = rs_tm_mix(m, l1 ^ w[f + 1]) + f;
        l2 = rs_tm_mix(m, l2 ^ w[f + 2]) + f;
        l3 = rs_tm_mix(m, l3 ^ w[f + 3]) + f;
    }
    if (f < n) l0 = rs_tm_mix(m, l0 ^ w[f]) + f, f++;
    if (f < n) l1 = rs_tm_mix(m, l1 ^ w[f]) + f, f++;
    if (f < n) l2 = rs_tm_mix(m, l2 ^ w[f]) + f;
    return rs_tm_mix(m, rs_tm_mix(m, rs_tm_mix(m, rs_tm_mix(m, l0 ^ n) ^ l1) ^ l2) ^ l3);
}

ranksnap_status rs_tm_stack_id(mapper *m, const rs_pickle_value *frames, const loc *l, uint32_t *out)
{
    rs_snap *s = m->s;
    *out = 0;
    size_t n = rs_pickle_len(frames);
    if (!frames || n == 0) return RANKSNAP_OK;
    /* the same item array (the same list, or one the decoder shares) holds the same frames */
    const void *items = frames->v.seq.items;
    uint32_t hit = rs_tm_ptr_get(m->stack_items, items);
    if (hit && s->stacks[hit - 1].n_frames == n) {
        *out = hit;
        return RANKSNAP_OK;
    }
    if (rs_tm_grow((void **)&m->scratch, &m->scratch_cap, n, sizeof *m->scratch) != 0)
        return rs_tm_no_memory(m, "a stack");
    for (size_t i = 0; i < n; i++) {
        loc fl = rs_tm_loc_down(l, ".frames", i);
        const rs_pickle_value *fr = frames->v.seq.items[i];
        uint32_t known = rs_tm_ptr_get(m->frame_dicts, fr);
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
            return rs_tm_no_memory(m, "the stack table");
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
            rs_tm_ptr_put(m->stack_items, items, *out);
            return RANKSNAP_OK;
        }
        j = (j + 1) & m->stack_mask;
    }
    if (s->n_stacks >= UINT32_MAX - 1 ||
        rs_tm_grow((void **)&s->stacks, &m->stacks_cap, s->n_stacks + 1, sizeof *s->stacks) != 0)
        return rs_tm_no_memory(m, "the stack table");
    rs_snap_stack *st = &s->stacks[s->n_stacks];
    st->frames = malloc(n * sizeof *st->frames);
    if (!st->frames) return rs_tm_no_memory(m, "a stack");
    memcpy(st->frames, m->scratch, n * sizeof *st->frames);
    st->n_frames = n;
    s->n_stacks++;
    m->stack_slot[j] = (uint32_t)s->n_stacks;
    m->stack_hash[j] = h;
    *out = (uint32_t)s->n_stacks;
    rs_tm_ptr_put(m->stack_items, items, *out);
    return RANKSNAP_OK;
}

ranksnap_status rs_tm_f_stack(mapper *m, const fields *f, const loc *l, uint32_t *out)
{
    const rs_pickle_value *frames;
    RS_CHECK(rs_tm_f_list(m, f, F_FRAMES, l, &frames));
    return rs_tm_stack_id(m, frames, l, out);
}
