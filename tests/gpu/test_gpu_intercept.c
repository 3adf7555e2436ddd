/*
 * test_gpu_intercept.c — a plain CUDA program whose allocation calls ranksnap takes over
 * (label gpu). Built twice from this file:
 *   test_gpu_intercept       shared CUDA runtime, run with LD_PRELOAD=libranksnap.so
 *   test_gpu_intercept_wrap  static CUDA runtime, linked with ranksnap::wrap (RS_TEST_WRAP)
 * The program is written as any CUDA program is: it calls cudaMalloc and cudaFree and knows
 * ranksnap only through dlsym(RTLD_DEFAULT, "ranksnap_get_stats"), to check what was seen.
 *
 *   (no argument)  interception of cudaMalloc/cudaFree in a loop and of the async calls; a
 *                  pointer from the real cudaMalloc (before ranksnap started) and one from
 *                  cudaMallocPitch (another allocator) freed through the interposed cudaFree;
 *                  cudaMemGetInfo counting ranksnap's cache as free; a clean last error
 *   --oom          run with RANKSNAP_MEMORY_LIMIT=256MiB: an allocation over the limit returns
 *                  cudaErrorMemoryAllocation, left once in cudaGetLastError as the real one does
 *   --disabled     run with RANKSNAP_DISABLE=1: everything passes through, ranksnap never starts
 *   --plain        allocate 2 GiB and free it, no checks (the static runtime, preloaded: ranksnap
 *                  sees nothing and must say so at exit)
 *   --plain-init   the same with ranksnap started (ranksnap_init, as MPI_Init would) and
 *                  finalised while the 2 GiB are held: finalize must say so
 *
 * Without a usable device it prints why and exits 77 (ctest: skipped).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "cuda_device.h"
#include "ranksnap.h"

#define MiB ((size_t)1 << 20)

typedef ranksnap_status (*stats_fn)(ranksnap_stats *);
typedef ranksnap_status (*dump_fn)(const char *);

static stats_fn get_stats;
static dump_fn dump;

/* The real functions, behind whatever interposes them. */
#if defined(RS_TEST_WRAP)
cudaError_t __real_cudaMalloc(void **ptr, size_t size);
cudaError_t __real_cudaMemGetInfo(size_t *f, size_t *t);
static cudaError_t real_malloc(void **p, size_t n)
{
    return __real_cudaMalloc(p, n);
}
static cudaError_t real_mem_get_info(size_t *f, size_t *t)
{
    return __real_cudaMemGetInfo(f, t);
}
#else
static void *cudart(void)
{
    void *h = dlopen("libcudart.so." RS_CUDART_MAJOR, RTLD_NOW | RTLD_NOLOAD);
    if (!h) {
        fprintf(stderr, "the shared CUDA runtime is not loaded: %s\n", dlerror());
        exit(1);
    }
    return h;
}
static cudaError_t real_malloc(void **p, size_t n)
{
    cudaError_t (*f)(void **, size_t);
    *(void **)&f = dlsym(cudart(), "cudaMalloc");
    return f(p, n);
}
static cudaError_t real_mem_get_info(size_t *fr, size_t *t)
{
    cudaError_t (*f)(size_t *, size_t *);
    *(void **)&f = dlsym(cudart(), "cudaMemGetInfo");
    return f(fr, t);
}
#endif

static ranksnap_stats stats(void)
{
    ranksnap_stats s;
    memset(&s, 0, sizeof s);
    CHECK(get_stats(&s) == RANKSNAP_OK);
    return s;
}

