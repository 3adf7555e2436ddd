/*
 * runtime_child.h — one rank of the real runtime (sim backend) in a forked child, for the tests
 * that need a snapshot the runtime itself wrote.
 *
 * The runtime is a per-process singleton: a child starts it fresh, and the test process is left
 * with none. The child records from its first allocation, runs the test's workload through the
 * public API and dumps DIR/rank-00000.rsnap.
 */
#ifndef RANKSNAP_TEST_RUNTIME_CHILD_H
#define RANKSNAP_TEST_RUNTIME_CHILD_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ranksnap.h"

/* Allocations and steps through the public API; 1 when every call succeeded. What it leaves
 * allocated is in the snapshot's end state. */
typedef int (*runtime_workload)(void);

static inline int runtime_child_main(const char *dir, runtime_workload work)
{
    setenv("RANKSNAP_DIR", dir, 1);
    setenv("RANKSNAP_BACKEND", "sim", 1);
    setenv("RANKSNAP_REPORT", "0", 1);
    if (ranksnap_init(NULL) != RANKSNAP_OK) {
        fprintf(stderr, "child: ranksnap_init: %s\n", ranksnap_last_error());
        return 1;
    }
    int ok = work() && ranksnap_dump(NULL) == 0;
    if (!ok) fprintf(stderr, "child: %s\n", ranksnap_last_error());
    ranksnap_finalize();
    return ok ? 0 : 1;
}

/* Runs `work` in a child whose RANKSNAP_DIR is `dir`; 1 when the child dumped and exited 0. */
static inline int runtime_child_run(const char *dir, runtime_workload work)
{
    fflush(NULL); /* what the parent has buffered must not be written by the child too */
    pid_t pid = fork();
    if (pid == 0) _exit(runtime_child_main(dir, work));
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

#endif
