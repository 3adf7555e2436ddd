/*
 * timeline.c — a rank's history walked into a bounded, drawable timeline (timeline.h).
 *
 * The one history walk (walk.h) gives the levels, the first peak and the last OOM, by the rules
 * the summary uses too, so the page's peak is the report's. Walked once more here, the events are
 * cut into consecutive buckets, which keep the time of their first event and the lowest, highest
 * and last level they saw: a min/max per bucket, so a 1-event spike stays visible however many
 * events share one. A bucket closes after count / (max_points / 2) events or after
 * span / (max_points / 2) µs, whichever comes first, so there are at most max_points of them:
 * dense bursts get as many buckets as their events deserve (a training step's few milliseconds
 * after a long initialization would get one or two buckets of equal time), and a long quiet
 * stretch never shares a bucket with what follows it. The page merges buckets per pixel column
 * as it draws. At the moment (the peak, or the OOM) the live blocks are copied out.
 * Sizes come from an untrusted file: levels saturate at 0 and UINT64_MAX, never wrap.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "sat.h"
#include "text.h"
#include "timeline.h"
#include "walk.h"

#define NO_INDEX UINT32_MAX

/* ---- building ------------------------------------------------------------------------------ */

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

void rs_timeline_free(rs_timeline *t)
{
    if (!t) return;
    free(t->alloc.index);
    free(t->alloc.t);
    free(t->alloc.lo);
    free(t->alloc.hi);
    free(t->alloc.last);
    free(t->reserved.index);
    free(t->reserved.t);
    free(t->reserved.lo);
    free(t->reserved.hi);
    free(t->reserved.last);
    free(t->big_size);
    free(t->big_site);
    for (size_t i = 0; i < t->n_site_names; i++) free(t->site_names[i]);
    free(t->site_names);
    free(t->step_t);
    free(t->step_no);
    free(t->range_t0);
    free(t->range_t1);
    free(t->range_begin);
    free(t->range_end);
    free(t->live);
    for (size_t i = 0; i < t->n_stacks; i++) free(t->stacks[i].frames);
    free(t->stacks);
    for (size_t i = 0; i < t->n_frames; i++) {
        free(t->frames[i].function);
        free(t->frames[i].file);
    }
    free(t->frames);
    free(t->sites);
    free(t->site_paths);
    free(t->site_stack);
    free(t);
}

uint32_t rs_timeline_points_for(size_t n_ranks)
{
    if (n_ranks <= 64) return RS_TIMELINE_DEFAULT_POINTS;
    size_t p = 128000 / n_ranks;
    return p < 200 ? 200 : (uint32_t)p;
}

/* Dense per-bucket accumulators of one level, compacted into an rs_timeline_series at the end. */
typedef struct dense {
    uint64_t *lo, *hi, *last;
    uint8_t *seen;
} dense;

static int dense_init(dense *d, uint32_t n)
{
    d->lo = malloc(n * sizeof *d->lo);
    d->hi = malloc(n * sizeof *d->hi);
    d->last = malloc(n * sizeof *d->last);
    d->seen = calloc(n, 1);
    return d->lo && d->hi && d->last && d->seen ? 0 : -1;
}

static void dense_free(dense *d)
{
    free(d->lo);
    free(d->hi);
    free(d->last);
    free(d->seen);
}

static void dense_add(dense *d, uint32_t b, uint64_t level)
{
    if (!d->seen[b]) {
        d->seen[b] = 1;
        d->lo[b] = d->hi[b] = level;
    } else {
        if (level < d->lo[b]) d->lo[b] = level;
        if (level > d->hi[b]) d->hi[b] = level;
    }
    d->last[b] = level;
}

