/*
 * test_external.c — an external recorder (ranksnap_set_recorder, RANKSNAP_RECORDER=torch) driven
 * by the runtime, with C ops standing in for the Python glue: RANKSNAP_RECORDER and
 * RANKSNAP_STACKS, when start/dump/stop are called, what the metadata says, the file and the
 * post-mortem path. Each runtime lives in a forked child (the runtime is one per process).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "external.h"
#include "options.h"
#include "scratch_dir.h"

static char scratch[256];

/* ---- a framework of C ops: what the runtime called, in order ---- */

typedef struct fake_fw {
    char calls[256];      /* "start(1000,0) dump stop" ... */
    char meta[8192];      /* the last metadata */
    int holds_lock;       /* what holds_lock answers */
    int started_at_step;  /* the step current at start(), from the last ranksnap_step */
} fake_fw;

static fake_fw fw;
static int64_t last_step = -1;

static void note(const char *s)
{
    size_t n = strlen(fw.calls);
    snprintf(fw.calls + n, sizeof fw.calls - n, "%s%s", n ? " " : "", s);
}

static int fw_start(void *ctx, uint64_t max_entries, int stacks_all)
{
    char b[64];
    snprintf(b, sizeof b, "start(%llu,%d)", (unsigned long long)max_entries, stacks_all);
    note(b);
    fw.started_at_step = (int)last_step;
    return 0;
}

static int fw_stop(void *ctx)
{
    note("stop");
    return 0;
}

static int fw_dump(void *ctx, const char *meta, void *arg, void (*put)(void *, const void *, size_t))
{
    note("dump");
    snprintf(fw.meta, sizeof fw.meta, "%s", meta);
    put(arg, "PICKLE-BYTES", 12);
    return 0;
}

static uint64_t fw_reserved(void *ctx)
{
    return 0;
}

static int fw_holds_lock(void)
{
    return fw.holds_lock;
}

static ranksnap_recorder_ops fw_ops(void)
{
    ranksnap_recorder_ops o;
    memset(&o, 0, sizeof o);
    o.start = fw_start;
    o.stop = fw_stop;
    o.dump = fw_dump;
    o.reserved = fw_reserved;
    o.holds_lock = fw_holds_lock;
    return o;
}

static void step(int64_t s)
{
    last_step = s;
    if (ranksnap_step(s) != RANKSNAP_OK) fprintf(stderr, "step %lld: %s\n", (long long)s, ranksnap_last_error());
}

/* Runs body() in a child with RANKSNAP_RECORDER=torch and RANKSNAP_DIR=scratch/sub; the child's
 * exit status (0: every CHECK held), or 128 + the signal that ended it. */
static int in_child(const char *sub, const char *steps, int (*body)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        char dir[320];
        snprintf(dir, sizeof dir, "%s/%s", scratch, sub);
        setenv("RANKSNAP_RECORDER", "torch", 1);
        setenv("RANKSNAP_DIR", dir, 1);
        setenv("RANKSNAP_STEPS", steps, 1);
        setenv("RANKSNAP_REPORT", "0", 1);
        /* the SIGTERM cases check that the dump is made, not its bound: the handler waits until
         * the dumper answers, which under qemu on a loaded machine took past the 800 ms default */
        setenv("RANKSNAP_DUMP_TIMEOUT_MS", "60000", 1);
        memset(&fw, 0, sizeof fw);
        check_failures_ = 0; /* the child's own checks only, not the parent's so far */
        _exit(body());
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static long file_size(const char *sub, const char *name, mode_t *mode)
{
    char path[400];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s/%s", scratch, sub, name);
    if (stat(path, &sb) != 0) return -1;
    if (mode) *mode = sb.st_mode & 0777;
    return (long)sb.st_size;
}

/* ---- options ---- */

TEST(recorder_option_takes_ranksnap_or_torch_and_names_a_bad_value)
{
    rs_options o;
    CHECK_EQ_U64(rs_options_load_one(&o, "RANKSNAP_RECORDER", "torch"), RANKSNAP_OK);
    CHECK_EQ_U64(o.recorder, RS_RECORDER_TORCH);
    CHECK_EQ_U64(rs_options_load_one(&o, "RANKSNAP_RECORDER", "ranksnap"), RANKSNAP_OK);
    CHECK_EQ_U64(o.recorder, RS_RECORDER_RANKSNAP);
    CHECK_EQ_U64(rs_options_load_one(&o, "RANKSNAP_RECORDER", "jax"), RANKSNAP_ERR_OPTION);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "RANKSNAP_RECORDER=jax: expected ranksnap or torch");
}

TEST(python_and_all_stacks_belong_to_torch_mode)
{
    rs_options o;
    CHECK_EQ_U64(rs_options_load_one(&o, "RANKSNAP_STACKS", "python"), RANKSNAP_OK);
    CHECK_EQ_U64(rs_external_check_options(&o), RANKSNAP_ERR_OPTION);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "RANKSNAP_STACKS=python: python and all are PyTorch's");
    o.recorder = RS_RECORDER_TORCH;
    CHECK_EQ_U64(rs_external_check_options(&o), RANKSNAP_OK);
    o.stacks = RS_STACKS_FP;
    CHECK_EQ_U64(rs_external_check_options(&o), RANKSNAP_ERR_OPTION);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "RANKSNAP_STACKS=fp");
    o.stacks = RS_STACKS_NATIVE; /* the default stands for python there */
    CHECK_EQ_U64(rs_external_check_options(&o), RANKSNAP_OK);
}

TEST(set_recorder_is_refused_while_ranksnap_records_itself)
{
    unsetenv("RANKSNAP_RECORDER");
    ranksnap_recorder_ops o = fw_ops();
    CHECK_EQ_U64(ranksnap_set_recorder(&o), RANKSNAP_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "RANKSNAP_RECORDER=ranksnap");
    CHECK_EQ_U64(ranksnap_set_recorder(NULL), RANKSNAP_OK);
}

