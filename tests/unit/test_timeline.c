/*
 * test_timeline.c — the per-rank timelines that report.html draws (collector/timeline.c) and the
 * page around them (collector/report_html.c), over hand-built snapshots (synth_snapshot.h):
 * bounded buckets that keep a one-event spike, a peak and an end level that agree with the
 * summary, the OOM moment and the live blocks there, the page's size for 32 ranks of 100,000
 * events, and snapshot strings that cannot break out of the page or name a URL.
 * The page in a real browser is tests/html.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compare.h"
#include "progress.h"
#include "report_html.h"
#include "synth_snapshot.h"
#include "timeline.h"

#define MIB SY_MIB

static uint64_t max_hi(const rs_timeline *t)
{
    uint64_t m = t->alloc_start;
    for (size_t i = 0; i < t->alloc.n; i++)
        if (t->alloc.hi[i] > m) m = t->alloc.hi[i];
    return m;
}

/* A page of `n` ranks, rank `big` with 1.5 times the activations, into a malloc'ed string. */
static char *page_of(rs_snap **full, int n, size_t *len)
{
    rs_summary *sums = calloc((size_t)n, sizeof *sums);
    rs_compare_result *r = NULL;
    char *buf = NULL;
    *len = 0;
    for (int i = 0; i < n; i++) rs_summary_of(full[i], &sums[i]);
    rs_compare_config cfg;
    rs_compare_config_default(&cfg);
    CHECK(rs_compare(sums, (const rs_snap *const *)full, (size_t)n, n, &cfg, &r) == RANKSNAP_OK);
    FILE *m = open_memstream(&buf, len);
    CHECK(m != NULL);
    if (m && r) CHECK(rs_report_html_of_snapshots(m, r, (const rs_snap *const *)full, (size_t)n) == RANKSNAP_OK);
    if (m) fclose(m);
    rs_compare_result_free(r);
    free(sums);
    return buf;
}

TEST(timeline_keeps_at_most_max_points_buckets_and_a_one_event_spike)
{
    synth y;
    synth_init(&y, 0, 1, "job-1");
    uint32_t small = synth_site(&y, "small_tensor", "model.c", 10);
    uint32_t spike = synth_site(&y, "huge_workspace", "model.c", 20);
    for (int i = 0; i < 20000; i++) {
        if (i == 12345) synth_free(&y, synth_alloc(&y, 512 * MIB, spike));
        synth_free(&y, synth_alloc(&y, MIB, small));
    }
    rs_snap *s = synth_finish(&y);
    rs_timeline *t = NULL;
    CHECK(rs_timeline_build(s, 300, &t) == RANKSNAP_OK);
    if (t) {
        CHECK(t->n_buckets <= 300 && t->n_buckets >= 150);
        CHECK(t->alloc.n <= 300 && t->reserved.n <= 300);
        CHECK_EQ_U64(max_hi(t), 512 * MIB);
        CHECK_EQ_U64(t->peak_bytes, 512 * MIB);
        /* the bucket of the spike names the spike as its largest allocation */
        int named = 0;
        for (size_t i = 0; i < t->alloc.n; i++)
            if (t->big_size[i] == 512 * MIB && t->big_site[i] != RS_TIMELINE_NO_SITE &&
                strcmp(t->site_names[t->big_site[i]], "huge_workspace (model.c:20)") == 0)
                named = 1;
        CHECK(named);
        for (size_t i = 1; i < t->alloc.n; i++) CHECK(t->alloc.index[i] > t->alloc.index[i - 1]);
    }
    rs_timeline_free(t);
    rs_snap_free(s);
}

