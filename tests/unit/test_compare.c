/*
 * test_compare.c — summaries and verdicts over hand-built snapshots (synth_snapshot.h): the peak
 * found by replaying the history, sites matched by function + file + line, the per-step series,
 * and the verdicts (identical ranks, a constant offset, a leak, an OOM, missing ranks, noise).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compare.h"
#include "synth_snapshot.h"

#define MIB SY_MIB

static const rs_site *find_site(const rs_site *v, size_t n, const char *function)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].function, function) == 0) return &v[i];
    return NULL;
}

/* Summaries (and the snapshots, kept in full[]) of `n` ranks of one job; rank i uses cfg[i]. */
static void train_ranks(const train_cfg *cfg, int n, int world, rs_snap **full,
                        rs_summary *sums)
{
    for (int i = 0; i < n; i++) {
        full[i] = synth_train(i, world, "job-1", &cfg[i]);
        rs_summary_of(full[i], &sums[i]);
    }
}

static void free_ranks(rs_snap **full, int n)
{
    for (int i = 0; i < n; i++) rs_snap_free(full[i]);
}

/* Four ranks of one job, each the default training loop until a test changes its cfg[]. */
typedef struct four_ranks {
    train_cfg cfg[4];
    rs_snap *full[4];
    rs_summary sums[4];
} four_ranks;

static void four_ranks_init(four_ranks *f)
{
    for (int i = 0; i < 4; i++) f->cfg[i] = train_default();
}

enum { FROM_SNAPSHOTS, FROM_SUMMARIES };

/* Trains the four ranks and compares them, FROM_SNAPSHOTS (the full ones at hand) or
 * FROM_SUMMARIES alone. */
static rs_compare_result *four_ranks_compare(four_ranks *f, int from)
{
    train_ranks(f->cfg, 4, 4, f->full, f->sums);
    rs_compare_result *r = NULL;
    const rs_snap *const *full = from == FROM_SNAPSHOTS ? (const rs_snap *const *)f->full : NULL;
    CHECK(rs_compare(f->sums, full, 4, 0, NULL, &r) == RANKSNAP_OK);
    return r;
}

static void four_ranks_free(four_ranks *f, rs_compare_result *r)
{
    rs_compare_result_free(r);
    free_ranks(f->full, 4);
}

TEST(site_is_the_innermost_frame_that_is_not_ranksnaps_own)
{
    synth y;
    synth_init(&y, 0, 1, "j");
    uint32_t a = synth_site(&y, "attention_scores", "/home/u/src/model.c", 211);
    synth_alloc(&y, 4 * MIB, a);
    rs_snap *s = synth_finish(&y);
    rs_site site;
    rs_site_of_stack(s, a, &site);
    CHECK(strcmp(site.function, "attention_scores") == 0);
    CHECK(strcmp(site.file, "/home/u/src/model.c") == 0);
    CHECK_EQ_U64(site.line, 211);
    rs_site_of_stack(s, 0, &site);
    CHECK(strcmp(site.function, "(no stack)") == 0);
    rs_snap_free(s);
}

TEST(sites_are_matched_by_function_file_and_line_not_by_pc)
{
    synth y;
    synth_init(&y, 0, 1, "j");
    /* Two return addresses on one source line: one site. */
    uint32_t a = synth_site(&y, "attention_scores", "model.c", 211);
    uint32_t b = synth_site(&y, "attention_scores", "model.c", 211);
    uint32_t c = synth_site(&y, "attention_scores", "model.c", 212);
    synth_alloc(&y, 4 * MIB, a);
    synth_alloc(&y, 2 * MIB, b);
    synth_alloc(&y, 1 * MIB, c);
    rs_snap *s = synth_finish(&y);
    CHECK(s->frames[s->stacks[a - 1].frames[3]].pc != s->frames[s->stacks[b - 1].frames[3]].pc);
    rs_site *v = NULL;
    size_t n = 0;
    CHECK(rs_site_list_at_peak(s, &v, NULL, &n) == RANKSNAP_OK);
    CHECK_EQ_U64(n, 2);
    if (n == 2) {
        CHECK_EQ_U64(v[0].line, 211);
        CHECK_EQ_U64(v[0].bytes, 6 * MIB);
        CHECK_EQ_U64(v[0].blocks, 2);
        CHECK_EQ_U64(v[1].line, 212);
        CHECK_EQ_U64(v[1].bytes, 1 * MIB);
    }
    free(v);
    rs_snap_free(s);
}

/* A stack whose innermost frame after ranksnap's is an unresolved one in library `lib`. */
static rs_snap *unresolved_in(const char *lib, uint32_t *stack)
{
    synth y;
    synth_init(&y, 0, 1, "j");
    rs_snap *s = y.s;
    s->modules = sy_xrealloc(s->modules, 3 * sizeof *s->modules);
    s->modules[2] = (rs_snap_module){sy_strdup(lib), 0x7e0000000000, sy_strdup("")};
    s->n_modules = 3;
    *stack = synth_site(&y, "??", "??", 0);
    s->frames[s->stacks[*stack - 1].frames[3]].module = 2;
    synth_alloc(&y, 4 * MIB, *stack);
    return synth_finish(&y);
}

TEST(an_unresolved_site_is_named_by_its_module)
{
    uint32_t a;
    rs_snap *s = unresolved_in("/opt/app/lib/libsolver.so.3", &a);
    rs_site site;
    rs_site_of_stack(s, a, &site);
    CHECK(strcmp(site.function, "??") == 0);
    CHECK(strcmp(site.file, "libsolver.so.3") == 0);
    rs_snap_free(s);
}

TEST(an_unresolved_frame_in_nccl_is_looked_past_to_its_caller)
{
    uint32_t a;
    rs_snap *s = unresolved_in("/usr/lib/x86_64-linux-gnu/libnccl.so.2", &a);
    rs_site site;
    rs_site_of_stack(s, a, &site);
    CHECK(strcmp(site.function, "main") == 0);
    CHECK(strcmp(site.file, "train.c") == 0);
    rs_snap_free(s);
}

