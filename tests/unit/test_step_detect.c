/*
 * test_step_detect.c — steps found from the period of the collectives (rank/runtime/step_detect.c),
 * as a table of synthetic call sequences in the shapes real programs have: periods of 1 to 4096
 * calls, repeated equal calls inside a step, set-up broadcasts, a warm-up iteration, an evaluation
 * every K steps, a checkpoint's broadcasts, a period that changes mid-run, a last partial step,
 * gradient accumulation, no period at all; and the runtime numbering a range from them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ranksnap.h"
#include "step_detect.h"
#include "steps.h"

#define MAX_CALLS 40000

/* A program's calls: each with its token, its name, the iteration it belongs to (-1: set-up;
 * calls off the pattern belong to the iteration after them) and whether it ends an iteration. */
typedef struct seq {
    int n;
    uint64_t tok[MAX_CALLS];
    const char *name[MAX_CALLS];
    int iter[MAX_CALLS];
    char ends[MAX_CALLS];
    int cur; /* the iteration the next calls belong to */
} seq;

static const char *const NAMES[] = {"ncclAllReduce", "MPI_Bcast", "ncclAllGather", "ncclReduceScatter", "MPI_Allreduce"};
enum { AR, BC, AG, RS, MAR };

static void call(seq *s, int kind, uint64_t count)
{
    if (s->n == MAX_CALLS) return;
    s->tok[s->n] = rs_step_detect_token(NAMES[kind], count, 7, 0);
    s->name[s->n] = NAMES[kind];
    s->iter[s->n] = s->cur;
    s->ends[s->n] = 0;
    s->n++;
}

/* the last call ended iteration s->cur */
static void end_iter(seq *s)
{
    s->ends[s->n - 1] = 1;
    s->cur++;
}

/* `p` calls of distinct counts (one per layer, each its own size) */
static void iter_distinct(seq *s, int kind, int p)
{
    for (int k = 0; k < p; k++) call(s, kind, 1000 + (uint64_t)k);
    end_iter(s);
}

/* `n` iterations of two calls of `kind`, of counts a then b */
static void two_call_iters(seq *s, int n, int kind, uint64_t a, uint64_t b)
{
    for (int it = 0; it < n; it++) {
        call(s, kind, a);
        call(s, kind, b);
        end_iter(s);
    }
}

/* Feeds `s` and checks: a pattern of `want_period` calls is found (0: none is); every step the
 * detector gives is the program's iteration (the one under way where it is found, the next one
 * at the end of each); after it is found every iteration's end begins a step but at most
 * `may_miss` (a pattern that changed, looked for again). The detector is left in *out. */
static void check_seq(const char *what, seq *s, int want_period, int may_miss, rs_step_detect **out)
{
    rs_step_detect *d = calloc(1, sizeof *d);
    int64_t last = -1;
    int found_at = -1, missed = 0, wrong = 0;
    for (int c = 0; c < s->n; c++) {
        int64_t got = rs_step_detect_feed(d, s->tok[c], s->name[c]);
        int64_t want = s->ends[c] ? s->iter[c] + 1 : s->iter[c];
        if (got >= 0 && found_at < 0) found_at = c;
        if (got >= 0 && (got != want || got <= last)) {
            if (!wrong++) fprintf(stderr, "%s: call %d gave step %lld, want %lld (last %lld)\n", what, c, (long long)got,
                                  (long long)want, (long long)last);
        }
        if (got < 0 && found_at >= 0 && s->ends[c]) missed++;
        if (got >= 0) last = got;
    }
    char how[160];
    rs_step_detect_describe(d, how, sizeof how);
    if (d->period != want_period || missed > may_miss || wrong)
        fprintf(stderr, "%s: period %d (want %d), found at call %d, %d ends missed, \"%s\"\n", what, d->period,
                want_period, found_at, missed, how);
    CHECK(d->period == want_period);
    CHECK(wrong == 0);
    CHECK(missed <= may_miss);
    CHECK((found_at >= 0) == (want_period > 0));
    if (out) *out = d;
    else free(d);
}

static seq *new_seq(void)
{
    return calloc(1, sizeof(seq));
}

