/*
 * torch_segments.c — a PyTorch snapshot's segments and their blocks mapped onto rs_snap's
 * final state, and the device the snapshot is of.
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
#include "torch_segments.h"

/* Segment and block dicts are PyTorch's own, one per segment and block: one met twice (a pickle
 * repeating it through its memo, [S] * N) would make the model N times what the input holds. */
static ranksnap_status once(mapper *m, const rs_pickle_value *dict, const loc *l, const char *what)
{
    uint32_t first = rs_tm_idcache_get(&m->seen, (uintptr_t)dict, 0, 1);
    if (first)
        return rs_tm_bad(m, dict, l, NULL, "the same %s dict as one before it (a memo reference): "
                                     "PyTorch writes each %s once", what, what);
    if (rs_tm_idcache_put(&m->seen, (uintptr_t)dict, 0, 1, 1) != 0) return rs_tm_no_memory(m, "the segments");
    return RANKSNAP_OK;
}

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
    RS_CHECK(rs_tm_f_str(m, f, F_STATE, l, &v));
    if (!v) return rs_tm_bad(m, f->dict, l, "state", "missing (PyTorch always writes it)");
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
    return rs_tm_bad(m, v, l, "state",
               "expected active_allocated, active_pending_free (or active_awaiting_free) or "
               "inactive");
}

/* segment_pool_id: a pair of non-negative ints (PyTorch's MempoolId_t), (0, 0) when absent
 * (PyTorch before private pools were listed). */
static ranksnap_status pool_id(const mapper *m, const fields *f, const loc *l, uint64_t id[2])
{
    const rs_pickle_value *v = field_of(f, F_SEGMENT_POOL_ID);
    id[0] = id[1] = 0;
    if (!v || v->kind == RS_PICKLE_NONE) return RANKSNAP_OK;
    if ((v->kind != RS_PICKLE_TUPLE && v->kind != RS_PICKLE_LIST) || rs_pickle_len(v) != 2 ||
        rs_pickle_get_u64(rs_pickle_item(v, 0), &id[0]) != 0 || rs_pickle_get_u64(rs_pickle_item(v, 1), &id[1]) != 0)
        return rs_tm_bad(m, v, l, "segment_pool_id", "expected a pair of non-negative ints");
    return RANKSNAP_OK;
}

static ranksnap_status map_segment(mapper *m, const rs_pickle_value *seg, const loc *l, rs_snap_segment *g)
{
    fields f;
    RS_CHECK(rs_tm_read_fields(m, seg, l, &f));
    RS_CHECK(once(m, seg, l, "segment"));
    RS_CHECK(f_u64(m, &f, F_ADDRESS, l, 1, &g->addr));
    RS_CHECK(f_u64(m, &f, F_TOTAL_SIZE, l, 1, &g->total_size));
    RS_CHECK(rs_tm_f_stream(m, &f, l, &g->stream));
    RS_CHECK(rs_tm_f_stack(m, &f, l, &g->stack));
    const rs_pickle_value *type, *blocks;
    RS_CHECK(rs_tm_f_str(m, &f, F_SEGMENT_TYPE, l, &type));
    g->is_small = type ? rs_pickle_str_is(type, "small") : g->total_size <= TORCH_SMALL_BUFFER;
    RS_CHECK(pool_id(m, &f, l, g->pool_id));
    RS_CHECK(rs_tm_f_list(m, &f, F_BLOCKS, l, &blocks));
    size_t n = rs_pickle_len(blocks);
    g->blocks = calloc(n ? n : 1, sizeof *g->blocks);
    if (!g->blocks) return rs_tm_no_memory(m, "the blocks of a segment");
    uint64_t offset = g->addr, allocated = 0, active = 0, requested = 0;
    int sorted = 1;
    for (size_t i = 0; i < n; i++) {
        loc bl = rs_tm_loc_down(l, ".blocks", i);
        const rs_pickle_value *blk = rs_pickle_item(blocks, i);
        rs_snap_block *b = &g->blocks[i];
        fields bf;
        RS_CHECK(rs_tm_read_fields(m, blk, &bl, &bf));
        RS_CHECK(once(m, blk, &bl, "block"));
        /* PyTorch before 2.1 wrote no block address: blocks tile the segment in order. */
        b->addr = offset;
        RS_CHECK(f_u64(m, &bf, F_ADDRESS, &bl, 0, &b->addr));
        RS_CHECK(f_u64(m, &bf, F_SIZE, &bl, 1, &b->size));
        b->requested_size = b->size;
        RS_CHECK(f_u64(m, &bf, F_REQUESTED_SIZE, &bl, 0, &b->requested_size));
        RS_CHECK(block_state(m, &bf, &bl, &b->state));
        RS_CHECK(rs_tm_f_stack(m, &bf, &bl, &b->stack));
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
    RS_CHECK(rs_tm_read_fields(m, seg, l, &f));
    RS_CHECK(f_u64(m, &f, F_DEVICE, l, 0, &d));
    *dev = d > INT32_MAX ? INT32_MAX : (int64_t)d;
    return RANKSNAP_OK;
}

ranksnap_status rs_tm_majority_device(mapper *m, const rs_pickle_value *segments, int64_t *out)
{
    int64_t dev[MAX_DEVICES];
    size_t count[MAX_DEVICES], n_dev = 0;
    *out = -1;
    for (size_t i = 0; i < rs_pickle_len(segments); i++) {
        loc l = rs_tm_loc_down(NULL, "segments", i);
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

ranksnap_status rs_tm_map_segments(mapper *m, const rs_pickle_value *segments, int64_t device)
{
    rs_snap *s = m->s;
    size_t n = rs_pickle_len(segments);
    s->segments = calloc(n ? n : 1, sizeof *s->segments);
    if (!s->segments) return rs_tm_no_memory(m, "the segments");
    for (size_t i = 0; i < n; i++) {
        loc l = rs_tm_loc_down(NULL, "segments", i);
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
