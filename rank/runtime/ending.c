/*
 * ending.c — a rank whose process ends without finalizing ranksnap: exit() on a failing status or
 * with the program's MPI still open, a program that never finalizes ranksnap, MPI_Abort.
 *
 * How it ends is noted (state.c: in the ring file's header at once, in the snapshot) and the
 * range being recorded is written, so that `ranksnap report DIR` says what happened instead of
 * guessing. Nothing here calls MPI or waits without a bound: the program did not finalize MPI
 * (or is aborting it), its peers may be gone or waiting for it in a collective, and exit() may run
 * on a thread, or in a signal handler, while another thread is stopped inside the allocator. The
 * instance stays as it is — other threads may still be allocating — and so does the ring file,
 * which a SIGKILL that follows (mpirun's, once a rank is gone) leaves behind.
 */
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dump.h"
#include "ending.h"
#include "log.h"
#include "ranksnap.h"
#include "state.h"

/* exit() called on a thread other than the process's first (Linux: its thread id is the pid). */
static int rs_ending_off_main(void)
{
#if defined(SYS_gettid)
    return (long)syscall(SYS_gettid) != (long)getpid();
#else
    return 0;
#endif
}

void rs_ending_exit(int status, int mpi_open)
{
    rs_runtime *rt = rs_state_get();
    if (!rt || rs_state_forked()) return;
    /* a failing rank's peers wait for it elsewhere: a finalize that still comes (a destructor
     * calling MPI_Finalize) must not gather with them */
    if (status != 0) ranksnap_abandon();
    rs_state_note_end(RS_END_EXIT | (mpi_open ? RS_END_MPI_OPEN : 0) |
                          (rs_ending_off_main() ? RS_END_OFF_MAIN : 0),
                      status);
    char why[64];
    snprintf(why, sizeof why, "exit(%d)%s", status, mpi_open ? " before MPI_Finalize" : "");
    RS_INFO(RS_SUB_DUMP, "%s: the rank leaves without finalizing ranksnap", why);
    (void)rs_dump_on_the_way_out(rt, 1, 1, why);
}

void rs_ending_mpi_abort(int code)
{
    rs_runtime *rt = rs_state_get();
    if (!rt || rs_state_forked()) return;
    ranksnap_abandon();
    rs_state_note_end(RS_END_MPI_ABORT, code);
    char why[48];
    snprintf(why, sizeof why, "MPI_Abort(%d)", code);
    (void)rs_dump_on_the_way_out(rt, 1, 1, why);
}

void ranksnap_exiting(int status)
{
    rs_state_note_end(RS_END_EXIT | (rs_ending_off_main() ? RS_END_OFF_MAIN : 0), status);
}