/* Periods of 1 to 4096 calls, each call its own size: found, at the length the lock needs
 * (RS_SD_MIN_SPAN calls, RS_SD_REPEATS repetitions), and numbered as the iterations. */
TEST(periods_of_1_to_4096_calls_are_found)
{
    static const int periods[] = {1, 2, 3, 7, 42, 43, 64, 100, 150, 300, 1000, 4096};
    for (size_t k = 0; k < sizeof periods / sizeof *periods; k++) {
        int p = periods[k];
        int iters = (3 * p < RS_SD_MIN_SPAN ? RS_SD_MIN_SPAN / p + 1 : 3) + 4;
        seq *s = new_seq();
        for (int it = 0; it < iters; it++) iter_distinct(s, AR, p);
        char what[64];
        snprintf(what, sizeof what, "period %d", p);
        check_seq(what, s, p, 0, NULL);
        free(s);
    }
}

/* Three equal calls and a different one: a step of four calls, not four steps of one; and a
 * step whose calls vary in count (equal runs of 3, 2 and 1) is one step */
TEST(equal_calls_inside_a_step_are_not_the_step)
{
    seq *s = new_seq();
    for (int it = 0; it < 50; it++) {
        for (int k = 0; k < 3; k++) call(s, AR, 1000);
        call(s, BC, 1);
        end_iter(s);
    }
    rs_step_detect *d;
    check_seq("AAAB", s, 4, 0, &d);
    char how[160];
    rs_step_detect_describe(d, how, sizeof how);
    CHECK_STR_CONTAINS(how, "ncclAllReduce x3, MPI_Bcast x1 per step");
    free(d);
    memset(s, 0, sizeof *s);
    for (int it = 0; it < 40; it++) {
        for (int k = 0; k < 3; k++) call(s, AR, 1000);
        for (int k = 0; k < 2; k++) call(s, AR, 500);
        call(s, MAR, 1);
        end_iter(s);
    }
    check_seq("AAABBC", s, 6, 0, NULL);
    free(s);
}

/* A step of 100 equal all-reduces (one per layer) and two buckets; a 48-layer FSDP step (an
 * all-gather per layer forward, an all-gather and a reduce-scatter per layer backward) */
TEST(steps_of_many_equal_calls_are_one_step)
{
    seq *s = new_seq();
    for (int it = 0; it < 8; it++) {
        for (int k = 0; k < 100; k++) call(s, AR, 4096);
        call(s, AR, 25 << 20);
        call(s, AR, 3 << 20);
        end_iter(s);
    }
    check_seq("100 equal all-reduces and 2 buckets", s, 102, 0, NULL);
    memset(s, 0, sizeof *s);
    for (int it = 0; it < 8; it++) {
        for (int k = 0; k < 48; k++) call(s, AG, 1 << 20);
        for (int k = 0; k < 48; k++) {
            call(s, AG, 1 << 20);
            call(s, RS, 1 << 20);
        }
        call(s, MAR, 1);
        end_iter(s);
    }
    check_seq("FSDP, 48 layers", s, 145, 0, NULL);
    free(s);
}

/* k identical set-up broadcasts (settings shared by rank 0) come before step 0, whatever k; the
 * detector says how many calls came before */
TEST(set_up_broadcasts_are_never_the_step)
{
    static const int ks[] = {1, 3, 8, 40};
    for (size_t k = 0; k < sizeof ks / sizeof *ks; k++) {
        seq *s = new_seq();
        s->cur = -1;
        for (int j = 0; j < ks[k]; j++) call(s, BC, 1);
        s->cur = 0;
        two_call_iters(s, 80, MAR, 2, 1);
        rs_step_detect *d;
        char what[64], how[160], want[64];
        snprintf(what, sizeof what, "%d set-up broadcasts", ks[k]);
        check_seq(what, s, 2, 0, &d);
        rs_step_detect_describe(d, how, sizeof how);
        snprintf(want, sizeof want, ", %d calls before", ks[k]);
        CHECK_STR_CONTAINS(how, want);
        free(d);
        free(s);
    }
}

