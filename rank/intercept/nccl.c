/*
 * nccl.c — NCCL's device memory, accounted per communicator as memory outside the
 * allocator (label "nccl"), and ncclMemAlloc buffers recorded (label "nccl_mem").
 *
 * Exported from libranksnap.so only (never from libranksnap.a), so they interpose NCCL when the
 * library is preloaded; the real functions come from dlsym(RTLD_NEXT), else from the libnccl.so.2
 * already loaded (a Python extension's dependency lives in a local scope RTLD_NEXT does not see).
 *
 * How much a communicator takes cannot be asked of NCCL; it is measured: the device's free bytes
 * before and after creation (ncclCommInitRank, ncclCommInitRankConfig, ncclCommInitAll,
 * ncclCommSplit), minus what ranksnap's own cache reserved meanwhile (another thread allocating),
 * on the device current when the call was made. NCCL since 2.22 connects lazily (NCCL_RUNTIME_CONNECT=1): the buffers of
 * an algorithm are allocated at its first use, so each communicator's first ncclAllReduce is
 * measured the same way and added to it. Destroy and abort take the communicator's bytes back
 * out. Memory NCCL takes later (other collectives' first use, grouped calls, proxies) stays in the
 * unlabelled part of the outside bytes; NCCL_RUNTIME_CONNECT=0 makes NCCL allocate at creation,
 * where all of it is measured. A non-blocking communicator (config->blocking = 0) is measured for
 * what it took by the time the call returned.
 *
 * ncclMemAlloc buffers are the program's tensors allocated by NCCL (cuMem, for registration and
 * NVLS); they appear in the history as outside_alloc / outside_free events with the caller's
 * stack, and under the label "nccl_mem" in the totals — never in the allocator's state, peaks or
 * replays, which are about ranksnap's cache.
 *
 * Each communicator made is recorded too (rank/runtime/comms.c), with an id its members share (a
 * hash of the ncclUniqueId; of the parent's id and the color for a split), the ncclAllReduce
 * calls made on it and its destroy or abort: the ranks' roles are found from those alive while a
 * range records.
 *
 * Every successful ncclAllReduce, ncclReduceScatter, ncclAllGather, ncclBroadcast and ncclReduce
 * is reported to the step counting (rank/runtime/steps.c): a sharded job's steps are found from
 * its reduce-scatters and all-gathers as a replicated one's are from its all-reduces, and
 * RANKSNAP_STEP_ON=ncclAllReduce:N (or another of them) makes every N-th call a step boundary,
 * as MPI_Allreduce:N does through pmpi.c.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include <nccl.h>

#include "comms.h"
#include "instance.h"
#include "log.h"
#include "outside.h"
#include "ptrmap.h"
#include "steps.h"

#define RS_EXPORT __attribute__((visibility("default")))

typedef struct rs_nccl {
    ncclResult_t (*init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*init_rank_config)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    ncclResult_t (*init_all)(ncclComm_t *, int, const int *);
    ncclResult_t (*split)(ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *);
    ncclResult_t (*destroy)(ncclComm_t);
    ncclResult_t (*abort_)(ncclComm_t);
    ncclResult_t (*mem_alloc)(void **, size_t);
    ncclResult_t (*mem_free)(void *);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                               cudaStream_t);
    ncclResult_t (*reduce_scatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                   ncclComm_t, cudaStream_t);
    ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
                           cudaStream_t);
    ncclResult_t (*count)(const ncclComm_t, int *);
    ncclResult_t (*user_rank)(const ncclComm_t, int *);
} rs_nccl;

static rs_nccl rs_nccl_real;
static pthread_once_t rs_nccl_once = PTHREAD_ONCE_INIT;

static void *rs_nccl_sym(void **handle, const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (f) return f;
    if (!*handle) *handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
    if (!*handle) *handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!*handle) *handle = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
    return *handle ? dlsym(*handle, name) : NULL;
}

static void rs_nccl_load(void)
{
    rs_nccl *n = &rs_nccl_real;
    void *h = NULL;
    *(void **)(&n->init_rank) = rs_nccl_sym(&h, "ncclCommInitRank");
    *(void **)(&n->init_rank_config) = rs_nccl_sym(&h, "ncclCommInitRankConfig");
    *(void **)(&n->init_all) = rs_nccl_sym(&h, "ncclCommInitAll");
    *(void **)(&n->split) = rs_nccl_sym(&h, "ncclCommSplit");
    *(void **)(&n->destroy) = rs_nccl_sym(&h, "ncclCommDestroy");
    *(void **)(&n->abort_) = rs_nccl_sym(&h, "ncclCommAbort");
    *(void **)(&n->mem_alloc) = rs_nccl_sym(&h, "ncclMemAlloc");
    *(void **)(&n->mem_free) = rs_nccl_sym(&h, "ncclMemFree");
    *(void **)(&n->all_reduce) = rs_nccl_sym(&h, "ncclAllReduce");
    *(void **)(&n->reduce_scatter) = rs_nccl_sym(&h, "ncclReduceScatter");
    *(void **)(&n->all_gather) = rs_nccl_sym(&h, "ncclAllGather");
    *(void **)(&n->broadcast) = rs_nccl_sym(&h, "ncclBroadcast");
    *(void **)(&n->reduce) = rs_nccl_sym(&h, "ncclReduce");
    *(void **)(&n->count) = rs_nccl_sym(&h, "ncclCommCount");
    *(void **)(&n->user_rank) = rs_nccl_sym(&h, "ncclCommUserRank");
}

static const rs_nccl *rs_nccl_get(void)
{
    pthread_once(&rs_nccl_once, rs_nccl_load);
    return &rs_nccl_real;
}

/* What a call answers when NCCL itself cannot be found behind the interposer. */
static ncclResult_t rs_nccl_missing(const char *name)
{
    fprintf(stderr, "ranksnap: %s: the real NCCL function cannot be found (no libnccl.so.2 loaded "
            "behind libranksnap.so)\n", name);
    return ncclSystemError;
}

