/*
 * test_endings.c — how a rank's process ended, from what it left to what the report says of it.
 *
 * The runtime in a forked child (sim backend, no MPI: the MPI shapes are tests/mpi/exits.sh) ends
 * each way a program ends — exit() from main, from a thread, from a signal handler, exit(0)
 * without ranksnap_finalize, _exit, SIGKILL, SIGTERM, a forked helper's exit — and the files it
 * left are read back; then the words the reports build on them (collector/analyze/endings.h),
 * and why a rank with no data has none, from summaries made to order.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "endings.h"
#include "ranksnap.h"
#include "ring_decode.h"
#include "rsnap_decode.h"
#include "scratch_dir.h"
#include "summary.h"

static char tmpdir[256];

/* ---- the runtime, ended each way, in a child ------------------------------------------------ */

typedef void (*ending_fn)(void);

/* RANKSNAP_DIR=tmpdir/sub, steps 2:6 recorded; the child marks steps 0..3 allocating 1 MiB more
 * at each, then `end`s (in the range). Returns the child's wait status. */
static int run_ending(const char *sub, ending_fn end)
{
    char dir[320];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, sub);
    mkdir(dir, 0700);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("RANKSNAP_DIR", dir, 1);
        setenv("RANKSNAP_BACKEND", "sim", 1);
        setenv("RANKSNAP_REPORT", "0", 1);
        setenv("RANKSNAP_STEPS", "2:6", 1);
        /* whether a dump is written, not how fast: the default 800 ms can run out on a loaded
         * machine */
        setenv("RANKSNAP_DUMP_TIMEOUT_MS", "60000", 1);
        if (ranksnap_init(NULL) != RANKSNAP_OK) _exit(90);
        for (int step = 0; step < 4; step++) {
            void *p = NULL;
            if (ranksnap_step(step) != RANKSNAP_OK || ranksnap_malloc(&p, 1 << 20, NULL) != RANKSNAP_OK)
                _exit(91);
        }
        end();
        _exit(92); /* not reached */
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    return status;
}

/* The rank's snapshot and ring in tmpdir/sub (NULL where there is none). */
static void files_of(const char *sub, rs_snap **snap, rs_snap **ring)
{
    char path[400];
    *snap = *ring = NULL;
    snprintf(path, sizeof path, "%s/%s/rank-00000.rsnap", tmpdir, sub);
    if (access(path, F_OK) == 0) CHECK(rs_rsnap_decode_file(path, snap) == RANKSNAP_OK);
    snprintf(path, sizeof path, "%s/%s/rank-00000.ring", tmpdir, sub);
    int closed = 1;
    if (access(path, F_OK) == 0) CHECK(rs_ring_decode_file(path, ring, &closed) == RANKSNAP_OK && !closed);
}

static void end_exit_2(void)
{
    exit(2);
}

static void end_exit_0(void)
{
    exit(0);
}

static void end__exit(void)
{
    _exit(2);
}

static void end_sigkill(void)
{
    raise(SIGKILL);
}

static void end_sigterm(void)
{
    raise(SIGTERM);
}

static void *exit_3(void *arg)
{
    (void)arg;
    exit(3);
}

static void end_on_a_thread(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, exit_3, NULL) == 0) pthread_join(t, NULL);
}

static void exit_4(int sig)
{
    (void)sig;
    exit(4);
}

static void end_in_a_handler(void)
{
    signal(SIGUSR1, exit_4);
    raise(SIGUSR1);
}

/* A helper the rank forks: it marks a step and exit(1)s in the range; the rank then dies by
 * _exit, so that only the helper could have written the rank's snapshot or noted an end in its
 * ring. */
static void end_after_a_forked_helper(void)
{
    pid_t pid = fork();
    if (pid == 0) exit(ranksnap_step(3) == RANKSNAP_OK);
    int status = 0;
    waitpid(pid, &status, 0);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 93);
}

/* exit(2) in a range: the snapshot is written on the way out and says so; the ring stays, with
 * the end in its header, and so do the steps' words */
TEST(exit_in_a_range_writes_the_snapshot_and_keeps_the_ring_with_the_status)
{
    int status = run_ending("exit", end_exit_2);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2);
    rs_snap *snap, *ring;
    files_of("exit", &snap, &ring);
    CHECK(snap && ring);
    CHECK(snap && snap->complete && snap->end.flags == RS_END_EXIT && snap->end.status == 2);
    CHECK(ring && (ring->end.flags & RS_END_HOW_) == RS_END_EXIT && ring->end.status == 2 &&
          (ring->end.flags & RS_END_DUMP_DONE));
    CHECK(ring && ring->time.steps_from && !strcmp(ring->time.steps_from, "ranksnap_step"));
    char w[256];
    if (snap) rs_endings_words(&snap->end, w, sizeof w);
    CHECK_STR_CONTAINS(snap ? w : NULL, "exited with status 2");
    CHECK(snap && !strstr(w, "MPI_Finalize")); /* no MPI here */
    rs_snap_free(snap);
    rs_snap_free(ring);
}

