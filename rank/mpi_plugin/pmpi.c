/*
 * pmpi.c — joining an MPI job without code changes, through the MPI profiling interface.
 *
 * MPI_Init, MPI_Init_thread and MPI_Finalize are wrapped: ranksnap starts on MPI_COMM_WORLD right
 * after the real init and gathers, reports and shuts down right before the real finalize, while
 * MPI still works. A few collectives are wrapped only to number steps (RANKSNAP_STEP_ON, or found from their
 * period: rank/runtime/step_detect.c), and the calls that make and free communicators to record
 * them, with the all-reduces made on each (rank/runtime/comms.c: the ranks' roles are found from
 * the communicators alive while a range records). The wrappers are in the MPI plugin
 * (plugin.c), so they take effect when it is preloaded (ranksnap-run, for a program linked with
 * MPI) or linked ahead of libmpi (ranksnap::mpi). ranksnap's own MPI traffic uses PMPI_* and is
 * never counted.
 *
 * They reach libranksnap.so through its public API (ranksnap_init, ranksnap_finalize; weak, so
 * that the plugin loads, and passes calls on, where the library is not there) and the runtime's
 * table (rs_mp_host): until the library took the plugin they record nothing.
 *
 * Programs that never call MPI but run under mpirun (PyTorch with NCCL) get MPI from
 * rank/mpi/world.c instead.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "mpi_weak.h"
#include "plugin.h"
#include "ranksnap.h"

#pragma weak ranksnap_init
#pragma weak ranksnap_finalize
#pragma weak ranksnap_last_error

#define RS_EXPORT __attribute__((visibility("default")))


/* Called once MPI is up. A start that fails (a bad option above all) makes ranksnap pass calls
 * through for the run, said once on rank 0 (rank/runtime/instance.c), and the program goes on as
 * if ranksnap were not there: nothing to do here about it. */
static void rs_start_on_world(void)
{
    if (!ranksnap_init || !rs_mp_armed()) return;
    MPI_Comm world = MPI_COMM_WORLD;
    rs_mp_wrapper_init(1);
    (void)ranksnap_init(&world);
    rs_mp_wrapper_init(0);
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
    const rs_mpi_host *host = rs_mp_host();
    if (ranksnap_finalize && ranksnap_finalize() != RANKSNAP_OK && host && ranksnap_last_error) {
        char msg[1024];
        snprintf(msg, sizeof msg, "finalize: %s", ranksnap_last_error());
        host->warn(msg);
    }
    rs_mp_disown();
    return PMPI_Finalize();
}

/* A communicator the program made, recorded (rank/runtime/comms.c) with an id that every member
 * computes alike: a hash of the sorted world ranks of its members. MPI_COMM_NULL (a split's
 * MPI_UNDEFINED color) is not one. */
static void rs_record_comm(int rc, MPI_Comm c)
{
    const rs_mpi_host *host = rs_mp_host();
    if (!host || rc != MPI_SUCCESS || c == MPI_COMM_NULL) return;
    int size = 0, rank = 0;
    MPI_Group g, wg;
    if (PMPI_Comm_size(c, &size) != MPI_SUCCESS || PMPI_Comm_rank(c, &rank) != MPI_SUCCESS ||
        size < 1 || size > (1 << 24))
        return;
    int *in = malloc(2 * (size_t)size * sizeof *in);
    if (!in) return;
    int *out = in + size;
    for (int i = 0; i < size; i++) in[i] = i;
    int got = PMPI_Comm_group(c, &g) == MPI_SUCCESS, ok = 0;
    if (got && PMPI_Comm_group(MPI_COMM_WORLD, &wg) == MPI_SUCCESS) {
        ok = PMPI_Group_translate_ranks(g, size, in, wg, out) == MPI_SUCCESS;
        PMPI_Group_free(&wg);
    }
    if (got) PMPI_Group_free(&g);
    /* the world ranks of its members in their order in it: alike on every member */
    uint64_t id = 0;
    for (int i = 0; ok && i < size; i++) id = host->hash(id, &out[i], sizeof out[i]);
    if (ok) host->comm_created((uint64_t)(uintptr_t)c, id, size, rank);
    free(in);
}

RS_EXPORT int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_split(comm, color, key, newcomm);
    rs_record_comm(rc, rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL);
    return rc;
}

RS_EXPORT int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_split_type(comm, type, key, info, newcomm);
    rs_record_comm(rc, rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL);
    return rc;
}

RS_EXPORT int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_create(comm, group, newcomm);
    rs_record_comm(rc, rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL);
    return rc;
}

RS_EXPORT int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_create_group(comm, group, tag, newcomm);
    rs_record_comm(rc, rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL);
    return rc;
}

RS_EXPORT int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_dup(comm, newcomm);
    rs_record_comm(rc, rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL);
    return rc;
}

RS_EXPORT int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[],
                              int reorder, MPI_Comm *newcomm)
{
    int rc = PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm);
    rs_record_comm(rc, rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL);
    return rc;
}

RS_EXPORT int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm)
{
    int rc = PMPI_Cart_sub(comm, remain_dims, newcomm);
    rs_record_comm(rc, rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL);
    return rc;
}

/* A freed communicator is no longer a source of roles; its record goes before the real free,
 * so that a handle MPI hands out again at once (Open MPI reuses them) is not taken for it. A
 * failed free is an error MPI makes fatal unless the job chose otherwise. */
static void rs_forget_comm(const MPI_Comm *comm)
{
    const rs_mpi_host *host = rs_mp_host();
    if (host && comm && *comm != MPI_COMM_NULL) host->comm_freed((uint64_t)(uintptr_t)*comm);
}

RS_EXPORT int MPI_Comm_free(MPI_Comm *comm)
{
    rs_forget_comm(comm);
    return PMPI_Comm_free(comm);
}

RS_EXPORT int MPI_Comm_disconnect(MPI_Comm *comm)
{
    rs_forget_comm(comm);
    return PMPI_Comm_disconnect(comm);
}

/* Each call's name, count, datatype and root or op become a token of the step detector. */
#define RS_COUNTED(name, n, t, extra, call)                                                        \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        const rs_mpi_host *host_ = rs_mp_host();                                                   \
        if (rc_ == MPI_SUCCESS && host_)                                                           \
            host_->collective_done(name, (uint64_t)(n), (uint64_t)(uintptr_t)(t), (uint64_t)(extra)); \
        return rc_;                                                                                \
    } while (0)

RS_EXPORT int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c)
{
    const rs_mpi_host *host = rs_mp_host();
    if (host) host->allreduce_on((uint64_t)(uintptr_t)c);
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
