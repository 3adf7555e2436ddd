/*
 * step_detect_bench.c — what finding steps from the collectives (rank/runtime/step_detect.c) adds
 * to a collective call, beside the bare call, measured in one run.
 *
 *   step_detect_bench [N]      (a singleton MPI process, or mpirun -np 1)
 *
 * Links ranksnap ahead of libmpi, as an application does, so MPI_Init starts it and MPI_Allreduce
 * goes through its wrapper. Times N calls of a one-float all-reduce on MPI_COMM_SELF: PMPI_Allreduce
 * (the bare call, the anchor); MPI_Allreduce with RANKSNAP_STEP_ON=none (the wrapper, no
 * detection); MPI_Allreduce with detection (every call a step once found: nccl-tests' loop, the
 * dearest case, a step boundary each call); and the detector alone, fed a period of 3 and one of
 * 4096 calls (looking, then following the pattern and still looking beside it) and a sequence
 * with none (looking at every call).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ranksnap.h"
#include "step_detect.h"

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static double time_calls(long n, int bare)
{
    float x = 1.0f, y;
    for (long i = 0; i < 1000; i++) /* warm-up: the period is found here */
        bare ? PMPI_Allreduce(&x, &y, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_SELF)
             : MPI_Allreduce(&x, &y, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_SELF);
    double t0 = now_ns();
    for (long i = 0; i < n; i++)
        bare ? PMPI_Allreduce(&x, &y, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_SELF)
             : MPI_Allreduce(&x, &y, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_SELF);
    return (now_ns() - t0) / (double)n;
}

/* the detector alone, fed n calls: a period of `period` calls each of its own size (0: a
 * sequence with no period, where it looks at every call) */
static double time_detector(long n, int period)
{
    static rs_step_detect d;
    d = (rs_step_detect){0};
    uint64_t x = 88172645463325252ull;
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        uint64_t tok;
        if (period) {
            tok = rs_step_detect_token("ncclAllReduce", (uint64_t)(i % period), 7, 0);
        } else {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            tok = x;
        }
        __asm__ volatile("" ::"r"(rs_step_detect_feed(&d, tok, "ncclAllReduce")));
    }
    double ns = (now_ns() - t0) / (double)n;
    if (period && d.period != period) fprintf(stderr, "step_detect_bench: period %d found as %d\n", period, d.period);
    return ns;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    /* no range is ever recorded: what is timed is the step boundaries, not a dump */
    setenv("RANKSNAP_STEPS", "1000000000:1000000001", 1);
    setenv("RANKSNAP_REPORT", "0", 1);
    setenv("RANKSNAP_BACKEND", "sim", 1);
    const char *mode = getenv("RS_BENCH_MODE");
    if (!mode) {
        /* the parent: one child per mode, so each starts ranksnap with its own options */
        char cmd[4096];
        double ns[2] = {0, 0};
        const char *modes[2] = {"off", "on"};
        for (int m = 0; m < 2; m++) {
            snprintf(cmd, sizeof cmd, "RS_BENCH_MODE=%s %s %ld", modes[m], argv[0], n);
            FILE *p = popen(cmd, "r");
            if (!p || fscanf(p, "%lf %lf", &ns[0], &ns[1]) != 2) return fprintf(stderr, "step_detect_bench: child\n"), 1;
            pclose(p);
            if (m == 0) printf("%-58s %8.1f ns\n", "PMPI_Allreduce, 1 float, MPI_COMM_SELF (anchor)", ns[0]);
            printf("%-58s %8.1f ns  (+%.1f)\n",
                   m ? "MPI_Allreduce, steps detected (a step every call)" : "MPI_Allreduce, RANKSNAP_STEP_ON=none",
                   ns[1], ns[1] - ns[0]);
        }
        printf("%-58s %8.1f ns\n", "detector alone, period of 3 found", time_detector(n, 3));
        printf("%-58s %8.1f ns\n", "detector alone, period of 4096 found", time_detector(n, 4096));
        printf("%-58s %8.1f ns\n", "detector alone, looking (no period)", time_detector(n, 0));
        /* the first RS_SD_QUICK_CALLS calls also guess short steps (O(RS_SD_QUICK_MAX) a call) */
        printf("%-58s %8.1f ns\n", "detector alone, looking and guessing (first 4096 calls)",
               time_detector(RS_SD_QUICK_CALLS, 0));
        return 0;
    }
    setenv("RANKSNAP_STEP_ON", mode[1] == 'f' ? "none" : "", 1);
    MPI_Init(&argc, &argv);
    double bare = time_calls(n, 1), wrapped = time_calls(n, 0);
    printf("%.2f %.2f\n", bare, wrapped);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