TEST(a_long_path_keeps_its_file_name_and_a_long_symbol_its_start)
{
    char path[300], fn[200];
    memset(path, 'd', sizeof path);
    memcpy(path, "/src/", 5);
    strcpy(path + 250, "/attention.c");
    memset(fn, 'f', sizeof fn);
    fn[sizeof fn - 1] = '\0';
    synth y;
    synth_init(&y, 0, 1, "j");
    uint32_t a = synth_site(&y, fn, path, 7);
    rs_snap *s = synth_finish(&y);
    rs_site site;
    rs_site_of_stack(s, a, &site);
    CHECK_EQ_U64(strlen(site.function), RS_SITE_FUNC_LEN - 1);
    CHECK_EQ_U64(strlen(site.file), RS_SITE_FILE_LEN - 1);
    CHECK(strncmp(site.file, "...", 3) == 0);
    CHECK(strcmp(site.file + strlen(site.file) - 12, "/attention.c") == 0);
    rs_snap_free(s);
}

TEST(a_block_alive_at_the_end_counts_its_block_size_from_the_state)
{
    synth y;
    synth_init(&y, 0, 1, "j");
    uint32_t a = synth_site(&y, "f", "m.c", 1);
    synth_alloc(&y, 3 * MIB, a);
    rs_snap *s = synth_finish(&y);
    /* The allocator handed out a whole 4 MiB block for the 3 MiB request (not split). */
    s->segments[0].blocks[0].size = 4 * MIB;
    s->totals.allocated_bytes_current = s->totals.allocated_bytes_peak = 4 * MIB;
    rs_site *v = NULL;
    size_t n = 0;
    CHECK(rs_site_list_at_peak(s, &v, NULL, &n) == RANKSNAP_OK);
    CHECK(n == 1 && v[0].bytes == (int64_t)(4 * MIB));
    free(v);
    rs_snap_free(s);
}

TEST(sites_at_peak_replay_to_the_peak_not_the_end)
{
    synth y;
    synth_init(&y, 0, 1, "j");
    uint32_t big = synth_site(&y, "forward", "model.c", 1);
    uint32_t small = synth_site(&y, "optimizer", "model.c", 2);
    uint64_t p = synth_alloc(&y, 100 * MIB, big);
    synth_free(&y, p);
    synth_alloc(&y, 10 * MIB, small);
    rs_snap *s = synth_finish(&y);
    rs_site *v = NULL;
    size_t n = 0;
    CHECK(rs_site_list_at_peak(s, &v, NULL, &n) == RANKSNAP_OK);
    CHECK_EQ_U64(n, 1);
    if (n >= 1) {
        CHECK(strcmp(v[0].function, "forward") == 0);
        CHECK_EQ_U64(v[0].bytes, 100 * MIB);
    }
    free(v);
    rs_snap_free(s);
}

TEST(sites_at_peak_count_blocks_from_before_the_history)
{
    synth y;
    synth_init(&y, 0, 1, "j");
    uint32_t w = synth_site(&y, "init_parameters", "model.c", 10);
    uint32_t t = synth_site(&y, "temporary", "model.c", 20);
    uint32_t f = synth_site(&y, "forward", "model.c", 30);
    synth_alloc(&y, 50 * MIB, w);          /* alive throughout, its alloc dropped */
    uint64_t tmp = synth_alloc(&y, 30 * MIB, t); /* freed later, its alloc dropped */
    uint64_t drop = y.s->history.count;
    uint64_t x = synth_alloc(&y, 40 * MIB, f);
    synth_free(&y, tmp);
    synth_free(&y, x);
    synth_drop_oldest(&y, drop);
    rs_snap *s = synth_finish(&y);
    rs_site *v = NULL;
    size_t n = 0;
    CHECK(rs_site_list_at_peak(s, &v, NULL, &n) == RANKSNAP_OK);
    const rs_site *sw = find_site(v, n, "init_parameters");
    const rs_site *sb = find_site(v, n, "(before recording)");
    const rs_site *sf = find_site(v, n, "forward");
    CHECK(sw && sw->bytes == (int64_t)(50 * MIB));
    CHECK(sb && sb->bytes == (int64_t)(30 * MIB));
    CHECK(sf && sf->bytes == (int64_t)(40 * MIB));
    CHECK_EQ_U64(n, 3);
    free(v);

    rs_summary sum;
    rs_summary_of(s, &sum);
    CHECK_EQ_U64(sum.dropped, drop);
    CHECK_EQ_U64(sum.peak_allocated, 120 * MIB);
    /* The peak is inside the kept history: 3 segments of 50, 30 and 40 MiB rounded to 2 MiB. */
    CHECK_EQ_U64(sum.reserved_at_peak, 120 * MIB);
    rs_snap_free(s);
}

TEST(sites_of_an_oom_rank_are_those_live_at_the_oom)
{
    synth y;
    synth_init(&y, 0, 1, "j");
    uint32_t a = synth_site(&y, "early_peak", "m.c", 1);
    uint32_t b = synth_site(&y, "at_oom", "m.c", 2);
    uint32_t r = synth_site(&y, "train_step", "m.c", 3);
    uint64_t p = synth_alloc(&y, 200 * MIB, a);
    synth_free(&y, p);
    synth_alloc(&y, 20 * MIB, b);
    synth_oom(&y, 1 * MIB, r);
    synth_alloc(&y, 8 * MIB, b); /* after the OOM: not part of the moment */
    rs_snap *s = synth_finish(&y);
    rs_site *v = NULL;
    size_t n = 0;
    CHECK(rs_site_list_at_peak(s, &v, NULL, &n) == RANKSNAP_OK);
    CHECK_EQ_U64(n, 1);
    if (n) {
        CHECK(strcmp(v[0].function, "at_oom") == 0);
        CHECK_EQ_U64(v[0].bytes, 20 * MIB);
    }
    free(v);
    rs_summary sum;
    rs_summary_of(s, &sum);
    CHECK_EQ_U64(sum.oom, 1);
    CHECK_EQ_U64(sum.oom_requested, 1 * MIB);
    CHECK(strcmp(sum.oom_site.function, "train_step") == 0);
    rs_snap_free(s);
}

TEST(summary_has_the_peak_of_each_step)
{
    train_cfg c = train_default();
    rs_snap *s = synth_train(0, 1, "j", &c);
    rs_summary sum;
    rs_summary_of(s, &sum);
    CHECK_EQ_U64(sum.n_steps, 8);
    CHECK_EQ_U64(sum.step_first, 0);
    CHECK_EQ_U64(sum.step_stride, 1);
    /* parameters + 4 activations + one workspace */
    for (int k = 0; k < 8; k++) CHECK_EQ_U64(sum.step_peak[k], (64 + 64 + 1) * MIB);
    CHECK_EQ_U64(sum.peak_allocated, 129 * MIB);
    CHECK_EQ_U64(sum.peak_step, 0);
    CHECK_EQ_U64(sum.reserved_at_peak, (64 + 64 + 2) * MIB);
    CHECK(strcmp(sum.host, "node00") == 0);
    CHECK(sum.n_sites >= 2);
    if (sum.n_sites >= 2) {
        CHECK(strcmp(sum.sites[0].function, "init_parameters") == 0 ||
              strcmp(sum.sites[0].function, "attention_scores") == 0);
        CHECK_EQ_U64(sum.sites[0].bytes, 64 * MIB);
    }
    rs_snap_free(s);
}

