/*
 * test_check_harness.c — the tests' check macros themselves (tests/check.h): a program whose
 * check fails must exit non-zero wherever the check ran, inside a RUN() or outside one (in main,
 * in a mode's function), and a program whose checks all hold must exit 0.
 *
 * Each case runs in a forked child that returns check_summary() as its exit status; the parent
 * judges the statuses with plain code, not with the macros it is testing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

TEST(a_check_that_holds)
{
    CHECK(1 + 1 == 2);
}

TEST(a_check_that_fails)
{
    CHECK_EQ_U64(1 + 1, 3);
}

static void failing_check_outside_run(void)
{
    CHECK(1 + 1 == 3);
}

static void failing_check_inside_run(void)
{
    RUN(a_check_that_fails);
}

static void passing_checks_inside_and_outside_run(void)
{
    CHECK(2 > 1);
    RUN(a_check_that_holds);
}

static void failing_check_outside_after_a_passing_run(void)
{
    RUN(a_check_that_holds);
    CHECK_STR_CONTAINS("ranksnap", "torch");
}

/* the exit status of a child that ran `body` and returned check_summary(), or -1 */
static int status_of(void (*body)(void))
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        body();
        _exit(check_summary());
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

int main(void)
{
    static const struct {
        const char *name;
        void (*body)(void);
        int want;
    } cases[] = {
        {"failing_check_outside_run_fails_the_program", failing_check_outside_run, 1},
        {"failing_check_inside_run_fails_the_program", failing_check_inside_run, 1},
        {"failing_check_after_a_passing_run_fails_the_program",
         failing_check_outside_after_a_passing_run, 1},
        {"checks_that_hold_inside_and_outside_run_pass", passing_checks_inside_and_outside_run, 0},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = status_of(cases[i].body);
        printf("%s %s (exit %d, want %d)\n", got == cases[i].want ? "ok  " : "FAIL", cases[i].name,
               got, cases[i].want);
        bad += got != cases[i].want;
    }
    printf("%d of %zu harness cases wrong\n", bad, sizeof cases / sizeof cases[0]);
    return bad ? 1 : 0;
}
