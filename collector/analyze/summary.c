/*
 * summarize.c — one rank's snapshot reduced to what the comparison needs: its peaks, the per-step
 * peak series, the OOM and the allocation sites that held memory at the peak (rs_summary_of,
 * rs_site_list_at_peak).
 *
 * The snapshot has the state at the end and the history that led there, but not the state at
 * the peak. So the history is replayed against a table of blocks keyed by address:
 * - the live set at the history's start is reconstructed first: a block whose first event in the
 *   history is a free_requested was alive before it (its allocation was dropped from the ring or
 *   happened before recording; its stack is unknown: site "(before recording)"), and a block alive
 *   at the end with no event in the history was alive throughout, under its own stack;
 * - then events are applied forward: `alloc` adds the block, `free_requested` removes it (a block
 *   awaiting stream events is already freed as far as allocated bytes go, as in PyTorch's stats).
 * Trace events carry the requested size; the allocator counts the rounded block size, so a size
 * is rounded up to allocator_settings.min_block_size, except that the last allocation of a block
 * still alive at the end takes the block's exact size from the state. The allocated level at the
 * history's start is totals.allocated_bytes_current minus the sum of the replayed deltas, so the
 * replay ends exactly at the current value; reserved bytes are replayed the same way from
 * segment_alloc / segment_free.
 * Rings that dropped events, recording that was switched off for a while, or a crash-path
 * snapshot can make the history inconsistent (a free of an unknown block, an allocation over a
 * live one): every such event is applied as best it can be and every level saturates at 0 and at
 * the integer range, so a bad history gives a worse answer, never a crash or a negative number.
 *
 * Sites are the innermost frame that is not ranksnap's own, keyed by function, file and line
 * (never by pc or address) so that they match across ranks whose libraries loaded elsewhere.
 */
#include <stdlib.h>
#include <string.h>

#include "addr_hash.h"
#include "compare.h"
#include "errors.h"
#include "text.h"

/* Pseudo stack id of a block that was alive before the history began (stack unknown). */
#define STACK_BEFORE UINT32_MAX
/* Moment "the state at the end", for which the state's own blocks are exact. */
#define MOMENT_END INT64_MAX

enum { SLOT_USED = 1, SLOT_LIVE = 2, SLOT_START_LIVE = 4, SLOT_END_LIVE = 8, SLOT_SEEN = 16 };

typedef struct slot {
    uint64_t addr;
    uint64_t size, start_size, end_size;
    uint64_t last_event; /* index of the last alloc/free_requested of this address */
    uint32_t stack, start_stack, end_stack;
    uint32_t flags;
} slot;

typedef struct replay {
    const rs_snap *s;
    slot *slots;
    size_t mask;
    uint64_t min_block;
} replay;

/* What the first pass over the history finds. */
typedef struct scan {
    int any_alloc;      /* an alloc or free_requested event exists */
    int64_t peak;       /* event index after which allocated peaked, -1 = at the start */
    int64_t last_oom;   /* index of the last oom event, -1 = none */
    int64_t alloc_sum;  /* sum of allocated deltas over the history */
    int64_t res_sum;    /* sum of reserved deltas */
    int any_step;
    int64_t step_min, step_max;
} scan;

/* ---- saturating arithmetic: sizes come from an untrusted file ------------------------------ */

static int64_t sat_add(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}

static int64_t to_i64(uint64_t u)
{
    return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
}

/* base + rel, clamped to [0, UINT64_MAX]. */
static uint64_t apply(uint64_t base, int64_t rel)
{
    if (rel >= 0) {
        uint64_t r = (uint64_t)rel;
        return base > UINT64_MAX - r ? UINT64_MAX : base + r;
    }
    uint64_t m = rel == INT64_MIN ? (uint64_t)INT64_MAX + 1 : (uint64_t)-rel;
    return base > m ? base - m : 0;
}