/* a warm-up iteration that begins as the others do (with an extra broadcast) is step 0 */
TEST(warm_up_iteration_that_begins_like_the_pattern_is_step_0)
{
    seq *s = new_seq();
    call(s, AR, 1000);
    call(s, BC, 1);
    call(s, AR, 24);
    end_iter(s);
    two_call_iters(s, 79, AR, 1000, 24);
    check_seq("warm-up", s, 2, 0, NULL);
    free(s);
}

/* an evaluation every 40 steps and a checkpoint's broadcasts (20 tensors of 20 sizes) add calls
 * off the pattern: they begin no step, and the iterations after them are counted on (an
 * evaluation more often than every RS_SD_MIN_SPAN calls is part of the step) */
TEST(evaluation_and_checkpoint_calls_are_skipped)
{
    seq *s = new_seq();
    for (int it = 0; it < 160; it++) {
        for (int k = 0; k < 5; k++) call(s, AR, 100 + (uint64_t)k);
        end_iter(s);
        if (it % 40 == 39)
            for (int k = 0; k < 3; k++) call(s, MAR, 1);
        if (it == 100)
            for (int k = 0; k < 20; k++) call(s, BC, 1u << k);
    }
    rs_step_detect *d;
    check_seq("evaluation every 40 steps, a checkpoint", s, 5, 0, &d);
    char how[160];
    rs_step_detect_describe(d, how, sizeof how);
    CHECK(d->skipped > 0);
    free(d);
    free(s);
}

/* a period that changes mid-run (another set of buckets) is found again, the steps numbered on;
 * as is a step of 300 calls that becomes one of 1000 */
TEST(period_that_changes_mid_run_is_found_again)
{
    seq *s = new_seq();
    for (int it = 0; it < 60; it++) iter_distinct(s, AR, 3);
    for (int it = 0; it < 60; it++) {
        for (int k = 0; k < 5; k++) call(s, AG, 7 + (uint64_t)k);
        end_iter(s);
    }
    rs_step_detect *d;
    check_seq("3 then 5 calls", s, 5, RS_SD_MIN_SPAN / 5 + 2, &d);
    char how[160];
    rs_step_detect_describe(d, how, sizeof how);
    CHECK_STR_CONTAINS(how, "ncclAllGather x5 per step");
    CHECK_STR_CONTAINS(how, "pattern changed");
    free(d);
    memset(s, 0, sizeof *s);
    for (int it = 0; it < 5; it++) iter_distinct(s, AR, 300);
    for (int it = 0; it < 6; it++) {
        for (int k = 0; k < 1000; k++) call(s, AG, 7 + (uint64_t)k);
        end_iter(s);
    }
    check_seq("300 then 1000 calls", s, 1000, 4, NULL);
    free(s);
}

/* a last partial iteration begins no step */
TEST(last_partial_step_begins_no_step)
{
    seq *s = new_seq();
    for (int it = 0; it < 50; it++) iter_distinct(s, AR, 4);
    call(s, AR, 1000);
    call(s, AR, 1001);
    rs_step_detect *d;
    check_seq("last partial step", s, 4, 0, &d);
    CHECK(d->step == 50);
    free(d);
    free(s);
}

/* gradient accumulation: 4 micro-steps (two all-gathers each) and the all-reduce make one step */
TEST(gradient_accumulation_is_one_step)
{
    seq *s = new_seq();
    for (int it = 0; it < 40; it++) {
        for (int m = 0; m < 4; m++) {
            call(s, AG, 1 << 20);
            call(s, AG, 1 << 18);
        }
        call(s, AR, 1 << 24);
        end_iter(s);
    }
    check_seq("gradient accumulation", s, 9, 0, NULL);
    free(s);
}

/* Calls with no period: nothing is found, the detector keeps looking, and says why, with the
 * collective to count; one all-reduce per iteration for fewer iterations than the lock needs:
 * not found, and the words name RANKSNAP_STEP_ON=MPI_Allreduce:1 */