TEST(summary_downsamples_a_long_step_series_keeping_the_maximum)
{
    synth y;
    synth_init(&y, 0, 1, "j");
    uint32_t a = synth_site(&y, "f", "m.c", 1);
    for (int step = 0; step < 200; step++) {
        synth_step(&y, step);
        /* one step in 50 is higher */
        uint64_t p = synth_alloc(&y, (step % 50 == 7 ? 9 : 1) * MIB, a);
        synth_free(&y, p);
    }
    rs_snap *s = synth_finish(&y);
    rs_summary sum;
    rs_summary_of(s, &sum);
    CHECK(sum.n_steps <= RS_SUMMARY_MAX_STEPS);
    CHECK_EQ_U64(sum.step_stride, 4);
    CHECK_EQ_U64(sum.n_steps, 50);
    CHECK_EQ_U64(sum.step_peak[0], 1 * MIB);
    CHECK_EQ_U64(sum.step_peak[1], 9 * MIB); /* steps 4..7 */
    CHECK_EQ_U64(sum.step_peak[2], 1 * MIB);
    CHECK_EQ_U64(sum.step_peak[13], 1 * MIB);
    CHECK_EQ_U64(sum.step_peak[14], 9 * MIB); /* steps 56..59 */
    rs_snap_free(s);
}

TEST(summary_marks_steps_that_were_not_recorded)
{
    synth y;
    synth_init(&y, 0, 1, "j");
    uint32_t a = synth_site(&y, "f", "m.c", 1);
    int64_t steps[] = {10, 11, 20};
    for (int i = 0; i < 3; i++) {
        synth_step(&y, steps[i]);
        synth_free(&y, synth_alloc(&y, (uint64_t)(i + 1) * MIB, a));
    }
    rs_snap *s = synth_finish(&y);
    rs_summary sum;
    rs_summary_of(s, &sum);
    CHECK_EQ_U64(sum.step_first, 10);
    CHECK_EQ_U64(sum.n_steps, 11);
    CHECK_EQ_U64(sum.step_peak[0], 1 * MIB);
    CHECK_EQ_U64(sum.step_peak[1], 2 * MIB);
    CHECK(sum.step_peak[5] == RS_SUMMARY_NO_DATA);
    CHECK_EQ_U64(sum.step_peak[10], 3 * MIB);
    rs_snap_free(s);
}

TEST(summary_of_an_inconsistent_history_never_goes_negative)
{
    synth y;
    synth_init(&y, 0, 1, "j");
    uint32_t a = synth_site(&y, "f", "m.c", 1);
    synth_step(&y, 0);
    uint64_t p = synth_alloc(&y, 8 * MIB, a);
    synth_free(&y, p);
    rs_snap *s = synth_finish(&y);
    rs_snap_history *h = &s->history;
    /* A free of a block nobody allocated, an allocation over a live block, and totals that say
     * less is allocated than the history frees. */
    for (uint64_t i = 0; i < h->count; i++) {
        if (h->action[i] == RS_ACT_SEGMENT_ALLOC) h->action[i] = RS_ACT_FREE_REQUESTED;
        if (h->action[i] == RS_ACT_FREE_COMPLETED) h->action[i] = RS_ACT_ALLOC;
        if (h->action[i] == RS_ACT_SEGMENT_FREE) h->size[i] = UINT64_MAX;
    }
    h->size[0] = UINT64_MAX - 5;
    s->totals.allocated_bytes_current = 0;
    s->totals.reserved_bytes_current = 0;
    rs_summary sum;
    rs_summary_of(s, &sum);
    CHECK_EQ_U64(sum.n_steps, 1);
    CHECK(sum.step_peak[0] != RS_SUMMARY_NO_DATA);
    rs_site *v = NULL;
    size_t n = 0;
    CHECK(rs_site_list_at_peak(s, &v, NULL, &n) == RANKSNAP_OK);
    for (size_t i = 0; i < n; i++) CHECK(v[i].bytes >= 0);
    free(v);
    rs_snap_free(s);
}

TEST(identical_ranks_produce_no_verdict)
{
    four_ranks f;
    four_ranks_init(&f);
    rs_compare_result *r = four_ranks_compare(&f, FROM_SNAPSHOTS);
    if (r) {
        CHECK_EQ_U64(r->world_size, 4);
        CHECK_EQ_U64(r->n_ranks, 4);
        CHECK_EQ_U64(r->n_divergent, 0);
        CHECK_EQ_U64(r->n_oom, 0);
        CHECK_EQ_U64(r->n_missing, 0);
        CHECK_EQ_U64(r->n_notes, 0);
        CHECK_EQ_U64(r->median_peak, 129 * MIB);
        CHECK_EQ_U64(r->mad, 0);
        CHECK_EQ_U64(r->reference_rank, 0);
    }
    four_ranks_free(&f, r);
}

TEST(larger_activations_from_step_0_are_a_constant_offset_at_their_site)
{
    four_ranks f;
    four_ranks_init(&f);
    f.cfg[2].act_factor = 1.5;
    rs_compare_result *r = four_ranks_compare(&f, FROM_SNAPSHOTS);
    CHECK(r && r->n_divergent == 1);
    if (r && r->n_divergent == 1) {
        const rs_compare_divergent *d = &r->divergent[0];
        CHECK_EQ_U64(d->rank, 2);
        CHECK_EQ_U64(d->peak_allocated, 161 * MIB);
        CHECK_EQ_U64(d->reference_peak, 129 * MIB);
        CHECK(d->divergence_pct > 24.8 && d->divergence_pct < 24.9);
        CHECK_EQ_U64(d->first_divergent_step, 0);
        CHECK_EQ_U64(d->growth, 0);
        CHECK(d->n_sites >= 1);
        if (d->n_sites >= 1) {
            CHECK(strcmp(d->sites[0].site.function, "attention_scores") == 0);
            CHECK(strcmp(d->sites[0].site.file, "src/model.c") == 0);
            CHECK_EQ_U64(d->sites[0].site.line, 211);
            CHECK_EQ_U64(d->sites[0].site.bytes, 32 * MIB);
        }
        for (size_t i = 0; i < d->n_sites; i++) CHECK(d->sites[i].site.bytes > 0);
        CHECK(r->reference_rank != 2);
    }
    four_ranks_free(&f, r);
}