/* Only the buckets that saw an event, in order; `bt` is each bucket's start time. */
static int dense_compact(const dense *d, const int64_t *bt, uint32_t n, rs_timeline_series *out)
{
    size_t m = 0;
    for (uint32_t b = 0; b < n; b++) m += d->seen[b];
    out->n = 0;
    out->index = malloc((m ? m : 1) * sizeof *out->index);
    out->t = malloc((m ? m : 1) * sizeof *out->t);
    out->lo = malloc((m ? m : 1) * sizeof *out->lo);
    out->hi = malloc((m ? m : 1) * sizeof *out->hi);
    out->last = malloc((m ? m : 1) * sizeof *out->last);
    if (!out->index || !out->t || !out->lo || !out->hi || !out->last) return -1;
    for (uint32_t b = 0; b < n; b++) {
        if (!d->seen[b]) continue;
        out->index[out->n] = b;
        out->t[out->n] = bt[b];
        out->lo[out->n] = d->lo[b];
        out->hi[out->n] = d->hi[b];
        out->last[out->n] = d->last[b];
        out->n++;
    }
    return 0;
}

/* Index of the site name of snapshot stack `stack`, added on first use. `memo` has n_stacks + 2
 * entries (NO_INDEX = not yet named), the last for RS_WALK_STACK_BEFORE. */
static uint32_t site_name_of(rs_timeline *t, const rs_site_picker *pk, uint32_t *memo,
                             uint32_t stack, int *oom)
{
    const rs_snap *s = pk->s;
    size_t m = stack == RS_WALK_STACK_BEFORE ? s->n_stacks + 1 : stack > s->n_stacks ? 0 : stack;
    if (memo[m] != NO_INDEX) return memo[m];
    rs_site site;
    rs_site_path path;
    rs_site_pick_path(pk, m == s->n_stacks + 1 ? 0 : (uint32_t)m, &site, &path);
    if (m == s->n_stacks + 1) {
        snprintf(site.function, sizeof site.function, "(before recording)");
        rs_site_path_of_site(&site, &path);
    }
    char buf[RS_SITE_PATH_MAX * (RS_SITE_FUNC_LEN + RS_SITE_FILE_LEN + 32)];
    rs_site_path_format(&path, buf, sizeof buf);
    /* Two stacks of one site share a name: the page lists each site once. */
    for (size_t i = 0; i < t->n_site_names; i++)
        if (strcmp(t->site_names[i], buf) == 0) return memo[m] = (uint32_t)i;
    char *p = dup_str(buf);
    char **v = realloc(t->site_names, (t->n_site_names + 1) * sizeof *v);
    if (!p || !v) {
        free(p);
        if (v) t->site_names = v;
        *oom = 1;
        return RS_TIMELINE_NO_SITE;
    }
    t->site_names = v;
    v[t->n_site_names] = p;
    return memo[m] = (uint32_t)t->n_site_names++;
}

static int cmp_block_desc(const void *pa, const void *pb)
{
    const rs_timeline_block *a = pa, *b = pb;
    if (a->size != b->size) return a->size > b->size ? -1 : 1;
    return (a->addr > b->addr) - (a->addr < b->addr);
}

/* Copies snapshot stacks into the timeline, each stack and frame once: those of the largest live
 * blocks, then those the sites' paths were taken from (so that the page can open a site onto its
 * whole stack). Room for RS_TIMELINE_MAX_LIVE + RS_TIMELINE_MAX_SITES stacks. */
typedef struct stack_copier {
    uint32_t *frame_map; /* snapshot frame index -> timeline frame, NO_INDEX */
    uint32_t *stack_map; /* snapshot stack id -> timeline stack, NO_INDEX */
} stack_copier;

static int copier_init(stack_copier *c, rs_timeline *t, const rs_snap *s)
{
    size_t room = RS_TIMELINE_MAX_LIVE + RS_TIMELINE_MAX_SITES;
    c->frame_map = malloc((s->n_frames ? s->n_frames : 1) * sizeof *c->frame_map);
    c->stack_map = malloc((s->n_stacks + 1) * sizeof *c->stack_map);
    t->stacks = calloc(room, sizeof *t->stacks);
    t->frames = calloc(room * RS_TIMELINE_MAX_FRAMES + 1, sizeof *t->frames);
    if (!c->frame_map || !c->stack_map || !t->stacks || !t->frames) return -1;
    for (size_t i = 0; i < s->n_frames; i++) c->frame_map[i] = NO_INDEX;
    for (size_t i = 0; i <= s->n_stacks; i++) c->stack_map[i] = NO_INDEX;
    return 0;
}

static void copier_free(stack_copier *c)
{
    free(c->frame_map);
    free(c->stack_map);
}

