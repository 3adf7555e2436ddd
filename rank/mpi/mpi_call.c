/*
 * mpi_call.c — mpi_call.h.
 */
#include <time.h>

#include "clock.h"
#include "errors.h"
#include "mpi_call.h"

ranksnap_status rs_mpi_call_fail(const rs_mpi_ops *m, const char *what, int err)
{
    char msg[512];
    m->error_string(err, msg, sizeof msg);
    return rs_error(RANKSNAP_ERR_MPI, "ranksnap: %s failed: %s", what, msg);
}

int rs_mpi_call_wait(const rs_mpi_ops *m, rs_mpi_req *req, double deadline)
{
    for (;;) {
        int done = 0;
        if (m->test(req, &done) != 0) return 0;
        if (done) return 1;
        if (rs_now_mono_s() > deadline) return 0;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}
