/*
 * test_devices_mpi.c — ranks of an mpirun job that choose their device after MPI_Init, as every
 * multi-GPU MPI program does, on the fake CUDA runtime's two devices (label mpi).
 *
 * Rank r calls cudaSetDevice(r % 2) after MPI_Init and allocates (r + 1) * 16 MiB there, so each
 * device has ranks of its own and rank 3 is the largest. Rank 3 then switches to device 0 mid-run
 * and allocates 8 MiB there too: one rank, two devices. Built twice: preloaded (the shared
 * runtime's route) and linked with ranksnap::wrap (the link-time route). Prints one line per rank
 * with every call's cudaError_t; tests/cli/devices_mpi_job.sh checks it and the snapshots.
 */
#include <stdio.h>

#include <cuda_runtime_api.h>
#include <mpi.h>

#define MiB ((size_t)1 << 20)

int main(int argc, char **argv)
{
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    void *p = NULL, *q = NULL, *other = NULL;
    cudaError_t e0 = cudaSetDevice(rank % 2);
    cudaError_t e1 = cudaMalloc(&p, (size_t)(rank + 1) * 16 * MiB);
    cudaError_t e2 = cudaMalloc(&q, MiB);
    cudaError_t e3 = cudaFree(q), e4 = cudaSuccess, e5 = cudaSuccess;
    if (rank == 3) {
        e4 = cudaSetDevice(0);
        e5 = cudaMalloc(&other, 8 * MiB);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    cudaError_t e6 = cudaFree(p), e7 = other ? cudaFree(other) : cudaSuccess;
    printf("rank %d: %d %d %d %d %d %d %d %d\n", rank, e0, e1, e2, e3, e4, e5, e6, e7);
    return 0;
}
