/*
 * test_intercept_core.c — the CUDA interposers' core (rank/intercept/intercept.c) without a GPU
 * (label unit).
 *
 * The core takes a table of "real" CUDA functions; here that table is a fake runtime (addresses
 * of its own, a programmable current device, free memory, capture state and last error), and
 * ranksnap serves from the sim backend (ranksnap_icp_test_serve_sim). So every decision the core makes
 * runs in CI: lazy start on the first call, what is served and what passes through (another
 * device served by its own allocator, a foreign pointer, a captured stream, a non-default pool),
 * how frees are ordered, what
 * cudaMemGetInfo answers under a memory limit, how an OOM is reported, the outside-memory labels
 * in the snapshot and the report, the PyTorch entry points, and frees after finalize. It lives
 * with the GPU tests because it needs the CUDA headers (not the library, not a device).
 *
 * Run with RANKSNAP_BACKEND=sim RANKSNAP_MEMORY_LIMIT=1GiB (tests/gpu/CMakeLists.txt). The tests
 * run in order: the first one starts ranksnap, the last one finalises it.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "compare.h"
#include "instance.h"
#include "intercept.h"
#include "outside.h"
#include "ranksnap.h"
#include "report_json.h"
#include "report_text.h"
#include "rsnap_decode.h"
#include "state.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* ---- the fake runtime ----------------------------------------------------------------------- */

static struct {
    int device;
    size_t free_b, total_b;
    int mallocs, frees, malloc_asyncs, free_asyncs, pool_mallocs;
    size_t last_size;
    cudaError_t last_error;
    cudaStream_t capturing;
    uintptr_t next;
} fk = {0, 60 * GiB, 80 * GiB, 0, 0, 0, 0, 0, 0, cudaSuccess, NULL, 0x7e0000000000};

static cudaError_t fk_malloc(void **p, size_t n)
{
    fk.mallocs++;
    fk.last_size = n;
    if (n > fk.total_b) {
        *p = NULL;
        fk.last_error = cudaErrorMemoryAllocation;
        return cudaErrorMemoryAllocation;
    }
    *p = (void *)fk.next;
    fk.next += (n + 0xfff) & ~(size_t)0xfff;
    return cudaSuccess;
}
static cudaError_t fk_free(void *p)
{
    fk.frees++;
    /* NULL and the fake's own addresses are valid: a ranksnap block here would be corruption */
    return !p || ((uintptr_t)p >= 0x7e0000000000 && (uintptr_t)p < 0x7f0000000000)
               ? cudaSuccess
               : cudaErrorInvalidValue;
}
static cudaError_t fk_malloc_async(void **p, size_t n, cudaStream_t s)
{
    (void)s;
    fk.malloc_asyncs++;
    fk.mallocs--; /* counted apart */
    return fk_malloc(p, n);
}
static cudaError_t fk_free_async(void *p, cudaStream_t s)
{
    (void)s;
    fk.free_asyncs++;
    fk.frees--;
    return fk_free(p);
}
static cudaError_t fk_pool(void **p, size_t n, cudaMemPool_t pool, cudaStream_t s)
{
    (void)pool;
    (void)s;
    fk.pool_mallocs++;
    fk.mallocs--;
    return fk_malloc(p, n);
}
static cudaError_t fk_mem_get_info(size_t *f, size_t *t)
{
    *f = fk.free_b;
    *t = fk.total_b;
    return cudaSuccess;
}
static cudaError_t fk_get_device(int *d)
{
    *d = fk.device;
    return cudaSuccess;
}
#define FK_DEFAULT_POOL ((cudaMemPool_t)(uintptr_t)0x1000)
static cudaError_t fk_default_pool(cudaMemPool_t *p, int d)
{
    (void)d;
    *p = FK_DEFAULT_POOL;
    return cudaSuccess;
}
static cudaError_t fk_is_capturing(cudaStream_t s, enum cudaStreamCaptureStatus *c)
{
    *c = s && s == fk.capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}
static cudaError_t fk_peek(void)
{
    return fk.last_error;
}

