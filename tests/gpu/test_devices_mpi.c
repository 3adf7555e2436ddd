/*
 * test_devices_mpi.c — ranks of an mpirun job that choose their device after MPI_Init, as every
 * multi-GPU MPI program does, on the fake CUDA runtime's two devices (label mpi).
 *
 * Rank r calls cudaSetDevice(r % 2) after MPI_Init and allocates (r + 1) * 16 MiB there, so each
 * device has ranks of its own and rank 3 is the largest. Rank 3 then switches to device 0 mid-run
 * and allocates 8 MiB there too: one rank, two devices. Rank 2, on device 0, asks for 4 MiB on
 * device 1 as PyTorch's pluggable allocator names it (ranksnap_torch_malloc): the backend must
 * take it from device 1 and leave the rank on device 0. Built twice: preloaded (the shared
 * runtime's route) and linked with ranksnap::wrap (the link-time route). Prints one line per rank
 * with every call's cudaError_t, and one with the MiB each device holds for the rank while its
 * memory is live, as the fake runtime counts them (where the memory was taken from, whatever
 * ranksnap recorded); tests/cli/devices_mpi_job.sh checks them and the snapshots.
 */
#include <dlfcn.h>
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
    void *named = NULL;
    int after = -1;
    if (rank == 2) {
        void *(*torch_malloc)(size_t, int, void *);
        *(void **)&torch_malloc = dlsym(RTLD_DEFAULT, "ranksnap_torch_malloc");
        named = torch_malloc ? torch_malloc(4 * MiB, 1, NULL) : NULL;
        cudaGetDevice(&after);
        printf("rank 2 named device 1: %s, current device after it %d\n", named ? "ok" : "NULL",
               after);
    }
    size_t (*used)(int);
    *(void **)&used = dlsym(RTLD_DEFAULT, "fake_device_used");
    if (used)
        printf("rank %d holds: %zu %zu\n", rank, used(0) / MiB, used(1) / MiB);
    else
        printf("rank %d holds: not on the fake runtime\n", rank);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    cudaError_t e6 = cudaFree(p), e7 = other ? cudaFree(other) : cudaSuccess;
    if (named) cudaFree(named);
    printf("rank %d: %d %d %d %d %d %d %d %d\n", rank, e0, e1, e2, e3, e4, e5, e6, e7);
    return 0;
}
