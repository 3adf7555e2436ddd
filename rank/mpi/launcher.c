/*
 * launcher.c — launcher.h: reading what mpirun, srun, mpiexec or torchrun exported.
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher.h"

static const char *const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                        "SLURM_PROCID", "RANK", NULL};
static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS",
                                        "WORLD_SIZE", NULL};
static const char *const local_rank_vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                              "SLURM_LOCALID", "LOCAL_RANK", NULL};
/* torchrun's own, for its workers */
static const char *const torchrun_rank[] = {"RANK", NULL};
static const char *const torchrun_size[] = {"WORLD_SIZE", NULL};
static const char *const torchrun_local_rank[] = {"LOCAL_RANK", NULL};

/* A worker torchrun started (its agent gives each one TORCHELASTIC_RUN_ID): it also inherits the
 * agent's environment, and under srun or mpirun the agent is one task of several, whose
 * SLURM_PROCID or OMPI_COMM_WORLD_RANK numbers the nodes, not the workers, and whose MPI world
 * the workers are no part of. Its own variables are torchrun's. */
static int torchrun_worker(void)
{
    const char *v = getenv("TORCHELASTIC_RUN_ID");
    return v && *v;
}

/* The first of `names` set to a non-negative int; `fallback` when none is. */
static int env_int(const char *const *names, int fallback)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (!v || !*v) continue;
        char *end;
        errno = 0;
        long x = strtol(v, &end, 10);
        if (errno == 0 && *end == '\0' && x >= 0 && x <= INT_MAX) return (int)x;
    }
    return fallback;
}

int rs_launcher_rank(int fallback)
{
    return env_int(torchrun_worker() ? torchrun_rank : rank_vars, fallback);
}

int rs_launcher_size(int fallback)
{
    return env_int(torchrun_worker() ? torchrun_size : size_vars, fallback);
}

int rs_launcher_local_rank(int fallback)
{
    return env_int(torchrun_worker() ? torchrun_local_rank : local_rank_vars, fallback);
}

int rs_launcher_rank_unknown(void)
{
    if (rs_launcher_rank(-1) >= 0) return 0;
    /* Lightning's launcher gives the processes it starts LOCAL_RANK, NODE_RANK and WORLD_SIZE,
     * and its script passes the rank to torch.distributed itself; a process with no launcher
     * variable at all is a program started on its own, rank 0 of 1 */
    return rs_launcher_size(1) > 1 || rs_launcher_local_rank(-1) >= 0;
}

int rs_launcher_attempt(void)
{
    static const char *const vars[] = {"TORCHELASTIC_RESTART_COUNT", NULL};
    return env_int(vars, 0);
}

int rs_launcher_has_peers(void)
{
    /* the variables of launchers that start ranks of one MPI world (not torchrun's WORLD_SIZE:
     * its workers are not MPI processes) */
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", NULL};
    return !torchrun_worker() && env_int(vars, 1) > 1;
}

const char *rs_launcher_mpi_family(void)
{
    static const char *const ompi[] = {"OMPI_COMM_WORLD_SIZE", NULL};
    static const char *const pmi[] = {"PMI_SIZE", NULL};
    if (!rs_launcher_has_peers()) return NULL;
    if (env_int(ompi, 0) > 1) return "openmpi";
    if (env_int(pmi, 0) > 1) return "mpich";
    return NULL;
}

void rs_launcher_job(const char *host, char *buf, size_t n)
{
    /* torchrun's rendezvous id names the job on every node; "none" is its default when the user
     * gave none, shared by unrelated runs, so it names nothing */
    static const char *const job_vars[] = {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID",
                                           "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
                                           "TORCHELASTIC_RUN_ID", NULL};
    for (const char *const *v = job_vars; *v; v++) {
        const char *s = getenv(*v);
        if (s && *s && strcmp(s, "none") != 0) {
            snprintf(buf, n, "%s", s);
            return;
        }
    }
    snprintf(buf, n, "local-%s-%ld", host, (long)getppid());
}

int rs_launcher_preloaded(void)
{
    static atomic_int preloaded = -1;
    int p = atomic_load_explicit(&preloaded, memory_order_relaxed);
    if (p >= 0) return p;
    const char *pre = getenv("LD_PRELOAD");
    p = 0;
    for (const char *s = pre; s && *s;) {
        size_t len = strcspn(s, ": ");
        const char *base = s;
        for (const char *c = s; c < s + len; c++)
            if (*c == '/') base = c + 1;
        if ((size_t)(s + len - base) >= 11 && !strncmp(base, "libranksnap", 11)) p = 1;
        s += len;
        s += strspn(s, ": ");
    }
    atomic_store_explicit(&preloaded, p, memory_order_relaxed);
    return p;
}
