/*
 * ending.h — a rank whose process ends without finalizing ranksnap (ending.c): how it ended noted,
 * its open range written, no MPI call and no unbounded wait.
 */
#ifndef RANKSNAP_ENDING_H
#define RANKSNAP_ENDING_H

/* exit(status) runs while ranksnap is running and will not be finalized (instance.c's exit path
 * decides): `mpi_open` when the program initialized MPI and did not finalize it. A failing status
 * also abandons (ranksnap_abandon): a finalize that comes later gathers nothing. */
void rs_ending_exit(int status, int mpi_open);

/* MPI_Abort(code) is about to end the job (rank/mpi_plugin/pmpi.c). */
void rs_ending_mpi_abort(int code);

#endif
