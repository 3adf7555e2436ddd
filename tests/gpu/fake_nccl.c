/*
 * fake_nccl.c — a stand-in for libnccl.so.2 on machines without a GPU (with fake_cudart.c), so
 * that ranksnap's NCCL interposers (rank/intercept/nccl.c) run end to end in CI (label unit).
 *
 * A communicator takes 48 MiB of the fake device when created and gives them back when
 * destroyed; ncclMemAlloc takes what it is asked. Like the real NCCL, it takes device memory
 * through its own path (fake_device_take), never through the interposed cudaMalloc, so that
 * ranksnap can only measure it.
 *
 * ncclCommInitRank does the same, except where the process has loaded the CUDA driver (the fake
 * one, tests/gpu/fake_cuda_driver.c): then, like NCCL 2.19 and later, it takes the communicator's
 * memory from the driver, found through cuGetProcAddress_v2, 25 MiB on the caller's thread and
 * 23 MiB on a "proxy" thread of its own while the caller waits.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include <cuda.h>
#include <nccl.h>
#undef cuGetProcAddress

#define FAKE_EXPORT __attribute__((visibility("default")))
#define FAKE_COMM_BYTES ((size_t)48 << 20)

void *fake_device_take(size_t n);
void fake_device_give(void *p);

struct ncclComm {
    void *mem;
    CUdeviceptr on_caller, on_proxy;
    int device;
};

typedef CUresult (*drv_alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*drv_free_fn)(CUdeviceptr);
static drv_alloc_fn drv_alloc;
static drv_free_fn drv_free;

/* The driver's cuMemAlloc and cuMemFree as NCCL's static runtime finds them; 0 without a driver. */
static int driver_entry_points(void)
{
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!drv) return 0;
    CUresult (*get)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
    *(void **)&get = dlsym(drv, "cuGetProcAddress_v2");
    CUdriverProcAddressQueryResult q;
    return get && get("cuMemAlloc", (void **)&drv_alloc, 12000, 0, &q) == CUDA_SUCCESS &&
           get("cuMemFree", (void **)&drv_free, 12000, 0, &q) == CUDA_SUCCESS;
}

static void *proxy_thread(void *comm)
{
    struct ncclComm *c = comm;
    /* a new thread has no current device: NCCL's proxy sets the communicator's */
    void (*set_device)(int);
    *(void **)&set_device = dlsym(RTLD_DEFAULT, "fake_driver_set_device");
    if (set_device) set_device(c->device);
    return drv_alloc(&c->on_proxy, (size_t)23 << 20) == CUDA_SUCCESS ? c : NULL;
}

FAKE_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    (void)nranks;
    (void)id;
    (void)rank;
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c) return ncclSystemError;
    *comm = c;
    if (!driver_entry_points()) return (c->mem = fake_device_take(FAKE_COMM_BYTES)) ? ncclSuccess : ncclSystemError;
    CUresult (*get_device)(CUdevice *);
    *(void **)&get_device = dlsym(RTLD_DEFAULT, "cuCtxGetDevice");
    CUdevice d = 0;
    if (get_device) get_device(&d);
    c->device = (int)d;
    if (drv_alloc(&c->on_caller, (size_t)25 << 20) != CUDA_SUCCESS) return ncclUnhandledCudaError;
    pthread_t t;
    void *ok = NULL;
    if (pthread_create(&t, NULL, proxy_thread, c) != 0 || pthread_join(t, &ok) != 0 || !ok)
        return ncclSystemError;
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    (void)devlist;
    for (int i = 0; i < ndev; i++) {
        comms[i] = calloc(1, sizeof *comms[i]);
        if (!comms[i] || !(comms[i]->mem = fake_device_take(FAKE_COMM_BYTES))) return ncclSystemError;
    }
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (comm->on_caller) drv_free(comm->on_caller);
    if (comm->on_proxy) drv_free(comm->on_proxy);
    if (comm->mem) fake_device_give(comm->mem);
    free(comm);
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    *ptr = fake_device_take(size);
    return *ptr ? ncclSuccess : ncclUnhandledCudaError;
}

FAKE_EXPORT ncclResult_t ncclMemFree(void *ptr)
{
    fake_device_give(ptr);
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                       ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                       cudaStream_t stream)
{
    (void)sendbuff;
    (void)recvbuff;
    (void)count;
    (void)datatype;
    (void)op;
    (void)comm;
    (void)stream;
    return ncclSuccess;
}

/* The other collectives do nothing either; ranksnap counts their calls for the steps. */
FAKE_EXPORT ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream)
{
    (void)sendbuff, (void)recvbuff, (void)recvcount, (void)datatype, (void)op, (void)comm, (void)stream;
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                       ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    (void)sendbuff, (void)recvbuff, (void)sendcount, (void)datatype, (void)comm, (void)stream;
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                       ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    (void)sendbuff, (void)recvbuff, (void)count, (void)datatype, (void)root, (void)comm, (void)stream;
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    (void)sendbuff, (void)recvbuff, (void)count, (void)datatype, (void)op, (void)root, (void)comm,
        (void)stream;
    return ncclSuccess;
}

FAKE_EXPORT const char *ncclGetErrorString(ncclResult_t result)
{
    return result == ncclSuccess ? "no error" : "error";
}
