/*
 * test_framework_oom.c — an out-of-memory error the framework's allocator raised itself
 * (ranksnap_framework_oom) in a rank ranksnap records natively: recorded as the rank's OOM with
 * the figures the error gave, written at once; told apart from the driver's refusal, which
 * PyTorch's cudaMallocAsync backend reports with the same error (recorded already, not twice);
 * refused where the rank is not recorded natively and for frames read without the GIL. Each
 * runtime lives in a forked child (sim backend), which reads its own file back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "cmd_summary.h"
#include "outside.h"
#include "ranksnap.h"
#include "rsnap_decode.h"
#include "scratch_dir.h"

#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)
/* PyTorch's message gives two decimals of MiB: each figure within this of the exact one */
#define MIB_ROUNDING ((uint64_t)5243)

static char scratch[256];
static char dir[320];

/* A PyTorch rank under backend:cudaMallocAsync, as the glue starts it: recorded natively. */
static int start_native(const char *sub)
{
    snprintf(dir, sizeof dir, "%s/%s", scratch, sub);
    mkdir(dir, 0700);
    setenv("RANKSNAP_DIR", dir, 1);
    setenv("RANKSNAP_BACKEND", "sim", 1);
    setenv("RANKSNAP_REPORT", "0", 1);
    setenv("RANKSNAP_RECORDER", "torch", 1);
    return ranksnap_record_natively("no recorder") == RANKSNAP_OK && ranksnap_init(NULL) == RANKSNAP_OK;
}

/* The error of a request of `requested` with the framework's `allocated` bytes and its `limit`. */
static ranksnap_framework_oom_info said(uint64_t requested, uint64_t allocated, uint64_t limit)
{
    ranksnap_framework_oom_info o;
    memset(&o, 0, sizeof o);
    o.requested = requested;
    o.allocated = allocated;
    o.limit = limit;
    o.device_free = 10 * GIB;
    o.device_total = 16 * GIB;
    o.rounding = MIB_ROUNDING;
    return o;
}

/* The rank's file as it is now (the OOM wrote it; ranksnap_dump first when `dump`), which must
 * hold an OOM record and count `ooms` OOMs; NULL when it does not hold one. */
static rs_snap *written(int dump, uint64_t ooms)
{
    if (dump) CHECK(ranksnap_dump(NULL) == RANKSNAP_OK);
    char path[400];
    snprintf(path, sizeof path, "%s/rank-00000.rsnap", dir);
    rs_snap *s = NULL;
    CHECK(rs_rsnap_decode_file(path, &s) == RANKSNAP_OK && s->has_oom);
    if (s && !s->has_oom) {
        rs_snap_free(s);
        return NULL;
    }
    if (s) CHECK_EQ_U64(s->totals.num_ooms, ooms);
    return s;
}

/* The end of a child's checks of `s`. */
static int done(rs_snap *s)
{
    rs_snap_free(s);
    ranksnap_finalize();
    return 1;
}

typedef int (*child_fn)(void);

