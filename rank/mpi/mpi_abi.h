/*
 * mpi_abi.h — what libranksnap.so and an MPI plugin (libranksnap-mpi-FAMILY.so) hand each other.
 *
 * libranksnap.so has no MPI in it. Open MPI's and MPICH's ABIs differ (a communicator is a
 * pointer in one, an int in the other, and the constants with it), so everything that needs
 * mpi.h — the PMPI wrappers, joining the world, the point-to-point calls of the coordinator and
 * the gather — is built once per MPI family into a small plugin (rank/mpi_plugin/), which
 * mpi_plugin.c finds: preloaded by ranksnap-run next to the library, linked by the program
 * (ranksnap::mpi), or opened from the library's folder when the process has an MPI.
 *
 * Only ABI-neutral types cross: ints, sizes, and handles the plugin owns. A communicator is the
 * address of an MPI_Comm (the plugin's own copy, or the program's, as ranksnap_init takes it); a
 * request is an MPI_Request copied into a uint64_t, 0 for none. Message contents are bytes: the
 * ranks of one job share one architecture. Every call returns MPI's error code, MPI_SUCCESS
 * being 0 in every MPI.
 */
#ifndef RANKSNAP_MPI_ABI_H
#define RANKSNAP_MPI_ABI_H

#include <stddef.h>
#include <stdint.h>

/* Bumped whenever rs_mpi_ops or rs_mpi_host change: a plugin of another build is refused. */
#define RS_MPI_ABI 1

/* A request: an MPI_Request's bytes, 0 when there is none (done, cancelled, never posted). */
typedef uint64_t rs_mpi_req;

/* state()'s bits */
#define RS_MPI_INITIALIZED 1
#define RS_MPI_FINALIZED 2

/* What the plugin's PMPI wrappers record through: the runtime, as rank/runtime/mpi_host.c gives
 * it. The plugin calls nothing else of libranksnap.so but the public API. */
typedef struct rs_mpi_host {
    /* a communicator the program made: its handle, the id every member computes alike (hash
     * below, over the members' world ranks in their order), its size and this rank's index */
    void (*comm_created)(uint64_t handle, uint64_t id, int size, int rank);
    /* one the program frees (MPI_Comm_free, MPI_Comm_disconnect), before the real free */
    void (*comm_freed)(uint64_t handle);
    uint64_t (*hash)(uint64_t seed, const void *p, size_t n);
    /* an all-reduce on a communicator, and any collective that may number steps */
    void (*allreduce_on)(uint64_t handle);
    void (*collective_done)(const char *name, uint64_t count, uint64_t datatype, uint64_t extra);
    void (*warn)(const char *msg);
} rs_mpi_host;

/* The plugin's operations, from its one exported function besides the MPI_* wrappers:
 *     const rs_mpi_ops *ranksnap_mpi_plugin(void);                                        */
typedef struct rs_mpi_ops {
    int abi;            /* RS_MPI_ABI */
    const char *family; /* "openmpi" or "mpich": the mpi.h it was built with */
    /* the runtime's table, handed over once the plugin is taken; NULL until then */
    void (*attach)(const rs_mpi_host *host);
    /* MPI_Get_library_version's first line */
    void (*library)(char *buf, size_t n);

    /* ---- the world (rank/mpi/world.c) ---- */
    int (*state)(void); /* RS_MPI_INITIALIZED | RS_MPI_FINALIZED */
    /* *world = the address of MPI_COMM_WORLD and 1 when MPI is up (initialising it, with
     * MPI_THREAD_FUNNELED, when `may_init` and it is not: ranksnap then owns it); 0 when it is
     * finalised, not up and not to be started, or the program's own MPI_Init is under way (its
     * wrapper starts ranksnap on MPI_COMM_WORLD itself); -1 when MPI_Init_thread failed. */
    int (*join)(int may_init, const void **world);
    /* MPI_Finalize if ranksnap initialised MPI and the program did not finalise it */
    void (*release)(void);
    /* MPI_Abort(MPI_COMM_WORLD, code) when MPI is up; returns when it is not */
    void (*abort)(int code);

    /* ---- ranksnap's own communicator (rank/mpi/coord.c, gather.c) ---- */
    /* a duplicate of *comm (an MPI_Comm's address), with this rank and the size */
    int (*comm_dup)(const void *comm, void **out, int *rank, int *size);
    void (*comm_free)(void *comm);
    int (*send)(void *comm, const void *buf, size_t n, int peer, int tag);
    int (*recv)(void *comm, void *buf, size_t n, int peer, int tag);
    int (*isend)(void *comm, const void *buf, size_t n, int peer, int tag, rs_mpi_req *req);
    int (*irecv)(void *comm, void *buf, size_t n, int peer, int tag, rs_mpi_req *req);
    /* *done = 1 and *req = 0 once it completed (a request that is 0 is done) */
    int (*test)(rs_mpi_req *req, int *done);
    /* the completed ones of `n` (MPI_Testsome): their indices in idx, how many in *count, and
     * -1 there when none of them is pending (MPI_UNDEFINED) */
    int (*testsome)(int n, rs_mpi_req *reqs, int *idx, int *count);
    /* cancels a request that may never match and releases it; *req = 0 */
    void (*cancel)(rs_mpi_req *req);
    void (*error_string)(int err, char *buf, size_t n);
} rs_mpi_ops;

#endif