/* `end` exits with `status`: the snapshot written as it left says so, with `flags` */
static void expect_exit_snapshot(const char *sub, ending_fn end, int status, uint32_t flags)
{
    int st = run_ending(sub, end);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == status);
    rs_snap *snap, *ring;
    files_of(sub, &snap, &ring);
    CHECK(snap && snap->end.flags == flags && snap->end.status == status);
    rs_snap_free(snap);
    rs_snap_free(ring);
}

/* A program that started ranksnap itself and exits 0 without ranksnap_finalize: its range is
 * written, the exit said as it was */
TEST(exit_0_without_finalize_writes_the_range_and_says_so)
{
    expect_exit_snapshot("exit0", end_exit_0, 0, RS_END_EXIT);
}

TEST(exit_on_a_thread_is_said_to_be_off_the_main_thread)
{
    expect_exit_snapshot("thread", end_on_a_thread, 3, RS_END_EXIT | RS_END_OFF_MAIN);
}

TEST(exit_in_a_signal_handler_writes_the_snapshot_with_its_status)
{
    expect_exit_snapshot("handler", end_in_a_handler, 4, RS_END_EXIT);
}

/* _exit and SIGKILL run nothing of the process: the ring is all there is, with no end in it (the
 * report then says the cause was not recorded), and with the way its steps were numbered */
TEST(exit_without_exit_handlers_leaves_the_ring_with_no_end)
{
    ending_fn ends[2] = {end__exit, end_sigkill};
    const char *subs[2] = {"_exit", "sigkill"};
    for (int i = 0; i < 2; i++) {
        int status = run_ending(subs[i], ends[i]);
        CHECK(i == 0 ? WIFEXITED(status) && WEXITSTATUS(status) == 2
                     : WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        rs_snap *snap, *ring;
        files_of(subs[i], &snap, &ring);
        CHECK(!snap && ring);
        CHECK(ring && ring->end.flags == 0);
        CHECK(ring && ring->time.steps_from && !strcmp(ring->time.steps_from, "ranksnap_step"));
        rs_snap_free(snap);
        rs_snap_free(ring);
    }
}

/* SIGTERM: noted by the handler at once, the snapshot written by the dumper thread, incomplete,
 * and the signal re-raised */
TEST(sigterm_is_noted_and_the_snapshot_written_on_it)
{
    int status = run_ending("sigterm", end_sigterm);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    rs_snap *snap, *ring;
    files_of("sigterm", &snap, &ring);
    CHECK(snap && !snap->complete && snap->end.flags == SIGTERM);
    CHECK(ring && (ring->end.flags & RS_END_SIGNAL_MASK) == SIGTERM && (ring->end.flags & RS_END_DUMP_DONE));
    rs_snap_free(snap);
    rs_snap_free(ring);
}

/* A helper forked by the rank that exit(1)s is not the rank: it writes none of its files and
 * notes nothing in the ring it shares with it */
TEST(forked_helper_exiting_writes_nothing_of_the_rank)
{
    int status = run_ending("fork", end_after_a_forked_helper);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1); /* ranksnap_step: a no-op there */
    rs_snap *snap, *ring;
    files_of("fork", &snap, &ring);
    CHECK(!snap && ring);
    CHECK(ring && ring->end.flags == 0);
    rs_snap_free(snap);
    rs_snap_free(ring);
}

/* ---- the words ------------------------------------------------------------------------------ */

static rs_summary summary_ended(uint32_t flags, int32_t status, int complete, int recovered)
{
    rs_summary s;
    memset(&s, 0, sizeof s);
    s.rank = 1;
    s.world_size = 4;
    s.complete = complete;
    s.recovered = recovered;
    s.driver = -1;
    s.end = (rs_end){flags, status, status};
    return s;
}

static void expect_note(rs_summary s, const char *want)
{
    char note[1024];
    rs_endings_note(&s, 0, note, sizeof note);
    CHECK_STR_CONTAINS(note, want);
    CHECK(!strstr(note, "out of host memory"));
}

TEST(words_say_each_part_of_the_end_in_order)
{
    char w[256];
    rs_end e = {SIGTERM | RS_END_EXIT | RS_END_MPI_OPEN | RS_END_OFF_MAIN, 1, 0};
    rs_endings_words(&e, w, sizeof w);
    CHECK(!strcmp(w, "got signal 15 (SIGTERM), then exited with status 1 before MPI_Finalize (exit "
                     "called on a thread other than the main one)"));
    e = (rs_end){RS_END_MPI_ABORT, 0, 5};
    rs_endings_words(&e, w, sizeof w);
    CHECK(!strcmp(w, "called MPI_Abort with error code 5"));
    e = (rs_end){RS_END_DUMP_BEGAN, 0, 0}; /* the dump's progress is not how it ended */
    CHECK(rs_endings_words(&e, w, sizeof w) == 0 && !w[0]);
    CHECK(rs_endings_words(&e, w, 1) == 0);
}

