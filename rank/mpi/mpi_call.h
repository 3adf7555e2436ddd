/*
 * mpi_call.h — checking ranksnap's own MPI calls, and waiting on them with a deadline.
 *
 * ranksnap's messages go through the MPI plugin's point-to-point calls (mpi_abi.h) on its own
 * communicator (coord.h). A wait never blocks: a rank that hangs or died must cost the others a
 * bounded time, so requests are polled until a deadline and cancelled when it passes.
 */
#ifndef RANKSNAP_MPI_CALL_H
#define RANKSNAP_MPI_CALL_H

#include "mpi_abi.h"
#include "ranksnap.h"

/* RANKSNAP_ERR_MPI with "ranksnap: WHAT failed: <MPI's error string>". */
ranksnap_status rs_mpi_call_fail(const rs_mpi_ops *m, const char *what, int err);

#define RS_MPI(m, call, what)                                                                      \
    do {                                                                                           \
        int rs_mpi_rc_ = (call);                                                                   \
        if (rs_mpi_rc_ != 0) return rs_mpi_call_fail((m), what, rs_mpi_rc_);                       \
    } while (0)

/* Polls `req` until it completes or `deadline` (rs_now_mono_s seconds) passes; 1 if completed. */
int rs_mpi_call_wait(const rs_mpi_ops *m, rs_mpi_req *req, double deadline);

#endif