static uint64_t add_u64(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static int own_frame(const rs_snap *s, const rs_snap_frame *f);

int rs_site_frame_is_ranksnaps(const rs_snap *s, const rs_snap_frame *f)
{
    return own_frame(s, f);
}

static int own_frame(const rs_snap *s, const rs_snap_frame *f)
{
    /* __wrap_cudaMalloc & co. are ranksnap's too, though linked into the program (ranksnap::wrap) */
    if (strncmp(f->function, "ranksnap_", 9) == 0 || strncmp(f->function, "rs_", 3) == 0 ||
        strncmp(f->function, "__wrap_cuda", 11) == 0)
        return 1;
    if (f->module >= 0 && (size_t)f->module < s->n_modules &&
        strstr(s->modules[f->module].path, "libranksnap"))
        return 1;
    return 0;
}

/* Frames of the framework rather than of the user's code, for snapshots that ask to skip them
 * (PyTorch's, whose stacks interleave C++ frames, torch's Python and the standard library with
 * the user's lines): C++ frames without a source file ("??"), torch and its C++ sources, the
 * Python standard library (lib/python3.X outside site-packages / dist-packages) and frozen
 * modules. Packages a user installed (transformers, ...) count as user code. */
static int framework_frame(const rs_snap_frame *f)
{
    const char *file = f->file;
    if (!file[0] || strcmp(file, "??") == 0) return 1;
    if (strstr(file, "/torch/") || strstr(file, "-packages/torch") || strstr(file, "/c10/") ||
        strstr(file, "/aten/src/") || strncmp(file, "<frozen", 7) == 0)
        return 1;
    const char *lib = strstr(file, "lib/python3");
    return lib && !strstr(lib, "-packages/");
}

/* Frame index of the site of stack `id`, -1 for no stack. A stack made only of ranksnap's own
 * frames (cut short by RANKSNAP_STACK_DEPTH) falls back to its outermost frame, the one nearest
 * the application. With skip_framework_frames, a stack with no user frame falls back to its
 * innermost frame with a source file (a torch Python line says more than a C++ "??"), then to
 * its innermost frame that is not ranksnap's. */
static int64_t site_frame(const rs_snap *s, uint32_t id)
{
    if (id == 0 || id > s->n_stacks) return -1;
    const rs_snap_stack *st = &s->stacks[id - 1];
    if (st->n_frames == 0) return -1;
    int skip = s->skip_framework_frames;
    int64_t with_file = -1, other = -1;
    for (size_t i = 0; i < st->n_frames; i++) {
        const rs_snap_frame *f = &s->frames[st->frames[i]];
        if (own_frame(s, f)) continue;
        if (!skip || !framework_frame(f)) return st->frames[i];
        if (other < 0) other = st->frames[i];
        if (with_file < 0 && f->file[0] && strcmp(f->file, "??") != 0) with_file = st->frames[i];
    }
    if (with_file >= 0) return with_file;
    if (other >= 0) return other;
    return st->frames[st->n_frames - 1];
}

static void site_from_frame(const rs_snap *s, int64_t frame, rs_site *out)
{
    memset(out, 0, sizeof *out);
    if (frame < 0) {
        rs_text_copy_head(out->function, sizeof out->function, "(no stack)");
        return;
    }
    const rs_snap_frame *f = &s->frames[frame];
    rs_text_copy_head(out->function, sizeof out->function, f->function);
    /* An unresolved frame is at least "?? in libnccl.so.2": the module is the same on every
     * rank, its pc is not. */
    const char *file = f->file;
    if (strcmp(f->function, "??") == 0 && strcmp(f->file, "??") == 0 && f->module >= 0 &&
        (size_t)f->module < s->n_modules && s->modules[f->module].path[0])
        file = rs_text_basename(s->modules[f->module].path);
    rs_text_copy_tail(out->file, sizeof out->file, file);
    out->line = f->line;
}

int rs_site_same(const rs_site *a, const rs_site *b)
{
    return a->line == b->line && strcmp(a->function, b->function) == 0 &&
           strcmp(a->file, b->file) == 0;
}

int rs_site_cmp(const rs_site *a, const rs_site *b)
{
    int c = strcmp(a->function, b->function);
    if (c) return c;
    c = strcmp(a->file, b->file);
    if (c) return c;
    return (a->line > b->line) - (a->line < b->line);
}

static int cmp_key(const void *pa, const void *pb)
{
    return rs_site_cmp(pa, pb);
}

static int cmp_bytes_desc(const void *pa, const void *pb)
{
    const rs_site *a = pa, *b = pb;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    return rs_site_cmp(a, b);
}

void rs_site_of_stack(const rs_snap *s, uint32_t stack, rs_site *out)
{
    site_from_frame(s, site_frame(s, stack), out);
}

/* Per-frame byte counters, turned into merged, sorted sites. Index n_frames is "(no stack)",
 * n_frames + 1 "(before recording)". */
typedef struct tally {
    const rs_snap *s;
    int64_t *frame_of_stack; /* [n_stacks + 1] */
    uint64_t *bytes;
    uint64_t *blocks;
} tally;

static ranksnap_status tally_init(tally *t, const rs_snap *s)
{
    memset(t, 0, sizeof *t);
    t->s = s;
    t->frame_of_stack = malloc((s->n_stacks + 1) * sizeof *t->frame_of_stack);
    t->bytes = calloc(s->n_frames + 2, sizeof *t->bytes);
    t->blocks = calloc(s->n_frames + 2, sizeof *t->blocks);
    if (!t->frame_of_stack || !t->bytes || !t->blocks) {
        free(t->frame_of_stack);
        free(t->bytes);
        free(t->blocks);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY,
                        "rank %d: no memory to tally %zu frames of %zu stacks", s->rank,
                        s->n_frames, s->n_stacks);
    }
    for (size_t i = 0; i <= s->n_stacks; i++) t->frame_of_stack[i] = site_frame(s, (uint32_t)i);
    return RANKSNAP_OK;
}

