/*
 * plugin.c — an MPI plugin's operations (mpi_abi.h) over one MPI family's PMPI_* calls.
 *
 * Built once per MPI family (libranksnap-mpi-openmpi.so, libranksnap-mpi-mpich.so) from this
 * same source, each with its family's mpi.h, and linked with no MPI library: its PMPI_* calls
 * bind to the MPI the process has — the program's own, or the one rank/mpi/mpi_plugin.c opened
 * first — so one plugin serves every MPI of its ABI (MPICH's serves Intel MPI and MVAPICH too).
 * The family is what mpi.h says it is; the core checks it against the MPI the process loaded.
 *
 * It owns MPI's state as ranksnap sees it: whether ranksnap initialised MPI (and so finalises
 * it), and whether the program's own MPI_Init is under way (pmpi.c's wrappers).
 */
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "mpi_abi.h"
#include "mpi_weak.h"
#include "plugin.h"

#if defined(OPEN_MPI)
#define RS_MP_FAMILY "openmpi"
#elif defined(MPICH_VERSION) || defined(MPICH)
#define RS_MP_FAMILY "mpich"
#else
#error "an mpi.h of neither Open MPI nor MPICH: no plugin family for it"
#endif

_Static_assert(sizeof(MPI_Request) <= sizeof(rs_mpi_req), "an MPI_Request must fit a rs_mpi_req");

static _Atomic(const rs_mpi_host *) rs_mp_host_ptr;
static atomic_int rs_mp_in_wrapper_init;
static atomic_int rs_mp_we_own_mpi;

const rs_mpi_host *rs_mp_host(void)
{
    return atomic_load_explicit(&rs_mp_host_ptr, memory_order_acquire);
}

void rs_mp_wrapper_init(int inside)
{
    atomic_store(&rs_mp_in_wrapper_init, inside);
}

void rs_mp_disown(void)
{
    atomic_store(&rs_mp_we_own_mpi, 0);
}

/* MPI was in the process when the plugin was loaded, so its weak references are bound
 * (mpi_weak.h). Loaded before it — preloaded into a process that opens an MPI later, a child of
 * an MPI program — they stay unbound: the plugin then takes no part (no ranksnap start in its
 * MPI_Init, no operations for the library), and its wrappers only pass calls on. */
int rs_mp_armed(void)
{
#if defined(OPEN_MPI)
    if (!&ompi_mpi_comm_world) return 0;
#endif
    return PMPI_Init_thread != NULL && PMPI_Comm_dup != NULL;
}

static void mp_attach(const rs_mpi_host *host)
{
    atomic_store_explicit(&rs_mp_host_ptr, host, memory_order_release);
}

static void mp_library(char *buf, size_t n)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (PMPI_Get_library_version(v, &len) != MPI_SUCCESS || len <= 0) {
        snprintf(buf, n, "an MPI of the %s family", RS_MP_FAMILY);
        return;
    }
    v[sizeof v - 1] = '\0';
    const char *s = v;
    while (*s == ' ' || *s == '\n') s++;
    snprintf(buf, n, "%.*s", (int)strcspn(s, "\n"), s);
}

/* ---- the world ---------------------------------------------------------------------------- */

static int mp_state(void)
{
    int inited = 0, finalized = 0;
    PMPI_Initialized(&inited);
    PMPI_Finalized(&finalized);
    return (inited ? RS_MPI_INITIALIZED : 0) | (finalized ? RS_MPI_FINALIZED : 0);
}