/* The timeline's index of snapshot stack `id` (RS_TIMELINE_NO_SITE for none), copied on first
 * use with its functions as the reports show them (demangled). */
static uint32_t copy_stack(rs_timeline *t, stack_copier *c, const rs_site_picker *pk, uint32_t id,
                           int *bad)
{
    const rs_snap *s = pk->s;
    if (id == 0 || id == RS_WALK_STACK_BEFORE || id > s->n_stacks) return RS_TIMELINE_NO_SITE;
    if (c->stack_map[id] != NO_INDEX) return c->stack_map[id];
    const rs_snap_stack *st = &s->stacks[id - 1];
    size_t nf = st->n_frames < RS_TIMELINE_MAX_FRAMES ? st->n_frames : RS_TIMELINE_MAX_FRAMES;
    rs_timeline_stack *out = &t->stacks[t->n_stacks];
    out->frames = malloc((nf ? nf : 1) * sizeof *out->frames);
    if (!out->frames) {
        *bad = 1;
        return RS_TIMELINE_NO_SITE;
    }
    c->stack_map[id] = (uint32_t)t->n_stacks++;
    for (size_t k = 0; k < nf; k++) {
        uint32_t f = st->frames[k];
        if (c->frame_map[f] == NO_INDEX) {
            rs_timeline_frame *fr = &t->frames[t->n_frames];
            fr->function = dup_str(rs_site_frame_function(pk, f));
            fr->file = dup_str(s->frames[f].file);
            fr->line = s->frames[f].line;
            if (!fr->function || !fr->file) {
                free(fr->function);
                free(fr->file);
                fr->function = fr->file = NULL;
                *bad = 1;
                break;
            }
            c->frame_map[f] = (uint32_t)t->n_frames++;
        }
        out->frames[out->n_frames++] = c->frame_map[f];
    }
    return c->stack_map[id];
}

/* The largest live blocks, with their sites and stacks copied into the timeline. Blocks are
 * rs_timeline_block whose `stack` is still the snapshot's id (RS_WALK_STACK_BEFORE for none);
 * `memo` is site_name_of's. */
static int keep_live(rs_timeline *t, stack_copier *c, const rs_site_picker *pk, rs_timeline_block *v,
                     size_t n, uint32_t *memo)
{
    qsort(v, n, sizeof *v, cmp_block_desc);
    if (n > RS_TIMELINE_MAX_LIVE) n = RS_TIMELINE_MAX_LIVE;
    t->live = malloc((n ? n : 1) * sizeof *t->live);
    if (!t->live) return -1;
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++) {
        t->live[i] = v[i];
        t->live[i].site = site_name_of(t, pk, memo, v[i].stack, &bad);
        t->live[i].stack = copy_stack(t, c, pk, v[i].stack, &bad);
    }
    t->n_live = bad ? 0 : n;
    return bad ? -1 : 0;
}

/* Live bytes by site at the moment, with each site's path and the stack it was taken from. */
static ranksnap_status keep_sites(rs_timeline *t, stack_copier *c, const rs_site_picker *pk, rs_walk *w)
{
    rs_site *sites = NULL;
    rs_site_path *paths = NULL;
    size_t n = 0;
    RS_CHECK(rs_site_list_at_moment(w, &sites, &paths, &n));
    t->sites = sites;
    t->site_paths = paths;
    t->n_sites = n < RS_TIMELINE_MAX_SITES ? n : RS_TIMELINE_MAX_SITES;
    t->site_stack = malloc((t->n_sites ? t->n_sites : 1) * sizeof *t->site_stack);
    int bad = !t->site_stack;
    for (size_t i = 0; i < t->n_sites && !bad; i++)
        t->site_stack[i] = copy_stack(t, c, pk, paths[i].stack, &bad);
    if (bad)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rank %d: no memory for the stacks of %zu sites",
                        pk->s->rank, t->n_sites);
    return RANKSNAP_OK;
}

/* Recorded ranges as time spans: from the first step marker inside the range to the first marker
 * after it (or the last event). A history that starts inside a range (older events dropped)
 * starts the span at its first event. */