static const rs_cuda_real fake = {
    .version = RS_CUDA_REAL_VERSION,
    .malloc_ = fk_malloc,
    .free_ = fk_free,
    .malloc_async = fk_malloc_async,
    .malloc_async_ptsz = fk_malloc_async,
    .free_async = fk_free_async,
    .free_async_ptsz = fk_free_async,
    .malloc_from_pool_async = fk_pool,
    .malloc_from_pool_async_ptsz = fk_pool,
    .mem_get_info = fk_mem_get_info,
    .get_device = fk_get_device,
    .device_get_default_mem_pool = fk_default_pool,
    .stream_is_capturing = fk_is_capturing,
    .peek_at_last_error = fk_peek,
};

static ranksnap_stats stats(void)
{
    ranksnap_stats s;
    memset(&s, 0, sizeof s);
    ranksnap_get_stats(&s);
    return s;
}

static char tmpdir[] = "/tmp/ranksnap-icp-XXXXXX";

/* Dumps the snapshot and decodes it (NULL on failure, counted). */
static rs_snap *dump_and_read(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    CHECK(ranksnap_dump(path) == RANKSNAP_OK);
    rs_snap *s = NULL;
    CHECK(rs_rsnap_decode_file(path, &s) == RANKSNAP_OK);
    return s;
}

static uint64_t label_bytes(const rs_snap *s, const char *label)
{
    for (size_t i = 0; s && i < s->totals.n_outside_labels; i++)
        if (!strcmp(s->totals.outside_labels[i].label, label)) return s->totals.outside_labels[i].bytes;
    return 0;
}

/* ---- tests ---------------------------------------------------------------------------------- */

TEST(first_intercepted_call_starts_ranksnap)
{
    ranksnap_stats s;
    CHECK(ranksnap_get_stats(&s) == RANKSNAP_ERR_NOT_INITIALIZED);
    uint64_t before = rs_state_intercepted();
    void *p = NULL;
    CHECK(ranksnap_icp_malloc(&fake, &p, 1000, NULL) == cudaSuccess);
    CHECK(p != NULL);
    CHECK(rs_state_intercepted() == before + 1);
    s = stats();
    CHECK_EQ_U64(s.num_allocs, 1);
    CHECK_EQ_U64(s.requested_bytes, 1000);
    CHECK(fk.mallocs == 0); /* nothing went to the "real" runtime */
    CHECK(ranksnap_icp_free(&fake, p) == cudaSuccess);
    CHECK(fk.frees == 0);
    CHECK_EQ_U64(stats().num_frees, 1);
}

TEST(pointer_from_before_ranksnap_goes_to_the_real_free_untouched)
{
    void *early = NULL;
    CHECK(fake.malloc_(&early, 4 * MiB) == cudaSuccess); /* "allocated before ranksnap loaded" */
    uint64_t frees = stats().num_frees;
    int real_frees = fk.frees;
    CHECK(ranksnap_icp_free(&fake, early) == cudaSuccess);
    CHECK(fk.frees == real_frees + 1);
    CHECK_EQ_U64(stats().num_frees, frees);
    /* cudaFree(NULL), the "create the context" idiom, is the real one's too */
    CHECK(ranksnap_icp_free(&fake, NULL) == cudaSuccess);
    CHECK(fk.frees == real_frees + 2);
    /* an interior pointer of a ranksnap block is not ranksnap's to free either */
    void *p = NULL;
    CHECK(ranksnap_icp_malloc(&fake, &p, 8 * MiB, NULL) == cudaSuccess);
    CHECK(ranksnap_icp_free(&fake, (char *)p + 512) == cudaErrorInvalidValue);
    CHECK(ranksnap_icp_free(&fake, p) == cudaSuccess);
}

TEST(allocations_on_another_device_are_served_by_its_own_allocator)
{
    int mallocs = fk.mallocs;
    uint64_t allocs = stats().num_allocs;
    fk.device = 1;
    void *p = NULL;
    CHECK(ranksnap_icp_malloc(&fake, &p, MiB, NULL) == cudaSuccess);
    fk.device = 0;
    /* ranksnap's, not the real runtime's, and on device 1's addresses (the sim's per device) */
    CHECK(fk.mallocs == mallocs);
    CHECK_EQ_U64(stats().num_allocs, allocs + 1);
    CHECK((uintptr_t)p >= 0x7f0000000000 + ((uintptr_t)1 << 48));
    rs_snap *s = dump_and_read("two-devices.rsnap");
    CHECK(s && s->n_devices == 2);
    int on_1 = 0;
    for (size_t i = 0; s && i < s->n_segments; i++)
        if (s->segments[i].device == 1 && s->segments[i].allocated_size == MiB) on_1 = 1;
    CHECK(on_1);
    CHECK(s && s->n_devices == 2 && s->devices[0].index == 0 && s->devices[1].index == 1 &&
          s->devices[1].num_allocs == 1);
    rs_snap_free(s);
    /* freed with device 0 current: the block's own allocator takes it back */
    CHECK(ranksnap_icp_free(&fake, p) == cudaSuccess);
    CHECK(ranksnap_empty_cache() == RANKSNAP_OK);
    CHECK_EQ_U64(stats().reserved_bytes, 0);
}