/* `fn` in a forked child; 1 when it returned 1 (its CHECKs failed there say what broke). */
static int in_child(child_fn fn)
{
    fflush(NULL);
    int before = check_failures_;
    pid_t pid = fork();
    if (pid == 0) _exit(fn() && check_failures_ == before ? 0 : 1);
    int status = -1;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static int over_its_limit(void)
{
    CHECK(start_native("over"));
    CHECK(ranksnap_step(3) == RANKSNAP_OK);
    ranksnap_framework_oom_info o = said(64 * MIB, 200 * MIB + MIB / 2, 250 * MIB);
    CHECK(ranksnap_framework_oom(&o) == RANKSNAP_OK);
    /* written at once, before the script's end */
    rs_snap *s = written(0, 1);
    if (!s) return 0;
    CHECK_EQ_U64(s->oom.requested, 64 * MIB);
    CHECK_EQ_U64(s->oom.allocated, 200 * MIB + MIB / 2);
    CHECK_EQ_U64(s->oom.memory_limit, 250 * MIB);
    CHECK_EQ_U64(s->oom.device_free, 10 * GIB);
    CHECK_EQ_U64(s->oom.device_total, 16 * GIB);
    CHECK(s->oom.step == 3);
    /* the history's oom event: the request, and the device's free bytes */
    int found = 0;
    for (size_t i = 0; i < s->history.count; i++)
        if (s->history.action[i] == RS_ACT_OOM) {
            found = 1;
            CHECK_EQ_U64(s->history.size[i], 64 * MIB);
            CHECK_EQ_U64(s->history.addr[i], 10 * GIB);
        }
    CHECK(found);
    return done(s);
}

TEST(framework_oom_over_its_limit_is_the_ranks_oom_with_the_errors_figures)
{
    CHECK(in_child(over_its_limit));
}

/* The driver refused 4 MiB, then PyTorch's error for it: within the limit, or no limit, or too
 * close to it to tell from two decimals. */
static int drivers_refusal_reported_again(void)
{
    CHECK(start_native("driver"));
    const uint64_t cases[][2] = {{50 * MIB, 0}, {50 * MIB, 100 * MIB}, {96 * MIB, 100 * MIB}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rs_outside_driver_oom(4 * MIB, 0);
        /* as PyTorch prints 4 MiB give or take a byte: 4.00 MiB */
        ranksnap_framework_oom_info o = said(4 * MIB + 1, cases[i][0], cases[i][1]);
        CHECK(ranksnap_framework_oom(&o) == RANKSNAP_OK);
    }
    rs_snap *s = written(1, 3);
    if (!s) return 0;
    /* the driver's record: it does not say what was free */
    CHECK_EQ_U64(s->oom.device_free, 0);
    CHECK_EQ_U64(s->oom.requested, 4 * MIB);
    return done(s);
}

TEST(framework_oom_that_the_driver_refused_is_not_counted_twice)
{
    CHECK(in_child(drivers_refusal_reported_again));
}

/* What cannot be the driver's: a request over the limit beyond the rounding, after a refusal of
 * the driver's of the same size; a second error too close to tell after the driver's refusal was
 * matched to the first; one too close to tell after a refusal of another size. */
static int others_after_the_drivers(void)
{
    CHECK(start_native("others"));
    rs_outside_driver_oom(4 * MIB, 0);
    ranksnap_framework_oom_info over = said(4 * MIB, 100 * MIB, 100 * MIB);
    CHECK(ranksnap_framework_oom(&over) == RANKSNAP_OK);
    rs_outside_driver_oom(4 * MIB, 0);
    ranksnap_framework_oom_info close = said(4 * MIB, 96 * MIB, 100 * MIB);
    CHECK(ranksnap_framework_oom(&close) == RANKSNAP_OK); /* the driver's */
    CHECK(ranksnap_framework_oom(&close) == RANKSNAP_OK);
    rs_outside_driver_oom(8 * MIB, 0);
    ranksnap_framework_oom_info other = said(4 * MIB, 96 * MIB + 1, 100 * MIB);
    CHECK(ranksnap_framework_oom(&other) == RANKSNAP_OK);
    rs_snap *s = written(1, 6);
    if (!s) return 0;
    CHECK_EQ_U64(s->oom.memory_limit, 100 * MIB);
    CHECK_EQ_U64(s->oom.allocated, 96 * MIB + 1);
    return done(s);
}

TEST(framework_oom_over_its_limit_after_a_drivers_refusal_is_another_oom)
{
    CHECK(in_child(others_after_the_drivers));
}

/* An error that did not say the request's size: recorded, and said as not known. */
static int size_not_known(void)
{
    CHECK(start_native("unknown"));
    ranksnap_framework_oom_info o = said(0, 100 * MIB, 100 * MIB);
    CHECK(ranksnap_framework_oom(&o) == RANKSNAP_OK);
    rs_snap *s = written(0, 1);
    if (!s) return 0;
    CHECK_EQ_U64(s->oom.requested, 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f && rs_cmd_summary_print(f, s, "rank-00000.rsnap") == RANKSNAP_OK);
    if (f) fclose(f);
    CHECK_STR_CONTAINS(text, "tried to allocate (size not known)");
    free(text);
    return done(s);
}

TEST(framework_oom_of_a_size_not_known_is_recorded_saying_so)
{
    CHECK(in_child(size_not_known));
}

/* Outside a natively recorded rank (a C program's), where the framework's observer serves. */
static int not_native(void)
{
    snprintf(dir, sizeof dir, "%s/not_native", scratch);
    mkdir(dir, 0700);
    setenv("RANKSNAP_DIR", dir, 1);
    setenv("RANKSNAP_BACKEND", "sim", 1);
    setenv("RANKSNAP_REPORT", "0", 1);
    CHECK(ranksnap_init(NULL) == RANKSNAP_OK);
    ranksnap_framework_oom_info o = said(4 * MIB, 100 * MIB, 100 * MIB);
    CHECK(ranksnap_framework_oom(&o) == RANKSNAP_ERR_UNSUPPORTED);
    CHECK(ranksnap_framework_oom(NULL) == RANKSNAP_ERR_INVALID_ARGUMENT);
    ranksnap_finalize();
    return 1;
}

/* Frames with no interpreter to read their names from (or, in Python, without its GIL). */
static int no_gil(void)
{
    CHECK(start_native("no_gil"));
    ranksnap_framework_oom_info o = said(4 * MIB, 100 * MIB, 100 * MIB);
    uintptr_t code = 0x1000;
    int line = 7;
    o.codes = &code;
    o.lines = &line;
    o.n = 1;
    CHECK(ranksnap_framework_oom(&o) == RANKSNAP_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "GIL");
    ranksnap_finalize();
    return 1;
}

TEST(framework_oom_is_refused_outside_a_native_rank_and_without_the_gil)
{
    CHECK(in_child(not_native));
    CHECK(in_child(no_gil));
}

int main(void)
{
    if (scratch_dir_make(scratch, sizeof scratch, "framework_oom") != 0) return 1;
    RUN(framework_oom_over_its_limit_is_the_ranks_oom_with_the_errors_figures);
    RUN(framework_oom_that_the_driver_refused_is_not_counted_twice);
    RUN(framework_oom_over_its_limit_after_a_drivers_refusal_is_another_oom);
    RUN(framework_oom_of_a_size_not_known_is_recorded_saying_so);
    RUN(framework_oom_is_refused_outside_a_native_rank_and_without_the_gil);
    return scratch_dir_done(scratch, check_summary());
}
