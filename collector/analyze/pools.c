/*
 * pools.c — pools.h: the private pools' segments of a snapshot, what they held at a moment of its
 * history, and the line that made the largest.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "pools.h"
#include "sat.h"
#include "text.h"

static int is_private(const rs_snap_segment *g)
{
    return g->pool_id[0] != 0 || g->pool_id[1] != 0;
}

int rs_pools_any(const rs_snap *s)
{
    for (size_t i = 0; i < s->n_segments; i++)
        if (is_private(&s->segments[i])) return 1;
    return 0;
}

typedef struct pool_seg {
    uint64_t addr, size;
    int before;      /* an event at its address at or before the moment was seen */
    int alive;       /* the last such event was its segment_alloc */
    int after;       /* the first event after the moment, when none before: its action + 1 */
} pool_seg;

static int cmp_seg(const void *pa, const void *pb)
{
    const pool_seg *a = pa, *b = pb;
    return (a->addr > b->addr) - (a->addr < b->addr);
}

/* The segment holding `addr` (its first byte when `exact`), NULL when none. */
static pool_seg *find(pool_seg *v, size_t n, uint64_t addr, int exact)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].addr <= addr) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return NULL;
    pool_seg *g = &v[lo - 1];
    if (exact) return g->addr == addr ? g : NULL;
    return addr - g->addr < g->size ? g : NULL;
}

ranksnap_status rs_pools_at(rs_walk *w, int64_t moment, rs_pools_use *out)
{
    const rs_snap *s = w->s;
    memset(out, 0, sizeof *out);
    size_t n = 0;
    for (size_t i = 0; i < s->n_segments; i++) n += is_private(&s->segments[i]);
    if (!n) return RANKSNAP_OK;
    pool_seg *v = calloc(n, sizeof *v);
    if (!v) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for the private pools' %zu segments", n);
    for (size_t i = 0, k = 0; i < s->n_segments; i++)
        if (is_private(&s->segments[i])) {
            v[k].addr = s->segments[i].addr;
            v[k++].size = s->segments[i].total_size;
        }
    qsort(v, n, sizeof *v, cmp_seg);
    /* Alive at the moment: made by the last of its segment events up to it; with none up to it,
     * alive unless its first event after is the one that made it (a segment with no event at
     * all was there throughout the history). */
    const rs_snap_history *h = &s->history;
    for (uint64_t i = 0; i < h->count; i++) {
        uint8_t a = h->action[i];
        if (a != RS_ACT_SEGMENT_ALLOC && a != RS_ACT_SEGMENT_FREE) continue;
        pool_seg *g = find(v, n, h->addr[i], 1);
        if (!g) continue;
        if (moment == RS_WALK_END || (int64_t)i <= moment) {
            g->before = 1;
            g->alive = a == RS_ACT_SEGMENT_ALLOC;
        } else if (!g->before && !g->after) {
            g->after = a + 1;
        }
    }
    for (size_t k = 0; k < n; k++) {
        if (!v[k].before) v[k].alive = v[k].after != RS_ACT_SEGMENT_ALLOC + 1;
        if (v[k].alive) out->reserved = rs_sat_add_u64(out->reserved, v[k].size);
    }
    rs_walk_to(w, moment);
    size_t it = 0;
    for (rs_walk_block *b = rs_walk_next_live(w, &it); b; b = rs_walk_next_live(w, &it)) {
        pool_seg *g = find(v, n, b->addr, 0);
        if (g && g->alive) out->allocated = rs_sat_add_u64(out->allocated, b->size);
    }
    if (out->allocated > out->reserved) out->allocated = out->reserved;
    free(v);
    return RANKSNAP_OK;
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && memcmp(s + n - k, tail, k) == 0;
}

/* PyTorch's capture code, under which the user's line that captured the graph is found. */
static int is_capture_frame(const rs_snap_frame *f)
{
    const char *file = f->file ? f->file : "";
    return ends_with(file, "torch/cuda/graphs.py") || ends_with(file, "_inductor/cudagraph_trees.py");
}

int rs_pools_site(const rs_snap *s, const rs_site_picker *pk, rs_site *out)
{
    memset(out, 0, sizeof *out);
    /* the largest pool by its segments at the end, and its first segment that has a stack */
    const rs_snap_segment *best = NULL;
    uint64_t best_bytes = 0;
    for (size_t i = 0; i < s->n_segments; i++) {
        const rs_snap_segment *g = &s->segments[i];
        if (!is_private(g)) continue;
        uint64_t bytes = 0;
        const rs_snap_segment *first = NULL;
        for (size_t j = 0; j < s->n_segments; j++) {
            const rs_snap_segment *o = &s->segments[j];
            if (o->pool_id[0] != g->pool_id[0] || o->pool_id[1] != g->pool_id[1]) continue;
            bytes = rs_sat_add_u64(bytes, o->total_size);
            if (!first || (!first->stack && o->stack)) first = o;
        }
        if (bytes > best_bytes) {
            best_bytes = bytes;
            best = first;
        }
    }
    if (!best) return 0;
    int graph = best->pool_id[0] != 0; /* capture_begin's own pool: (capture id, 0) */
    rs_site at;
    memset(&at, 0, sizeof at);
    int named = 0;
    if (best->stack) {
        const rs_snap_stack *st = &s->stacks[best->stack - 1];
        size_t j = 0;
        while (j < st->n_frames && !is_capture_frame(&s->frames[st->frames[j]])) j++;
        if (j < st->n_frames) graph = 1;
        /* The line that captured it, outside the capture code: the first of the user's own Python
         * frames, else the first frame that may be a site. torch.compile's CUDA graph trees
         * capture under the code Inductor generated and the compiled model's forward (a
         * transformers model's is an installed package's): the user's line is the script's that
         * called the compiled model, further out. */
        size_t pick = st->n_frames;
        for (size_t k = j + 1; pk->info && j < st->n_frames && k < st->n_frames; k++) {
            const rs_site_rules_frame *c = &pk->info[st->frames[k]];
            if (c->kind == RS_SITE_FRAME_PYTHON && !c->installed) {
                pick = k;
                break;
            }
            if (pick == st->n_frames && (c->kind == RS_SITE_FRAME_PYTHON || c->kind == RS_SITE_FRAME_NATIVE))
                pick = k;
        }
        if (pick < st->n_frames) {
            uint32_t fi = st->frames[pick];
            rs_text_copy_head(at.function, sizeof at.function, rs_site_frame_function(pk, fi));
            rs_text_copy_head(at.file, sizeof at.file, s->frames[fi].file ? s->frames[fi].file : "");
            at.line = s->frames[fi].line;
            named = 1;
        }
        if (!named && j == st->n_frames) {
            rs_site_pick(pk, best->stack, &at);
            named = 1;
        }
    }
    /* a pool no stack names, whose id does not show a capture: a graph given a shared pool
     * handle and a MemPool have ids of one shape, so the report says it cannot tell them apart */
    const char *what = graph ? "CUDA graph pool"
                       : best->stack ? "private memory pool"
                                     : "private memory pool (no stack: a graph's or a MemPool's)";
    if (named) {
        char name[sizeof out->function + 80];
        snprintf(name, sizeof name, "%s of %s", what, at.function);
        rs_text_copy_head(out->function, sizeof out->function, name);
    } else
        rs_text_copy_head(out->function, sizeof out->function, what);
    memcpy(out->file, at.file, sizeof out->file);
    out->line = at.line;
    out->bytes = (int64_t)(best_bytes > INT64_MAX ? INT64_MAX : best_bytes);
    out->blocks = 0;
    return 1;
}