TEST(cudaFree_orders_reuse_on_the_legacy_stream)
{
    void *p = NULL;
    CHECK(ranksnap_icp_malloc(&fake, &p, 3 * MiB, NULL) == cudaSuccess);
    CHECK(ranksnap_icp_free(&fake, p) == cudaSuccess);
    /* freed, but waiting for its event on the legacy stream: still active */
    ranksnap_stats s = stats();
    CHECK_EQ_U64(s.allocated_bytes, 0);
    CHECK_EQ_U64(s.active_bytes, 3 * MiB);
    /* the next allocation processes the (completed) event and reuses the block */
    void *q = NULL;
    CHECK(ranksnap_icp_malloc(&fake, &q, 3 * MiB, NULL) == cudaSuccess);
    CHECK(q == p);
    CHECK(ranksnap_icp_free(&fake, q) == cudaSuccess);
}

TEST(cudaFreeAsync_on_the_allocating_stream_needs_no_event)
{
    cudaStream_t s1 = (cudaStream_t)(uintptr_t)0x5000;
    void *p = NULL;
    CHECK(ranksnap_icp_malloc_async(&fake, &p, 2 * MiB, s1, 0, NULL) == cudaSuccess);
    CHECK(ranksnap_icp_free_async(&fake, p, s1, 0) == cudaSuccess);
    CHECK_EQ_U64(stats().active_bytes, 0);
    /* freed on another stream: ordered by an event there */
    CHECK(ranksnap_icp_malloc_async(&fake, &p, 2 * MiB, s1, 0, NULL) == cudaSuccess);
    CHECK(ranksnap_icp_free_async(&fake, p, (cudaStream_t)(uintptr_t)0x6000, 0) == cudaSuccess);
    CHECK_EQ_U64(stats().active_bytes, 2 * MiB);
    CHECK(fk.malloc_asyncs == 0 && fk.free_asyncs == 0);
}

TEST(ptsz_stream_zero_is_the_per_thread_stream)
{
    void *p = NULL;
    /* _ptsz with stream 0 on both sides: the same stream (cudaStreamPerThread), no event */
    CHECK(ranksnap_icp_malloc_async(&fake, &p, MiB, 0, 1, NULL) == cudaSuccess);
    uint64_t active = stats().active_bytes;
    CHECK(ranksnap_icp_free_async(&fake, p, 0, 1) == cudaSuccess);
    CHECK_EQ_U64(stats().active_bytes, active - MiB);
    /* legacy stream 0 allocated, per-thread 0 freed: two streams, so an event */
    CHECK(ranksnap_icp_malloc_async(&fake, &p, MiB, 0, 0, NULL) == cudaSuccess);
    active = stats().active_bytes;
    CHECK(ranksnap_icp_free_async(&fake, p, 0, 1) == cudaSuccess);
    CHECK_EQ_U64(stats().active_bytes, active);
}

TEST(a_stream_being_captured_gets_the_real_stream_ordered_allocator)
{
    cudaStream_t cap = (cudaStream_t)(uintptr_t)0x7000;
    fk.capturing = cap;
    uint64_t allocs = stats().num_allocs;
    void *p = NULL;
    CHECK(ranksnap_icp_malloc_async(&fake, &p, MiB, cap, 0, NULL) == cudaSuccess);
    CHECK(fk.malloc_asyncs == 1);
    CHECK_EQ_U64(stats().num_allocs, allocs);
    CHECK(ranksnap_icp_free_async(&fake, p, cap, 0) == cudaSuccess);
    CHECK(fk.free_asyncs == 1);
    fk.capturing = NULL;
}