static int ranges_of(rs_timeline *t, const rs_snap *s)
{
    const rs_snap_history *h = &s->history;
    size_t n = s->time.n_ranges;
    t->range_t0 = malloc((n ? n : 1) * sizeof *t->range_t0);
    t->range_t1 = malloc((n ? n : 1) * sizeof *t->range_t1);
    t->range_begin = malloc((n ? n : 1) * sizeof *t->range_begin);
    t->range_end = malloc((n ? n : 1) * sizeof *t->range_end);
    if (!t->range_t0 || !t->range_t1 || !t->range_begin || !t->range_end) return -1;
    int64_t off = s->time.clock_offset_us;
    for (size_t r = 0; r < n; r++) {
        int64_t b = s->time.ranges[r].begin, e = s->time.ranges[r].end;
        int64_t t0 = 0, t1 = 0;
        int in = 0, seen_step = 0;
        for (uint64_t i = 0; i < h->count; i++) {
            int64_t ti = rs_sat_add_i64(rs_sat_i64(h->time_us[i]), off);
            if (h->action[i] == RS_ACT_STEP) {
                int64_t st = (int64_t)h->size[i];
                int inside = st >= b && (e < 0 || st < e);
                if (!seen_step && inside && st > b && !in) {
                    /* the range began before the history does */
                    in = 1;
                    t0 = t->t_first;
                }
                seen_step = 1;
                if (inside && !in) {
                    in = 1;
                    t0 = ti;
                } else if (!inside && in) {
                    t1 = ti;
                    break;
                }
            }
            if (in) t1 = ti;
        }
        if (!in) continue;
        t->range_t0[t->n_ranges] = t0;
        t->range_t1[t->n_ranges] = t1;
        t->range_begin[t->n_ranges] = b;
        t->range_end[t->n_ranges] = e;
        t->n_ranges++;
    }
    return 0;
}

static int steps_of(rs_timeline *t, const rs_snap *s)
{
    const rs_snap_history *h = &s->history;
    size_t total = 0;
    for (uint64_t i = 0; i < h->count; i++) total += h->action[i] == RS_ACT_STEP;
    size_t every = total / RS_TIMELINE_MAX_STEPS + 1;
    size_t n = total / every + 1;
    t->step_t = malloc(n * sizeof *t->step_t);
    t->step_no = malloc(n * sizeof *t->step_no);
    if (!t->step_t || !t->step_no) return -1;
    size_t k = 0;
    for (uint64_t i = 0; i < h->count; i++) {
        if (h->action[i] != RS_ACT_STEP) continue;
        if (k++ % every != 0 || t->n_steps == n) continue;
        t->step_t[t->n_steps] = rs_sat_add_i64(rs_sat_i64(h->time_us[i]), s->time.clock_offset_us);
        t->step_no[t->n_steps] = (int64_t)h->size[i];
        t->n_steps++;
    }
    return 0;
}

/* The blocks live in the walk now; *out is malloc'ed. */
static int capture_live(rs_walk *w, rs_timeline_block **out, size_t *n)
{
    size_t m = 0, it = 0;
    while (rs_walk_next_live(w, &it)) m++;
    *out = malloc((m ? m : 1) * sizeof **out);
    *n = 0;
    if (!*out) return -1;
    it = 0;
    for (const rs_walk_block *b; (b = rs_walk_next_live(w, &it));) {
        (*out)[*n].addr = b->addr;
        (*out)[*n].size = b->size;
        (*out)[*n].stack = b->stack;
        (*n)++;
    }
    return 0;
}

/* Pass 2 and the live blocks at the moment: after event index `moment`, before the first event
 * for -1, the end state (whose blocks are exact) for RS_WALK_END. */