static void tally_add(tally *t, uint32_t stack, uint64_t bytes)
{
    size_t i;
    if (stack == STACK_BEFORE)
        i = t->s->n_frames + 1;
    else if (stack > t->s->n_stacks || t->frame_of_stack[stack] < 0)
        i = t->s->n_frames;
    else
        i = (size_t)t->frame_of_stack[stack];
    t->bytes[i] = add_u64(t->bytes[i], bytes);
    t->blocks[i]++;
}

/* Consumes the tally. */
static ranksnap_status tally_finish(tally *t, rs_site **out, size_t *n_out)
{
    const rs_snap *s = t->s;
    size_t n = 0;
    for (size_t i = 0; i < s->n_frames + 2; i++)
        if (t->blocks[i]) n++;
    rs_site *v = calloc(n ? n : 1, sizeof *v);
    if (!v) {
        free(t->frame_of_stack);
        free(t->bytes);
        free(t->blocks);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rank %d: no memory for %zu sites", s->rank, n);
    }
    n = 0;
    for (size_t i = 0; i < s->n_frames + 2; i++) {
        if (!t->blocks[i]) continue;
        if (i == s->n_frames + 1) {
            memset(&v[n], 0, sizeof v[n]);
            rs_text_copy_head(v[n].function, sizeof v[n].function, "(before recording)");
        } else {
            site_from_frame(s, i == s->n_frames ? -1 : (int64_t)i, &v[n]);
        }
        v[n].bytes = to_i64(t->bytes[i]);
        v[n].blocks = t->blocks[i] > INT32_MAX ? INT32_MAX : (int32_t)t->blocks[i];
        n++;
    }
    free(t->frame_of_stack);
    free(t->bytes);
    free(t->blocks);
    /* Two pcs on one source line are one site. */
    qsort(v, n, sizeof *v, cmp_key);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && rs_site_same(&v[m - 1], &v[i])) {
            v[m - 1].bytes = sat_add(v[m - 1].bytes, v[i].bytes);
            v[m - 1].blocks = v[m - 1].blocks > INT32_MAX - v[i].blocks
                                  ? INT32_MAX
                                  : v[m - 1].blocks + v[i].blocks;
        } else {
            v[m++] = v[i];
        }
    }
    qsort(v, m, sizeof *v, cmp_bytes_desc);
    *out = v;
    *n_out = m;
    return RANKSNAP_OK;
}