/* ---- measuring ------------------------------------------------------------------------------ */

typedef struct rs_probe {
    int ok;
    int device; /* the calling thread's current device, the one NCCL creates on */
    uint64_t free0, reserved0;
    int64_t seen0; /* what the driver's interposers had recorded in the process */
} rs_probe;

static void rs_probe_begin(rs_probe *p)
{
    p->ok = rs_instance_ensure() == RANKSNAP_OK && (p->device = rs_instance_current_device()) >= 0 &&
            rs_instance_device_usage(p->device, &p->free0, &p->reserved0) == RANKSNAP_OK;
    p->seen0 = rs_outside_driver_net_all();
    rs_outside_nccl_call_begin();
}

/* The measured call returned (whatever it answered). */
static void rs_probe_returned(void)
{
    rs_outside_nccl_call_end();
}

/* Bytes the device lost since rs_probe_begin that neither ranksnap's cache took nor the driver's
 * interposers recorded already, on any thread (under NCCL's name, from its stack: NCCL's proxy
 * thread allocates while the caller waits). */
static uint64_t rs_probe_end(const rs_probe *p)
{
    uint64_t free1 = 0, reserved1 = 0;
    if (!p->ok || rs_instance_device_usage(p->device, &free1, &reserved1) != RANKSNAP_OK) return 0;
    int64_t taken = (int64_t)p->free0 - (int64_t)free1;
    int64_t known =
        (int64_t)reserved1 - (int64_t)p->reserved0 + (rs_outside_driver_net_all() - p->seen0);
    return taken > known ? (uint64_t)(taken - known) : 0;
}

/* Communicator -> bytes accounted to it; the top bit says its first ncclAllReduce was measured. */
static rs_ptrmap rs_comm_bytes = RS_PTRMAP_INIT;
#define RS_FIRST_COLL_DONE (UINT64_C(1) << 63)

static void rs_comm_account(ncclComm_t comm, uint64_t bytes, const char *how)
{
    if (!comm) return;
    uint64_t old = 0;
    /* a handle NCCL reuses after a destroy we did not see starts afresh */
    if (rs_ptrmap_take(&rs_comm_bytes, comm, &old))
        rs_outside_add("nccl", -(int64_t)(old & ~RS_FIRST_COLL_DONE));
    if (rs_ptrmap_put(&rs_comm_bytes, comm, bytes) != 0) return;
    rs_outside_add("nccl", (int64_t)bytes);
    RS_INFO(RS_SUB_INIT, "%s: communicator %p holds %llu bytes of device memory", how, (void *)comm,
            (unsigned long long)bytes);
}

static void rs_comm_release(ncclComm_t comm)
{
    uint64_t v = 0;
    if (comm && rs_ptrmap_take(&rs_comm_bytes, comm, &v))
        rs_outside_add("nccl", -(int64_t)(v & ~RS_FIRST_COLL_DONE));
}

/* ---- communicators -------------------------------------------------------------------------- */

/* A split's communicator, recorded (rank/runtime/comms.c) with an id every member computes alike:
 * its parent's id and the color. Its size and this rank's index are NCCL's to say. */
