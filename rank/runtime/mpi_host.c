/*
 * mpi_host.c — the runtime's side of the MPI plugin (mpi_host.h): the functions its wrappers
 * call, which libranksnap.so does not export.
 */
#include <stdint.h>

#include "comms.h"
#include "log.h"
#include "mpi_host.h"
#include "mpi_plugin.h"
#include "steps.h"

static void rs_mh_comm_created(uint64_t handle, uint64_t id, int size, int rank)
{
    rs_comms_add(handle, id, size, rank, "mpi");
}

static void rs_mh_warn(const char *msg)
{
    RS_WARN(RS_SUB_MPI, "%s", msg);
}

static const rs_mpi_host rs_mh_host = {
    .comm_created = rs_mh_comm_created,
    .comm_freed = rs_comms_free,
    .hash = rs_comms_hash,
    .allreduce_on = rs_comms_allreduce,
    .collective_done = rs_steps_collective_done,
    .warn = rs_mh_warn,
};

void rs_mpi_host_install(void)
{
    rs_mpi_plugin_set_host(&rs_mh_host);
}