/* ---- replay -------------------------------------------------------------------------------- */

/* The slot of `addr`, created when missing (the table is sized so that it never fills). */
static slot *slot_get(replay *rp, uint64_t addr)
{
    size_t i = rs_addr_hash(addr) & rp->mask;
    while (rp->slots[i].flags & SLOT_USED) {
        if (rp->slots[i].addr == addr) return &rp->slots[i];
        i = (i + 1) & rp->mask;
    }
    rp->slots[i].flags = SLOT_USED;
    rp->slots[i].addr = addr;
    return &rp->slots[i];
}

static int is_block_event(uint8_t a)
{
    return a == RS_ACT_ALLOC || a == RS_ACT_FREE_REQUESTED;
}

/* The allocator's rounding of a request (PyTorch's round_size for the minimum block). */
static uint64_t block_size_of(const replay *rp, uint64_t requested)
{
    uint64_t m = rp->min_block;
    if (requested < m) return m;
    uint64_t r = requested % m;
    if (r == 0) return requested;
    return requested > UINT64_MAX - (m - r) ? UINT64_MAX : requested + (m - r);
}

static void replay_free(replay *rp)
{
    free(rp->slots);
    rp->slots = NULL;
}

/* Builds the table and the live set at the history's start. */
static ranksnap_status replay_init(replay *rp, const rs_snap *s)
{
    memset(rp, 0, sizeof *rp);
    rp->s = s;
    rp->min_block = s->allocator.min_block_size ? s->allocator.min_block_size : 512;
    const rs_snap_history *h = &s->history;

    uint64_t keys = 1;
    for (size_t i = 0; i < s->n_segments; i++) keys += s->segments[i].n_blocks;
    for (uint64_t i = 0; i < h->count; i++)
        if (is_block_event(h->action[i])) keys++;
    size_t cap = 16;
    while (cap < 2 * keys && cap < ((size_t)1 << 62)) cap <<= 1;
    rp->slots = calloc(cap, sizeof *rp->slots);
    if (!rp->slots)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY,
                        "rank %d: no memory to replay %llu events over %llu blocks", s->rank,
                        (unsigned long long)h->count, (unsigned long long)keys);
    rp->mask = cap - 1;

    for (size_t i = 0; i < s->n_segments; i++) {
        for (size_t k = 0; k < s->segments[i].n_blocks; k++) {
            const rs_snap_block *b = &s->segments[i].blocks[k];
            if (b->state != RS_BLOCK_ACTIVE_ALLOCATED) continue;
            slot *sl = slot_get(rp, b->addr);
            sl->flags |= SLOT_END_LIVE;
            sl->end_size = b->size;
            sl->end_stack = b->stack;
        }
    }
    for (uint64_t i = 0; i < h->count; i++) {
        uint8_t a = h->action[i];
        if (!is_block_event(a)) continue;
        slot *sl = slot_get(rp, h->addr[i]);
        if (!(sl->flags & SLOT_SEEN)) {
            sl->flags |= SLOT_SEEN;
            if (a == RS_ACT_FREE_REQUESTED) {
                sl->flags |= SLOT_START_LIVE;
                sl->start_size = block_size_of(rp, h->size[i]);
                sl->start_stack = STACK_BEFORE;
            }
        }
        sl->last_event = i;
    }
    for (size_t i = 0; i <= rp->mask; i++) {
        slot *sl = &rp->slots[i];
        if ((sl->flags & SLOT_END_LIVE) && !(sl->flags & SLOT_SEEN)) {
            sl->flags |= SLOT_START_LIVE;
            sl->start_size = sl->end_size;
            sl->start_stack = sl->end_stack;
        }
    }
    return RANKSNAP_OK;
}