static int walk_levels(rs_timeline *t, rs_walk *w, stack_copier *sc, const rs_site_picker *pk,
                       uint32_t max_points, int64_t moment)
{
    const rs_snap *s = w->s;
    const rs_snap_history *h = &s->history;
    uint32_t n = max_points;
    dense da, dr;
    memset(&da, 0, sizeof da);
    memset(&dr, 0, sizeof dr);
    uint64_t *big = calloc(n ? n : 1, sizeof *big);
    uint32_t *big_stack = malloc((n ? n : 1) * sizeof *big_stack);
    uint32_t *memo = malloc((s->n_stacks + 2) * sizeof *memo);
    int64_t *bt = malloc((n ? n : 1) * sizeof *bt);
    rs_timeline_block *blocks = NULL;
    size_t n_blocks = 0;
    int bad = !big || !big_stack || !memo || !bt || dense_init(&da, n) != 0 ||
              dense_init(&dr, n) != 0;
    if (bad) goto done;
    for (size_t i = 0; i <= s->n_stacks + 1; i++) memo[i] = NO_INDEX;

    /* the two limits of a bucket (file comment): events, and µs from its first event */
    uint64_t half = n / 2 ? n / 2 : 1;
    uint64_t per = h->count / half + 1;
    /* unsigned: t_last >= t_first, and a crafted file's times may span more than INT64_MAX */
    uint64_t width = ((uint64_t)t->t_last - (uint64_t)t->t_first) / half + 1;
    uint64_t in_bucket = 0;
    int64_t b_start = 0;
    uint32_t b = 0;
    int open = 0;
    rs_walk_reset(w);
    if (moment < 0 && capture_live(w, &blocks, &n_blocks) != 0) {
        bad = 1;
        goto done;
    }
    rs_walk_change c;
    for (uint64_t i = 0; i < h->count; i++) {
        uint64_t level = w->allocated, res = w->reserved;
        rs_walk_event(w, &c);
        int64_t ti = rs_sat_add_i64(rs_sat_i64(h->time_us[i]), s->time.clock_offset_us);
        /* a clock that stepped back also starts a bucket; past n buckets (only a clock going
         * back and forth gets there) the last one takes the rest */
        if (!open || in_bucket >= per || ti < b_start ||
            (uint64_t)ti - (uint64_t)b_start >= width) {
            if (!open) {
                open = 1;
                bt[0] = ti;
            } else if (b + 1 < n) {
                bt[++b] = ti;
            }
            b_start = ti;
            in_bucket = 0;
        }
        in_bucket++;
        if (h->action[i] == RS_ACT_ALLOC || h->action[i] == RS_ACT_FREE_REQUESTED) {
            if (!da.seen[b]) dense_add(&da, b, level);
            dense_add(&da, b, w->allocated);
            if (h->action[i] == RS_ACT_ALLOC && h->size[i] > big[b]) {
                big[b] = h->size[i];
                big_stack[b] = h->stack[i];
            }
        } else if (c.d_reserved) {
            if (!dr.seen[b]) dense_add(&dr, b, res);
            dense_add(&dr, b, w->reserved);
        }
        if ((int64_t)i == moment && capture_live(w, &blocks, &n_blocks) != 0) {
            bad = 1;
            goto done;
        }
    }
    if (moment == RS_WALK_END) {
        size_t m = 0;
        for (size_t i = 0; i < s->n_segments; i++) m += s->segments[i].n_blocks;
        blocks = malloc((m ? m : 1) * sizeof *blocks);
        if (!blocks) {
            bad = 1;
            goto done;
        }
        for (size_t i = 0; i < s->n_segments; i++)
            for (size_t k = 0; k < s->segments[i].n_blocks; k++) {
                const rs_snap_block *blk = &s->segments[i].blocks[k];
                if (blk->state != RS_BLOCK_ACTIVE_ALLOCATED) continue;
                blocks[n_blocks].addr = blk->addr;
                blocks[n_blocks].size = blk->size;
                blocks[n_blocks].stack = blk->stack;
                n_blocks++;
            }
    }
    t->n_buckets = open ? b + 1 : 1;
    if (dense_compact(&da, bt, t->n_buckets, &t->alloc) != 0 ||
        dense_compact(&dr, bt, t->n_buckets, &t->reserved) != 0) {
        bad = 1;
        goto done;
    }
    t->big_size = malloc((t->alloc.n ? t->alloc.n : 1) * sizeof *t->big_size);
    t->big_site = malloc((t->alloc.n ? t->alloc.n : 1) * sizeof *t->big_site);
    if (!t->big_size || !t->big_site) {
        bad = 1;
        goto done;
    }
    for (size_t i = 0; i < t->alloc.n; i++) {
        uint32_t k = t->alloc.index[i];
        t->big_size[i] = big[k];
        t->big_site[i] = big[k] ? site_name_of(t, pk, memo, big_stack[k], &bad) : RS_TIMELINE_NO_SITE;
    }
    if (!bad && keep_live(t, sc, pk, blocks, n_blocks, memo) != 0) bad = 1;
done:
    dense_free(&da);
    dense_free(&dr);
    free(big);
    free(big_stack);
    free(memo);
    free(bt);
    free(blocks);
    return bad ? -1 : 0;
}

