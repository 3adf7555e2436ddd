/*
 * alloc_bench.c — nanoseconds per malloc+free pair on a warm cache.
 *
 * Sizes 512 B, 64 KiB, 4 MiB and 64 MiB; one block live at a time (`live` 1: malloc, free) or 64
 * (64 mallocs, then 64 frees). Modes, each measured in the same run as its anchors:
 *   glibc            malloc/free of host memory (the host anchor)
 *   off              ranksnap, recording off
 *   on               ranksnap, recording on, no stacks
 *   on_stacks        ranksnap, recording on, native stacks of 16 frames
 *   cudaMallocAsync  the CUDA runtime's stream-ordered pool (cuda builds, with a device)
 * The ranksnap modes use whatever RANKSNAP_BACKEND picks (sim on a machine without a GPU).
 * Each row is the median of --reps repetitions of --iters pairs. The 16-frame stacks are real:
 * the loop runs under 16 recursive calls, as an allocation deep in a framework would.
 *
 *   alloc_bench [--json] [--iters N] [--reps R] [--modes glibc,off,on,on_stacks,cudaMallocAsync]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ranksnap.h"

#if defined(RANKSNAP_BENCH_CUDA)
#include <cuda_runtime_api.h>
#endif

enum { B_GLIBC, B_OFF, B_ON, B_ON_STACKS, B_CUDA_ASYNC, B_COUNT };
static const char *const mode_names[B_COUNT] = {"glibc", "off", "on", "on_stacks", "cudaMallocAsync"};
static const size_t sizes[] = {512, 64 << 10, 4 << 20, 64 << 20};
static const int lives[] = {1, 64};
#define MAX_LIVE 64
#define STACK_FRAMES 16

typedef struct row {
    int mode;
    size_t size;
    int live;
    double ns;
} row;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "alloc_bench: %s: %s\n", what, detail);
    exit(1);
}

static void rs_ok(ranksnap_status st, const char *what)
{
    if (st != RANKSNAP_OK) {
        fprintf(stderr, "alloc_bench: %s: %s: %s\n", what, ranksnap_strerror(st), ranksnap_last_error());
        exit(1);
    }
}

/* One round: `live` mallocs then `live` frees. Returns the number of pairs. */
static int round_glibc(size_t size, int live)
{
    void *p[MAX_LIVE];
    for (int i = 0; i < live; i++)
        if (!(p[i] = malloc(size))) die("malloc", "out of memory");
    /* keep the compiler from pairing malloc and free away */
    __asm__ volatile("" : : "r"(p) : "memory");
    for (int i = 0; i < live; i++) free(p[i]);
    return live;
}

static int round_ranksnap(size_t size, int live)
{
    void *p[MAX_LIVE];
    for (int i = 0; i < live; i++) rs_ok(ranksnap_malloc(&p[i], size, NULL), "ranksnap_malloc");
    for (int i = 0; i < live; i++) rs_ok(ranksnap_free(p[i]), "ranksnap_free");
    return live;
}

#if defined(RANKSNAP_BENCH_CUDA)
static int round_cuda_async(size_t size, int live)
{
    void *p[MAX_LIVE];
    for (int i = 0; i < live; i++)
        if (cudaMallocAsync(&p[i], size, 0) != cudaSuccess) die("cudaMallocAsync", "failed");
    for (int i = 0; i < live; i++)
        if (cudaFreeAsync(p[i], 0) != cudaSuccess) die("cudaFreeAsync", "failed");
    return live;
}
#endif

typedef int (*round_fn)(size_t, int);

typedef struct run_args {
    round_fn fn;
    size_t size;
    int live;
    long iters;
    double ns;
} run_args;

static void timed(run_args *a)
{
    long rounds = a->iters / a->live;
    if (rounds < 1) rounds = 1;
    for (long i = 0; i < rounds / 10 + 1; i++) a->fn(a->size, a->live); /* warm the cache */
    double t0 = now_ns();
    long pairs = 0;
    for (long i = 0; i < rounds; i++) pairs += a->fn(a->size, a->live);
    a->ns = (now_ns() - t0) / (double)pairs;
}