TEST(notes_say_which_file_the_end_left)
{
    /* written on the way out */
    expect_note(summary_ended(RS_END_EXIT | RS_END_MPI_OPEN, 1, 1, 0),
                "exited with status 1 before MPI_Finalize; its snapshot was written as it left");
    expect_note(summary_ended(SIGABRT | RS_END_DUMP_BEGAN | RS_END_DUMP_DONE, 0, 0, 0),
                "got signal 6 (SIGABRT): its snapshot was written on that signal");
    /* a ring: the cause not recorded when nothing was seen, never a guessed one */
    expect_note(summary_ended(0, 0, 0, 1), "ended without writing its snapshot, and without an exit, "
                                           "a fatal signal or an MPI_Abort that ranksnap saw: the cause "
                                           "was not recorded");
    expect_note(summary_ended(RS_END_EXIT | RS_END_MPI_OPEN, 1, 0, 1),
                "exited with status 1 before MPI_Finalize without writing its snapshot (with no "
                "recorded range left to write)");
    expect_note(summary_ended(SIGTERM | RS_END_DUMP_BEGAN, 0, 0, 1),
                "got signal 15 (SIGTERM) without writing its snapshot (the dump was begun and did not "
                "finish before the process ended)");
    expect_note(summary_ended(SIGTERM | RS_END_DUMP_BEGAN | RS_END_DUMP_GAVE_UP, 0, 0, 1),
                "the dump gave up: a thread held the allocator's lock");
    expect_note(summary_ended(SIGTERM, 0, 0, 1), "(the process ended before the dump began)");
    expect_note(summary_ended(SIGTERM | RS_END_DUMP_BEGAN | RS_END_DUMP_DONE, 0, 0, 1),
                "got signal 15 (SIGTERM); the snapshot it wrote then is not among the files read");
    /* an end its ring saw after the snapshot kept was written */
    expect_note(summary_ended(RS_END_EXIT | RS_END_AFTER_SNAPSHOT, 1, 1, 0),
                "exited with status 1 after its snapshot was written (which its ring recorded)");
    /* a file written at a range's end says nothing */
    char note[64];
    rs_summary quiet = summary_ended(0, 0, 1, 0);
    CHECK(rs_endings_note(&quiet, 0, note, sizeof note) == 0);
    /* many ranks: the plural */
    rs_summary sig = summary_ended(SIGTERM | RS_END_DUMP_BEGAN | RS_END_DUMP_DONE, 0, 0, 0);
    char many[512];
    rs_endings_note(&sig, 1, many, sizeof many);
    CHECK_STR_CONTAINS(many, "their snapshots were written on that signal");
}

TEST(no_data_rests_on_what_the_file_shows)
{
    char why[1024];
    /* it ran through its range with the driver's layer off by setting */
    rs_summary s = summary_ended(0, 0, 1, 0);
    s.n_steps = 4;
    s.step_stride = 1;
    s.step_first = 2;
    s.driver = 0;
    rs_endings_no_data_why(&s, why, sizeof why);
    CHECK_STR_CONTAINS(why, "it marked steps 2 to 5, so it ran through its range");
    CHECK_STR_CONTAINS(why, "RANKSNAP_DRIVER=0 was set for this run");
    CHECK(!strstr(why, "killed") && !strstr(why, "start-up"));
    /* the driver's layer on: the calls did not reach ranksnap, as far as it can tell */
    s.driver = 1;
    rs_endings_no_data_why(&s, why, sizeof why);
    CHECK(!strstr(why, "RANKSNAP_DRIVER"));
    CHECK_STR_CONTAINS(why, "none of its allocation calls reached ranksnap, or it allocated no device memory");
    /* it exited before its range */
    s = summary_ended(RS_END_EXIT | RS_END_MPI_OPEN, 1, 0, 1);
    rs_endings_no_data_why(&s, why, sizeof why);
    CHECK(!strcmp(why, "it exited with status 1 before MPI_Finalize without writing its snapshot"));
    /* a ring with nothing in it and nothing of its end */
    s = summary_ended(0, 0, 0, 1);
    rs_endings_no_data_why(&s, why, sizeof why);
    CHECK(!strcmp(why, "it ended before recording anything, and how it ended was not recorded"));
}

int main(void)
{
    if (scratch_dir_make(tmpdir, sizeof tmpdir, "ranksnap-endings") != 0) return 1;
    RUN(exit_in_a_range_writes_the_snapshot_and_keeps_the_ring_with_the_status);
    RUN(exit_0_without_finalize_writes_the_range_and_says_so);
    RUN(exit_on_a_thread_is_said_to_be_off_the_main_thread);
    RUN(exit_in_a_signal_handler_writes_the_snapshot_with_its_status);
    RUN(exit_without_exit_handlers_leaves_the_ring_with_no_end);
    RUN(sigterm_is_noted_and_the_snapshot_written_on_it);
    RUN(forked_helper_exiting_writes_nothing_of_the_rank);
    RUN(words_say_each_part_of_the_end_in_order);
    RUN(notes_say_which_file_the_end_left);
    RUN(no_data_rests_on_what_the_file_shows);
    return scratch_dir_done(tmpdir, check_summary());
}
