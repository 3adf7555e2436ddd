/*
 * fake_nccl.c — a stand-in for libnccl.so.2 on machines without a GPU (with fake_cudart.c), so
 * that ranksnap's NCCL interposers (rank/intercept/nccl.c) run end to end in CI (label unit).
 *
 * A communicator takes 48 MiB of the fake device when created and gives them back when
 * destroyed; ncclMemAlloc takes what it is asked. Like the real NCCL, it takes device memory
 * through its own path (fake_device_take), never through the interposed cudaMalloc, so that
 * ranksnap can only measure it.
 */
#include <stdlib.h>

#include <nccl.h>

#define FAKE_EXPORT __attribute__((visibility("default")))
#define FAKE_COMM_BYTES ((size_t)48 << 20)

void *fake_device_take(size_t n);
void fake_device_give(void *p);

struct ncclComm {
    void *mem;
};

FAKE_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    (void)devlist;
    for (int i = 0; i < ndev; i++) {
        comms[i] = malloc(sizeof *comms[i]);
        if (!comms[i] || !(comms[i]->mem = fake_device_take(FAKE_COMM_BYTES))) return ncclSystemError;
    }
    return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    fake_device_give(comm->mem);
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

FAKE_EXPORT const char *ncclGetErrorString(ncclResult_t result)
{
    return result == ncclSuccess ? "no error" : "error";
}
