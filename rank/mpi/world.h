/*
 * world.h — the job's MPI world, for processes that did not start MPI themselves.
 *
 * Programs that run under mpirun or srun but never call MPI_Init (PyTorch with NCCL, a CUDA
 * program that only uses NCCL) are joined to the launcher's MPI world by ranksnap, which then owns
 * MPI and finalises it when it finalizes. A program that does call MPI_Init must get there first:
 * starting MPI earlier, from inside one of its cudaMalloc calls, would make its own MPI_Init fail.
 * MPI itself is the MPI plugin's (mpi_plugin.h): without one, ranksnap leaves MPI alone.
 */
#ifndef RANKSNAP_WORLD_H
#define RANKSNAP_WORLD_H

/* For ranksnap_init(NULL): when MPI is up (or this process is one of several ranks a launcher
 * started, in which case ranksnap initialises MPI and owns it), sets *comm_out to the address of
 * MPI_COMM_WORLD and returns 1; 0 when the process is on its own (or inside MPI_Init's wrapper,
 * which passes the communicator itself); -1 when MPI could not be initialised. The caller decides
 * whether joining is allowed at all (RANKSNAP_MPI). */
int rs_world_join(const void **comm_out);

/* 1 for a process that a launcher started among several, that links an MPI library and has not
 * called MPI_Init yet: ranksnap must wait for that MPI_Init (the wrapper in
 * rank/intercept/pmpi.c then starts it on MPI_COMM_WORLD). */
int rs_world_program_will_init(void);

/* Finalises MPI if ranksnap initialised it. */
void rs_world_release(void);

/* MPI_Abort on MPI_COMM_WORLD when MPI is up, else abort(): RANKSNAP_ON_OOM=dump-and-abort. */
void rs_world_abort(int code);

#endif
