/*
 * test_intercept_mpi.c — a preloaded rank of an mpirun job, on the fake CUDA runtime (label mpi).
 *
 * Built twice. With RS_WITH_MPI it is an MPI program that allocates before MPI_Init (ranksnap must
 * leave MPI to the program's MPI_Init, pass that early allocation through, start at MPI_Init and
 * gather at MPI_Finalize) and frees after MPI_Finalize (the early pointer by the real cudaFree, the
 * other by ranksnap's retired allocator: both must succeed). Without it, it never calls MPI: its
 * first cudaMalloc makes ranksnap join the job and the report is gathered at exit. Rank r
 * allocates (r + 1) * 16 MiB, so the report must flag rank 1. Prints one line per rank that the
 * ctest command checks, with the report ranksnap wrote.
 */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#if defined(RS_WITH_MPI)
#include <mpi.h>
#endif

#define MiB ((size_t)1 << 20)

int main(int argc, char **argv)
{
    void *early = NULL, *p = NULL, *q = NULL;
#if defined(RS_WITH_MPI)
    cudaError_t e0 = cudaMalloc(&early, MiB);
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#else
    (void)argc;
    (void)argv;
    cudaError_t e0 = cudaSuccess;
    const char *r = getenv("OMPI_COMM_WORLD_RANK"); /* Open MPI's mpirun, else MPICH's Hydra */
    if (!r) r = getenv("PMI_RANK");
    int rank = r ? atoi(r) : 0;
#endif
    cudaError_t e1 = cudaMalloc(&p, (size_t)(rank + 1) * 16 * MiB);
    cudaError_t e2 = cudaMalloc(&q, MiB);
    cudaError_t e3 = cudaFree(q);
#if defined(RS_WITH_MPI)
    MPI_Finalize();
#endif
    cudaError_t e4 = cudaFree(early), e5 = cudaFree(p);
    int ok = e0 == cudaSuccess && e1 == cudaSuccess && e2 == cudaSuccess && e3 == cudaSuccess &&
             e4 == cudaSuccess && e5 == cudaSuccess;
    printf("rank %d: %s (%d %d %d %d %d %d)\n", rank, ok ? "all calls succeeded" : "FAILED", e0, e1,
           e2, e3, e4, e5);
    return ok ? 0 : 1;
}
