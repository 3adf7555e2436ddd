/*
 * exit_mid_range.c — a rank of an mpirun job that never calls MPI (ranksnap joins the job at
 * ranksnap_init and gathers the open range at exit) and leaves in the middle of the range by
 * exit(): the exit path must tell a failing status from a good one (exit_mid_range.sh).
 *
 *   exit_mid_range STEPS RANK STEP CODE
 *
 * Each rank allocates on the sim backend and marks STEPS steps. At STEP, rank RANK (or every
 * rank, for -1) calls exit(CODE); the others wait there for it, as ranks blocked in a collective
 * with a peer that is gone do, until mpirun ends them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ranksnap.h"

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: exit_mid_range STEPS RANK STEP CODE\n");
        return 2;
    }
    int steps = atoi(argv[1]), who = atoi(argv[2]), at = atoi(argv[3]), code = atoi(argv[4]);
    const char *r = getenv("OMPI_COMM_WORLD_RANK"); /* Open MPI's mpirun, else MPICH's Hydra */
    if (!r) r = getenv("PMI_RANK");
    int rank = r ? atoi(r) : 0;
    ranksnap_status st = ranksnap_init(NULL);
    if (st != RANKSNAP_OK) {
        fprintf(stderr, "rank %d: ranksnap_init: %s\n", rank, ranksnap_last_error());
        return 3;
    }
    for (int step = 0; step < steps; step++) {
        ranksnap_step(step);
        void *p = NULL;
        if (ranksnap_malloc(&p, (size_t)(rank + 1) << 20, NULL) != RANKSNAP_OK) return 4;
        if (step == at) {
            printf("rank %d at step %d\n", rank, step);
            fflush(stdout);
            if (who < 0 || who == rank) exit(code);
            for (;;) pause();
        }
        ranksnap_free(p);
    }
    return 0;
}