TEST(pointers_from_before_ranksnap_and_from_another_allocator_are_freed_by_the_real_free)
{
    /* ranksnap starts at the first intercepted call: not yet */
    ranksnap_stats s;
    CHECK(get_stats(&s) == RANKSNAP_ERR_NOT_INITIALIZED);
    void *early = NULL, *pitched = NULL;
    size_t pitch = 0, f0 = 0, f1 = 0, t = 0;
    CHECK(real_malloc(&early, 64 * MiB) == cudaSuccess);
    CHECK(cudaMallocPitch(&pitched, &pitch, 4096, 4096) == cudaSuccess);
    /* this one starts ranksnap */
    void *p = NULL;
    CHECK(cudaMalloc(&p, MiB) == cudaSuccess);
    s = stats();
    CHECK_EQ_U64(s.num_allocs, 1);
    CHECK(real_mem_get_info(&f0, &t) == cudaSuccess);
    CHECK(cudaFree(early) == cudaSuccess);
    CHECK(cudaFree(pitched) == cudaSuccess);
    CHECK(real_mem_get_info(&f1, &t) == cudaSuccess);
    /* really released by the runtime, not swallowed or cached */
    CHECK(f1 >= f0 + 64 * MiB);
    CHECK_EQ_U64(stats().num_frees, 0);
    CHECK(cudaFree(p) == cudaSuccess);
    CHECK_EQ_U64(stats().num_frees, 1);
    CHECK(cudaGetLastError() == cudaSuccess);
}

TEST(malloc_and_free_in_a_loop_go_through_ranksnap)
{
    ranksnap_stats before = stats();
    const int n = 500;
    for (int i = 0; i < n; i++) {
        size_t size = (size_t)512 << (i % 15); /* 512 B .. 8 MiB */
        void *p = NULL;
        CHECK(cudaMalloc(&p, size) == cudaSuccess);
        CHECK(cudaMemset(p, i & 0xff, size) == cudaSuccess);
        CHECK(cudaFree(p) == cudaSuccess);
    }
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    ranksnap_stats s = stats();
    CHECK_EQ_U64(s.num_allocs - before.num_allocs, n);
    CHECK_EQ_U64(s.num_frees - before.num_frees, n);
    CHECK(s.reserved_bytes > 0);
    CHECK_EQ_U64(s.allocated_bytes, 0);
    /* the cache kept segments: far fewer device reservations than calls (a block freed with
     * cudaFree waits for its event on the legacy stream, so a few more than one per size) */
    printf("%d cudaMalloc calls took %llu device reservations\n", n,
           (unsigned long long)(s.num_segment_allocs - before.num_segment_allocs));
    CHECK(s.num_segment_allocs - before.num_segment_allocs < (uint64_t)n / 4);
}

TEST(async_calls_go_through_ranksnap_on_their_stream)
{
    cudaStream_t st;
    CHECK(cudaStreamCreate(&st) == cudaSuccess);
    ranksnap_stats before = stats();
    for (int i = 0; i < 50; i++) {
        void *p = NULL;
        CHECK(cudaMallocAsync(&p, 3 * MiB, st) == cudaSuccess);
        CHECK(cudaMemsetAsync(p, 1, 3 * MiB, st) == cudaSuccess);
        CHECK(cudaFreeAsync(p, st) == cudaSuccess);
    }
    CHECK(cudaStreamSynchronize(st) == cudaSuccess);
    ranksnap_stats s = stats();
    CHECK_EQ_U64(s.num_allocs - before.num_allocs, 50);
    CHECK_EQ_U64(s.num_frees - before.num_frees, 50);
    /* freed on their own stream: reused at once, one segment for all of them */
    CHECK(s.num_segment_allocs - before.num_segment_allocs <= 1);
    cudaMemPool_t pool;
    int dev = 0;
    CHECK(cudaGetDevice(&dev) == cudaSuccess);
    CHECK(cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess);
    void *q = NULL;
    CHECK(cudaMallocFromPoolAsync(&q, MiB, pool, st) == cudaSuccess);
    CHECK_EQ_U64(stats().num_allocs - s.num_allocs, 1);
    CHECK(cudaFreeAsync(q, st) == cudaSuccess);
    CHECK(cudaStreamSynchronize(st) == cudaSuccess);
    CHECK(cudaStreamDestroy(st) == cudaSuccess);
}

TEST(mem_get_info_counts_ranksnaps_cache_as_free)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, 100 * MiB) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    size_t rf = 0, rt = 0, f = 0, t = 0;
    CHECK(real_mem_get_info(&rf, &rt) == cudaSuccess);
    CHECK(cudaMemGetInfo(&f, &t) == cudaSuccess);
    ranksnap_stats s = stats();
    CHECK(s.reserved_bytes >= 100 * MiB);
    CHECK_EQ_U64(t, rt);
    /* another process on the device may move the free bytes by a little between the calls */
    long long diff = (long long)f - (long long)rf - (long long)(s.reserved_bytes - s.allocated_bytes);
    CHECK(diff > -(long long)(4 * MiB) && diff < (long long)(4 * MiB));
}

