/*
 * test_shared_device.c — a rank of an mpirun job whose ranks all run on one GPU, preloaded, on the
 * fake CUDA runtime's shared device and the fake NVML (label mpi; tests/cli/shared_device_job.sh
 * runs it and checks what the ranks wrote).
 *
 * Rank r takes a pool of (r + 1) * 256 MiB on device 0 — from ranksnap's caching allocator
 * through the preloaded cudaMalloc, or with --torch from the "framework" (RANKSNAP_RECORDER=torch:
 * cudaMalloc passes through, and reserved() says what the pool holds) — and 32 MiB behind every
 * allocator (fake_device_take, as NCCL takes its buffers). With both ranks holding all of it, each
 * writes its snapshot to DIR/held-rank-R.rsnap (--torch: .json, the metadata the framework's dump
 * is handed). So each rank's own device memory is its context (64 MiB), the 32 MiB and its pool:
 * 96 MiB outside its allocator, whatever the other rank holds. Then everything is given back and
 * MPI_Finalize gathers the report.
 *
 * usage: test_shared_device [--torch] DIR
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "ranksnap.h"

#define MiB ((size_t)1 << 20)

static uint64_t pool_bytes;

/* ---- --torch: a framework that keeps its own allocator (ranksnap.h, "an external recorder") ---- */

static int fw_start(void *ctx, uint64_t max_entries, int stacks_all)
{
    (void)ctx, (void)max_entries, (void)stacks_all;
    return 0;
}

static int fw_stop(void *ctx)
{
    (void)ctx;
    return 0;
}

/* The "snapshot" is the metadata ranksnap hands over: what the test reads. */
static int fw_dump(void *ctx, const char *meta, void *arg, void (*put)(void *, const void *, size_t))
{
    (void)ctx;
    put(arg, meta, strlen(meta));
    return 0;
}

static uint64_t fw_reserved(void *ctx)
{
    (void)ctx;
    return pool_bytes;
}

int main(int argc, char **argv)
{
    int torch = argc > 2 && !strcmp(argv[1], "--torch");
    if (argc != 2 + torch) {
        fprintf(stderr, "usage: test_shared_device [--torch] DIR\n");
        return 2;
    }
    const char *dir = argv[1 + torch];
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ranksnap_recorder_ops ops = {.start = fw_start, .stop = fw_stop, .dump = fw_dump,
                                 .reserved = fw_reserved};
    if (torch) {
        if (ranksnap_set_recorder(&ops) != RANKSNAP_OK) {
            fprintf(stderr, "rank %d: %s\n", rank, ranksnap_last_error());
            return 1;
        }
    }
    void *(*take)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "fake_device_take");
    void (*give)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "fake_device_give");
    if (!take || !give) {
        fprintf(stderr, "rank %d: the fake CUDA runtime is not loaded\n", rank);
        return 1;
    }
    void *pool = NULL, *behind = NULL;
    int ok = cudaSetDevice(0) == cudaSuccess &&
             cudaMalloc(&pool, (size_t)(rank + 1) * 256 * MiB) == cudaSuccess &&
             (behind = take(32 * MiB)) != NULL;
    pool_bytes = pool ? (uint64_t)(rank + 1) * 256 * MiB : 0;
    /* both ranks hold everything while each writes its snapshot */
    MPI_Barrier(MPI_COMM_WORLD);
    char path[4096];
    snprintf(path, sizeof path, "%s/held-rank-%d.%s", dir, rank, torch ? "json" : "rsnap");
    if (ranksnap_dump(path) != RANKSNAP_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, ranksnap_last_error());
        ok = 0;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    give(behind);
    ok &= cudaFree(pool) == cudaSuccess;
    pool_bytes = 0;
    MPI_Finalize();
    printf("rank %d: %s\n", rank, ok ? "all calls succeeded" : "FAILED");
    return ok ? 0 : 1;
}