static void rs_record_split(ncclComm_t parent, int color, ncclComm_t comm)
{
    const rs_nccl *n = rs_nccl_get();
    int size = 0, rank = 0;
    uint64_t pid = rs_comms_id_of((uint64_t)(uintptr_t)parent);
    if (!pid || !n->count || !n->user_rank || n->count(comm, &size) != ncclSuccess ||
        n->user_rank(comm, &rank) != ncclSuccess)
        return;
    rs_comms_add((uint64_t)(uintptr_t)comm, rs_comms_hash(pid, &color, sizeof color), size, rank,
                 "nccl");
}

RS_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    const rs_nccl *n = rs_nccl_get();
    if (!n->init_rank) return rs_nccl_missing("ncclCommInitRank");
    rs_probe p;
    rs_probe_begin(&p);
    ncclResult_t res = n->init_rank(comm, nranks, id, rank);
    rs_probe_returned();
    if (res == ncclSuccess && p.ok && comm) rs_comm_account(*comm, rs_probe_end(&p), "ncclCommInitRank");
    if (res == ncclSuccess && comm)
        rs_comms_add((uint64_t)(uintptr_t)*comm, rs_comms_hash(0, &id, sizeof id), nranks, rank, "nccl");
    return res;
}

RS_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                              ncclConfig_t *config)
{
    const rs_nccl *n = rs_nccl_get();
    if (!n->init_rank_config) return rs_nccl_missing("ncclCommInitRankConfig");
    rs_probe p;
    rs_probe_begin(&p);
    ncclResult_t res = n->init_rank_config(comm, nranks, id, rank, config);
    rs_probe_returned();
    /* ncclInProgress: a non-blocking communicator still initialising (measured as it is now) */
    if ((res == ncclSuccess || res == ncclInProgress) && p.ok && comm)
        rs_comm_account(*comm, rs_probe_end(&p), "ncclCommInitRankConfig");
    if ((res == ncclSuccess || res == ncclInProgress) && comm)
        rs_comms_add((uint64_t)(uintptr_t)*comm, rs_comms_hash(0, &id, sizeof id), nranks, rank, "nccl");
    return res;
}

RS_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    const rs_nccl *n = rs_nccl_get();
    if (!n->init_all) return rs_nccl_missing("ncclCommInitAll");
    rs_probe p;
    rs_probe_begin(&p);
    ncclResult_t res = n->init_all(comms, ndev, devlist);
    rs_probe_returned();
    if (res != ncclSuccess || !p.ok || !comms || ndev <= 0) return res;
    /* One process, several devices: what the measured device (the current one) lost belongs to
     * the communicator on that device (the first one when none is). */
    int on_ours = 0;
    for (int i = 0; i < ndev; i++)
        if ((devlist ? devlist[i] : i) == p.device) {
            on_ours = i;
            break;
        }
    rs_comm_account(comms[on_ours], rs_probe_end(&p), "ncclCommInitAll");
    return res;
}

RS_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                     ncclConfig_t *config)
{
    const rs_nccl *n = rs_nccl_get();
    if (!n->split) return rs_nccl_missing("ncclCommSplit");
    rs_probe p;
    rs_probe_begin(&p);
    ncclResult_t res = n->split(comm, color, key, newcomm, config);
    rs_probe_returned();
    /* NCCL_SPLIT_NOCOLOR gives *newcomm = NULL: nothing to account */
    if ((res == ncclSuccess || res == ncclInProgress) && p.ok && newcomm && *newcomm)
        rs_comm_account(*newcomm, rs_probe_end(&p), "ncclCommSplit");
    if (res == ncclSuccess && newcomm && *newcomm) rs_record_split(comm, color, *newcomm);
    return res;
}

RS_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    const rs_nccl *n = rs_nccl_get();
    if (!n->destroy) return rs_nccl_missing("ncclCommDestroy");
    /* before the real call: NCCL may hand out its handle again at once */
    rs_comms_free((uint64_t)(uintptr_t)comm);
    ncclResult_t res = n->destroy(comm);
    if (res == ncclSuccess || res == ncclInProgress) rs_comm_release(comm);
    return res;
}

RS_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    const rs_nccl *n = rs_nccl_get();
    if (!n->abort_) return rs_nccl_missing("ncclCommAbort");
    rs_comms_free((uint64_t)(uintptr_t)comm);
    ncclResult_t res = n->abort_(comm);
    /* an abort frees the communicator's resources even when it reports an error */
    rs_comm_release(comm);
    return res;
}

