/*
 * test_held_job.c — a program that allocates everything before its loop, as most C/C++ trainers
 * and solvers do, run under mpirun with ranksnap by tests/cli/held_job.sh (label mpi): what each
 * rank holds when its recorded range opens must be in the range, by site.
 *
 * Its first argument says how it allocates, up front, after MPI_Init: `driver` through the CUDA
 * driver (cuMemAlloc_v2, on tests/gpu's fake driver, preloaded libranksnap.so in front of it);
 * `alloc` and `oom` through ranksnap's own allocator (ranksnap_malloc, sim backend). Every rank
 * takes its parameters (32 MiB) and its activations (64 MiB; rank 1 twice that, at a line of its
 * own), frees nothing, then runs 16 steps of one MPI_Allreduce each; in `alloc` and `oom` it
 * numbers them itself (ranksnap_step). In `driver` and `alloc` rank 2 also frees, in step 7, a
 * block it allocated before the loop and allocates again at once (the same address on the
 * allocator). In `oom` rank 3 asks, in step 7, for more than RANKSNAP_MEMORY_LIMIT leaves it.
 * `devices` is `driver` on two devices: the parameters on device 0, the activations (and rank 1's
 * second half) on device 1, as a rank that drives two GPUs allocates.
 * Prints "rank R: held ok" (or "rank R: oom" for the refused request).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "ranksnap.h"

#define MiB ((size_t)1 << 20)

static int by_driver;

/* the fake driver's current device for this thread (cuCtxSetCurrent's stand-in) */
void fake_driver_set_device(int d);

/* A macro, not a function: the allocating call is on the line that uses it, as in a program
 * that calls cuMemAlloc or ranksnap_malloc itself. */
#define TAKE(bytes) (by_driver ? take_driver(bytes) : take_alloc(bytes))
#define take_driver(bytes) (cuMemAlloc_v2(&dp, (bytes)) == CUDA_SUCCESS ? (void *)(uintptr_t)dp : NULL)
#define take_alloc(bytes) (ranksnap_malloc(&hp, (bytes), NULL) == RANKSNAP_OK ? hp : NULL)

static void give(void *p)
{
    if (by_driver)
        cuMemFree_v2((CUdeviceptr)(uintptr_t)p);
    else
        ranksnap_free(p);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "alloc";
    int devices = !strcmp(mode, "devices");
    by_driver = devices || !strcmp(mode, "driver");
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (by_driver && cuInit(0) != CUDA_SUCCESS) return printf("rank %d: FAILED cuInit\n", rank), 1;
    CUdeviceptr dp = 0;
    void *hp = NULL;
    void *params = TAKE(32 * MiB);
    if (devices) fake_driver_set_device(1);
    void *acts = TAKE(64 * MiB);
    void *more = rank == 1 ? TAKE(64 * MiB) : NULL; /* rank 1's second half of activations */
    void *scratch = TAKE(8 * MiB);
    int ok = params && acts && scratch && (rank != 1 || more);
    for (int step = 0; step < 16; step++) {
        if (!by_driver) ranksnap_step(step);
        if (step == 7 && rank == 2 && (!strcmp(mode, "alloc") || !strcmp(mode, "driver"))) {
            /* made before the range, freed in it, taken again at once */
            give(scratch);
            scratch = TAKE(8 * MiB);
            ok = ok && scratch;
        }
        if (step == 7 && rank == 3 && !strcmp(mode, "oom")) {
            void *big = TAKE(512 * MiB);
            if (!big) printf("rank %d: oom\n", rank);
            ok = ok && !big;
        }
        double x = 1.0, y = 0.0;
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    printf("rank %d: %s\n", rank, ok ? "held ok" : "FAILED");
    MPI_Finalize();
    return ok ? 0 : 1;
}
