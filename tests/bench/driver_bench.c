/*
 * driver_bench.c — what the CUDA driver's interposers (rank/intercept/driver.c) add to a driver
 * allocation, beside the bare call, measured in one run.
 *
 *   driver_bench LIBRANKSNAP [N [FAKE_DIR]]
 *
 * Runs itself three times over the driver libcuda.so.1 finds (the real one on a GPU machine;
 * where none answers, the fake of tests/gpu in FAKE_DIR, host memory, said so): without
 * ranksnap, with LIBRANKSNAP preloaded and RANKSNAP_DRIVER=0 (the wrappers pass every call
 * through), and preloaded with the driver's calls recorded (a stack, an owner, an event each).
 * Each child times N pairs of cuMemAlloc_v2(1 MiB) + cuMemFree_v2, called through the pointer
 * cuGetProcAddress_v2 gave (the route the CUDA runtime and NCCL take), after a warm-up, and prints
 * ns per pair; the parent runs the three in turn five times and prints each one's median.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#undef cuGetProcAddress

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*proc_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int child(long n)
{
    void *drv = dlopen("libcuda.so.1", RTLD_NOW);
    if (!drv) return fprintf(stderr, "driver_bench: no libcuda.so.1: %s\n", dlerror()), 2;
    CUresult (*init)(unsigned);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set)(CUcontext);
    proc_fn get;
    *(void **)&init = dlsym(drv, "cuInit");
    *(void **)&retain = dlsym(drv, "cuDevicePrimaryCtxRetain");
    *(void **)&set = dlsym(drv, "cuCtxSetCurrent");
    *(void **)&get = dlsym(drv, "cuGetProcAddress_v2");
    if (!init || !get || init(0) != CUDA_SUCCESS) return fprintf(stderr, "driver_bench: cuInit\n"), 2;
    CUcontext ctx = NULL;
    if (retain && set && retain(&ctx, 0) == CUDA_SUCCESS) set(ctx);
    alloc_fn alloc;
    free_fn release;
    CUdriverProcAddressQueryResult q;
    if (get("cuMemAlloc", (void **)&alloc, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS ||
        get("cuMemFree", (void **)&release, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS)
        return fprintf(stderr, "driver_bench: cuGetProcAddress\n"), 2;
    CUdeviceptr p;
    for (long i = 0; i < n / 10 + 1; i++)
        if (alloc(&p, 1 << 20) != CUDA_SUCCESS || release(p) != CUDA_SUCCESS) return 2;
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        alloc(&p, 1 << 20);
        release(p);
    }
    printf("%.0f\n", (now_ns() - t0) / (double)n);
    return 0;
}

#define ROUNDS 5

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[ROUNDS]; -1 when a run failed. */
static double median(double *v)
{
    for (int k = 0; k < ROUNDS; k++)
        if (v[k] < 0) return -1;
    qsort(v, ROUNDS, sizeof v[0], by_value);
    return v[ROUNDS / 2];
}

/* One child under `env` (NULL: none added); its ns per pair, or -1. */
static double run(const char *self, long n, const char *preload, const char *driver)
{
    fflush(stdout);
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        /* what ranksnap says at exit (the "nothing reached" note of the pass-through run) is not
         * the table's */
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 2);
        if (preload) setenv("LD_PRELOAD", preload, 1);
        if (driver) setenv("RANKSNAP_DRIVER", driver, 1);
        setenv("RANKSNAP_REPORT", "0", 1);
        setenv("RANKSNAP_WRITE", "none", 1);
        char count[32];
        snprintf(count, sizeof count, "%ld", n);
        execl(self, self, "--child", count, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[64] = "";
    ssize_t got = read(fd[0], buf, sizeof buf - 1);
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    return atof(buf);
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "--child")) return child(atol(argv[2]));
    if (argc < 2) {
        fprintf(stderr, "usage: driver_bench LIBRANKSNAP [N]\n");
        return 2;
    }
    long n = argc > 2 ? atol(argv[2]) : 20000;
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 2;
    self[len] = '\0';
    double bare = run(self, n, NULL, NULL);
    const char *which = "the CUDA driver";
    if (bare < 0 && argc > 3) {
        /* no GPU here: the wrappers' cost over the fake driver (host memory), said as such */
        setenv("LD_LIBRARY_PATH", argv[3], 1);
        which = "the fake driver (no usable GPU driver here)";
        bare = run(self, n, NULL, NULL);
    }
    if (bare < 0) {
        printf("driver_bench: skipped: no CUDA driver answered cuInit\n");
        return 77;
    }
    /* a real driver's allocation time drifts between processes: the three configurations take
     * turns, ROUNDS times, and each one's median is shown */
    double b[ROUNDS], o[ROUNDS], r[ROUNDS];
    for (int k = 0; k < ROUNDS; k++) {
        b[k] = k ? run(self, n, NULL, NULL) : bare;
        o[k] = run(self, n, argv[1], "0");
        r[k] = run(self, n, argv[1], "1");
    }
    bare = median(b);
    double off = median(o);
    double on = median(r);
    printf("cuMemAlloc_v2(1 MiB) + cuMemFree_v2 through cuGetProcAddress_v2 on %s, %ld pairs, "
           "ns per pair\n", which, n);
    printf("  %-40s %10.0f\n", "bare driver (anchor)", bare);
    printf("  %-40s %10.0f  (%+.0f)\n", "preloaded, RANKSNAP_DRIVER=0", off, off - bare);
    printf("  %-40s %10.0f  (%+.0f)\n", "preloaded, recorded (stack, owner, event)", on, on - bare);
    return bare < 0 || off < 0 || on < 0;
}