/* ---- collectives ---------------------------------------------------------------------------- */

RS_EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream)
{
    const rs_nccl *n = rs_nccl_get();
    if (!n->all_reduce) return rs_nccl_missing("ncclAllReduce");
    rs_comms_allreduce((uint64_t)(uintptr_t)comm);
    uint64_t v = 0;
    int first = rs_instance_active(NULL) && rs_ptrmap_get(&rs_comm_bytes, comm, &v) &&
                !(v & RS_FIRST_COLL_DONE);
    rs_probe p = {0, -1, 0, 0, 0};
    if (first) rs_probe_begin(&p);
    ncclResult_t res = n->all_reduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
    if (first) {
        rs_probe_returned();
        uint64_t more = rs_probe_end(&p);
        /* only a communicator still known (not destroyed by another thread meanwhile) */
        if (rs_ptrmap_add(&rs_comm_bytes, comm, more | RS_FIRST_COLL_DONE) && more) {
            rs_outside_add("nccl", (int64_t)more);
            RS_INFO(RS_SUB_INIT, "first ncclAllReduce on communicator %p: %llu more bytes",
                    (void *)comm, (unsigned long long)more);
        }
    }
    if (res == ncclSuccess) rs_steps_collective_done("ncclAllReduce", count, (uint64_t)datatype, (uint64_t)op);
    return res;
}

/* The other collectives pass through; only their completed calls count, for the steps. */
RS_EXPORT ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                         cudaStream_t stream)
{
    const rs_nccl *n = rs_nccl_get();
    if (!n->reduce_scatter) return rs_nccl_missing("ncclReduceScatter");
    ncclResult_t res = n->reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
    if (res == ncclSuccess)
        rs_steps_collective_done("ncclReduceScatter", recvcount, (uint64_t)datatype, (uint64_t)op);
    return res;
}

RS_EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                     ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    const rs_nccl *n = rs_nccl_get();
    if (!n->all_gather) return rs_nccl_missing("ncclAllGather");
    ncclResult_t res = n->all_gather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
    if (res == ncclSuccess) rs_steps_collective_done("ncclAllGather", sendcount, (uint64_t)datatype, 0);
    return res;
}

RS_EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                     ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    const rs_nccl *n = rs_nccl_get();
    if (!n->broadcast) return rs_nccl_missing("ncclBroadcast");
    ncclResult_t res = n->broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream);
    if (res == ncclSuccess) rs_steps_collective_done("ncclBroadcast", count, (uint64_t)datatype, (uint64_t)root);
    return res;
}

RS_EXPORT ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                  ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    const rs_nccl *n = rs_nccl_get();
    if (!n->reduce) return rs_nccl_missing("ncclReduce");
    ncclResult_t res = n->reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
    if (res == ncclSuccess)
        rs_steps_collective_done("ncclReduce", count, (uint64_t)datatype, (uint64_t)op << 32 | (uint32_t)root);
    return res;
}

/* ---- ncclMemAlloc --------------------------------------------------------------------------- */

static rs_ptrmap rs_nccl_mem = RS_PTRMAP_INIT; /* buffer -> bytes asked for */

RS_EXPORT ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    const rs_nccl *n = rs_nccl_get();
    if (!n->mem_alloc) return rs_nccl_missing("ncclMemAlloc");
    /* the driver's interposers see NCCL's cuMemCreate underneath: under this label, then */
    const char *label = rs_outside_driver_label("nccl_mem");
    int64_t seen = rs_outside_driver_net();
    ncclResult_t res = n->mem_alloc(ptr, size);
    rs_outside_driver_label(label);
    if (rs_outside_driver_net() != seen) return res;
    if (res == ncclSuccess && ptr && *ptr && size && rs_instance_ensure() == RANKSNAP_OK &&
        rs_ptrmap_put(&rs_nccl_mem, *ptr, size) == 0) {
        rs_outside_add("nccl_mem", (int64_t)size);
        rs_outside_record(1, *ptr, size);
    }
    return res;
}

RS_EXPORT ncclResult_t ncclMemFree(void *ptr)
{
    const rs_nccl *n = rs_nccl_get();
    if (!n->mem_free) return rs_nccl_missing("ncclMemFree");
    ncclResult_t res = n->mem_free(ptr);
    uint64_t size = 0;
    if (res == ncclSuccess && ptr && rs_ptrmap_take(&rs_nccl_mem, ptr, &size)) {
        rs_outside_add("nccl_mem", -(int64_t)size);
        rs_outside_record(0, ptr, size);
    }
    return res;
}