TEST(allocation_over_the_limit_fails_once_with_the_runtimes_error_and_one_oom)
{
    void *p = NULL, *q = NULL;
    CHECK(cudaMalloc(&p, 64 * MiB) == cudaSuccess);
    cudaError_t e = cudaMalloc(&q, 512 * MiB);
    printf("cudaMalloc(512 MiB) over a 256 MiB limit: %s\n", cudaGetErrorName(e));
    CHECK(e == cudaErrorMemoryAllocation);
    CHECK(q == NULL);
    /* as with the real cudaMalloc: the error once in the last-error slot, not sticky */
    e = cudaGetLastError();
    printf("cudaGetLastError after it: %s\n", cudaGetErrorName(e));
    CHECK(e == cudaErrorMemoryAllocation);
    CHECK(cudaGetLastError() == cudaSuccess);
    ranksnap_stats s = stats();
    CHECK_EQ_U64(s.num_ooms, 1);
    CHECK_EQ_U64(s.memory_limit_bytes, 256 * MiB);
    size_t f = 0, t = 0;
    CHECK(cudaMemGetInfo(&f, &t) == cudaSuccess);
    CHECK_EQ_U64(t, 256 * MiB);
    CHECK(f <= 192 * MiB);
    CHECK(cudaMalloc(&q, MiB) == cudaSuccess); /* and it goes on */
    CHECK(cudaFree(q) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess);
}

TEST(disabled_ranksnap_passes_every_call_through_and_never_starts)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, 8 * MiB) == cudaSuccess);
    CHECK(cudaMemset(p, 0, 8 * MiB) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess);
    ranksnap_stats s;
    CHECK(get_stats(&s) == RANKSNAP_ERR_NOT_INITIALIZED);
    CHECK(cudaGetLastError() == cudaSuccess);
}

int main(int argc, char **argv)
{
    if (skip_without_a_cuda_device()) return 77;
    *(void **)&get_stats = dlsym(RTLD_DEFAULT, "ranksnap_get_stats");
    *(void **)&dump = dlsym(RTLD_DEFAULT, "ranksnap_dump");
    if (!get_stats || !dump) {
        printf("FAIL: libranksnap.so is not loaded (LD_PRELOAD / ranksnap::wrap missing)\n");
        return 1;
    }
    if (argc > 1 && !strcmp(argv[1], "--oom")) {
        RUN(allocation_over_the_limit_fails_once_with_the_runtimes_error_and_one_oom);
        return check_summary();
    }
    if (argc > 1 && !strcmp(argv[1], "--disabled")) {
        RUN(disabled_ranksnap_passes_every_call_through_and_never_starts);
        return check_summary();
    }
    if (argc > 1 && (!strcmp(argv[1], "--plain") || !strcmp(argv[1], "--plain-init"))) {
        ranksnap_status (*init)(const void *), (*fini)(void);
        *(void **)&init = dlsym(RTLD_DEFAULT, "ranksnap_init");
        *(void **)&fini = dlsym(RTLD_DEFAULT, "ranksnap_finalize");
        int with_init = !strcmp(argv[1], "--plain-init");
        if (with_init && init(NULL) != RANKSNAP_OK) return 1;
        void *p = NULL;
        if (cudaMalloc(&p, 2048 * MiB) != cudaSuccess || cudaMemset(p, 0, 2048 * MiB) != cudaSuccess)
            return 1;
        if (with_init && fini() != RANKSNAP_OK) return 1;
        return cudaFree(p) == cudaSuccess ? 0 : 1;
    }
    RUN(pointers_from_before_ranksnap_and_from_another_allocator_are_freed_by_the_real_free);
    RUN(malloc_and_free_in_a_loop_go_through_ranksnap);
    RUN(async_calls_go_through_ranksnap_on_their_stream);
    RUN(mem_get_info_counts_ranksnaps_cache_as_free);
    if (argc > 1) CHECK(dump(argv[1]) == RANKSNAP_OK);
    return check_summary();
}