TEST(a_leak_from_step_3_is_growth_from_step_3_at_the_leaking_site)
{
    four_ranks f;
    four_ranks_init(&f);
    f.cfg[1].leak_from = 3;
    f.cfg[1].leak_bytes = 20 * MIB;
    rs_compare_result *r = four_ranks_compare(&f, FROM_SNAPSHOTS);
    CHECK(r && r->n_divergent == 1);
    if (r && r->n_divergent == 1) {
        const rs_compare_divergent *d = &r->divergent[0];
        CHECK_EQ_U64(d->rank, 1);
        CHECK_EQ_U64(d->growth, 1);
        CHECK_EQ_U64(d->first_divergent_step, 3);
        CHECK(d->n_sites >= 1);
        if (d->n_sites >= 1) {
            CHECK(strcmp(d->sites[0].site.function, "keep_for_logging") == 0);
            CHECK_EQ_U64(d->sites[0].site.bytes, 5 * 20 * MIB);
        }
    }
    four_ranks_free(&f, r);
}

TEST(a_small_leak_is_dated_from_where_it_started)
{
    /* 2 MiB a step is under 5% of a 129 MiB step at first; the threshold is crossed later. */
    four_ranks f;
    four_ranks_init(&f);
    for (int i = 0; i < 4; i++) f.cfg[i].steps = 16;
    f.cfg[3].leak_from = 4;
    f.cfg[3].leak_bytes = 2 * MIB;
    rs_compare_result *r = four_ranks_compare(&f, FROM_SNAPSHOTS);
    CHECK(r && r->n_divergent == 1);
    if (r && r->n_divergent == 1) {
        CHECK_EQ_U64(r->divergent[0].rank, 3);
        CHECK_EQ_U64(r->divergent[0].growth, 1);
        CHECK_EQ_U64(r->divergent[0].first_divergent_step, 4);
    }
    four_ranks_free(&f, r);
}

TEST(a_small_steady_leak_is_growth_with_its_bytes_per_step_since_step_0)
{
    /* the rank keeps an 8 MiB output every step for 12 steps: +7% at the end, under the 5%
     * threshold until step 7 (the rule before called it "a constant offset from step 7") */
    four_ranks f;
    four_ranks_init(&f);
    for (int i = 0; i < 4; i++) {
        f.cfg[i].steps = 12;
        f.cfg[i].param_bytes = 1300 * MIB;
    }
    f.cfg[1].leak_from = 0;
    f.cfg[1].leak_bytes = 8 * MIB;
    rs_compare_result *r = four_ranks_compare(&f, FROM_SNAPSHOTS);
    CHECK(r && r->n_divergent == 1);
    if (r && r->n_divergent == 1) {
        const rs_compare_divergent *d = &r->divergent[0];
        CHECK_EQ_U64(d->rank, 1);
        CHECK(d->divergence_pct > 6.9 && d->divergence_pct < 7.5);
        CHECK_EQ_U64(d->growth, 1);
        CHECK_EQ_U64(d->first_divergent_step, 0);
        CHECK(d->growth_per_step > 7.99 * MIB && d->growth_per_step < 8.01 * MIB);
        CHECK(d->n_sites >= 1 && strcmp(d->sites[0].site.function, "keep_for_logging") == 0);
        /* its 80 GiB device at 8 MiB a step from 1300 + 4 * 16 + 12 * 8 MiB at step 11 */
        CHECK_EQ_U64(d->capacity, (uint64_t)80 << 30);
        CHECK_EQ_U64(d->capacity_is_limit, 0);
        CHECK_EQ_U64(d->exhaust_step, 11 + ((80 << 10) - 1300 - 4 * 16 - 12 * 8 + 7) / 8);
    }
    four_ranks_free(&f, r);
}

TEST(a_buffer_kept_once_is_an_offset_from_its_step)
{
    four_ranks f;
    four_ranks_init(&f);
    for (int i = 0; i < 4; i++) f.cfg[i].steps = 12;
    f.cfg[2].hold_step = 5;
    f.cfg[2].hold_bytes = 40 * MIB;
    rs_compare_result *r = four_ranks_compare(&f, FROM_SNAPSHOTS);
    CHECK(r && r->n_divergent == 1);
    if (r && r->n_divergent == 1) {
        const rs_compare_divergent *d = &r->divergent[0];
        CHECK_EQ_U64(d->rank, 2);
        CHECK_EQ_U64(d->growth, 0);
        CHECK_EQ_U64(d->first_divergent_step, 5);
        CHECK_EQ_U64(d->exhaust_step, (uint64_t)-1);
        CHECK(d->n_sites >= 1 && strcmp(d->sites[0].site.function, "cache_batch") == 0);
    }
    four_ranks_free(&f, r);
}

/* A summary whose step peaks are base + extra[k] MiB for steps 0..n-1. */
static rs_summary summary_with_steps(int rank, uint64_t base, const double *extra, int n)
{
    rs_summary s;
    memset(&s, 0, sizeof s);
    s.rank = rank;
    s.world_size = 4;
    s.complete = 1;
    s.peak_step = -1;
    s.n_steps = n;
    s.step_stride = 1;
    for (int k = 0; k < n; k++) {
        s.step_peak[k] = (uint64_t)((double)base + extra[k] * (double)MIB);
        if (s.step_peak[k] > s.peak_allocated) s.peak_allocated = s.step_peak[k];
    }
    return s;
}

/* Compares three flat ranks of 1000 MiB (the step-to-step jitter `noise`) with rank 3's series. */
static rs_compare_result *against_flat_ranks(const double *rank3, int n, const double *noise,
                                             uint64_t limit)
{
    rs_summary s[4];
    double flat[RS_SUMMARY_MAX_STEPS];
    for (int i = 0; i < 3; i++) {
        for (int k = 0; k < n; k++) flat[k] = noise[(k + i) % n];
        s[i] = summary_with_steps(i, 1000 * MIB, flat, n);
    }
    s[3] = summary_with_steps(3, 1000 * MIB, rank3, n);
    s[3].memory_limit = limit;
    rs_compare_result *r = NULL;
    CHECK(rs_compare(s, NULL, 4, 0, NULL, &r) == RANKSNAP_OK);
    return r;
}

