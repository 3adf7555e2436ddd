/* pmpi.h — MPI for processes that did not start it themselves (see pmpi.c). */
#ifndef RANKSNAP_PMPI_H
#define RANKSNAP_PMPI_H

/* For ranksnap_init(NULL): when MPI is up (or this process is one of several ranks a launcher
 * started, and RANKSNAP_MPI is not 0, in which case ranksnap initialises MPI and owns it), sets
 * *comm_out to the address of MPI_COMM_WORLD and returns 1; 0 when the process is on its own;
 * -1 when MPI could not be initialised. */
int rs_mpi_join(const void **comm_out);

/* Finalises MPI if ranksnap initialised it. */
void rs_mpi_release(void);

/* MPI_Abort on MPI_COMM_WORLD when MPI is up, else abort(): RANKSNAP_ON_OOM=dump-and-abort. */
void rs_mpi_abort(int code);

#endif
