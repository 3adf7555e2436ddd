/*
 * mpi_host.h — what an MPI plugin's PMPI wrappers reach the runtime through (mpi_abi.h).
 */
#ifndef RANKSNAP_MPI_HOST_H
#define RANKSNAP_MPI_HOST_H

/* Hands the runtime's table to rank/mpi/mpi_plugin.c, for the plugin it takes (or took): the
 * communicators the program makes and its collectives reach comms.c and steps.c. Idempotent. */
void rs_mpi_host_install(void);

#endif