ranksnap_status rs_timeline_build(const rs_snap *s, uint32_t max_points, rs_timeline **out)
{
    if (!s || !out) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_timeline_build: NULL argument");
    *out = NULL;
    if (max_points == 0) max_points = RS_TIMELINE_DEFAULT_POINTS;
    const rs_snap_history *h = &s->history;
    rs_timeline *t = calloc(1, sizeof *t);
    if (!t) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rank %d: no memory for a timeline", s->rank);
    t->rank = s->rank;
    t->complete = s->complete;
    t->events = h->count;
    t->dropped = h->dropped > s->totals.events_dropped ? h->dropped : s->totals.events_dropped;
    t->peak_step = -1;
    t->oom_step = -1;
    int64_t off = s->time.clock_offset_us;
    for (uint64_t i = 0; i < h->count; i++) {
        int64_t ti = rs_sat_add_i64(rs_sat_i64(h->time_us[i]), off);
        if (i == 0 || ti < t->t_first) t->t_first = ti;
        if (i == 0 || ti > t->t_last) t->t_last = ti;
    }
    if (h->count == 0) t->t_first = t->t_last = rs_sat_add_i64(rs_sat_i64(s->time_us), off);
    if (max_points < 2) max_points = 2;

    rs_walk w;
    ranksnap_status st = rs_walk_init(&w, s);
    if (st != RANKSNAP_OK) {
        free(t);
        return st;
    }
    t->alloc_start = w.start_allocated;
    t->reserved_start = w.start_reserved;
    t->peak_bytes = w.peak_allocated;
    int64_t peak = w.peak_event, last_oom = w.last_oom;
    t->peak_t = peak >= 0 ? rs_sat_add_i64(rs_sat_i64(h->time_us[peak]), off) : t->t_first;
    if (peak >= 0) {
        for (int64_t i = peak; i >= 0; i--)
            if (h->action[i] == RS_ACT_STEP) {
                t->peak_step = (int64_t)h->size[i];
                break;
            }
    }
    if (s->has_oom) {
        t->oom = 1;
        t->oom_requested = s->oom.requested;
        t->oom_step = s->oom.step;
        if (last_oom >= 0)
            t->oom_t = rs_sat_add_i64(rs_sat_i64(h->time_us[last_oom]), off);
        else if (s->oom.time_us)
            t->oom_t = rs_sat_add_i64(rs_sat_i64(s->oom.time_us), off);
    }
    /* the moment, as the summary chooses it */
    int64_t moment = rs_walk_moment(&w);
    t->moment_is_oom = s->has_oom;
    if (moment == RS_WALK_END)
        t->moment_t = s->has_oom && t->oom_t ? t->oom_t : t->t_last;
    else
        t->moment_t = moment >= 0 ? rs_sat_add_i64(rs_sat_i64(h->time_us[moment]), off) : t->t_first;

    rs_site_picker pk;
    rs_site_picker_init(&pk, s);
    stack_copier sc;
    int bad = copier_init(&sc, t, s) != 0;
    if (!bad) bad = walk_levels(t, &w, &sc, &pk, max_points, moment) != 0;
    if (!bad) bad = steps_of(t, s) != 0 || ranges_of(t, s) != 0;
    if (!bad) st = keep_sites(t, &sc, &pk, &w);
    copier_free(&sc);
    rs_site_picker_free(&pk);
    rs_walk_free(&w);
    if (st != RANKSNAP_OK) {
        rs_timeline_free(t);
        return st;
    }
    if (bad) {
        rs_timeline_free(t);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rank %d: no memory for the timeline of %llu events",
                        s->rank, (unsigned long long)h->count);
    }
    *out = t;
    return RANKSNAP_OK;
}