TEST(no_period_says_why_and_what_to_set)
{
    rs_step_detect *d = calloc(1, sizeof *d);
    uint64_t x = 88172645463325252ull;
    int64_t any = -1;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift: a fixed sequence, no period */
        int64_t s = rs_step_detect_feed(d, x, i % 4 ? "ncclAllGather" : "MPI_Allreduce");
        if (s > any) any = s;
    }
    CHECK(any == -1);
    CHECK(d->period == 0);
    char how[160];
    rs_step_detect_describe(d, how, sizeof how);
    CHECK(how[0] == '\0');
    rs_step_detect_explain(d, how, sizeof how);
    CHECK_STR_CONTAINS(how, "no repeating pattern in 20000 collectives; try RANKSNAP_STEP_ON=MPI_Allreduce:1");
    memset(d, 0, sizeof *d);
    for (int j = 0; j < 3; j++) rs_step_detect_feed(d, rs_step_detect_token("MPI_Bcast", 1, 1, 0), "MPI_Bcast");
    for (int it = 0; it < 90; it++) any = rs_step_detect_feed(d, rs_step_detect_token("MPI_Allreduce", 4, 1, 2), "MPI_Allreduce");
    CHECK(any == -1);
    rs_step_detect_explain(d, how, sizeof how);
    CHECK_STR_CONTAINS(how, "try RANKSNAP_STEP_ON=MPI_Allreduce:1");
    if (!strstr(how, "try RANKSNAP_STEP_ON=MPI_Allreduce:1")) fprintf(stderr, "explain: %s\n", how);
    free(d);
}

/* The tentative step: a program of one call per iteration gets its steps guessed from the third
 * call on, numbered as the pattern found at its 128th call numbers them (which then agrees); three
 * equal calls of a step of four are guessed as steps of one (the fourth skipped), and the pattern
 * found, the step of four, disagrees; set-up broadcasts' guess is dropped when the loop makes no
 * broadcast step, and the loop's own guess follows at once. */
TEST(short_steps_are_guessed_early_and_the_pattern_confirms_them)
{
    rs_step_detect *d = calloc(1, sizeof *d);
    uint64_t a = rs_step_detect_token("MPI_Allreduce", 1, 7, 0);
    int64_t first_guess = -1, guessed_at = -1, last_guess = -1;
    for (int i = 0; i < 200; i++) {
        int64_t st = rs_step_detect_feed(d, a, "MPI_Allreduce");
        if (d->q_began >= 0 && first_guess < 0) first_guess = d->q_began, guessed_at = i;
        if (d->q_began >= 0) last_guess = d->q_began;
        CHECK(!d->q_lost);
        if (st >= 0 && d->period > 0 && d->found_at == (uint64_t)i + 1) {
            CHECK(d->q_agrees);
            CHECK_EQ_U64(st, last_guess); /* the step under way is the one last guessed */
        }
    }
    CHECK_EQ_U64(guessed_at, 2);
    CHECK_EQ_U64(first_guess, 3); /* after three iterations, the fourth: step 3 */
    CHECK(d->period == 1);
    char how[200];
    memset(d, 0, sizeof *d);
    for (int i = 0; i < 10; i++) rs_step_detect_feed(d, a, "MPI_Allreduce");
    rs_step_detect_describe(d, how, sizeof how);
    CHECK_STR_CONTAINS(how, "MPI_Allreduce x1 per step, tentative (10 calls; 128 confirm)");

    memset(d, 0, sizeof *d);
    uint64_t b = rs_step_detect_token("MPI_Allreduce", 2, 7, 0);
    int lost_at = -1, agrees = -1;
    for (int it = 0; it < 60; it++)
        for (int k = 0; k < 4; k++) {
            int64_t st = rs_step_detect_feed(d, k < 3 ? a : b, "MPI_Allreduce");
            if (d->q_lost && lost_at < 0) lost_at = it * 4 + k;
            if (st >= 0 && agrees < 0 && d->period > 0) agrees = d->q_agrees;
        }
    /* guessed as steps of one call, the fourth skipped as off the pattern; the pattern found is
     * the step of four, which drops the guess */
    CHECK_EQ_U64(lost_at, -1);
    CHECK(agrees == 0);
    CHECK(d->period == 4);

    memset(d, 0, sizeof *d);
    uint64_t bc = rs_step_detect_token("MPI_Bcast", 1, 7, 0);
    for (int i = 0; i < 3; i++) rs_step_detect_feed(d, bc, "MPI_Bcast");
    CHECK(d->q_period == 1 && d->q_began == 3); /* the broadcasts guessed, for now */
    int64_t loop_guess = -1;
    lost_at = -1;
    for (int it = 0; it < 100; it++) {
        rs_step_detect_feed(d, a, "MPI_Allreduce");
        if (d->q_lost && lost_at < 0) lost_at = it;
        if (d->q_began >= 0 && loop_guess < 0 && lost_at >= 0) loop_guess = d->q_began;
    }
    /* no broadcast for six calls (two steps and three more): the guess is dropped, and the loop,
     * six calls long by then, is the next guess, numbered from where it began */
    CHECK_EQ_U64(lost_at, 5);
    CHECK_EQ_U64(loop_guess, 6);

    /* nccl-tests' shape: a set-up broadcast, five warm-up all-reduces, a barrier, twenty timed
     * ones, two all-reduces of the timings: too few calls to confirm a pattern, and the calls off
     * it are skipped, so the guess holds to the end, each all-reduce a step */
    memset(d, 0, sizeof *d);
    uint64_t bar = rs_step_detect_token("MPI_Barrier", 0, 0, 0), tm = rs_step_detect_token("MPI_Allreduce", 1, 9, 0);
    rs_step_detect_feed(d, bc, "MPI_Bcast");
    int lost = 0;
    for (int k = 0; k < 28; k++) {
        uint64_t t = k == 5 ? bar : k >= 26 ? tm : a;
        rs_step_detect_feed(d, t, k == 5 ? "MPI_Barrier" : k >= 26 ? "MPI_Allreduce" : "ncclAllReduce");
        lost |= d->q_lost;
    }
    CHECK(!lost && d->q_period == 1 && d->period == 0);
    /* named by the guessed pattern's calls, not by the last calls (the timings' all-reduces) */
    rs_step_detect_describe(d, how, sizeof how);
    CHECK_STR_CONTAINS(how, "ncclAllReduce x1 per step, tentative (29 calls; 128 confirm)");
    CHECK(strncmp(how, "ncclAllReduce", 13) == 0);
    CHECK_EQ_U64(d->q_step, 25); /* the 25 all-reduces were steps 0 to 24 */
    free(d);
}