TEST(timeline_peak_and_end_agree_with_the_summary)
{
    train_cfg c = train_default();
    c.act_factor = 1.5;
    rs_snap *s = synth_train(0, 1, "job-1", &c);
    rs_summary sum;
    rs_summary_of(s, &sum);
    rs_timeline *t = NULL;
    CHECK(rs_timeline_build(s, 0, &t) == RANKSNAP_OK);
    if (t) {
        CHECK_EQ_U64(t->peak_bytes, sum.peak_allocated);
        CHECK(t->peak_step == sum.peak_step);
        CHECK(t->n_buckets <= RS_TIMELINE_DEFAULT_POINTS);
        CHECK(t->alloc.n > 0);
        if (t->alloc.n) CHECK_EQ_U64(t->alloc.last[t->alloc.n - 1], s->totals.allocated_bytes_current);
        if (t->reserved.n)
            CHECK_EQ_U64(t->reserved.last[t->reserved.n - 1], s->totals.reserved_bytes_current);
        CHECK(t->n_steps == (size_t)c.steps);
        for (size_t i = 0; i < t->n_steps; i++) CHECK(t->step_no[i] == (int64_t)i);
        CHECK(!t->oom && !t->moment_is_oom);
        /* live at the peak: the parameters, the four activations and the last layer's
         * workspace, each with its stack */
        CHECK(t->n_live == 6);
        if (t->n_live == 6) {
            CHECK_EQ_U64(t->live[5].size, MIB);
            CHECK_EQ_U64(t->live[0].size, 64 * MIB);
            CHECK_EQ_U64(t->live[1].size, 24 * MIB);
            CHECK(t->live[1].stack < t->n_stacks);
            if (t->live[1].stack < t->n_stacks) {
                const rs_timeline_stack *st = &t->stacks[t->live[1].stack];
                int found = 0;
                for (size_t k = 0; k < st->n_frames; k++)
                    found |= strcmp(t->frames[st->frames[k]].function, "attention_scores") == 0;
                CHECK(found);
            }
            CHECK(t->live[1].site < t->n_site_names);
            if (t->live[1].site < t->n_site_names)
                CHECK(strcmp(t->site_names[t->live[1].site], "attention_scores (model.c:211)") == 0);
        }
        for (size_t i = 1; i < t->n_live; i++) CHECK(t->live[i - 1].size >= t->live[i].size);
        CHECK(t->n_sites > 0 && strcmp(t->sites[0].function, "attention_scores") == 0);
    }
    rs_timeline_free(t);
    rs_snap_free(s);
}

TEST(timeline_gives_a_burst_after_a_quiet_stretch_buckets_of_its_own)
{
    synth y;
    synth_init(&y, 0, 1, "job-1");
    uint32_t site = synth_site(&y, "step_tensor", "model.c", 10);
    synth_alloc(&y, 64 * MIB, site);
    y.now += 10 * 1000 * 1000; /* ten quiet seconds, then 20,000 events in 20 ms */
    int64_t burst = (int64_t)y.now;
    for (int i = 0; i < 4000; i++) synth_free(&y, synth_alloc(&y, (uint64_t)(1 + i % 7) * MIB, site));
    rs_snap *s = synth_finish(&y);
    rs_timeline *t = NULL;
    CHECK(rs_timeline_build(s, 2000, &t) == RANKSNAP_OK);
    if (t) {
        size_t in_burst = 0;
        for (size_t i = 0; i < t->alloc.n; i++) {
            in_burst += t->alloc.t[i] >= burst;
            CHECK(t->alloc.t[i] < burst - 1000 || t->alloc.t[i] >= burst); /* none straddles */
            if (i) CHECK(t->alloc.t[i] > t->alloc.t[i - 1]);
        }
        /* with buckets of equal time, the burst would get 2000 * 20 ms / 10 s = 4 of them */
        CHECK(in_burst >= 900);
        CHECK(t->n_buckets <= 2000);
        CHECK_EQ_U64(max_hi(t), 71 * MIB);
    }
    rs_timeline_free(t);
    rs_snap_free(s);
}

TEST(timeline_marks_the_oom_and_its_live_blocks)
{
    train_cfg c = train_default();
    c.oom_step = 3;
    c.oom_request = 40ull << 30;
    rs_snap *s = synth_train(0, 1, "job-1", &c);
    rs_timeline *t = NULL;
    CHECK(rs_timeline_build(s, 0, &t) == RANKSNAP_OK);
    if (t) {
        CHECK(t->oom && t->moment_is_oom);
        CHECK_EQ_U64(t->oom_requested, 40ull << 30);
        CHECK(t->oom_step == 3);
        CHECK(t->oom_t == (int64_t)s->history.time_us[s->history.count - 1]);
        CHECK(t->moment_t == t->oom_t);
        CHECK(t->n_live >= 5); /* the parameters and four activations */
        CHECK(t->n_ranges == 0);
    }
    rs_timeline_free(t);
    rs_snap_free(s);
}

