/*
 * test_gpu_alloc.c — the allocator on a real device (label gpu).
 *
 * The policy tests of the unit suite run on the sim backend; these repeat the ones whose truth
 * depends on the device: real segments and addresses, cross-stream frees ordered by real CUDA
 * events, OOM from the device itself and from RANKSNAP_MEMORY_LIMIT, and a snapshot taken on the
 * cuda backend. A stream is kept busy, deterministically and without a kernel, by a host function
 * enqueued on it that waits for a flag the test sets.
 *
 * The allocators take PyTorch's settings from RANKSNAP_ALLOC_CONF (read as the runtime reads it):
 * ctest runs the program once with the defaults and once with expandable_segments:True, whose
 * pages the cuda backend maps through CUDA's virtual memory API.
 *
 * Without a usable device it prints why and exits 77, which ctest reports as skipped.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "alloc.h"
#include "backend.h"
#include "backend_cuda.h"
#include "check.h"
#include "options.h"
#include "rsnap_decode.h"
#include "snapshot.h"

#define MiB ((size_t)1 << 20)

static rs_backend *backend;
static rs_options opts; /* RANKSNAP_ALLOC_CONF */

static void CUDART_CB hold_stream(void *flag)
{
    while (!atomic_load((atomic_int *)flag)) usleep(100);
}

static rs_alloc *new_alloc(uint64_t limit)
{
    rs_alloc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.memory_limit = limit;
    cfg.conf = &opts.alloc_conf;
    rs_alloc *a = NULL;
    CHECK(rs_alloc_create(backend, &cfg, &a) == RANKSNAP_OK);
    return a;
}

TEST(cuda_backend_reports_the_device)
{
    rs_device_info d;
    CHECK(backend->ops->device_info(backend, &d) == RANKSNAP_OK);
    CHECK(d.name[0] != '\0');
    CHECK(strncmp(d.uuid, "GPU-", 4) == 0);
    CHECK(d.total_bytes > 0);
    uint64_t f = 0, t = 0;
    CHECK(backend->ops->mem_info(backend, &f, &t) == RANKSNAP_OK);
    CHECK(f > 0 && f <= t);
}

TEST(small_requests_share_one_2mib_segment_on_the_device)
{
    rs_alloc *a = new_alloc(0);
    void *p = NULL, *q = NULL;
    CHECK(rs_alloc_malloc(a, 1000, NULL, &p) == RANKSNAP_OK);
    CHECK(rs_alloc_malloc(a, 1000, NULL, &q) == RANKSNAP_OK);
    CHECK((uintptr_t)q == (uintptr_t)p + 1024);
    ranksnap_stats s;
    memset(&s, 0, sizeof s);
    rs_alloc_get_stats(a, &s);
    CHECK_EQ_U64(s.reserved_bytes, 2 * MiB);
    CHECK_EQ_U64(s.allocated_bytes, 2048);
    /* the memory is real: the device can write it */
    CHECK(cudaMemset(p, 0xab, 1000) == cudaSuccess);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(rs_alloc_free(a, p) == RANKSNAP_OK);
    CHECK(rs_alloc_free(a, q) == RANKSNAP_OK);
    CHECK(rs_alloc_empty_cache(a) == RANKSNAP_OK);
    rs_alloc_get_stats(a, &s);
    CHECK_EQ_U64(s.reserved_bytes, 0);
    rs_alloc_destroy(a);
}

TEST(large_request_takes_a_20mib_segment_and_is_reused_warm)
{
    rs_alloc *a = new_alloc(0);
    void *p = NULL, *q = NULL;
    CHECK(rs_alloc_malloc(a, 5 * MiB, NULL, &p) == RANKSNAP_OK);
    ranksnap_stats s;
    memset(&s, 0, sizeof s);
    rs_alloc_get_stats(a, &s);
    CHECK_EQ_U64(s.reserved_bytes, 20 * MiB);
    CHECK(rs_alloc_free(a, p) == RANKSNAP_OK);
    CHECK(rs_alloc_malloc(a, 5 * MiB, NULL, &q) == RANKSNAP_OK);
    CHECK(p == q);
    rs_alloc_get_stats(a, &s);
    CHECK_EQ_U64(s.num_segment_allocs, 1);
    CHECK(rs_alloc_free(a, q) == RANKSNAP_OK);
    rs_alloc_destroy(a);
}

