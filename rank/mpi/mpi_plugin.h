/*
 * mpi_plugin.h — the MPI plugin (mpi_abi.h) for the MPI this process has, found once.
 *
 * Where it comes from, in order: the plugin already in the process (ranksnap-run preloads the
 * one of the program's MPI; a program may link ranksnap::mpi), else the one of the family of the
 * MPI library the process loaded (asked what it is: Open MPI's objects, or
 * MPI_Get_library_version), else of the launcher (mpirun's or a PMI launcher's variables, for a
 * process that has no MPI yet and that ranksnap joins to the job), opened from libranksnap.so's
 * folder with the MPI library it needs. RANKSNAP_MPI_PLUGIN names a family or a file instead, or
 * none. A process with no MPI library and no MPI launcher (torchrun, a program on its own) opens
 * nothing.
 */
#ifndef RANKSNAP_MPI_PLUGIN_H
#define RANKSNAP_MPI_PLUGIN_H

#include <stddef.h>

#include "mpi_abi.h"

/* The plugin's operations, looked for at the first call; NULL when there is no MPI to use or no
 * plugin for it. Why not is printed once, on rank 0, in one line ("ranksnap: ...; going on
 * without MPI"), unless the process simply has no MPI: the job runs on, each rank without the
 * gather over MPI. */
const rs_mpi_ops *rs_mpi_plugin(void);

/* The plugin rs_mpi_plugin took, or NULL; never looks. */
const rs_mpi_ops *rs_mpi_plugin_peek(void);

/* 1 when an MPI library (libmpi*, libmpich*) is loaded in this process. */
int rs_mpi_plugin_process_has_mpi(void);

/* The runtime's table for the plugin's wrappers (rank/runtime/mpi_host.c): kept, and handed to
 * the plugin when it is taken, or now if it was. */
void rs_mpi_plugin_set_host(const rs_mpi_host *host);

/* The family whose ABI an MPI library is, from what MPI_Get_library_version says: "openmpi"
 * (Open MPI, and what derives from it: IBM Spectrum MPI), "mpich" (MPICH, Intel MPI, MVAPICH,
 * Cray MPICH), NULL for anything else. */
const char *rs_mpi_plugin_family_of(const char *library_version);

#endif
