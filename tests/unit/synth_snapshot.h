/*
 * synth_snapshot.h — decoded snapshots (rs_snap) built by hand, for the comparison tests.
 *
 * A small allocator model: every allocation gets a segment of its own, rounded up to 2 MiB, that
 * is released when the block is freed, so reserved bytes move with allocated ones and differ by a
 * known amount. The builder records the history (segment_alloc, alloc, free_requested,
 * segment_free, step, oom) as the writer would, keeps the totals as the allocator would, and
 * turns the blocks still alive into the end state. Stacks have ranksnap's own frames innermost
 * (one known by its module, two by their names) so that site attribution has something to skip.
 * synth_train drives it like a training loop with knobs to make one rank different.
 * Header-only so that each test stays one source file; every allocation failure aborts the test.
 */
#ifndef RANKSNAP_TEST_SYNTH_SNAPSHOT_H
#define RANKSNAP_TEST_SYNTH_SNAPSHOT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rsnap_decode.h"
#include "snapshot.h"

#define SY_MIB ((uint64_t)1 << 20)
#define SY_SEG_ROUND (2 * SY_MIB)

typedef struct sy_live {
    uint64_t addr, size, seg_size;
    uint32_t stack;
} sy_live;

typedef struct synth {
    rs_snap *s;
    size_t cap_ev, cap_frames, cap_stacks;
    sy_live *live;
    size_t n_live, cap_live;
    uint64_t level, reserved, next_addr, now;
    int64_t step;
} synth;

static inline void *sy_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "synth: out of memory\n");
        abort();
    }
    return q;
}

static inline char *sy_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = sy_xrealloc(NULL, n);
    memcpy(p, s, n);
    return p;
}

static inline uint32_t sy_frame(synth *y, const char *function, const char *file, int line, int module)
{
    rs_snap *s = y->s;
    if (s->n_frames == y->cap_frames) {
        y->cap_frames = y->cap_frames ? 2 * y->cap_frames : 16;
        s->frames = sy_xrealloc(s->frames, y->cap_frames * sizeof *s->frames);
    }
    rs_snap_frame *f = &s->frames[s->n_frames];
    f->pc = 0x400000 + 0x40 * s->n_frames;
    f->module = module;
    f->function = sy_strdup(function);
    f->file = sy_strdup(file);
    f->line = line;
    f->text_hash = 0; /* made by the analysis that needs it */
    return (uint32_t)s->n_frames++;
}

/* A stack whose innermost application frame is function (file:line); returns its id. */
static inline uint32_t synth_site(synth *y, const char *function, const char *file, int line)
{
    rs_snap *s = y->s;
    uint32_t site = sy_frame(y, function, file, line, 0);
    if (s->n_stacks == y->cap_stacks) {
        y->cap_stacks = y->cap_stacks ? 2 * y->cap_stacks : 8;
        s->stacks = sy_xrealloc(s->stacks, y->cap_stacks * sizeof *s->stacks);
    }
    rs_snap_stack *st = &s->stacks[s->n_stacks];
    st->n_frames = 5;
    st->frames = sy_xrealloc(NULL, 5 * sizeof *st->frames);
    st->frames[0] = 0; /* capture_pcs in libranksnap.so */
    st->frames[1] = 1; /* ranksnap_malloc */
    st->frames[2] = 2; /* rs_alloc_malloc */
    st->frames[3] = site;
    st->frames[4] = 3; /* main */
    return (uint32_t)++s->n_stacks;
}

static inline void synth_init(synth *y, int rank, int world_size, const char *job)
{
    memset(y, 0, sizeof *y);
    rs_snap *s = sy_xrealloc(NULL, sizeof *s);
    memset(s, 0, sizeof *s);
    y->s = s;
    s->version = 1;
    s->rank = rank;
    s->world_size = world_size;
    char host[32];
    snprintf(host, sizeof host, "node%02d", rank);
    s->host = sy_strdup(host);
    s->pid = 1000 + rank;
    s->job = sy_strdup(job);
    s->complete = 1;
    s->device.index = 0;
    s->device.name = sy_strdup("ranksnap-sim");
    s->device.uuid = sy_strdup("GPU-synth");
    s->device.total_bytes = (uint64_t)80 << 30;
    s->backend = sy_strdup("sim");
    s->allocator.min_block_size = 512;
    s->allocator.max_split_size = UINT64_MAX;
    s->recorder.stacks = sy_strdup("native");
    s->recorder.stack_depth = 16;
    s->recorder.max_entries = 100000;
    s->time.current_step = -1;
    s->totals.peak_step = -1;
    s->n_streams = 1;
    s->streams = sy_xrealloc(NULL, sizeof *s->streams);
    s->streams[0] = 0;
    s->n_modules = 2;
    s->modules = sy_xrealloc(NULL, 2 * sizeof *s->modules);
    s->modules[0] = (rs_snap_module){sy_strdup(""), 0x400000, sy_strdup("")};
    s->modules[1] = (rs_snap_module){sy_strdup("/opt/ranksnap/lib/libranksnap.so.0"), 0x7f0000000000,
                                 sy_strdup("")};
    sy_frame(y, "capture_pcs", "stacks.c", 120, 1);
    sy_frame(y, "ranksnap_malloc", "rank/runtime/", 262, 0);
    sy_frame(y, "rs_alloc_malloc", "alloc.c", 780, 0);
    sy_frame(y, "main", "train.c", 5, 0);
    y->next_addr = 0x7f0000000000ull + ((uint64_t)rank << 40);
    y->now = 1700000000000000ull;
    y->step = -1;
}

