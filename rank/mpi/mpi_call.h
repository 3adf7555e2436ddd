/*
 * mpi_call.h — checking ranksnap's own MPI calls, and waiting on them with a deadline.
 *
 * ranksnap's messages go through PMPI_* on its own communicator (coord.h). A wait never blocks:
 * a rank that hangs or died must cost the others a bounded time, so requests are polled until a
 * deadline and cancelled when it passes.
 */
#ifndef RANKSNAP_MPI_CALL_H
#define RANKSNAP_MPI_CALL_H

#if defined(RANKSNAP_HAVE_MPI)
#include <mpi.h>

#include "ranksnap.h"

/* RANKSNAP_ERR_MPI with "ranksnap: WHAT failed: <MPI's error string>". */
ranksnap_status rs_mpi_call_fail(const char *what, int err);

#define RS_MPI(call, what)                                                                         \
    do {                                                                                           \
        int rs_mpi_rc_ = (call);                                                                   \
        if (rs_mpi_rc_ != MPI_SUCCESS) return rs_mpi_call_fail(what, rs_mpi_rc_);                 \
    } while (0)

/* Polls `req` until it completes or `deadline` (rs_now_mono_s seconds) passes; 1 if completed. */
int rs_mpi_call_wait(MPI_Request *req, double deadline);

/* Cancels a request that may never match, then releases it. */
void rs_mpi_call_cancel(MPI_Request *req);

#endif
#endif