/* The runtime: a program that only calls a collective each iteration, two all-reduces a step,
 * gets its range at the iterations of RANKSNAP_STEPS, and the words of its snapshot say it. */
TEST(runtime_numbers_the_range_from_the_collectives)
{
    setenv("RANKSNAP_STEPS", "70:72", 1);
    setenv("RANKSNAP_REPORT", "0", 1);
    setenv("RANKSNAP_STACKS", "none", 1);
    setenv("RANKSNAP_SIGNALS", "0", 1);
    unsetenv("RANKSNAP_STEP_ON");
    CHECK(ranksnap_init(NULL) == RANKSNAP_OK);
    int rec[80];
    for (int it = 0; it < 80; it++) {
        rec[it] = ranksnap_is_recording();
        rs_steps_collective_done("MPI_Allreduce", 4, 1, 2);
        rs_steps_collective_done("MPI_Allreduce", 1, 1, 2);
    }
    /* iterations 70 and 71 are recorded, the others are not */
    CHECK(!rec[69] && rec[70] && rec[71] && !rec[72]);
    CHECK(ranksnap_finalize() == RANKSNAP_OK);
}

int main(void)
{
    RUN(periods_of_1_to_4096_calls_are_found);
    RUN(equal_calls_inside_a_step_are_not_the_step);
    RUN(steps_of_many_equal_calls_are_one_step);
    RUN(set_up_broadcasts_are_never_the_step);
    RUN(warm_up_iteration_that_begins_like_the_pattern_is_step_0);
    RUN(evaluation_and_checkpoint_calls_are_skipped);
    RUN(period_that_changes_mid_run_is_found_again);
    RUN(last_partial_step_begins_no_step);
    RUN(gradient_accumulation_is_one_step);
    RUN(no_period_says_why_and_what_to_set);
    RUN(short_steps_are_guessed_early_and_the_pattern_confirms_them);
    RUN(runtime_numbers_the_range_from_the_collectives);
    return check_summary();
}