TEST(block_used_on_another_stream_waits_for_its_event)
{
    rs_alloc *a = new_alloc(0);
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess);
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess);
    void *p = NULL, *q = NULL, *r = NULL;
    CHECK(rs_alloc_malloc(a, 4 * MiB, s1, &p) == RANKSNAP_OK);
    atomic_int flag = 0;
    CHECK(cudaLaunchHostFunc(s2, hold_stream, &flag) == cudaSuccess);
    CHECK(rs_alloc_record_stream(a, p, s2) == RANKSNAP_OK);
    CHECK(rs_alloc_free(a, p) == RANKSNAP_OK);
    ranksnap_stats st;
    memset(&st, 0, sizeof st);
    rs_alloc_get_stats(a, &st);
    CHECK_EQ_U64(st.allocated_bytes, 0);
    CHECK_EQ_U64(st.active_bytes, 4 * MiB); /* awaiting the event on s2 */
    CHECK(rs_alloc_malloc(a, 4 * MiB, s1, &q) == RANKSNAP_OK);
    CHECK(q != p); /* s2 still holds the old block */
    atomic_store(&flag, 1);
    CHECK(cudaStreamSynchronize(s2) == cudaSuccess);
    CHECK(rs_alloc_malloc(a, 4 * MiB, s1, &r) == RANKSNAP_OK);
    CHECK(r == p); /* the event completed: the block is back and is the best fit */
    CHECK(rs_alloc_free(a, q) == RANKSNAP_OK);
    CHECK(rs_alloc_free(a, r) == RANKSNAP_OK);
    rs_alloc_destroy(a);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
}

TEST(memory_limit_gives_oom_with_the_numbers)
{
    rs_alloc *a = new_alloc(64 * MiB);
    void *p = NULL, *q = NULL;
    CHECK(rs_alloc_malloc(a, 40 * MiB, NULL, &p) == RANKSNAP_OK);
    CHECK(rs_alloc_malloc(a, 40 * MiB, NULL, &q) == RANKSNAP_ERR_OUT_OF_MEMORY);
    CHECK(q == NULL);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "40.00 MiB");
    rs_oom_info oom;
    CHECK(rs_alloc_last_oom(a, &oom));
    CHECK_EQ_U64(oom.requested, 40 * MiB);
    CHECK_EQ_U64(oom.memory_limit, 64 * MiB);
    CHECK(oom.device_total > 0);
    CHECK(rs_alloc_free(a, p) == RANKSNAP_OK);
    rs_alloc_destroy(a);
}

TEST(device_oom_is_reported_and_does_not_poison_later_calls)
{
    rs_alloc *a = new_alloc(0);
    uint64_t f = 0, t = 0;
    CHECK(backend->ops->mem_info(backend, &f, &t) == RANKSNAP_OK);
    void *p = NULL;
    CHECK(rs_alloc_malloc(a, (size_t)(t + (1ull << 30)), NULL, &p) == RANKSNAP_ERR_OUT_OF_MEMORY);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "total capacity");
    ranksnap_stats s;
    memset(&s, 0, sizeof s);
    rs_alloc_get_stats(a, &s);
    CHECK_EQ_U64(s.num_ooms, 1);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(rs_alloc_malloc(a, MiB, NULL, &p) == RANKSNAP_OK);
    CHECK(rs_alloc_free(a, p) == RANKSNAP_OK);
    rs_alloc_destroy(a);
}

TEST(snapshot_on_the_cuda_backend_names_the_device)
{
    setenv("RANKSNAP_BACKEND", "cuda", 1);
    setenv("RANKSNAP_STACKS", "native", 1);
    CHECK(ranksnap_init(NULL) == RANKSNAP_OK);
    void *p = NULL;
    CHECK(ranksnap_malloc(&p, 3 * MiB, NULL) == RANKSNAP_OK);
    char path[] = "/tmp/ranksnap-gpu-test-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    CHECK(ranksnap_dump(path) == RANKSNAP_OK);
    rs_snap *snap = NULL;
    CHECK(rs_rsnap_decode_file(path, &snap) == RANKSNAP_OK);
    if (snap) {
        CHECK(strcmp(snap->backend, "cuda") == 0);
        CHECK(snap->device.total_bytes > 0);
        CHECK(snap->n_segments == 1);
        rs_snap_free(snap);
    }
    unlink(path);
    CHECK(ranksnap_free(p) == RANKSNAP_OK);
    CHECK(ranksnap_finalize() == RANKSNAP_OK);
}

int main(void)
{
    if (!rs_backend_cuda_available()) {
        printf("SKIPPED: no usable CUDA device here (the cuda backend could not load the runtime "
               "or found no device); run on a GPU machine\n");
        return 77;
    }
    if (rs_options_load_one(&opts, "RANKSNAP_ALLOC_CONF", NULL) != RANKSNAP_OK) {
        printf("FAIL %s\n", ranksnap_last_error());
        return 1;
    }
    if (rs_backend_cuda_create(-1, &backend) != RANKSNAP_OK) {
        printf("FAIL cuda backend: %s\n", ranksnap_last_error());
        return 1;
    }
    RUN(cuda_backend_reports_the_device);
    RUN(small_requests_share_one_2mib_segment_on_the_device);
    RUN(large_request_takes_a_20mib_segment_and_is_reused_warm);
    RUN(block_used_on_another_stream_waits_for_its_event);
    RUN(memory_limit_gives_oom_with_the_numbers);
    RUN(device_oom_is_reported_and_does_not_poison_later_calls);
    RUN(snapshot_on_the_cuda_backend_names_the_device);
    backend->ops->destroy(backend);
    return check_summary();
}