TEST(timeline_turns_recorded_ranges_into_time_spans)
{
    train_cfg c = train_default();
    rs_snap *s = synth_train(0, 1, "job-1", &c);
    s->time.n_ranges = 2;
    s->time.ranges = malloc(2 * sizeof *s->time.ranges);
    s->time.ranges[0] = (rs_snap_range){2, 4};
    s->time.ranges[1] = (rs_snap_range){6, -1};
    s->time.clock_offset_us = -1000;
    rs_timeline *t = NULL;
    CHECK(rs_timeline_build(s, 0, &t) == RANKSNAP_OK);
    if (t) {
        CHECK(t->n_ranges == 2);
        int64_t step_t[8] = {0};
        for (size_t i = 0; i < t->n_steps && i < 8; i++) step_t[i] = t->step_t[i];
        CHECK(t->range_t0[0] == step_t[2] && t->range_t1[0] == step_t[4]);
        CHECK(t->range_t0[1] == step_t[6] && t->range_t1[1] == t->t_last);
        /* rank 0's time base: the offset is applied */
        CHECK(t->t_first == (int64_t)s->history.time_us[0] - 1000);
    }
    rs_timeline_free(t);
    rs_snap_free(s);
}

TEST(timeline_of_a_snapshot_without_history_is_one_empty_bucket)
{
    synth y;
    synth_init(&y, 3, 4, "job-1");
    rs_snap *s = synth_finish(&y);
    rs_timeline *t = NULL;
    CHECK(rs_timeline_build(s, 0, &t) == RANKSNAP_OK);
    if (t) {
        CHECK(t->n_buckets == 1 && t->alloc.n == 0 && t->n_steps == 0 && t->n_live == 0);
        CHECK(t->rank == 3 && t->t_first == t->t_last);
    }
    rs_timeline_free(t);
    rs_snap_free(s);
}

TEST(points_per_rank_shrink_beyond_64_ranks_but_not_below_200)
{
    CHECK(rs_timeline_points_for(1) == RS_TIMELINE_DEFAULT_POINTS);
    CHECK(rs_timeline_points_for(32) == RS_TIMELINE_DEFAULT_POINTS);
    CHECK(rs_timeline_points_for(64) == RS_TIMELINE_DEFAULT_POINTS);
    CHECK(rs_timeline_points_for(128) == 1000);
    CHECK(rs_timeline_points_for(100000) == 200);
}

TEST(page_for_32_ranks_of_100000_events_is_under_5_mb)
{
    enum { N = 32 };
    rs_snap *full[N];
    train_cfg c = train_default();
    /* 41 events a step: 2440 steps are 100,040 events, every alloc with a segment of its own, so
     * reserved bytes move as often as allocated ones (the page's worst case) */
    c.steps = 2440;
    for (int i = 0; i < N; i++) {
        train_cfg ci = c;
        if (i == 5) ci.act_factor = 1.5;
        full[i] = synth_train(i, N, "job-1", &ci);
        CHECK(full[i]->history.count >= 100000);
    }
    size_t len = 0;
    char *page = page_of(full, N, &len);
    printf("     page for %d ranks x %llu events: %zu bytes\n", N,
           (unsigned long long)full[0]->history.count, len);
    CHECK(page != NULL && len > 0);
    CHECK(len < 5u * 1000 * 1000);
    CHECK_STR_CONTAINS(page, "\"rank\":31,");
    free(page);
    for (int i = 0; i < N; i++) rs_snap_free(full[i]);
}

