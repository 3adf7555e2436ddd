/*
 * plugin.h — what an MPI plugin's wrappers (pmpi.c) ask of its operations (plugin.c).
 */
#ifndef RANKSNAP_PLUGIN_H
#define RANKSNAP_PLUGIN_H

#include "mpi_abi.h"

/* The runtime's table (mpi_abi.h), once libranksnap.so took this plugin; NULL until then, and
 * in a process where ranksnap never started: the wrappers then only pass calls on. */
const rs_mpi_host *rs_mp_host(void);

/* 1 when the process's MPI was there when the plugin was loaded (plugin.c): else the wrappers
 * start nothing and record nothing. */
int rs_mp_armed(void);

/* The MPI_Init wrappers bracket their ranksnap_init with 1 and 0, so that no join happens from
 * inside it. */
void rs_mp_wrapper_init(int inside);

/* The program finalises MPI itself (the MPI_Finalize wrapper): ranksnap no longer owns it. */
void rs_mp_disown(void);

#endif
