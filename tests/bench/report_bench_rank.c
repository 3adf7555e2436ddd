/*
 * report_bench_rank.c — one rank of report_bench's synthetic job: records M events through the
 * public API (sim backend) and leaves what a real rank leaves, a snapshot or a dead rank's ring.
 *
 * The workload is gather_bench's (bench_sites.h): a window of live blocks replaced one at a time
 * from four call sites (sizes log-uniform from 512 B to 8 MiB, one seed for every rank, so ranks
 * that do not diverge have the same peaks), ten steps; rank --diverge-rank holds 16 MiB more in
 * every step.
 * Each rank is a process of its own, as in a job, so that the files come from the recorder, the
 * native stacks and the snapshot encoder that write them in production.
 *
 *   report_bench_rank --rank R --size N [--events M] [--steps S] [--diverge-rank D] [--ring]
 *
 * Environment: RANKSNAP_DIR (where the file goes); the program sets RANKSNAP_BACKEND=sim,
 * RANKSNAP_MPI=0, RANKSNAP_REPORT=0, RANKSNAP_RING=mmap, RANKSNAP_MAX_ENTRIES above M, the
 * launcher's rank and size (OMPI_COMM_WORLD_RANK/SIZE) and RANKSNAP_JOB. Without --ring, finalize
 * writes rank-RRRRR.rsnap; with --ring the process ends by SIGKILL after the last event, leaving
 * rank-RRRRR.ring as the kernel's OOM killer would.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_sites.h"
#include "ranksnap.h"

#define WINDOW 48

static void ok(ranksnap_status st, const char *what)
{
    if (st != RANKSNAP_OK) {
        fprintf(stderr, "report_bench_rank: %s: %s\n", what, ranksnap_last_error());
        exit(1);
    }
}

static void bench_ok(ranksnap_status st, const char *what)
{
    ok(st, what);
}

static uint64_t events_now(void)
{
    ranksnap_stats s;
    ok(ranksnap_get_stats(&s), "ranksnap_get_stats");
    return s.events_recorded;
}

static int arg_u64(const char *s, uint64_t *out)
{
    char *end;
    if (!s || !*s || *s == '-') return -1;
    *out = strtoull(s, &end, 10);
    return *end ? -1 : 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: report_bench_rank --rank R --size N [--events M] [--steps S] "
                    "[--diverge-rank D] [--ring]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    uint64_t rank = UINT64_MAX, size = 0, events = 100000, steps = 10, diverge = 1;
    int ring = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t *dst = !strcmp(a, "--rank")           ? &rank
                        : !strcmp(a, "--size")         ? &size
                        : !strcmp(a, "--events")       ? &events
                        : !strcmp(a, "--steps")        ? &steps
                        : !strcmp(a, "--diverge-rank") ? &diverge
                                                       : NULL;
        if (!strcmp(a, "--ring")) {
            ring = 1;
        } else if (!dst || arg_u64(v, dst) != 0) {
            usage();
        } else {
            i++;
        }
    }
    if (rank == UINT64_MAX || size == 0 || rank >= size || steps == 0 || events < 100) usage();

    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, rank);
    setenv("OMPI_COMM_WORLD_RANK", buf, 1);
    snprintf(buf, sizeof buf, "%" PRIu64, size);
    setenv("OMPI_COMM_WORLD_SIZE", buf, 1);
    /* the ring must hold every event: a dropped one would make the file smaller than M */
    snprintf(buf, sizeof buf, "%" PRIu64, events + events / 8 + 1024);
    setenv("RANKSNAP_MAX_ENTRIES", buf, 1);
    setenv("RANKSNAP_BACKEND", "sim", 1);
    setenv("RANKSNAP_MPI", "0", 1);
    setenv("RANKSNAP_REPORT", "0", 1);
    setenv("RANKSNAP_RING", "mmap", 1);
    setenv("RANKSNAP_JOB", "report-bench", 1);
    setenv("RANKSNAP_STEPS", "", 1);
    ok(ranksnap_init(NULL), "ranksnap_init");

    void *win[WINDOW] = {0};
    int slot = 0;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (uint64_t k = 0; k < steps; k++) {
        ok(ranksnap_step((int64_t)k), "ranksnap_step");
        void *extra = rank == diverge ? site_divergent_buffer((size_t)16 << 20) : NULL;
        uint64_t target = events * (k + 1) / steps;
        while (events_now() < target) {
            int i = slot;
            slot = (slot + 1) % WINDOW;
            ok(ranksnap_free(win[i]), "ranksnap_free");
            unsigned site = (unsigned)bench_rng_next(&seed) % BENCH_N_SITES;
            win[i] = bench_sites[site](bench_next_size(&seed));
        }
        ok(ranksnap_free(extra), "ranksnap_free");
    }
    if (ring) {
        fflush(NULL);
        raise(SIGKILL);
    }
    ok(ranksnap_finalize(), "ranksnap_finalize");
    return 0;
}