/* Jitter of a few MiB, as the caching allocator's per-step peaks show on real runs. */
static const double jitter[12] = {0.0, 2.5, -1.0, 3.0, 0.5, -2.0, 1.5, -0.5, 2.0, -1.5, 1.0, 0.0};

TEST(a_jittery_constant_difference_is_an_offset_not_growth)
{
    double r3[12];
    for (int k = 0; k < 12; k++) r3[k] = 80 + 3 * jitter[(k * 5) % 12];
    rs_compare_result *r = against_flat_ranks(r3, 12, jitter, 0);
    CHECK(r && r->n_divergent == 1);
    if (r && r->n_divergent == 1) {
        CHECK_EQ_U64(r->divergent[0].growth, 0);
        CHECK_EQ_U64(r->divergent[0].first_divergent_step, 0);
    }
    rs_compare_result_free(r);
}

TEST(a_jittery_leak_is_growth_and_projects_the_step_its_limit_is_reached)
{
    /* 10 MiB a step from step 4 on, under a 2 GiB limit: 1000 + 80 MiB at step 11, then 968
     * MiB to go at 10 a step */
    double r3[12];
    for (int k = 0; k < 12; k++) r3[k] = (k > 3 ? 10.0 * (k - 3) : 0) + jitter[(k * 7) % 12];
    rs_compare_result *r = against_flat_ranks(r3, 12, jitter, 2048 * MIB);
    CHECK(r && r->n_divergent == 1);
    if (r && r->n_divergent == 1) {
        const rs_compare_divergent *d = &r->divergent[0];
        CHECK_EQ_U64(d->growth, 1);
        CHECK_EQ_U64(d->first_divergent_step, 4);
        CHECK(d->growth_per_step > 9 * MIB && d->growth_per_step < 11 * MIB);
        CHECK(d->growth_t >= 4);
        CHECK_EQ_U64(d->capacity, 2048 * MIB);
        CHECK_EQ_U64(d->capacity_is_limit, 1);
        CHECK(d->exhaust_step >= 105 && d->exhaust_step <= 110);
    }
    rs_compare_result_free(r);
}

TEST(a_one_time_jump_under_jitter_is_an_offset_from_the_jump)
{
    double r3[12];
    for (int k = 0; k < 12; k++) r3[k] = (k >= 6 ? 90.0 : 0) + jitter[(k * 7) % 12];
    rs_compare_result *r = against_flat_ranks(r3, 12, jitter, 0);
    CHECK(r && r->n_divergent == 1);
    if (r && r->n_divergent == 1) {
        CHECK_EQ_U64(r->divergent[0].growth, 0);
        CHECK_EQ_U64(r->divergent[0].first_divergent_step, 6);
    }
    rs_compare_result_free(r);
}

TEST(an_oom_rank_is_a_verdict_with_its_request_step_and_live_sites)
{
    four_ranks f;
    four_ranks_init(&f);
    f.cfg[3].oom_step = 5;
    f.cfg[3].oom_request = (uint64_t)2 << 30;
    rs_compare_result *r = four_ranks_compare(&f, FROM_SNAPSHOTS);
    CHECK(r && r->n_oom == 1);
    if (r && r->n_oom == 1) {
        const rs_compare_oom *o = &r->oom[0];
        CHECK_EQ_U64(o->rank, 3);
        CHECK_EQ_U64(o->requested, (uint64_t)2 << 30);
        CHECK_EQ_U64(o->step, 5);
        CHECK_EQ_U64(o->allocated, 128 * MIB);
        CHECK_EQ_U64(o->device_total, (uint64_t)80 << 30);
        CHECK(strcmp(o->site.site.function, "train_step") == 0);
        CHECK_EQ_U64(o->site.site.line, 99);
        CHECK(o->n_live == 2);
        int live = 0;
        for (size_t i = 0; i < o->n_live; i++) live |= strcmp(o->live[i].site.function, "attention_scores") == 0;
        CHECK(live);
        CHECK(r->reference_rank != 3);
        /* same peak as the others: no divergence verdict */
        CHECK_EQ_U64(r->n_divergent, 0);
    }
    four_ranks_free(&f, r);
}

/* The verdicts of two comparisons agree field for field, sites and paths included. */
static void check_same_verdicts(const rs_compare_result *a, const rs_compare_result *b)
{
    CHECK_EQ_U64(a->n_divergent, b->n_divergent);
    CHECK_EQ_U64(a->n_oom, b->n_oom);
    CHECK_EQ_U64(a->n_notes, b->n_notes);
    CHECK_EQ_U64(a->reference_rank, b->reference_rank);
    for (size_t i = 0; i < a->n_divergent && i < b->n_divergent; i++) {
        const rs_compare_divergent *x = &a->divergent[i], *y = &b->divergent[i];
        CHECK_EQ_U64(x->rank, y->rank);
        CHECK_EQ_U64(x->n_sites, y->n_sites);
        CHECK_EQ_U64(x->unattributed, y->unattributed);
        if (x->n_sites == y->n_sites)
            CHECK(memcmp(x->sites, y->sites, x->n_sites * sizeof *x->sites) == 0);
    }
    for (size_t i = 0; i < a->n_oom && i < b->n_oom; i++) {
        const rs_compare_oom *x = &a->oom[i], *y = &b->oom[i];
        CHECK(memcmp(&x->site, &y->site, sizeof x->site) == 0);
        CHECK_EQ_U64(x->n_live, y->n_live);
        if (x->n_live == y->n_live) CHECK(memcmp(x->live, y->live, x->n_live * sizeof *x->live) == 0);
    }
    for (size_t i = 0; i < a->n_notes && i < b->n_notes; i++) CHECK(strcmp(a->notes[i], b->notes[i]) == 0);
}