static int mp_join(int may_init, const void **world)
{
    static MPI_Comm w;
    *world = NULL;
    if (atomic_load(&rs_mp_in_wrapper_init)) return 0;
    int st = mp_state();
    if (st & RS_MPI_FINALIZED) return 0;
    if (!(st & RS_MPI_INITIALIZED)) {
        if (!may_init) return 0;
        int provided = 0;
        if (PMPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return -1;
        atomic_store(&rs_mp_we_own_mpi, 1);
    }
    w = MPI_COMM_WORLD;
    *world = &w;
    return 1;
}

static void mp_release(void)
{
    if (!atomic_exchange(&rs_mp_we_own_mpi, 0)) return;
    if (!(mp_state() & RS_MPI_FINALIZED)) PMPI_Finalize();
}

static void mp_abort(int code)
{
    if (mp_state() == RS_MPI_INITIALIZED) PMPI_Abort(MPI_COMM_WORLD, code);
}

/* ---- ranksnap's own communicator ---------------------------------------------------------- */

static rs_mpi_req mp_box(MPI_Request r)
{
    rs_mpi_req b = 0;
    if (r != MPI_REQUEST_NULL) memcpy(&b, &r, sizeof r);
    return b;
}

static MPI_Request mp_unbox(rs_mpi_req b)
{
    MPI_Request r = MPI_REQUEST_NULL;
    if (b) memcpy(&r, &b, sizeof r);
    return r;
}

static int mp_comm_dup(const void *comm, void **out, int *rank, int *size)
{
    *out = NULL;
    MPI_Comm *c = malloc(sizeof *c);
    if (!c) return MPI_ERR_NO_MEM;
    int rc = PMPI_Comm_dup(*(const MPI_Comm *)comm, c);
    if (rc == MPI_SUCCESS) rc = PMPI_Comm_rank(*c, rank);
    if (rc == MPI_SUCCESS) rc = PMPI_Comm_size(*c, size);
    if (rc != MPI_SUCCESS) {
        free(c);
        return rc;
    }
    *out = c;
    return MPI_SUCCESS;
}

static void mp_comm_free(void *comm)
{
    MPI_Comm *c = comm;
    if (!c) return;
    PMPI_Comm_free(c);
    free(c);
}

static int mp_send(void *comm, const void *buf, size_t n, int peer, int tag)
{
    if (n > INT_MAX) return MPI_ERR_COUNT;
    return PMPI_Send(buf, (int)n, MPI_BYTE, peer, tag, *(MPI_Comm *)comm);
}

static int mp_recv(void *comm, void *buf, size_t n, int peer, int tag)
{
    if (n > INT_MAX) return MPI_ERR_COUNT;
    return PMPI_Recv(buf, (int)n, MPI_BYTE, peer, tag, *(MPI_Comm *)comm, MPI_STATUS_IGNORE);
}

static int mp_isend(void *comm, const void *buf, size_t n, int peer, int tag, rs_mpi_req *req)
{
    *req = 0;
    if (n > INT_MAX) return MPI_ERR_COUNT;
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = PMPI_Isend(buf, (int)n, MPI_BYTE, peer, tag, *(MPI_Comm *)comm, &r);
    *req = mp_box(r);
    return rc;
}

static int mp_irecv(void *comm, void *buf, size_t n, int peer, int tag, rs_mpi_req *req)
{
    *req = 0;
    if (n > INT_MAX) return MPI_ERR_COUNT;
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = PMPI_Irecv(buf, (int)n, MPI_BYTE, peer, tag, *(MPI_Comm *)comm, &r);
    *req = mp_box(r);
    return rc;
}

static int mp_test(rs_mpi_req *req, int *done)
{
    *done = 1;
    MPI_Request r = mp_unbox(*req);
    if (r == MPI_REQUEST_NULL) return MPI_SUCCESS;
    int rc = PMPI_Test(&r, done, MPI_STATUS_IGNORE);
    *req = mp_box(r);
    return rc;
}

/* MPI_Testsome over the boxed requests, 64 at a time (a request array of this MPI's handles on
 * the stack): one call, one turn of MPI's progress, per 64 ranks. Real statuses, not
 * MPI_STATUSES_IGNORE: gcc 12 takes MPICH's declaration of that argument for an array to write. */
static int mp_testsome(int n, rs_mpi_req *reqs, int *idx, int *count)
{
    enum { CHUNK = 64 };
    MPI_Request r[CHUNK];
    MPI_Status statuses[CHUNK];
    int got[CHUNK];
    int pending = 0;
    *count = 0;
    for (int base = 0; base < n; base += CHUNK) {
        int m = n - base < CHUNK ? n - base : CHUNK, out = 0;
        for (int i = 0; i < m; i++) r[i] = mp_unbox(reqs[base + i]);
        int rc = PMPI_Testsome(m, r, &out, got, statuses);
        for (int i = 0; i < m; i++) reqs[base + i] = mp_box(r[i]);
        if (rc != MPI_SUCCESS) return rc;
        if (out == MPI_UNDEFINED) continue;
        pending = 1;
        for (int i = 0; i < out; i++) idx[(*count)++] = base + got[i];
    }
    if (!pending) *count = -1;
    return MPI_SUCCESS;
}

static void mp_cancel(rs_mpi_req *req)
{
    MPI_Request r = mp_unbox(*req);
    *req = 0;
    if (r == MPI_REQUEST_NULL) return;
    int done = 0;
    PMPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (done) return;
    PMPI_Cancel(&r);
    PMPI_Wait(&r, MPI_STATUS_IGNORE);
}

static void mp_error_string(int err, char *buf, size_t n)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (PMPI_Error_string(err, msg, &len) != MPI_SUCCESS) len = 0;
    snprintf(buf, n, "%.*s", len > 0 && len < MPI_MAX_ERROR_STRING ? len : 0, msg);
    if (!buf[0]) snprintf(buf, n, "MPI error %d", err);
}

static const rs_mpi_ops rs_mp_ops = {
    .abi = RS_MPI_ABI,
    .family = RS_MP_FAMILY,
    .attach = mp_attach,
    .library = mp_library,
    .state = mp_state,
    .join = mp_join,
    .release = mp_release,
    .abort = mp_abort,
    .comm_dup = mp_comm_dup,
    .comm_free = mp_comm_free,
    .send = mp_send,
    .recv = mp_recv,
    .isend = mp_isend,
    .irecv = mp_irecv,
    .test = mp_test,
    .testsome = mp_testsome,
    .cancel = mp_cancel,
    .error_string = mp_error_string,
};

__attribute__((visibility("default"))) const rs_mpi_ops *ranksnap_mpi_plugin(void);

const rs_mpi_ops *ranksnap_mpi_plugin(void)
{
    return rs_mp_armed() ? &rs_mp_ops : NULL;
}
