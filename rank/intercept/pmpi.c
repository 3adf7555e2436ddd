/*
 * pmpi.c — joining an MPI job without code changes, through the MPI profiling interface.
 *
 * MPI_Init, MPI_Init_thread and MPI_Finalize are wrapped: ranksnap starts on MPI_COMM_WORLD right
 * after the real init and gathers, reports and shuts down right before the real finalize, while
 * MPI still works. A few collectives are wrapped only to number steps (RANKSNAP_STEP_ON, or found from their
 * period: rank/runtime/step_detect.c). The
 * wrappers are in the library, so they take effect when it is preloaded (ranksnap-run) or linked
 * ahead of libmpi. ranksnap's own MPI traffic uses PMPI_* and is never counted.
 *
 * Programs that never call MPI but run under mpirun (PyTorch with NCCL) get MPI from
 * rank/mpi/world.c instead.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "log.h"
#include "steps.h"
#include "world.h"

#if defined(RANKSNAP_HAVE_MPI)
#include <mpi.h>

#define RS_EXPORT __attribute__((visibility("default")))


/* Called once MPI is up. A start that fails (a bad option above all) makes ranksnap pass calls
 * through for the run, said once on rank 0 (rank/runtime/instance.c), and the program goes on as
 * if ranksnap were not there: nothing to do here about it. */
static void rs_start_on_world(void)
{
    MPI_Comm world = MPI_COMM_WORLD;
    rs_world_wrapper_init(1);
    (void)ranksnap_init(&world);
    rs_world_wrapper_init(0);
}

RS_EXPORT int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) rs_start_on_world();
    return rc;
}

RS_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) rs_start_on_world();
    return rc;
}

RS_EXPORT int MPI_Finalize(void)
{
    ranksnap_status st = ranksnap_finalize();
    if (st != RANKSNAP_OK) RS_WARN(RS_SUB_MPI, "finalize: %s", ranksnap_last_error());
    rs_world_disown();
    return PMPI_Finalize();
}

/* Each call's name, count, datatype and root or op become a token of the step detector. */
#define RS_COUNTED(name, n, t, extra, call)                                                        \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ == MPI_SUCCESS)                                                                    \
            rs_steps_collective_done(name, (uint64_t)(n), (uint64_t)(uintptr_t)(t), (uint64_t)(extra)); \
        return rc_;                                                                                \
    } while (0)

RS_EXPORT int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c)
{
    RS_COUNTED("MPI_Allreduce", n, t, (uintptr_t)op, PMPI_Allreduce(s, r, n, t, op, c));
}

RS_EXPORT int MPI_Barrier(MPI_Comm c)
{
    RS_COUNTED("MPI_Barrier", 0, 0, 0, PMPI_Barrier(c));
}

RS_EXPORT int MPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c)
{
    RS_COUNTED("MPI_Bcast", n, t, root, PMPI_Bcast(b, n, t, root, c));
}

RS_EXPORT int MPI_Reduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c)
{
    RS_COUNTED("MPI_Reduce", n, t, root, PMPI_Reduce(s, r, n, t, op, root, c));
}

RS_EXPORT int MPI_Allgather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt,
                            MPI_Comm c)
{
    RS_COUNTED("MPI_Allgather", sn, st, 0, PMPI_Allgather(s, sn, st, r, rn, rt, c));
}

RS_EXPORT int MPI_Alltoall(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt,
                           MPI_Comm c)
{
    RS_COUNTED("MPI_Alltoall", sn, st, 0, PMPI_Alltoall(s, sn, st, r, rn, rt, c));
}

RS_EXPORT int MPI_Reduce_scatter(const void *s, void *r, const int rc[], MPI_Datatype t, MPI_Op op,
                                 MPI_Comm c)
{
    RS_COUNTED("MPI_Reduce_scatter", rc ? rc[0] : 0, t, (uintptr_t)op, PMPI_Reduce_scatter(s, r, rc, t, op, c));
}

#endif