/* Back to the live set at the history's start. */
static void replay_reset(replay *rp)
{
    for (size_t i = 0; i <= rp->mask; i++) {
        slot *sl = &rp->slots[i];
        if (!(sl->flags & SLOT_USED)) continue;
        sl->flags &= ~(uint32_t)SLOT_LIVE;
        if (sl->flags & SLOT_START_LIVE) {
            sl->flags |= SLOT_LIVE;
            sl->size = sl->start_size;
            sl->stack = sl->start_stack;
        }
    }
}

/* Applies event i; returns the change of allocated bytes and sets *d_res to that of reserved. */
static int64_t replay_event(replay *rp, uint64_t i, int64_t *d_res)
{
    const rs_snap_history *h = &rp->s->history;
    *d_res = 0;
    switch (h->action[i]) {
    case RS_ACT_ALLOC: {
        slot *sl = slot_get(rp, h->addr[i]);
        int64_t d = 0;
        /* Allocated over a live block: its free was not recorded. */
        if (sl->flags & SLOT_LIVE) d = -to_i64(sl->size);
        if ((sl->flags & SLOT_END_LIVE) && sl->last_event == i)
            sl->size = sl->end_size;
        else
            sl->size = block_size_of(rp, h->size[i]);
        sl->stack = h->stack[i];
        sl->flags |= SLOT_LIVE;
        return sat_add(d, to_i64(sl->size));
    }
    case RS_ACT_FREE_REQUESTED: {
        slot *sl = slot_get(rp, h->addr[i]);
        if (!(sl->flags & SLOT_LIVE)) return 0;
        sl->flags &= ~(uint32_t)SLOT_LIVE;
        return -to_i64(sl->size);
    }
    case RS_ACT_SEGMENT_ALLOC:
        *d_res = to_i64(h->size[i]);
        return 0;
    case RS_ACT_SEGMENT_FREE:
        *d_res = -to_i64(h->size[i]);
        return 0;
    default:
        return 0;
    }
}

/* First pass: where allocated peaks, the sums of the deltas, the last OOM and the step span. */
static void replay_scan(replay *rp, scan *sc)
{
    const rs_snap_history *h = &rp->s->history;
    memset(sc, 0, sizeof *sc);
    sc->peak = -1;
    sc->last_oom = -1;
    replay_reset(rp);
    int64_t level = 0, best = 0;
    for (uint64_t i = 0; i < h->count; i++) {
        uint8_t a = h->action[i];
        int64_t d_res;
        int64_t d = replay_event(rp, i, &d_res);
        level = sat_add(level, d);
        sc->res_sum = sat_add(sc->res_sum, d_res);
        if (is_block_event(a)) sc->any_alloc = 1;
        if (level > best) {
            best = level;
            sc->peak = (int64_t)i;
        }
        if (a == RS_ACT_OOM) sc->last_oom = (int64_t)i;
        if (a == RS_ACT_STEP) {
            int64_t st = (int64_t)h->size[i];
            if (!sc->any_step || st < sc->step_min) sc->step_min = st;
            if (!sc->any_step || st > sc->step_max) sc->step_max = st;
            sc->any_step = 1;
        }
    }
    sc->alloc_sum = level;
}

/* The moment whose live sites explain the rank: its OOM when it had one (the last oom event, or
 * the end state when the ring lost it), otherwise its peak. */
static int64_t sites_moment(const rs_snap *s, const scan *sc)
{
    if (s->has_oom) return sc->last_oom >= 0 ? sc->last_oom : MOMENT_END;
    if (s->history.count == 0 || !sc->any_alloc) return MOMENT_END;
    return sc->peak;
}

static ranksnap_status sites_at(replay *rp, int64_t moment, rs_site **out, size_t *n)
{
    const rs_snap *s = rp->s;
    tally t;
    RS_CHECK(tally_init(&t, s));
    if (moment == MOMENT_END) {
        for (size_t i = 0; i < s->n_segments; i++)
            for (size_t k = 0; k < s->segments[i].n_blocks; k++) {
                const rs_snap_block *b = &s->segments[i].blocks[k];
                if (b->state == RS_BLOCK_ACTIVE_ALLOCATED) tally_add(&t, b->stack, b->size);
            }
    } else {
        replay_reset(rp);
        for (int64_t i = 0; i <= moment; i++) {
            int64_t d_res;
            (void)replay_event(rp, (uint64_t)i, &d_res);
        }
        for (size_t i = 0; i <= rp->mask; i++)
            if (rp->slots[i].flags & SLOT_LIVE) tally_add(&t, rp->slots[i].stack, rp->slots[i].size);
    }
    return tally_finish(&t, out, n);
}