static inline void sy_event(synth *y, uint8_t action, uint64_t addr, uint64_t size, uint32_t stack)
{
    rs_snap_history *h = &y->s->history;
    if (h->count == y->cap_ev) {
        y->cap_ev = y->cap_ev ? 2 * y->cap_ev : 64;
        h->time_us = sy_xrealloc(h->time_us, y->cap_ev * sizeof *h->time_us);
        h->action = sy_xrealloc(h->action, y->cap_ev * sizeof *h->action);
        h->addr = sy_xrealloc(h->addr, y->cap_ev * sizeof *h->addr);
        h->size = sy_xrealloc(h->size, y->cap_ev * sizeof *h->size);
        h->stream = sy_xrealloc(h->stream, y->cap_ev * sizeof *h->stream);
        h->stack = sy_xrealloc(h->stack, y->cap_ev * sizeof *h->stack);
    }
    uint64_t i = h->count++;
    h->time_us[i] = y->now++;
    h->action[i] = action;
    h->addr[i] = addr;
    h->size[i] = size;
    h->stream[i] = 0;
    h->stack[i] = stack;
    h->capacity = h->count;
    y->s->totals.events_recorded++;
}

/* `size` should be a multiple of 512 so that the allocator's rounding is exact. */
static inline uint64_t synth_alloc(synth *y, uint64_t size, uint32_t stack)
{
    rs_snap_totals *t = &y->s->totals;
    uint64_t seg = (size + SY_SEG_ROUND - 1) / SY_SEG_ROUND * SY_SEG_ROUND;
    uint64_t addr = y->next_addr;
    y->next_addr += seg;
    sy_event(y, RS_ACT_SEGMENT_ALLOC, addr, seg, stack);
    y->reserved += seg;
    if (y->reserved > t->reserved_bytes_peak) t->reserved_bytes_peak = y->reserved;
    t->num_segment_allocs++;
    sy_event(y, RS_ACT_ALLOC, addr, size, stack);
    y->level += size;
    t->num_allocs++;
    if (y->level > t->allocated_bytes_peak) {
        t->allocated_bytes_peak = y->level;
        t->peak_step = y->step;
        t->peak_time_us = y->now;
    }
    if (y->n_live == y->cap_live) {
        y->cap_live = y->cap_live ? 2 * y->cap_live : 64;
        y->live = sy_xrealloc(y->live, y->cap_live * sizeof *y->live);
    }
    y->live[y->n_live++] = (sy_live){addr, size, seg, stack};
    return addr;
}

static inline void synth_free(synth *y, uint64_t addr)
{
    for (size_t i = 0; i < y->n_live; i++) {
        if (y->live[i].addr != addr) continue;
        sy_live b = y->live[i];
        y->live[i] = y->live[--y->n_live];
        sy_event(y, RS_ACT_FREE_REQUESTED, addr, b.size, b.stack);
        y->level -= b.size;
        y->s->totals.num_frees++;
        sy_event(y, RS_ACT_FREE_COMPLETED, addr, b.size, b.stack);
        sy_event(y, RS_ACT_SEGMENT_FREE, addr, b.seg_size, 0);
        y->reserved -= b.seg_size;
        y->s->totals.num_segment_frees++;
        return;
    }
    fprintf(stderr, "synth: free of unknown address %llx\n", (unsigned long long)addr);
    abort();
}

static inline void synth_step(synth *y, int64_t step)
{
    y->step = step;
    y->s->time.current_step = step;
    sy_event(y, RS_ACT_STEP, 0, (uint64_t)step, 0);
}

static inline void synth_oom(synth *y, uint64_t requested, uint32_t stack)
{
    rs_snap *s = y->s;
    uint64_t free_b = s->device.total_bytes / 100;
    sy_event(y, RS_ACT_OOM, free_b, requested, stack);
    s->has_oom = 1;
    s->oom = (rs_snap_oom){s->device.index, requested, requested, free_b, s->device.total_bytes, y->level, y->reserved,
                       0, y->now, 0, stack, y->step};
    s->totals.num_ooms++;
}

/* Takes the `k` oldest events out of a history (of a finished snapshot too), without counting
 * them as dropped; returns how many it took. */
