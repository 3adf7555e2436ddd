/*
 * mpi_call.c — mpi_call.h.
 */
#include <time.h>

#include "clock.h"
#include "errors.h"
#include "mpi_call.h"

#if defined(RANKSNAP_HAVE_MPI)

ranksnap_status rs_mpi_call_fail(const char *what, int err)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int n = 0;
    PMPI_Error_string(err, msg, &n);
    return rs_error(RANKSNAP_ERR_MPI, "ranksnap: %s failed: %s", what, msg);
}

int rs_mpi_call_wait(MPI_Request *req, double deadline)
{
    for (;;) {
        int done = 0;
        if (PMPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return 0;
        if (done) return 1;
        if (rs_now_mono_s() > deadline) return 0;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}

void rs_mpi_call_cancel(MPI_Request *req)
{
    if (*req == MPI_REQUEST_NULL) return;
    int done = 0;
    PMPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    PMPI_Cancel(req);
    PMPI_Wait(req, MPI_STATUS_IGNORE);
}

#endif