ranksnap_status rs_site_list_at_peak(const rs_snap *s, rs_site **out, size_t *n)
{
    if (!s || !out || !n)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_site_list_at_peak: NULL argument");
    *out = NULL;
    *n = 0;
    replay rp;
    RS_CHECK(replay_init(&rp, s));
    scan sc;
    replay_scan(&rp, &sc);
    ranksnap_status st = sites_at(&rp, sites_moment(s, &sc), out, n);
    replay_free(&rp);
    return st;
}

/* ---- summary ------------------------------------------------------------------------------- */

/* Second pass: per-step peaks of allocated bytes and the reserved level at the peak. */
static void step_series(replay *rp, const scan *sc, rs_summary *out)
{
    const rs_snap *s = rp->s;
    const rs_snap_history *h = &s->history;
    uint64_t l0 = apply(s->totals.allocated_bytes_current,
                        sc->alloc_sum == INT64_MIN ? INT64_MAX : -sc->alloc_sum);
    uint64_t r0 = apply(s->totals.reserved_bytes_current,
                        sc->res_sum == INT64_MIN ? INT64_MAX : -sc->res_sum);
    int64_t rel = 0, rel_res = 0;
    uint64_t max_level = l0, max_res = r0;

    /* Buckets of `stride` consecutive step numbers; a span too wide for an int32 stride (step
     * numbers that are not a training loop's) gives no series. */
    uint64_t stride = 1, span = 0;
    int series = sc->any_step;
    if (series) {
        span = (uint64_t)sc->step_max - (uint64_t)sc->step_min;
        stride = span / RS_SUMMARY_MAX_STEPS + 1;
        if (span + 1 <= RS_SUMMARY_MAX_STEPS) stride = 1;
        if (stride > INT32_MAX) series = 0;
    }
    for (int k = 0; k < RS_SUMMARY_MAX_STEPS; k++) out->step_peak[k] = RS_SUMMARY_NO_DATA;
    int64_t cur = -1;
    if (sc->peak < 0) out->reserved_at_peak = r0;

    replay_reset(rp);
    for (uint64_t i = 0; i < h->count; i++) {
        int64_t d_res;
        int64_t d = replay_event(rp, i, &d_res);
        rel = sat_add(rel, d);
        rel_res = sat_add(rel_res, d_res);
        uint64_t level = apply(l0, rel), res = apply(r0, rel_res);
        if (level > max_level) max_level = level;
        if (res > max_res) max_res = res;
        if ((int64_t)i == sc->peak) out->reserved_at_peak = res;
        if (!series) continue;
        if (h->action[i] == RS_ACT_STEP)
            cur = (int64_t)(((uint64_t)(int64_t)h->size[i] - (uint64_t)sc->step_min) / stride);
        if (cur >= 0 && (out->step_peak[cur] == RS_SUMMARY_NO_DATA || level > out->step_peak[cur]))
            out->step_peak[cur] = level;
    }
    if (series) {
        out->n_steps = (int32_t)(span / stride + 1);
        out->step_stride = (int32_t)stride;
        out->step_first = sc->step_min;
    }
    if (!sc->any_alloc) out->reserved_at_peak = s->totals.reserved_bytes_peak;
    /* Totals come from the allocator itself; the replay can only add what they lack (a snapshot
     * converted from elsewhere with no totals). */
    if (max_level > out->peak_allocated) out->peak_allocated = max_level;
    if (max_res > out->peak_reserved) out->peak_reserved = max_res;
}