/* Recurses to `depth` frames before timing, so that captured stacks have that many frames. */
__attribute__((noinline)) static void at_depth(int depth, run_args *a)
{
    if (depth > 1) {
        at_depth(depth - 1, a);
        __asm__ volatile("" ::: "memory"); /* not a tail call: keep the frame */
    } else {
        timed(a);
    }
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double measure(round_fn fn, size_t size, int live, long iters, int reps)
{
    double v[64];
    if (reps > 64) reps = 64;
    for (int r = 0; r < reps; r++) {
        run_args a = {fn, size, live, iters, 0};
        at_depth(STACK_FRAMES, &a);
        v[r] = a.ns;
    }
    qsort(v, (size_t)reps, sizeof v[0], cmp_double);
    return v[reps / 2];
}

static void start_ranksnap(int mode)
{
    setenv("RANKSNAP_RECORD", mode == B_OFF ? "0" : "1", 1);
    setenv("RANKSNAP_STACKS", mode == B_ON_STACKS ? "native" : "none", 1);
    setenv("RANKSNAP_STACK_DEPTH", "16", 1);
    /* no snapshot, no report at finalize: the bench measures the allocation path only */
    setenv("RANKSNAP_WRITE", "none", 1);
    setenv("RANKSNAP_REPORT", "0", 1);
    rs_ok(ranksnap_init(NULL), "ranksnap_init");
}

int main(int argc, char **argv)
{
    int json = 0, reps = 5;
    long iters = 200000;
    int want[B_COUNT] = {1, 1, 1, 1, 1};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            iters = strtol(argv[++i], NULL, 10);
            if (iters < 64) die("--iters", "expected an integer >= 64");
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = (int)strtol(argv[++i], NULL, 10);
            if (reps < 1 || reps > 64) die("--reps", "expected an integer in 1..64");
        } else if (!strcmp(argv[i], "--modes") && i + 1 < argc) {
            memset(want, 0, sizeof want);
            char *list = strdup(argv[++i]), *save = NULL;
            if (!list) die("--modes", "out of memory");
            for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                int found = 0;
                for (int m = 0; m < B_COUNT; m++)
                    if (!strcmp(t, mode_names[m])) want[m] = found = 1;
                if (!found) die("--modes", "expected a comma list of glibc,off,on,on_stacks,cudaMallocAsync");
            }
            free(list);
        } else {
            fprintf(stderr, "usage: alloc_bench [--json] [--iters N] [--reps R] [--modes LIST]\n");
            return 2;
        }
    }
#if !defined(RANKSNAP_BENCH_CUDA)
    want[B_CUDA_ASYNC] = 0;
#else
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) want[B_CUDA_ASYNC] = 0;
    if (want[B_CUDA_ASYNC]) {
        /* Keep freed memory in the pool, as a caching allocator does: a warm cache. */
        cudaMemPool_t pool;
        uint64_t threshold = UINT64_MAX;
        if (cudaDeviceGetDefaultMemPool(&pool, 0) != cudaSuccess ||
            cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold) != cudaSuccess)
            die("cudaMemPool", "cannot set the release threshold");
    }
#endif
    row rows[B_COUNT * 8];
    int n = 0;
    for (int m = 0; m < B_COUNT; m++) {
        if (!want[m]) continue;
        round_fn fn = round_ranksnap;
        if (m == B_GLIBC) fn = round_glibc;
#if defined(RANKSNAP_BENCH_CUDA)
        if (m == B_CUDA_ASYNC) fn = round_cuda_async;
#endif
        int is_rs = m == B_OFF || m == B_ON || m == B_ON_STACKS;
        if (is_rs) start_ranksnap(m);
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (size_t l = 0; l < sizeof lives / sizeof lives[0]; l++) {
                /* 64 live 64 MiB blocks is 4 GiB: fewer iterations keep glibc's mmap path sane */
                long it = sizes[s] >= (64u << 20) ? iters / 20 : iters;
                rows[n].mode = m;
                rows[n].size = sizes[s];
                rows[n].live = lives[l];
                rows[n].ns = measure(fn, sizes[s], lives[l], it, reps);
                n++;
            }
        if (is_rs) {
            ranksnap_stats st;
            rs_ok(ranksnap_get_stats(&st), "ranksnap_get_stats");
            if (!json)
                fprintf(stderr, "# %s: %" PRIu64 " events recorded, %" PRIu64 " dropped, %" PRIu64
                                " segment allocs\n", mode_names[m], st.events_recorded,
                        st.events_dropped, st.num_segment_allocs);
            ranksnap_finalize();
        }
    }
#if defined(RANKSNAP_BENCH_CUDA)
    if (want[B_CUDA_ASYNC]) cudaDeviceSynchronize();
#endif
    if (json) {
        printf("[\n");
        for (int i = 0; i < n; i++)
            printf("  {\"mode\": \"%s\", \"size\": %zu, \"live\": %d, \"ns_per_pair\": %.1f}%s\n",
                   mode_names[rows[i].mode], rows[i].size, rows[i].live, rows[i].ns, i + 1 < n ? "," : "");
        printf("]\n");
        return 0;
    }
    printf("%-16s %10s %5s %12s %10s\n", "mode", "size", "live", "ns/pair", "vs glibc");
    for (int i = 0; i < n; i++) {
        double anchor = 0;
        for (int j = 0; j < n; j++)
            if (rows[j].mode == B_GLIBC && rows[j].size == rows[i].size && rows[j].live == rows[i].live)
                anchor = rows[j].ns;
        char ratio[32] = "-";
        if (anchor > 0) snprintf(ratio, sizeof ratio, "%.2fx", rows[i].ns / anchor);
        printf("%-16s %10zu %5d %12.1f %10s\n", mode_names[rows[i].mode], rows[i].size, rows[i].live,
               rows[i].ns, ratio);
    }
    return 0;
}