TEST(default_pool_is_served_other_pools_pass_through_as_outside_memory)
{
    uint64_t allocs = stats().num_allocs;
    void *p = NULL, *q = NULL;
    CHECK(ranksnap_icp_malloc_from_pool_async(&fake, &p, MiB, FK_DEFAULT_POOL, 0, 0, NULL) == cudaSuccess);
    CHECK_EQ_U64(stats().num_allocs, allocs + 1);
    cudaMemPool_t mine = (cudaMemPool_t)(uintptr_t)0x2000;
    CHECK(ranksnap_icp_malloc_from_pool_async(&fake, &q, 6 * MiB, mine, 0, 0, NULL) == cudaSuccess);
    CHECK(fk.pool_mallocs == 1);
    CHECK_EQ_U64(stats().num_allocs, allocs + 1);
    rs_snap *s = dump_and_read("pool.rsnap");
    CHECK_EQ_U64(label_bytes(s, "cuda_mempool"), 6 * MiB);
    int seen = 0;
    for (uint64_t i = 0; s && i < s->history.count; i++)
        if (s->history.action[i] == RS_ACT_OUTSIDE_ALLOC && s->history.addr[i] == (uintptr_t)q &&
            s->history.size[i] == 6 * MiB)
            seen = 1;
    CHECK(seen);
    rs_snap_free(s);
    /* its free goes to the pool and takes the bytes back out */
    CHECK(ranksnap_icp_free_async(&fake, q, 0, 0) == cudaSuccess);
    CHECK(fk.free_asyncs == 2);
    s = dump_and_read("pool2.rsnap");
    CHECK_EQ_U64(label_bytes(s, "cuda_mempool"), 0);
    rs_snap_free(s);
    CHECK(ranksnap_icp_free_async(&fake, p, 0, 0) == cudaSuccess);
}

TEST(mem_get_info_counts_the_cache_as_free_within_the_limit)
{
    /* RANKSNAP_MEMORY_LIMIT=1GiB: a 1 GiB device, whatever the real one */
    CHECK(ranksnap_empty_cache() == RANKSNAP_OK);
    void *p = NULL, *q = NULL;
    CHECK(ranksnap_icp_malloc(&fake, &p, 100 * MiB, NULL) == cudaSuccess);
    CHECK(ranksnap_icp_malloc(&fake, &q, 50 * MiB, NULL) == cudaSuccess);
    size_t f = 0, t = 0;
    CHECK(ranksnap_icp_mem_get_info(&fake, &f, &t) == cudaSuccess);
    CHECK_EQ_U64(t, GiB);
    CHECK_EQ_U64(f, GiB - 150 * MiB);
    /* without a limit the answer would be the device's free bytes plus the cache: check the
     * arithmetic against a nearly full device, where the limit does not bind */
    fk.free_b = 10 * MiB;
    CHECK(ranksnap_icp_free_async(&fake, q, 0, 0) == cudaSuccess); /* 50 MiB back in the cache */
    ranksnap_stats s = stats();
    CHECK(ranksnap_icp_mem_get_info(&fake, &f, &t) == cudaSuccess);
    CHECK_EQ_U64(f, 10 * MiB + (s.reserved_bytes - s.allocated_bytes));
    fk.free_b = 60 * GiB;
    /* another device: its own allocator, under the same limit, with nothing allocated there */
    fk.device = 1;
    CHECK(ranksnap_icp_mem_get_info(&fake, &f, &t) == cudaSuccess);
    CHECK_EQ_U64(t, GiB);
    CHECK_EQ_U64(f, GiB);
    fk.device = 0;
    CHECK(ranksnap_icp_free(&fake, p) == cudaSuccess);
}

TEST(oom_is_cudaErrorMemoryAllocation_and_left_as_the_last_error)
{
    fk.last_error = cudaSuccess;
    void *p = (void *)1;
    CHECK(ranksnap_icp_malloc(&fake, &p, 2 * GiB, NULL) == cudaErrorMemoryAllocation);
    CHECK(p == NULL);
    /* the program's runtime was made to fail the same way, so cudaGetLastError says it */
    CHECK(fk.last_error == cudaErrorMemoryAllocation);
    CHECK(fk.last_size > fk.total_b);
    CHECK_EQ_U64(stats().num_ooms, 1);
    fk.last_error = cudaSuccess;
    /* and the next allocation works */
    CHECK(ranksnap_icp_malloc(&fake, &p, MiB, NULL) == cudaSuccess);
    CHECK(ranksnap_icp_free(&fake, p) == cudaSuccess);
}