TEST(snapshot_strings_cannot_close_the_script_or_put_a_url_in_the_page)
{
    synth y;
    synth_init(&y, 0, 2, "job</script><script>alert(1)</script>");
    uint32_t evil = synth_site(&y, "</script><img src=x onerror=alert(1)>", "http://example.com/x.c", 7);
    uint32_t bad_utf8 = synth_site(&y, "caf\xe9\xff", "model.c", 8);
    synth_step(&y, 0);
    synth_alloc(&y, 4 * MIB, evil);
    synth_alloc(&y, 2 * MIB, bad_utf8);
    rs_snap *full[2];
    full[0] = synth_finish(&y);
    train_cfg c = train_default();
    full[1] = synth_train(1, 2, "job</script><script>alert(1)</script>", &c);
    size_t len = 0;
    char *page = page_of(full, 2, &len);
    CHECK(page != NULL);
    if (page) {
        CHECK(strlen(page) == len);
        /* the error hook, the data blob and the page's script close; nothing else does */
        size_t closes = 0;
        for (const char *p = page; (p = strstr(p, "</script")) != NULL; p++) closes++;
        CHECK(closes == 3);
        CHECK(strstr(page, "http://") == NULL && strstr(page, "https://") == NULL);
        CHECK(strstr(page, "<img") == NULL);
        CHECK_STR_CONTAINS(page, "\\u003c\\/script\\u003e\\u003cimg src=x onerror=alert(1)\\u003e");
        CHECK_STR_CONTAINS(page, "caf\\ufffd\\ufffd");
        CHECK_STR_CONTAINS(page, "<body>");
        CHECK_STR_CONTAINS(page, "data-rendered");
    }
    free(page);
    rs_snap_free(full[0]);
    rs_snap_free(full[1]);
}

TEST(progress_is_shown_on_a_terminal_for_long_work_and_when_asked)
{
    CHECK(!rs_progress_wanted(-1, 0, 1000, 1ull << 40)); /* not a terminal: never by default */
    CHECK(!rs_progress_wanted(-1, 1, 4, 1 << 20));       /* a terminal, but short work */
    CHECK(rs_progress_wanted(-1, 1, RS_PROGRESS_MIN_FILES, 0));
    CHECK(rs_progress_wanted(-1, 1, 1, RS_PROGRESS_MIN_BYTES));
    CHECK(rs_progress_wanted(1, 0, 1, 0));               /* --progress */
    CHECK(!rs_progress_wanted(0, 1, 1000, 1ull << 40));  /* --no-progress */
}

TEST(progress_line_is_redrawn_in_place_and_erased_at_the_end)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    CHECK(m != NULL);
    if (!m) return;
    rs_progress p;
    rs_progress_begin(&p, m, "reading", 3, 3000000);
    for (int i = 0; i < 3; i++) rs_progress_step(&p, 1000000);
    rs_progress_end(&p);
    fclose(m);
    CHECK_STR_CONTAINS(buf, "\rranksnap report: reading 0/3 files, 0.0 of 3.0 MB\033[K");
    CHECK_STR_CONTAINS(buf, "\rranksnap report: reading 3/3 files, 3.0 of 3.0 MB\033[K");
    CHECK(len >= 4 && strcmp(buf + len - 4, "\r\033[K") == 0);
    CHECK(strchr(buf, '\n') == NULL);
    free(buf);

    rs_progress off;
    rs_progress_begin(&off, NULL, "reading", 3, 0); /* off: nothing to write to */
    rs_progress_step(&off, 1);
    rs_progress_end(&off);
    CHECK(off.drawn == 0);
}

int main(void)
{
    RUN(timeline_keeps_at_most_max_points_buckets_and_a_one_event_spike);
    RUN(timeline_peak_and_end_agree_with_the_summary);
    RUN(timeline_gives_a_burst_after_a_quiet_stretch_buckets_of_its_own);
    RUN(timeline_marks_the_oom_and_its_live_blocks);
    RUN(timeline_turns_recorded_ranges_into_time_spans);
    RUN(timeline_of_a_snapshot_without_history_is_one_empty_bucket);
    RUN(points_per_rank_shrink_beyond_64_ranks_but_not_below_200);
    RUN(page_for_32_ranks_of_100000_events_is_under_5_mb);
    RUN(snapshot_strings_cannot_close_the_script_or_put_a_url_in_the_page);
    RUN(progress_is_shown_on_a_terminal_for_long_work_and_when_asked);
    RUN(progress_line_is_redrawn_in_place_and_erased_at_the_end);
    return check_summary();
}
