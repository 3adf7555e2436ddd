/*
 * test_gpu_nccl.c — NCCL's device memory accounted as outside memory (label gpu).
 *
 * Run with LD_PRELOAD=libranksnap.so, two snapshot paths as arguments. A single-rank
 * communicator (ncclCommInitAll over one device) is created, used once (ncclAllReduce), then for
 * six iterations of a sharded job's reduce-scatter and all-gather (whose steps ranksnap finds),
 * and given an ncclMemAlloc buffer of 8 MiB; the first snapshot is dumped then, the second after
 * ncclMemFree and ncclCommDestroy. The ctest command (tests/gpu/CMakeLists.txt) reads both with
 * `ranksnap summary` / `ranksnap report --json`: the first must say "NCCL holds" a non-zero
 * amount, "ncclMemAlloc holds 8.00 MiB" and the steps found, the second neither. The program
 * checks here what it can see itself: every NCCL call succeeds, and ranksnap started.
 *
 * Without a usable device it prints why and exits 77 (ctest: skipped).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "check.h"
#include "cuda_device.h"
#include "ranksnap.h"

#define MiB ((size_t)1 << 20)

int main(int argc, char **argv)
{
    if (skip_without_a_cuda_device()) return 77;
    if (argc != 3) {
        fprintf(stderr, "usage: %s WITH_COMM.rsnap AFTER_DESTROY.rsnap\n", argv[0]);
        return 2;
    }
    ranksnap_status (*dump)(const char *);
    ranksnap_status (*get_stats)(ranksnap_stats *);
    *(void **)&dump = dlsym(RTLD_DEFAULT, "ranksnap_dump");
    *(void **)&get_stats = dlsym(RTLD_DEFAULT, "ranksnap_get_stats");
    if (!dump || !get_stats) {
        printf("FAIL: libranksnap.so is not preloaded\n");
        return 1;
    }
    CHECK(cudaSetDevice(0) == cudaSuccess);
    float *buf = NULL;
    const size_t count = 1 << 20;
    CHECK(cudaMalloc((void **)&buf, count * sizeof *buf) == cudaSuccess); /* starts ranksnap */
    CHECK(cudaMemset(buf, 0, count * sizeof *buf) == cudaSuccess);
    ranksnap_stats s;
    CHECK(get_stats(&s) == RANKSNAP_OK);

    ncclComm_t comm = NULL;
    int dev = 0;
    ncclResult_t r = ncclCommInitAll(&comm, 1, &dev);
    printf("ncclCommInitAll: %s\n", ncclGetErrorString(r));
    CHECK(r == ncclSuccess);
    r = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, 0);
    CHECK(r == ncclSuccess);
    for (int i = 0; i < 70; i++) { /* a step of two calls is found at the 64th (docs/GPU.md) */
        CHECK(ncclReduceScatter(buf, buf, count, ncclFloat, ncclSum, comm, 0) == ncclSuccess);
        CHECK(ncclAllGather(buf, buf, count / 2, ncclFloat, comm, 0) == ncclSuccess);
    }
    CHECK(cudaStreamSynchronize(0) == cudaSuccess);
    void *nbuf = NULL;
    r = ncclMemAlloc(&nbuf, 8 * MiB);
    printf("ncclMemAlloc: %s\n", ncclGetErrorString(r));
    CHECK(r == ncclSuccess);
    CHECK(dump(argv[1]) == RANKSNAP_OK);

    CHECK(ncclMemFree(nbuf) == ncclSuccess);
    CHECK(ncclCommDestroy(comm) == ncclSuccess);
    CHECK(dump(argv[2]) == RANKSNAP_OK);
    CHECK(cudaFree(buf) == cudaSuccess);
    return check_summary();
}