const char *rs_summary_outside_label_name(const char *label)
{
    static const char *const names[][2] = {{"nccl", "NCCL"},
                                           {"nccl_mem", "ncclMemAlloc"},
                                           {"cuda_mempool", "cudaMallocFromPoolAsync"},
                                           {"other", "other holders"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(label, names[i][0])) return names[i][1];
    return label;
}

/* The holders that hold something, largest first (a few: insertion sort). */
static void summarize_outside_labels(const rs_snap_totals *t, rs_summary *out)
{
    int n = 0;
    for (size_t i = 0; i < t->n_outside_labels; i++) {
        const rs_snap_outside_label *l = &t->outside_labels[i];
        if (!l->bytes) continue;
        int at = n < RS_SUMMARY_MAX_OUTSIDE_LABELS ? n : RS_SUMMARY_MAX_OUTSIDE_LABELS - 1;
        if (n == RS_SUMMARY_MAX_OUTSIDE_LABELS && out->outside_labels[at].bytes >= l->bytes) continue;
        while (at > 0 && out->outside_labels[at - 1].bytes < l->bytes) {
            out->outside_labels[at] = out->outside_labels[at - 1];
            at--;
        }
        rs_text_copy_head(out->outside_labels[at].label, sizeof out->outside_labels[at].label, l->label);
        out->outside_labels[at].bytes = l->bytes;
        if (n < RS_SUMMARY_MAX_OUTSIDE_LABELS) n++;
    }
    out->n_outside_labels = n;
}

void rs_summary_of(const rs_snap *s, rs_summary *out)
{
    memset(out, 0, sizeof *out);
    const rs_snap_totals *t = &s->totals;
    out->rank = s->rank;
    out->world_size = s->world_size;
    out->complete = s->complete;
    out->oom = s->has_oom;
    rs_text_copy_head(out->host, sizeof out->host, s->host ? s->host : "");
    rs_text_copy_head(out->job, sizeof out->job, s->job ? s->job : "");
    out->peak_allocated = t->allocated_bytes_peak;
    out->peak_reserved = t->reserved_bytes_peak;
    out->reserved_at_peak = t->reserved_bytes_peak;
    out->outside_peak = t->outside_bytes_peak;
    out->outside_end = t->outside_bytes_end;
    summarize_outside_labels(t, out);
    out->peak_step = t->peak_step;
    out->clock_offset_us = s->time.clock_offset_us;
    out->peak_time_us = t->peak_time_us
                            ? sat_add(to_i64(t->peak_time_us), s->time.clock_offset_us)
                            : 0;
    out->events = s->history.count;
    out->dropped = s->history.dropped > t->events_dropped ? s->history.dropped : t->events_dropped;
    for (int k = 0; k < RS_SUMMARY_MAX_STEPS; k++) out->step_peak[k] = RS_SUMMARY_NO_DATA;
    out->step_stride = 1;
    if (s->has_oom) {
        out->oom_requested = s->oom.requested;
        out->oom_device_free = s->oom.device_free;
        out->oom_device_total = s->oom.device_total;
        out->oom_allocated = s->oom.allocated;
        out->oom_reserved = s->oom.reserved;
        out->oom_memory_limit = s->oom.memory_limit;
        out->oom_step = s->oom.step;
        rs_site_of_stack(s, s->oom.stack, &out->oom_site);
    }

    /* Without memory for the replay the summary keeps the totals: still a fair summary. */
    replay rp;
    if (replay_init(&rp, s) != RANKSNAP_OK) return;
    scan sc;
    replay_scan(&rp, &sc);
    step_series(&rp, &sc, out);
    rs_site *sites = NULL;
    size_t n = 0;
    if (sites_at(&rp, sites_moment(s, &sc), &sites, &n) == RANKSNAP_OK) {
        out->n_sites = (int32_t)(n < RS_SUMMARY_MAX_SITES ? n : RS_SUMMARY_MAX_SITES);
        memcpy(out->sites, sites, (size_t)out->n_sites * sizeof *sites);
    }
    free(sites);
    replay_free(&rp);
}