TEST(sites_made_with_the_summary_give_the_verdicts_the_snapshots_give)
{
    four_ranks f;
    four_ranks_init(&f);
    f.cfg[1].leak_from = 3;
    f.cfg[1].leak_bytes = 8 * MIB;
    f.cfg[3].oom_step = 5;
    f.cfg[3].oom_request = (uint64_t)2 << 30;
    rs_compare_result *full = four_ranks_compare(&f, FROM_SNAPSHOTS);
    rs_summary sums[4];
    rs_summary_sites sites[4];
    const rs_summary_sites *by_rank[4];
    for (int i = 0; i < 4; i++) {
        rs_summary_of_sites(f.full[i], &sums[i], &sites[i]);
        CHECK(memcmp(&sums[i], &f.sums[i], sizeof sums[i]) == 0); /* the same summary */
        CHECK(sites[i].ok);
        by_rank[i] = &sites[i];
    }
    CHECK_EQ_U64(sites[3].oom_path.n, 1);
    CHECK(strcmp(sites[3].oom_path.frames[0].function, "train_step") == 0);
    /* the sites alone, and the sites with the snapshots: as the snapshots alone */
    rs_compare_result *from_sites = NULL, *both = NULL;
    CHECK(rs_compare_ex(sums, NULL, by_rank, 4, 0, NULL, &from_sites) == RANKSNAP_OK);
    CHECK(rs_compare_ex(sums, (const rs_snap *const *)f.full, by_rank, 4, 0, NULL, &both) == RANKSNAP_OK);
    CHECK(full && from_sites && both);
    if (full && from_sites && both) {
        CHECK(full->n_divergent == 1 && full->n_oom == 1);
        check_same_verdicts(full, from_sites);
        check_same_verdicts(full, both);
    }
    rs_compare_result_free(from_sites);
    rs_compare_result_free(both);
    /* sites that could not be made count as none: the summaries' top sites, and a note */
    rs_summary_sites none;
    memset(&none, 0, sizeof none);
    const rs_summary_sites *some[4] = {&none, &none, &none, &none};
    rs_compare_result *r = NULL;
    CHECK(rs_compare_ex(sums, NULL, some, 4, 0, NULL, &r) == RANKSNAP_OK);
    int noted = 0;
    for (size_t i = 0; r && i < r->n_notes; i++) noted |= strstr(r->notes[i], "no full snapshot of both") != NULL;
    CHECK(noted);
    rs_compare_result_free(r);
    /* no summaries for ranks to compare: refused, naming the call */
    r = NULL;
    CHECK(rs_compare_ex(NULL, NULL, by_rank, 4, 0, NULL, &r) == RANKSNAP_ERR_INVALID_ARGUMENT && !r);
    CHECK(strstr(ranksnap_last_error(), "rs_compare: NULL argument") != NULL);
    for (int i = 0; i < 4; i++) rs_summary_sites_free(&sites[i]);
    four_ranks_free(&f, full);
}

TEST(ranks_without_data_are_missing)
{
    train_cfg c[3];
    for (int i = 0; i < 3; i++) c[i] = train_default();
    rs_snap *full[3];
    rs_summary sums[3];
    for (int i = 0; i < 3; i++) {
        full[i] = synth_train(i == 2 ? 3 : i, 4, "job-1", &c[i]);
        rs_summary_of(full[i], &sums[i]);
    }
    rs_compare_result *r = NULL;
    CHECK(rs_compare(sums, NULL, 3, 0, NULL, &r) == RANKSNAP_OK);
    CHECK(r && r->n_missing == 1);
    if (r && r->n_missing == 1) CHECK_EQ_U64(r->missing[0], 2);
    rs_compare_result_free(r);
    /* An explicit world size wins over the summaries'. */
    CHECK(rs_compare(sums, NULL, 3, 6, NULL, &r) == RANKSNAP_OK);
    CHECK(r && r->n_missing == 3);
    if (r && r->n_missing == 3) {
        CHECK_EQ_U64(r->missing[0], 2);
        CHECK_EQ_U64(r->missing[1], 4);
        CHECK_EQ_U64(r->missing[2], 5);
    }
    rs_compare_result_free(r);
    free_ranks(full, 3);
}

static rs_summary summary_with_peak(int rank, uint64_t peak)
{
    rs_summary s;
    memset(&s, 0, sizeof s);
    s.rank = rank;
    s.world_size = 8;
    s.complete = 1;
    s.peak_allocated = peak;
    s.peak_step = -1;
    return s;
}

TEST(the_reference_is_the_lower_middle_rank_and_not_an_oom_rank)
{
    rs_summary s[4] = {summary_with_peak(0, 400), summary_with_peak(1, 100),
                        summary_with_peak(2, 300), summary_with_peak(3, 200)};
    s[0].world_size = s[1].world_size = s[2].world_size = s[3].world_size = 4;
    rs_compare_result *r = NULL;
    CHECK(rs_compare(s, NULL, 4, 0, NULL, &r) == RANKSNAP_OK);
    if (r) {
        CHECK_EQ_U64(r->median_peak, 200);
        CHECK_EQ_U64(r->reference_rank, 3);
    }
    rs_compare_result_free(r);
    /* an OOM cut rank 3's history short: the median is that of the other three */
    s[3].oom = 1;
    CHECK(rs_compare(s, NULL, 4, 0, NULL, &r) == RANKSNAP_OK);
    if (r) {
        CHECK_EQ_U64(r->median_peak, 300);
        CHECK_EQ_U64(r->reference_rank, 2);
        CHECK_EQ_U64(r->n_oom, 1);
    }
    rs_compare_result_free(r);
}

TEST(ranks_that_ran_out_of_memory_early_do_not_make_the_healthy_ones_divergent)
{
    /* two of four ranks OOMed in their first step, with little allocated: the lower-middle
     * median of all four would be theirs and flag both healthy ranks */
    rs_summary s[4] = {summary_with_peak(0, 1000 * MIB), summary_with_peak(1, 1000 * MIB),
                        summary_with_peak(2, 10 * MIB), summary_with_peak(3, 12 * MIB)};
    for (int i = 0; i < 4; i++) s[i].world_size = 4;
    s[2].oom = s[3].oom = 1;
    rs_compare_result *r = NULL;
    CHECK(rs_compare(s, NULL, 4, 0, NULL, &r) == RANKSNAP_OK);
    if (r) {
        CHECK_EQ_U64(r->median_peak, 1000 * MIB);
        CHECK_EQ_U64(r->n_oom, 2);
        CHECK_EQ_U64(r->n_divergent, 0);
    }
    rs_compare_result_free(r);
}