TEST(statuses_map_to_cuda_errors)
{
    CHECK(ranksnap_icp_cuda_error(RANKSNAP_OK) == cudaSuccess);
    CHECK(ranksnap_icp_cuda_error(RANKSNAP_ERR_OUT_OF_MEMORY) == cudaErrorMemoryAllocation);
    CHECK(ranksnap_icp_cuda_error(RANKSNAP_ERR_HOST_MEMORY) == cudaErrorMemoryAllocation);
    CHECK(ranksnap_icp_cuda_error(RANKSNAP_ERR_INVALID_ARGUMENT) == cudaErrorInvalidValue);
    CHECK(ranksnap_icp_cuda_error(RANKSNAP_ERR_UNKNOWN_POINTER) == cudaErrorInvalidValue);
    CHECK(ranksnap_icp_cuda_error(RANKSNAP_ERR_NOT_INITIALIZED) == cudaErrorInitializationError);
    CHECK(ranksnap_icp_cuda_error(RANKSNAP_ERR_UNSUPPORTED) == cudaErrorNotSupported);
    CHECK(ranksnap_icp_cuda_error(RANKSNAP_ERR_BACKEND) == cudaErrorUnknown);
}

TEST(a_wrap_table_pointing_back_into_ranksnap_is_refused)
{
    /* In this test the core is linked into the executable, so the fake's functions are "ours":
     * exactly the case of __real_cudaMalloc bound to libranksnap.so's own cudaMalloc. */
    CHECK(ranksnap_icp_wrap_real(&fake) == ranksnap_icp_preload_real());
    rs_cuda_real old = fake;
    old.version = RS_CUDA_REAL_VERSION + 1;
    CHECK(ranksnap_icp_wrap_real(&old) == ranksnap_icp_preload_real());
    /* functions from another module (here: the C library's, never called) are accepted. They
     * are looked up in libc itself: a sanitizer build puts its own malloc, strlen, ... into the
     * executable, which would make them "ours". */
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    CHECK(libc != NULL);
    if (!libc) return;
    rs_cuda_real other = fake;
    *(void **)&other.malloc_ = dlsym(libc, "getpid");
    *(void **)&other.free_ = dlsym(libc, "getppid");
    *(void **)&other.malloc_async = dlsym(libc, "getuid");
    *(void **)&other.free_async = dlsym(libc, "getgid");
    *(void **)&other.malloc_from_pool_async = dlsym(libc, "geteuid");
    *(void **)&other.mem_get_info = dlsym(libc, "getegid");
    CHECK(ranksnap_icp_wrap_real(&other) == &other);
    dlclose(libc);
}

TEST(outside_labels_reach_the_snapshot_and_the_report)
{
    rs_outside_add("nccl", 300 * (int64_t)MiB);
    rs_outside_add("nccl", -100 * (int64_t)MiB);
    rs_outside_add("nccl_mem", 64 * (int64_t)MiB);
    rs_outside_add("nccl_mem", -(int64_t)GiB); /* more than it holds: 0, not a wrap */
    rs_snap *s = dump_and_read("labels.rsnap");
    CHECK_EQ_U64(label_bytes(s, "nccl"), 200 * MiB);
    CHECK_EQ_U64(label_bytes(s, "nccl_mem"), 0);
    if (s) {
        rs_summary sum;
        rs_summary_of(s, &sum);
        CHECK(sum.n_outside_labels == 1); /* holders of 0 bytes are left out */
        CHECK(!strcmp(sum.outside_labels[0].label, "nccl"));
        rs_compare_result *r = NULL;
        const rs_snap *full[1] = {s};
        CHECK(rs_compare(&sum, full, 1, 0, NULL, &r) == RANKSNAP_OK);
        char *text = NULL, *json = NULL;
        size_t tn = 0, jn = 0;
        FILE *ft = open_memstream(&text, &tn), *fj = open_memstream(&json, &jn);
        CHECK(rs_report_text(ft, r) == RANKSNAP_OK);
        CHECK(rs_report_json(fj, r) == RANKSNAP_OK);
        fclose(ft);
        fclose(fj);
        CHECK_STR_CONTAINS(text, "rank 0: NCCL holds 200.00 MiB (outside the allocator at the end: ");
        CHECK_STR_CONTAINS(json, "\"outside_labels\": {\"nccl\": 209715200}");
        free(text);
        free(json);
        rs_compare_result_free(r);
    }
    rs_snap_free(s);
    /* past the table's size, new holders add up under "other" */
    char name[16];
    for (int i = 0; i < 12; i++) {
        snprintf(name, sizeof name, "lib%d", i);
        rs_outside_add(name, (int64_t)MiB);
    }
    s = dump_and_read("labels2.rsnap");
    CHECK(s && s->totals.n_outside_labels <= 8);
    uint64_t sum = 0;
    for (size_t i = 0; s && i < s->totals.n_outside_labels; i++)
        if (strncmp(s->totals.outside_labels[i].label, "lib", 3) == 0 ||
            !strcmp(s->totals.outside_labels[i].label, "other"))
            sum += s->totals.outside_labels[i].bytes;
    CHECK_EQ_U64(sum, 12 * MiB);
    CHECK(label_bytes(s, "other") > 0);
    rs_snap_free(s);
}

