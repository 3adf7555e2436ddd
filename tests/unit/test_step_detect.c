/*
 * test_step_detect.c — steps found from the period of the collectives (rank/runtime/step_detect.c):
 * a plain loop, a warm-up iteration, several collectives per step, an evaluation every K steps, a
 * last partial step, no period at all; and the runtime numbering a range from them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ranksnap.h"
#include "step_detect.h"
#include "steps.h"

/* A call of the test's program: 'A' = ncclAllReduce of 1000 floats, 'B' = of 24 floats,
 * 'C' = MPI_Bcast of 1 int, 'E' = MPI_Allreduce of 1 double (the evaluation's loss). */
static uint64_t tok_of(char c, const char **name)
{
    switch (c) {
    case 'A': *name = "ncclAllReduce"; return rs_step_detect_token(*name, 1000, 7, 0);
    case 'B': *name = "ncclAllReduce"; return rs_step_detect_token(*name, 24, 7, 0);
    case 'C': *name = "MPI_Bcast"; return rs_step_detect_token(*name, 1, 1, 0);
    default: *name = "MPI_Allreduce"; return rs_step_detect_token(*name, 1, 3, 0);
    }
}

/* Feeds `calls` and writes, for each call, the step that begins after it (-1: none). */
static void feed(rs_step_detect *d, const char *calls, int64_t *out)
{
    for (size_t i = 0; calls[i]; i++) {
        const char *name;
        uint64_t t = tok_of(calls[i], &name);
        out[i] = rs_step_detect_feed(d, t, name);
    }
}

/* the steps that began, in order, as a string "3 4 5" */
static void steps_of(const int64_t *out, size_t n, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && len < cap; i++)
        if (out[i] >= 0) len += (size_t)snprintf(buf + len, cap - len, "%s%lld", len ? " " : "", (long long)out[i]);
}

static void run_case(const char *calls, const char *want_steps, const char *want_how)
{
    rs_step_detect *d = calloc(1, sizeof *d);
    int64_t out[256];
    char got[512], how[160];
    feed(d, calls, out);
    steps_of(out, strlen(calls), got, sizeof got);
    rs_step_detect_describe(d, how, sizeof how);
    if (strcmp(got, want_steps) != 0 || strcmp(how, want_how) != 0)
        fprintf(stderr, "calls %s: steps \"%s\" (want \"%s\"), \"%s\" (want \"%s\")\n", calls, got, want_steps,
                how, want_how);
    CHECK(strcmp(got, want_steps) == 0);
    CHECK(strcmp(how, want_how) == 0);
    free(d);
}

/* one all-reduce per iteration (nccl-tests' loop): found at the third, which begins step 3 */
TEST(one_collective_per_step_is_found_after_three_calls)
{
    run_case("AAAAAA", "3 4 5 6", "ncclAllReduce x1 per step");
}

/* gradient buckets: three calls a step, two of one size; the steps end at the last bucket */
TEST(several_collectives_per_step_make_one_step)
{
    run_case("AABAABAABAAB", "3 4", "ncclAllReduce x3 per step");
}

/* a warm-up iteration that begins as the others do (with an extra broadcast) is step 0 */
TEST(warm_up_iteration_that_begins_like_the_pattern_is_step_0)
{
    run_case("ACBABABABAB", "3 4 5", "ncclAllReduce x2 per step");
}

/* set-up calls before the loop that do not look like an iteration come before step 0 */
TEST(set_up_calls_unlike_the_pattern_come_before_step_0)
{
    run_case("CEAAAA", "3 4", "ncclAllReduce x1 per step");
}

/* an evaluation every third step adds calls off the pattern: they begin no step, and the
 * training iterations after them are counted on */
TEST(evaluation_every_k_steps_is_skipped)
{
    run_case("ABABABEEABABABEEABAB", "3 4 5 6 7 8", "ncclAllReduce x2 per step");
}

/* a last partial iteration begins no step */
TEST(last_partial_step_begins_no_step)
{
    run_case("ABEABEABEABEA", "3 4", "ncclAllReduce x2, MPI_Allreduce x1 per step");
}

/* calls with no period: nothing is found, and after RS_SD_GIVE_UP calls the detector stops */
TEST(no_period_no_step)
{
    rs_step_detect *d = calloc(1, sizeof *d);
    uint64_t x = 88172645463325252ull;
    int64_t any = -1;
    for (int i = 0; i < RS_SD_GIVE_UP + 10; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift: a fixed sequence, no period */
        int64_t s = rs_step_detect_feed(d, x, "MPI_Bcast");
        if (s > any) any = s;
    }
    CHECK(any == -1);
    CHECK(d->period == -1);
    char how[64];
    rs_step_detect_describe(d, how, sizeof how);
    CHECK(how[0] == '\0');
    free(d);
}

/* The runtime: a program that only calls a collective each iteration gets its range at the
 * iterations of RANKSNAP_STEPS, and the program's own ranksnap_step takes over. */
TEST(runtime_numbers_the_range_from_the_collectives)
{
    setenv("RANKSNAP_STEPS", "3:5", 1);
    setenv("RANKSNAP_REPORT", "0", 1);
    setenv("RANKSNAP_STACKS", "none", 1);
    setenv("RANKSNAP_SIGNALS", "0", 1);
    unsetenv("RANKSNAP_STEP_ON");
    CHECK(ranksnap_init(NULL) == RANKSNAP_OK);
    int rec[8];
    for (int it = 0; it < 8; it++) {
        rec[it] = ranksnap_is_recording();
        rs_steps_collective_done("MPI_Allreduce", 4, 1, 2);
    }
    /* iterations 0..2 pass before the period is known; 3 and 4 are recorded, 5 on is not */
    CHECK(!rec[0] && !rec[1] && !rec[2]);
    CHECK(rec[3] && rec[4]);
    CHECK(!rec[5] && !rec[6] && !rec[7]);
    CHECK(ranksnap_finalize() == RANKSNAP_OK);
}

int main(void)
{
    RUN(one_collective_per_step_is_found_after_three_calls);
    RUN(several_collectives_per_step_make_one_step);
    RUN(warm_up_iteration_that_begins_like_the_pattern_is_step_0);
    RUN(set_up_calls_unlike_the_pattern_come_before_step_0);
    RUN(evaluation_every_k_steps_is_skipped);
    RUN(last_partial_step_begins_no_step);
    RUN(no_period_no_step);
    RUN(runtime_numbers_the_range_from_the_collectives);
    return check_summary();
}