TEST(ranks_that_recorded_nothing_are_no_data_and_out_of_the_median)
{
    /* killed at start-up: 0-byte peaks, which made the median 0 and a healthy rank +inf% */
    rs_summary s[4] = {summary_with_peak(0, 20000 * MIB), summary_with_peak(1, 20000 * MIB),
                        summary_with_peak(2, 0), summary_with_peak(3, 0)};
    for (int i = 0; i < 4; i++) s[i].world_size = 4;
    rs_compare_result *r = NULL;
    CHECK(rs_compare(s, NULL, 4, 0, NULL, &r) == RANKSNAP_OK);
    if (r) {
        CHECK_EQ_U64(r->median_peak, 20000 * MIB);
        CHECK_EQ_U64(r->n_divergent, 0);
        CHECK_EQ_U64(r->n_no_data, 2);
        if (r->n_no_data == 2) {
            CHECK_EQ_U64(r->no_data[0], 2);
            CHECK_EQ_U64(r->no_data[1], 3);
        }
        CHECK(r->reference_rank == 0 || r->reference_rank == 1);
        CHECK_EQ_U64(r->n_ranks, 4);
    }
    rs_compare_result_free(r);
}

TEST(the_mad_guard_keeps_an_evenly_spread_job_quiet_but_flags_an_outlier)
{
    /* Eight ranks spread +-10% around 1000 MiB: beyond 5% each, but that is the job's normal. */
    uint64_t peaks[8] = {900, 930, 960, 990, 1010, 1040, 1070, 1100};
    rs_summary s[8];
    for (int i = 0; i < 8; i++) s[i] = summary_with_peak(i, peaks[i] * MIB);
    rs_compare_result *r = NULL;
    CHECK(rs_compare(s, NULL, 8, 0, NULL, &r) == RANKSNAP_OK);
    CHECK(r && r->n_divergent == 0);
    rs_compare_result_free(r);
    s[5].peak_allocated = 2000 * MIB;
    CHECK(rs_compare(s, NULL, 8, 0, NULL, &r) == RANKSNAP_OK);
    CHECK(r && r->n_divergent == 1);
    if (r && r->n_divergent == 1) CHECK_EQ_U64(r->divergent[0].rank, 5);
    rs_compare_result_free(r);
}

TEST(a_rank_below_the_median_is_flagged_with_the_sites_it_lacks)
{
    four_ranks f;
    four_ranks_init(&f);
    f.cfg[0].act_factor = 0.5;
    rs_compare_result *r = four_ranks_compare(&f, FROM_SNAPSHOTS);
    CHECK(r && r->n_divergent == 1);
    if (r && r->n_divergent == 1) {
        const rs_compare_divergent *d = &r->divergent[0];
        CHECK_EQ_U64(d->rank, 0);
        CHECK(d->divergence_pct < 0);
        CHECK_EQ_U64(d->first_divergent_step, 0);
        CHECK(d->n_sites >= 1 && strcmp(d->sites[0].site.function, "attention_scores") == 0);
        if (d->n_sites >= 1) CHECK(d->sites[0].site.bytes == -(int64_t)(32 * MIB));
    }
    four_ranks_free(&f, r);
}

TEST(without_full_snapshots_sites_come_from_the_summaries)
{
    four_ranks f;
    four_ranks_init(&f);
    f.cfg[2].act_factor = 1.5;
    rs_compare_result *r = four_ranks_compare(&f, FROM_SUMMARIES);
    CHECK(r && r->n_divergent == 1);
    if (r && r->n_divergent == 1) {
        const rs_compare_divergent *d = &r->divergent[0];
        CHECK(d->n_sites >= 1 && strcmp(d->sites[0].site.function, "attention_scores") == 0);
        if (d->n_sites >= 1) CHECK_EQ_U64(d->sites[0].site.bytes, 32 * MIB);
        int noted = 0;
        for (size_t i = 0; i < r->n_notes; i++)
            if (strstr(r->notes[i], "no full snapshot")) noted = 1;
        CHECK(noted);
    }
    four_ranks_free(&f, r);
}

static void put_site(rs_summary *s, const char *function, const char *file, int line, uint64_t bytes)
{
    rs_site *x = &s->sites[s->n_sites++];
    memset(x, 0, sizeof *x);
    snprintf(x->function, sizeof x->function, "%s", function);
    snprintf(x->file, sizeof x->file, "%s", file);
    x->line = line;
    x->blocks = 1;
    x->bytes = (int64_t)bytes;
}

TEST(sites_with_a_stack_come_first_and_a_site_that_did_not_change_is_not_listed)
{
    /* PyTorch's stacks="python": the backward pass's blocks have no stack; the loss's line holds
     * the same bytes on every rank */
    rs_summary s[4];
    for (int i = 0; i < 4; i++) {
        s[i] = summary_with_peak(i, i == 3 ? 196 * MIB : 100 * MIB);
        s[i].world_size = 4;
        put_site(&s[i], "forward", "train.py", 10, i == 3 ? 42 * MIB : 10 * MIB);
        put_site(&s[i], "loss", "train.py", 20, 16 * MIB);
        if (i == 3) put_site(&s[i], "(no stack)", "", 0, 64 * MIB);
    }
    rs_compare_result *r = NULL;
    CHECK(rs_compare(s, NULL, 4, 0, NULL, &r) == RANKSNAP_OK);
    CHECK(r && r->n_divergent == 1);
    if (r && r->n_divergent == 1) {
        const rs_compare_divergent *d = &r->divergent[0];
        CHECK_EQ_U64(d->n_sites, 2);
        if (d->n_sites == 2) {
            CHECK(strcmp(d->sites[0].site.function, "forward") == 0);
            CHECK_EQ_U64(d->sites[0].site.bytes, 32 * MIB);
            CHECK(strcmp(d->sites[1].site.function, "(no stack)") == 0);
            CHECK_EQ_U64(d->sites[1].site.bytes, 64 * MIB);
        }
    }
    rs_compare_result_free(r);
}

TEST(notes_name_incomplete_snapshots_dropped_events_and_other_jobs)
{
    rs_summary s[3] = {summary_with_peak(0, 100), summary_with_peak(1, 100),
                        summary_with_peak(2, 100)};
    for (int i = 0; i < 3; i++) {
        s[i].world_size = 3;
        strcpy(s[i].job, "job-A");
    }
    s[1].complete = 0;
    s[1].dropped = 77;
    strcpy(s[2].job, "job-B");
    rs_compare_result *r = NULL;
    CHECK(rs_compare(s, NULL, 3, 0, NULL, &r) == RANKSNAP_OK);
    char all[2048] = "";
    for (size_t i = 0; r && i < r->n_notes; i++) {
        strncat(all, r->notes[i], sizeof all - strlen(all) - 2);
        strcat(all, "\n");
    }
    CHECK_STR_CONTAINS(all, "rank 1 wrote its snapshot from a crash path");
    CHECK_STR_CONTAINS(all, "rank 1 dropped its 77 oldest events");
    CHECK_STR_CONTAINS(all, "rank 2 belongs to job job-B, rank 0 to job job-A");
    rs_compare_result_free(r);
}