static int body_requires_the_four_ops(void)
{
    ranksnap_recorder_ops o = fw_ops();
    o.dump = NULL;
    CHECK_EQ_U64(ranksnap_set_recorder(&o), RANKSNAP_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "start, stop, dump and reserved are required");
    return check_failures_ != 0;
}

TEST(set_recorder_requires_start_stop_dump_and_reserved)
{
    CHECK_EQ_U64(in_child("four", "", body_requires_the_four_ops), 0);
}

/* ---- the schedule drives the framework's recorder ---- */

static int body_range(void)
{
    ranksnap_recorder_ops o = fw_ops();
    CHECK_EQ_U64(ranksnap_set_recorder(&o), RANKSNAP_OK);
    CHECK_EQ_U64(ranksnap_init(NULL), RANKSNAP_OK);
    for (int s = 0; s <= 6; s++) step(s);
    /* started at step 2 with RANKSNAP_MAX_ENTRIES and python stacks, dumped then stopped at 4 */
    if (strcmp(fw.calls, "start(100000,0) dump stop") != 0) fprintf(stderr, "calls: %s\n", fw.calls);
    CHECK(strcmp(fw.calls, "start(100000,0) dump stop") == 0);
    CHECK_EQ_U64(fw.started_at_step, 2);
    CHECK_STR_CONTAINS(fw.meta, "\"reason\": \"range_end\"");
    CHECK_STR_CONTAINS(fw.meta, "\"rank\": 0, \"world_size\": 1");
    CHECK_STR_CONTAINS(fw.meta, "\"ranges\": [[2, 4]]");
    CHECK_STR_CONTAINS(fw.meta, "\"steps\": [[2, ");
    CHECK_STR_CONTAINS(fw.meta, "], [3, ");
    CHECK_STR_CONTAINS(fw.meta, "\"recorder\": {\"max_entries\": 100000, \"stacks\": \"python\"}");
    CHECK(strstr(fw.meta, "[4, ") == NULL); /* the end boundary is not a recorded step */
    ranksnap_finalize();
    return check_failures_ != 0;
}

TEST(range_starts_the_framework_recorder_and_dumps_before_stopping)
{
    CHECK_EQ_U64(in_child("range", "2:4", body_range), 0);
    mode_t mode = 0;
    CHECK_EQ_U64(file_size("range", "rank-00000.pickle", &mode), 12);
    CHECK_EQ_U64(mode, 0600);
}

static int body_dump(void)
{
    ranksnap_recorder_ops o = fw_ops();
    CHECK_EQ_U64(ranksnap_set_recorder(&o), RANKSNAP_OK);
    CHECK_EQ_U64(ranksnap_init(NULL), RANKSNAP_OK);
    CHECK_EQ_U64(ranksnap_dump(NULL), RANKSNAP_OK);
    CHECK_STR_CONTAINS(fw.meta, "\"reason\": \"dump\"");
    CHECK(strcmp(fw.calls, "dump") == 0); /* no range: nothing started */
    ranksnap_finalize();
    return check_failures_ != 0;
}

TEST(ranksnap_dump_writes_the_frameworks_snapshot_as_the_ranks_pickle)
{
    CHECK_EQ_U64(in_child("dump", "100:101", body_dump), 0);
    CHECK_EQ_U64(file_size("dump", "rank-00000.pickle", NULL), 12);
    CHECK(file_size("dump", "rank-00000.rsnap", NULL) < 0);
    CHECK(file_size("dump", "rank-00000.ring", NULL) < 0); /* no ring file in torch mode */
}

/* ---- the post-mortem path ---- */

/* Records from step 1, then SIGTERM to itself; `held`: holds_lock says "this thread holds the
 * framework's lock" (Python's GIL). */
static int sigterm_held;

static int body_sigterm(void)
{
    ranksnap_recorder_ops o = fw_ops();
    fw.holds_lock = sigterm_held;
    ranksnap_set_recorder(&o);
    ranksnap_init(NULL);
    step(0);
    step(1);
    raise(SIGTERM);
    return 0;
}

TEST(sigterm_calls_the_dump_op_and_the_process_dies_of_it)
{
    sigterm_held = 0;
    CHECK_EQ_U64(in_child("sigterm", "1:10", body_sigterm), 128 + SIGTERM);
    CHECK_EQ_U64(file_size("sigterm", "rank-00000.pickle", NULL), 12);
}

TEST(sigterm_on_a_thread_holding_the_frameworks_lock_skips_the_dump)
{
    sigterm_held = 1;
    CHECK_EQ_U64(in_child("held", "1:10", body_sigterm), 128 + SIGTERM);
    CHECK(file_size("held", "rank-00000.pickle", NULL) < 0);
}

int main(void)
{
    if (scratch_dir_make(scratch, sizeof scratch, "test_external") != 0) return 1;
    RUN(recorder_option_takes_ranksnap_or_torch_and_names_a_bad_value);
    RUN(python_and_all_stacks_belong_to_torch_mode);
    RUN(set_recorder_is_refused_while_ranksnap_records_itself);
    RUN(set_recorder_requires_start_stop_dump_and_reserved);
    RUN(range_starts_the_framework_recorder_and_dumps_before_stopping);
    RUN(ranksnap_dump_writes_the_frameworks_snapshot_as_the_ranks_pickle);
    RUN(sigterm_calls_the_dump_op_and_the_process_dies_of_it);
    RUN(sigterm_on_a_thread_holding_the_frameworks_lock_skips_the_dump);
    return scratch_dir_done(scratch, check_summary());
}
