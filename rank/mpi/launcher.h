/*
 * launcher.h — what the program's launcher says about this process: its rank, the size of the
 * job, the job's id, and whether ranksnap was preloaded.
 *
 * The one place that reads the launchers' environment (Open MPI, PMIx, MPICH/Hydra's PMI, Slurm,
 * torchrun): ranksnap's own RANKSNAP_* settings come from the options table (common/options.h),
 * everything a launcher exports comes from here.
 */
#ifndef RANKSNAP_LAUNCHER_H
#define RANKSNAP_LAUNCHER_H

#include <stddef.h>

/* The rank a launcher gave this process (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK,
 * SLURM_PROCID, RANK), or `fallback` when none did. In a worker torchrun started
 * (TORCHELASTIC_RUN_ID set), this and the size and local rank below are torchrun's RANK,
 * WORLD_SIZE and LOCAL_RANK only: the scheduler's or MPI's variables it inherits are its agent's
 * (srun or mpirun in front of torchrun), and it joins no MPI world (rs_launcher_has_peers). */
int rs_launcher_rank(int fallback);

/* The number of ranks the launcher started (OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS,
 * WORLD_SIZE), or `fallback`. */
int rs_launcher_size(int fallback);

/* The rank among the ranks of this node (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,
 * SLURM_LOCALID, LOCAL_RANK), or `fallback`. */
int rs_launcher_local_rank(int fallback);

/* 1 when a launcher started this process as one of several (a world size > 1, or a local rank)
 * without saying which rank it is: Lightning's own launcher gives the processes it starts
 * LOCAL_RANK and WORLD_SIZE only, and the script passes the rank to torch.distributed itself.
 * 0 when a variable gives the rank, and for a process no launcher started (rank 0 of 1). */
int rs_launcher_rank_unknown(void);

/* Which attempt of the job this is: torchrun restarts failed workers with
 * TORCHELASTIC_RESTART_COUNT = 1, 2, ...; 0 for the first attempt and for every other launcher.
 * Files of attempt k > 0 are named so that they never overwrite attempt k - 1's. */
int rs_launcher_attempt(void);

/* 1 when a launcher started this process as one of several ranks (a world size > 1 from
 * OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_SIZE): the processes that ranksnap may join into an
 * MPI world. */
int rs_launcher_has_peers(void);

/* The MPI family of the launcher that started this process among several MPI ranks, for a
 * process that has no MPI library of its own yet (Python under mpirun): "openmpi" under Open
 * MPI's mpirun (OMPI_COMM_WORLD_SIZE), "mpich" under a PMI launcher (PMI_SIZE: MPICH's Hydra
 * mpiexec, srun --mpi=pmi2); NULL when rs_launcher_has_peers() is 0, or when only PMIx says so
 * (srun --mpi=pmix starts either family's programs). */
const char *rs_launcher_mpi_family(void);

/* The batch system's job id (SLURM_JOB_ID, PBS_JOBID, LSB_JOBID, PMIX_NAMESPACE,
 * OMPI_MCA_ess_base_jobid, torchrun's TORCHELASTIC_RUN_ID unless "none") into buf; else
 * "local-HOST-PPID" (the ranks of one mpirun, or of one torchrun agent, share their parent, so
 * they share the id). */
void rs_launcher_job(const char *host, char *buf, size_t n);

/* 1 when LD_PRELOAD names a libranksnap*: the user asked for the program's allocations to be
 * taken over. Decided once; the environment of a running process does not change its preloads. */
int rs_launcher_preloaded(void);

#endif
