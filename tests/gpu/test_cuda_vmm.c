/*
 * test_cuda_vmm.c — the cuda backend's expandable segments, through CUDA's virtual memory API.
 *
 * In CI (label unit) it runs on fake_cudart.c and fake_cuda_driver.c (LD_LIBRARY_PATH to their
 * folder: the backend dlopens libcudart.so.<major> and libcuda.so.1 by name), whose pages are the
 * host's own memory, so the test writes into what was mapped. It checks what the driver saw: one
 * handle per page, pages unmapped and released when the cache is emptied, the range given back
 * when nothing of it is mapped, an OOM when the device has no room. With --no-vmm the fake driver
 * reports no virtual memory management: the allocator keeps segments plain (cudaMalloc).
 * On the GPU machine the same program runs on the real driver (label gpu): there the driver's
 * counters are not readable and only the allocator's are checked.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "backend_cuda.h"
#include "check.h"

#define MiB ((size_t)1 << 20)

typedef size_t (*counter_fn)(void);
static counter_fn mapped_bytes, live_handles, reserved_ranges;

/* The fake driver's counters, when it is the driver that was loaded. */
static int fake_counters(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) return 0;
    *(void **)(&mapped_bytes) = dlsym(h, "fake_driver_mapped_bytes");
    *(void **)(&live_handles) = dlsym(h, "fake_driver_live_handles");
    *(void **)(&reserved_ranges) = dlsym(h, "fake_driver_reserved_ranges");
    return mapped_bytes && live_handles && reserved_ranges;
}

static rs_alloc *make(rs_backend **b, const char *conf)
{
    rs_alloc_conf c;
    char why[128];
    rs_alloc *a = NULL;
    rs_alloc_conf_reset(&c);
    CHECK(rs_alloc_conf_parse(&c, conf, 0, why, sizeof why) == 0);
    CHECK(rs_backend_cuda_create(-1, b) == RANKSNAP_OK);
    if (!*b) return NULL;
    rs_alloc_config cfg = {.conf = &c};
    CHECK(rs_alloc_create(*b, &cfg, &a) == RANKSNAP_OK);
    return a;
}

static ranksnap_stats stats(rs_alloc *a)
{
    ranksnap_stats s;
    memset(&s, 0, sizeof s);
    rs_alloc_get_stats(a, &s);
    return s;
}

TEST(expandable_segments_map_write_and_unmap_pages_through_the_driver)
{
    rs_backend *b = NULL;
    rs_alloc *a = make(&b, "expandable_segments:True");
    if (!a) return;
    CHECK(b->ops->map != NULL);
    int fake = fake_counters();
    void *x = NULL, *y = NULL;
    CHECK(rs_alloc_malloc(a, 5 * MiB, NULL, &x) == RANKSNAP_OK);
    CHECK(rs_alloc_malloc(a, 30 * MiB, NULL, &y) == RANKSNAP_OK);
    CHECK((char *)y == (char *)x + 5 * MiB); /* one range, grown */
    CHECK_EQ_U64(stats(a).reserved_bytes, 40 * MiB);
    if (fake) {
        memset(x, 0xab, 5 * MiB); /* really mapped, read-write */
        memset(y, 0xcd, 30 * MiB);
        CHECK_EQ_U64(mapped_bytes(), 40 * MiB);
        CHECK_EQ_U64(live_handles(), 2); /* 20 MiB pages */
        CHECK_EQ_U64(reserved_ranges(), 1);
    }
    CHECK(rs_alloc_free(a, y) == RANKSNAP_OK);
    CHECK(rs_alloc_empty_cache(a) == RANKSNAP_OK);
    CHECK_EQ_U64(stats(a).reserved_bytes, 20 * MiB);
    if (fake) {
        CHECK_EQ_U64(mapped_bytes(), 20 * MiB);
        CHECK_EQ_U64(live_handles(), 1);
        CHECK(((unsigned char *)x)[5 * MiB - 1] == 0xab);
    }
    CHECK(rs_alloc_free(a, x) == RANKSNAP_OK);
    CHECK(rs_alloc_empty_cache(a) == RANKSNAP_OK);
    CHECK_EQ_U64(stats(a).reserved_bytes, 0);
    if (fake) {
        CHECK_EQ_U64(mapped_bytes(), 0);
        CHECK_EQ_U64(live_handles(), 0);
        CHECK_EQ_U64(reserved_ranges(), 0);
    }
    CHECK(rs_alloc_check(a));
    rs_alloc_destroy(a);
    b->ops->destroy(b);
}

TEST(expandable_segments_run_out_of_memory_when_the_driver_has_no_room)
{
    if (!fake_counters()) {
        printf("  (real driver: the device is too large to fill here)\n");
        return;
    }
    setenv("FAKE_CUDA_DRIVER_CAPACITY", "67108864", 1); /* 64 MiB */
    rs_backend *b = NULL;
    rs_alloc *a = make(&b, "expandable_segments:True");
    if (!a) return;
    void *x = NULL, *y = NULL;
    CHECK(rs_alloc_malloc(a, 50 * MiB, NULL, &x) == RANKSNAP_OK); /* three pages */
    CHECK(rs_alloc_malloc(a, 30 * MiB, NULL, &y) == RANKSNAP_ERR_OUT_OF_MEMORY);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "CUDA out of memory. Tried to allocate 30.00 MiB.");
    CHECK_EQ_U64(mapped_bytes(), 60 * MiB); /* what failed left nothing behind */
    CHECK_EQ_U64(live_handles(), 3);
    rs_alloc_destroy(a); /* gives back every page and the range */
    CHECK_EQ_U64(mapped_bytes(), 0);
    CHECK_EQ_U64(live_handles(), 0);
    CHECK_EQ_U64(reserved_ranges(), 0);
    b->ops->destroy(b);
    unsetenv("FAKE_CUDA_DRIVER_CAPACITY");
}

TEST(without_virtual_memory_management_segments_stay_plain)
{
    rs_backend *b = NULL;
    rs_alloc *a = make(&b, "expandable_segments:True");
    if (!a) return;
    CHECK(b->ops->map == NULL);
    rs_alloc_conf c;
    rs_alloc_get_conf(a, &c);
    CHECK(c.expandable_segments == 0);
    void *x = NULL;
    CHECK(rs_alloc_malloc(a, 5 * MiB, NULL, &x) == RANKSNAP_OK);
    CHECK_EQ_U64(stats(a).reserved_bytes, 20 * MiB); /* a plain 20 MiB segment */
    if (fake_counters()) CHECK_EQ_U64(mapped_bytes(), 0);
    rs_alloc_destroy(a);
    b->ops->destroy(b);
}

int main(int argc, char **argv)
{
    if (!rs_backend_cuda_available()) {
        printf("SKIPPED: no CUDA device (real or fake) to run on\n");
        return 77;
    }
    if (argc > 1 && strcmp(argv[1], "--no-vmm") == 0) {
        RUN(without_virtual_memory_management_segments_stay_plain);
    } else {
        RUN(expandable_segments_map_write_and_unmap_pages_through_the_driver);
        RUN(expandable_segments_run_out_of_memory_when_the_driver_has_no_room);
    }
    return check_summary();
}
