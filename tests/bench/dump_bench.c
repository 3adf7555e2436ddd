/*
 * dump_bench.c — how long writing a snapshot takes: the OOM path and the fatal-signal path both
 * do it while the program waits (or while mpirun counts down to SIGKILL).
 *
 * Fills the ring with N events (default 100,000: alloc/free pairs of varied sizes from 64
 * distinct call sites, 16-frame native stacks) and times ranksnap_dump (encode, symbolize the
 * distinct frames, write a temporary file, fsync, rename) --reps times; prints the median and the
 * file size. The anchor is the same dump of a ring of 1,000 events.
 *
 *   dump_bench [--events N] [--reps R] [--json]     (RANKSNAP_DIR: where the files go)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ranksnap.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void ok(ranksnap_status st, const char *what)
{
    if (st != RANKSNAP_OK) {
        fprintf(stderr, "dump_bench: %s: %s\n", what, ranksnap_last_error());
        exit(1);
    }
}

/* 64 call sites: the site is picked by a switch so that each has its own return address. */
__attribute__((noinline)) static void site(int k, size_t size)
{
    void *p = NULL;
    switch (k & 7) {
    case 0: ok(ranksnap_malloc(&p, size, NULL), "malloc"); break;
    case 1: ok(ranksnap_malloc(&p, size + 512, NULL), "malloc"); break;
    case 2: ok(ranksnap_malloc(&p, size + 1024, NULL), "malloc"); break;
    case 3: ok(ranksnap_malloc(&p, size + 2048, NULL), "malloc"); break;
    case 4: ok(ranksnap_malloc(&p, size + 4096, NULL), "malloc"); break;
    case 5: ok(ranksnap_malloc(&p, size + 8192, NULL), "malloc"); break;
    case 6: ok(ranksnap_malloc(&p, size + 16384, NULL), "malloc"); break;
    default: ok(ranksnap_malloc(&p, size + 32768, NULL), "malloc"); break;
    }
    ok(ranksnap_free(p), "free");
}

__attribute__((noinline)) static void deep(int depth, int k, size_t size)
{
    if (depth > 0) {
        deep(depth - 1, k, size);
        __asm__ volatile("" ::: "memory");
    } else {
        site(k, size);
    }
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double dump_ms(long events, int reps, long *bytes)
{
    char max[32];
    snprintf(max, sizeof max, "%ld", events);
    setenv("RANKSNAP_MAX_ENTRIES", max, 1);
    setenv("RANKSNAP_STACKS", "native", 1);
    setenv("RANKSNAP_WRITE", "none", 1);
    setenv("RANKSNAP_REPORT", "0", 1);
    ok(ranksnap_init(NULL), "init");
    /* each pair is alloc + free_requested + free_completed (+ segment events at the start) */
    for (long i = 0; i < events / 3 + 64; i++) deep(8 + (int)(i % 8), (int)(i % 64), 4096 + (size_t)(i % 97) * 512);
    const char *dir = getenv("RANKSNAP_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/dump_bench.rsnap", dir && *dir ? dir : ".");
    double v[64];
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        ok(ranksnap_dump(path), "dump");
        v[r] = now_ms() - t0;
    }
    struct stat sb;
    *bytes = stat(path, &sb) == 0 ? (long)sb.st_size : -1;
    ranksnap_stats s;
    ok(ranksnap_get_stats(&s), "stats");
    ranksnap_finalize();
    qsort(v, (size_t)reps, sizeof v[0], cmp);
    return v[reps / 2];
}

int main(int argc, char **argv)
{
    long events = 100000;
    int reps = 5, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--events") && i + 1 < argc) events = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = (int)strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--json")) json = 1;
        else {
            fprintf(stderr, "usage: dump_bench [--events N] [--reps R] [--json]\n");
            return 2;
        }
    }
    if (events < 1000 || reps < 1 || reps > 64) {
        fprintf(stderr, "dump_bench: --events >= 1000, --reps 1..64\n");
        return 2;
    }
    long b_small = 0, b_big = 0;
    double small = dump_ms(1000, reps, &b_small);
    double big = dump_ms(events, reps, &b_big);
    const char *ring = getenv("RANKSNAP_RING");
    if (json) {
        printf("[{\"events\": 1000, \"ms\": %.2f, \"bytes\": %ld, \"ring\": \"%s\"},\n"
               " {\"events\": %ld, \"ms\": %.2f, \"bytes\": %ld, \"ring\": \"%s\"}]\n",
               small, b_small, ring ? ring : "mmap", events, big, b_big, ring ? ring : "mmap");
    } else {
        printf("%10s %10s %12s %12s\n", "events", "dump ms", "bytes", "bytes/event");
        printf("%10d %10.2f %12ld %12.1f\n", 1000, small, b_small, (double)b_small / 1000);
        printf("%10ld %10.2f %12ld %12.1f\n", events, big, b_big, (double)b_big / (double)events);
    }
    return 0;
}