static inline uint64_t sy_forget_oldest(rs_snap_history *h, uint64_t k)
{
    if (k > h->count) k = h->count;
    uint64_t n = h->count - k;
    memmove(h->time_us, h->time_us + k, n * sizeof *h->time_us);
    memmove(h->action, h->action + k, n * sizeof *h->action);
    memmove(h->addr, h->addr + k, n * sizeof *h->addr);
    memmove(h->size, h->size + k, n * sizeof *h->size);
    memmove(h->stream, h->stream + k, n * sizeof *h->stream);
    memmove(h->stack, h->stack + k, n * sizeof *h->stack);
    h->count = n;
    return k;
}

/* Forgets the `k` oldest events, as a full ring does. */
static inline void synth_drop_oldest(synth *y, uint64_t k)
{
    k = sy_forget_oldest(&y->s->history, k);
    y->s->history.dropped += k;
    y->s->totals.events_dropped += k;
}

/* The end state from the blocks still alive; the synth no longer owns the snapshot. */
static inline rs_snap *synth_finish(synth *y)
{
    rs_snap *s = y->s;
    s->n_segments = y->n_live;
    s->segments = sy_xrealloc(NULL, y->n_live * sizeof *s->segments);
    for (size_t i = 0; i < y->n_live; i++) {
        const sy_live *b = &y->live[i];
        rs_snap_segment *g = &s->segments[i];
        memset(g, 0, sizeof *g);
        g->addr = b->addr;
        g->total_size = b->seg_size;
        g->allocated_size = g->active_size = g->requested_size = b->size;
        g->stack = b->stack;
        g->n_blocks = b->seg_size > b->size ? 2 : 1;
        g->blocks = sy_xrealloc(NULL, g->n_blocks * sizeof *g->blocks);
        g->blocks[0] = (rs_snap_block){b->addr, b->size, b->size, b->stack, RS_BLOCK_ACTIVE_ALLOCATED};
        if (g->n_blocks == 2)
            g->blocks[1] = (rs_snap_block){b->addr + b->size, b->seg_size - b->size, 0, 0,
                                       RS_BLOCK_INACTIVE};
    }
    s->totals.allocated_bytes_current = y->level;
    s->totals.reserved_bytes_current = y->reserved;
    s->totals.active_bytes_current = y->level;
    s->totals.requested_bytes_current = y->level;
    s->time_us = y->now;
    free(y->live);
    y->live = NULL;
    y->s = NULL;
    return s;
}

/* A data-parallel training loop: parameters once, then per step a forward pass whose
 * activations pile up layer by layer (with a short-lived workspace per layer) and a backward
 * pass that frees them in reverse. */
typedef struct train_cfg {
    int steps;
    int layers;
    uint64_t param_bytes;
    uint64_t act_bytes;  /* per layer, before act_factor */
    double act_factor;   /* 1.5: this rank's batch is 1.5 times larger */
    int leak_from;       /* -1: none; else keeps leak_bytes per step from this step on */
    uint64_t leak_bytes;
    int oom_step;        /* -1: none; else the step whose forward pass fails */
    uint64_t oom_request;
    int hold_step;       /* -1: none; else allocates hold_bytes once, in this step, and keeps them */
    uint64_t hold_bytes;
} train_cfg;

static inline train_cfg train_default(void)
{
    train_cfg c = {8, 4, 64 * SY_MIB, 16 * SY_MIB, 1.0, -1, 0, -1, 0, -1, 0};
    return c;
}

static inline uint64_t sy_round512(double bytes)
{
    uint64_t b = (uint64_t)bytes;
    return (b + 511) / 512 * 512;
}

static inline rs_snap *synth_train(int rank, int world_size, const char *job, const train_cfg *c)
{
    synth y;
    synth_init(&y, rank, world_size, job);
    uint32_t params = synth_site(&y, "init_parameters", "src/model.c", 10);
    uint32_t act = synth_site(&y, "attention_scores", "src/model.c", 211);
    uint32_t work = synth_site(&y, "mlp_workspace", "src/model.c", 300);
    uint32_t leak = synth_site(&y, "keep_for_logging", "src/train.c", 57);
    uint32_t req = synth_site(&y, "train_step", "src/train.c", 99);
    uint32_t hold = synth_site(&y, "cache_batch", "src/train.c", 120);
    synth_alloc(&y, c->param_bytes, params);
    uint64_t acts[64];
    for (int step = 0; step < c->steps; step++) {
        synth_step(&y, step);
        for (int l = 0; l < c->layers && l < 64; l++) {
            acts[l] = synth_alloc(&y, sy_round512((double)c->act_bytes * c->act_factor), act);
            synth_free(&y, synth_alloc(&y, SY_MIB, work));
        }
        if (step == c->oom_step) {
            synth_oom(&y, c->oom_request, req);
            return synth_finish(&y);
        }
        if (c->leak_from >= 0 && step >= c->leak_from) synth_alloc(&y, c->leak_bytes, leak);
        if (step == c->hold_step) synth_alloc(&y, c->hold_bytes, hold);
        for (int l = c->layers < 64 ? c->layers : 64; l-- > 0;) synth_free(&y, acts[l]);
    }
    return synth_finish(&y);
}

#endif