TEST(a_note_says_why_the_communicators_gave_no_roles)
{
    rs_summary s[2] = {summary_with_peak(0, 100), summary_with_peak(1, 100)};
    rs_compare_config cfg;
    rs_compare_config_default(&cfg);
    cfg.ungrouped = "2 kinds of communicators divide the ranks (...)";
    rs_compare_result *r = NULL;
    CHECK(rs_compare(s, NULL, 2, 2, &cfg, &r) == RANKSNAP_OK);
    CHECK(r && r->n_notes == 1);
    if (r && r->n_notes == 1)
        CHECK_STR_EQ(r->notes[0], "ranks not grouped into roles: 2 kinds of communicators divide "
                                  "the ranks (...); --groups (RANKSNAP_GROUPS) declares them");
    rs_compare_result_free(r);
    /* nothing to say, nothing said */
    cfg.ungrouped = "";
    CHECK(rs_compare(s, NULL, 2, 2, &cfg, &r) == RANKSNAP_OK);
    CHECK(r && r->n_notes == 0);
    rs_compare_result_free(r);
}

TEST(notes_tell_the_rank_recovered_from_its_ring_from_those_dumped_on_a_crash_path)
{
    /* rank 2 was SIGKILLed (its ring recovered); mpirun then aborted the others, whose dumper
     * threads wrote from a crash path */
    rs_summary s[4];
    for (int i = 0; i < 4; i++) {
        s[i] = summary_with_peak(i, 100);
        s[i].world_size = 4;
        s[i].complete = 0;
    }
    s[2].recovered = 1;
    rs_compare_result *r = NULL;
    CHECK(rs_compare(s, NULL, 4, 0, NULL, &r) == RANKSNAP_OK);
    CHECK(r && r->n_notes == 2);
    if (r && r->n_notes == 2) {
        CHECK_STR_CONTAINS(r->notes[0], "rank 2 was recovered from its event ring");
        CHECK_STR_CONTAINS(r->notes[1], "ranks 0, 1, 3 wrote their snapshots from a crash path");
    }
    rs_compare_result_free(r);
}

TEST(a_rank_given_twice_is_noted_and_counted_once)
{
    rs_summary s[3] = {summary_with_peak(0, 100), summary_with_peak(1, 100),
                        summary_with_peak(1, 900)};
    for (int i = 0; i < 3; i++) s[i].world_size = 2;
    rs_compare_result *r = NULL;
    CHECK(rs_compare(s, NULL, 3, 0, NULL, &r) == RANKSNAP_OK);
    CHECK(r && r->n_ranks == 2);
    CHECK(r && r->n_notes == 1 && strstr(r->notes[0], "rank 1 was given twice"));
    rs_compare_result_free(r);
}

TEST(no_ranks_gives_every_rank_missing_and_no_reference)
{
    rs_compare_result *r = NULL;
    CHECK(rs_compare(NULL, NULL, 0, 3, NULL, &r) == RANKSNAP_OK);
    CHECK(r && r->reference_rank == -1 && r->n_missing == 3);
    rs_compare_result_free(r);
    rs_compare_config cfg;
    rs_compare_config_default(&cfg);
    cfg.divergence_pct = -1;
    CHECK(rs_compare(NULL, NULL, 0, 3, &cfg, &r) == RANKSNAP_ERR_INVALID_ARGUMENT);
    CHECK(r == NULL);
}

int main(void)
{
    RUN(site_is_the_innermost_frame_that_is_not_ranksnaps_own);
    RUN(sites_are_matched_by_function_file_and_line_not_by_pc);
    RUN(an_unresolved_site_is_named_by_its_module);
    RUN(an_unresolved_frame_in_nccl_is_looked_past_to_its_caller);
    RUN(a_long_path_keeps_its_file_name_and_a_long_symbol_its_start);
    RUN(a_block_alive_at_the_end_counts_its_block_size_from_the_state);
    RUN(sites_at_peak_replay_to_the_peak_not_the_end);
    RUN(sites_at_peak_count_blocks_from_before_the_history);
    RUN(sites_of_an_oom_rank_are_those_live_at_the_oom);
    RUN(summary_has_the_peak_of_each_step);
    RUN(summary_downsamples_a_long_step_series_keeping_the_maximum);
    RUN(summary_marks_steps_that_were_not_recorded);
    RUN(summary_of_an_inconsistent_history_never_goes_negative);
    RUN(identical_ranks_produce_no_verdict);
    RUN(larger_activations_from_step_0_are_a_constant_offset_at_their_site);
    RUN(a_leak_from_step_3_is_growth_from_step_3_at_the_leaking_site);
    RUN(a_small_leak_is_dated_from_where_it_started);
    RUN(a_small_steady_leak_is_growth_with_its_bytes_per_step_since_step_0);
    RUN(a_buffer_kept_once_is_an_offset_from_its_step);
    RUN(a_jittery_constant_difference_is_an_offset_not_growth);
    RUN(a_jittery_leak_is_growth_and_projects_the_step_its_limit_is_reached);
    RUN(a_one_time_jump_under_jitter_is_an_offset_from_the_jump);
    RUN(an_oom_rank_is_a_verdict_with_its_request_step_and_live_sites);
    RUN(sites_made_with_the_summary_give_the_verdicts_the_snapshots_give);
    RUN(ranks_without_data_are_missing);
    RUN(the_reference_is_the_lower_middle_rank_and_not_an_oom_rank);
    RUN(ranks_that_ran_out_of_memory_early_do_not_make_the_healthy_ones_divergent);
    RUN(ranks_that_recorded_nothing_are_no_data_and_out_of_the_median);
    RUN(the_mad_guard_keeps_an_evenly_spread_job_quiet_but_flags_an_outlier);
    RUN(a_rank_below_the_median_is_flagged_with_the_sites_it_lacks);
    RUN(without_full_snapshots_sites_come_from_the_summaries);
    RUN(sites_with_a_stack_come_first_and_a_site_that_did_not_change_is_not_listed);
    RUN(notes_name_incomplete_snapshots_dropped_events_and_other_jobs);
    RUN(a_note_says_why_the_communicators_gave_no_roles);
    RUN(notes_tell_the_rank_recovered_from_its_ring_from_those_dumped_on_a_crash_path);
    RUN(a_rank_given_twice_is_noted_and_counted_once);
    RUN(no_ranks_gives_every_rank_missing_and_no_reference);
    return check_summary();
}