TEST(torch_entry_points_allocate_from_the_cache)
{
    uint64_t allocs = stats().num_allocs, frees = stats().num_frees;
    void *p = ranksnap_torch_malloc(5000, 0, NULL);
    CHECK(p != NULL);
    CHECK_EQ_U64(stats().num_allocs, allocs + 1);
    CHECK(ranksnap_torch_malloc(0, 0, NULL) == NULL); /* empty tensors, as PyTorch's own */
    /* another device: its own allocator */
    void *q = ranksnap_torch_malloc(5000, 3, NULL);
    CHECK(q != NULL && (uintptr_t)q >= 0x7f0000000000 + ((uintptr_t)3 << 48));
    CHECK(ranksnap_torch_malloc(5000, 64, NULL) == NULL); /* no such device */
    CHECK_STR_CONTAINS(ranksnap_last_error(), "device 64");
    CHECK(ranksnap_torch_malloc(4 * GiB, 0, NULL) == NULL); /* over the 1 GiB limit */
    ranksnap_torch_free(p, 5000, 0, NULL);
    ranksnap_torch_free(q, 5000, 3, NULL);
    ranksnap_torch_free(NULL, 0, 0, NULL);
    CHECK_EQ_U64(stats().num_frees, frees + 2);
    CHECK_EQ_U64(stats().allocated_bytes, 0);
}

TEST(blocks_live_at_finalize_stay_valid_and_are_freed_afterwards)
{
    void *p = NULL;
    CHECK(ranksnap_icp_malloc(&fake, &p, 7 * MiB, NULL) == cudaSuccess);
    CHECK(ranksnap_finalize() == RANKSNAP_OK);
    /* MPI_Finalize before cudaFree: the block goes back to the retired allocator, not to the
     * real free (which would be given a pointer it never handed out) */
    int frees = fk.frees;
    CHECK(ranksnap_icp_free(&fake, p) == cudaSuccess);
    CHECK(fk.frees == frees);
    /* after finalize nothing starts ranksnap again: the real functions serve */
    int mallocs = fk.mallocs;
    CHECK(ranksnap_icp_malloc(&fake, &p, MiB, NULL) == cudaSuccess);
    CHECK(fk.mallocs == mallocs + 1);
    CHECK(ranksnap_icp_free(&fake, p) == cudaSuccess);
    CHECK(fk.frees == frees + 1);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    ranksnap_icp_test_serve_sim(1);
    RUN(first_intercepted_call_starts_ranksnap);
    RUN(pointer_from_before_ranksnap_goes_to_the_real_free_untouched);
    RUN(allocations_on_another_device_are_served_by_its_own_allocator);
    RUN(cudaFree_orders_reuse_on_the_legacy_stream);
    RUN(cudaFreeAsync_on_the_allocating_stream_needs_no_event);
    RUN(ptsz_stream_zero_is_the_per_thread_stream);
    RUN(a_stream_being_captured_gets_the_real_stream_ordered_allocator);
    RUN(default_pool_is_served_other_pools_pass_through_as_outside_memory);
    RUN(mem_get_info_counts_the_cache_as_free_within_the_limit);
    RUN(oom_is_cudaErrorMemoryAllocation_and_left_as_the_last_error);
    RUN(statuses_map_to_cuda_errors);
    RUN(a_wrap_table_pointing_back_into_ranksnap_is_refused);
    RUN(outside_labels_reach_the_snapshot_and_the_report);
    RUN(torch_entry_points_allocate_from_the_cache);
    RUN(blocks_live_at_finalize_stay_valid_and_are_freed_afterwards);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_summary();
}
