/*
 * test_time_ranges.c — RANKSNAP_STEPS=time:A:B as a short run meets it: each case runs the real
 * runtime (sim backend) in forked children, one fresh process per run, as a job's ranks are.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ranksnap.h"
#include "scratch_dir.h"

/* the race lost in a sixth to three quarters of the runs, by the load: 60 make a pass of the old
 * code a chance in tens of thousands */
#define RUNS 60

static char dir[256];

/* One run: init, one allocation, finalize at once. 0 when every call succeeded. */
static int short_run(const char *run_dir)
{
    setenv("RANKSNAP_DIR", run_dir, 1);
    setenv("RANKSNAP_BACKEND", "sim", 1);
    setenv("RANKSNAP_STEPS", "time:0:600", 1);
    setenv("RANKSNAP_REPORT", "0", 1);
    /* neither stacks nor the post-mortem thread: what the test is about is the range, and
     * libbacktrace, which both warm, is what ThreadSanitizer would report on */
    setenv("RANKSNAP_STACKS", "none", 1);
    setenv("RANKSNAP_SIGNALS", "0", 1);
    if (ranksnap_init(NULL) != RANKSNAP_OK) return 1;
    void *p = NULL;
    if (ranksnap_malloc(&p, (size_t)1 << 20, NULL) != RANKSNAP_OK) return 2;
    if (ranksnap_free(p) != RANKSNAP_OK) return 3;
    return ranksnap_finalize() == RANKSNAP_OK ? 0 : 4;
}

/* time:0:N covers the whole run, however short: the range began at init and finalize writes its
 * snapshot. A thread that began it lost the race to finalize in most runs of a program this
 * short, which then recorded nothing ("never reached"). */
TEST(time_range_from_zero_records_a_run_that_ends_at_once)
{
    int missing = 0;
    for (int i = 0; i < RUNS; i++) {
        char run_dir[300], snap[340];
        snprintf(run_dir, sizeof run_dir, "%s/run%d", dir, i);
        snprintf(snap, sizeof snap, "%s/rank-00000.rsnap", run_dir);
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) _exit(short_run(run_dir));
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        struct stat st;
        if (stat(snap, &st) != 0) missing++;
    }
    if (missing) fprintf(stderr, "no snapshot in %d of %d runs\n", missing, RUNS);
    CHECK(missing == 0);
}

int main(void)
{
    if (scratch_dir_make(dir, sizeof dir, "test_time_ranges") != 0) return 1;
    RUN(time_range_from_zero_records_a_run_that_ends_at_once);
    return scratch_dir_done(dir, check_summary());
}
