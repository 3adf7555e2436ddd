/*
 * test_driver_routes.c — a program that allocates device memory through the CUDA driver by every
 * route programs and their libraries take, run preloaded with libranksnap.so on the fake driver
 * (tests/gpu/fake_cuda_driver.c) by tests/cli/driver_routes_job.sh (label mpi).
 *
 * Rank r works on device r % 2 and allocates, each of a size of its own so that the checker can
 * tell them apart: 3 MiB by the direct export (cuMemAlloc_v2), 5 MiB through dlsym on a dlopen'ed
 * libcuda, 7 MiB through cuGetProcAddress_v2("cuMemAlloc"), 9 MiB through the cuGetProcAddress
 * that cuGetProcAddress itself returned, asked for cuMemAllocAsync with the per-thread flag (the
 * _ptsz variant), 11 MiB from a pool (cuMemAllocFromPoolAsync, CUDA 11.2's version), 13 MiB of
 * managed memory, 15 rows of 1 MiB pitched, 4 MiB of physical memory by cuMemCreate, mapped
 * and released while still mapped, and CUDA arrays of 17 MiB (2D), 19 MiB (3D) and 21 MiB
 * (mipmapped, through cuGetProcAddress_v2). With FAKE_NCCL_LIB naming tests/gpu's fake NCCL, it
 * creates a communicator, whose 25 MiB on this thread and 23 MiB on NCCL's own thread come from
 * the driver, and destroys it before the second snapshot. It checks what each route handed out
 * (ranksnap's wrapper for a wrapped name, the driver's own for cuInit and for cuMemAlloc's pre-3.2
 * ABI, the same wrapper twice), writes a snapshot with all of it live (ARG/live-RANK.rsnap),
 * frees everything, asks for more than the device has (the OOM), and writes a second snapshot
 * (ARG/end-RANK.rsnap): the pool keeps the 20 MiB of its two freed
 * allocations reserved, which that snapshot shows as the pools' cached bytes. Prints "rank R: routes
 * ok" or what failed.
 *
 * With --vmm as its second argument it runs ten rounds of NVIDIA's vectorAddMMAP sample: four
 * 2 MiB handles (cuMemCreate) mapped side by side into one reserved 8 MiB range, unmapped by one
 * cuMemUnmap of the whole range, released; every call must succeed (under RANKSNAP_MEMORY_LIMIT,
 * memory ranksnap still thought held would be refused), and it prints "rank R: vmm ok".
 *
 * With --same-address as its second argument, an allocation is made in the moment between the
 * driver's free of 8 MiB and the free call's return (as another thread's can be), and is given
 * the freed address; both are freed, and 60 MiB must then be granted under
 * RANKSNAP_MEMORY_LIMIT=64MiB (memory ranksnap still thought held would refuse it). Prints
 * "rank R: same address ok".
 *
 * With --cap as its second argument it allocates 16 MiB at a time through cuMemAlloc_v2 until
 * the driver (or RANKSNAP_MEMORY_LIMIT at the driver) refuses, eight at most, prints "rank R: N
 * under the cap", and frees them. With --diverge, rank 2 allocates three 16 MiB blocks and the
 * others two, the third at a line of its own, and ends with them live.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#undef cuGetProcAddress

#define MiB ((size_t)1 << 20)

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*proc_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*proc_fn)(const char *, void **, int, cuuint64_t);
typedef int (*dump_fn)(const char *);
/* ncclUniqueId, passed by value */
typedef struct {
    char internal[128];
} nccl_id;
/* exported by the driver, declared by cuda.h only for per-thread-stream builds */
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s);

static int failures;
static int rank_;

#define EXPECT(c)                                                                                  \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            printf("rank %d: FAILED %s (line %d)\n", rank_, #c, __LINE__);                         \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* 1 when `f` lies in the library whose file name contains `lib`. */
static int in_library(const void *f, const char *lib)
{
    Dl_info d;
    return f && dladdr(f, &d) && d.dli_fname && strstr(d.dli_fname, lib) != NULL;
}

static CUdeviceptr between; /* the allocation made inside the free (--same-address) */

static void allocate_between(void)
{
    if (cuMemAlloc_v2(&between, 8 * MiB) != CUDA_SUCCESS) between = 0;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    const char *r = getenv("OMPI_COMM_WORLD_RANK"); /* Open MPI's mpirun, else MPICH's Hydra */
    if (!r) r = getenv("PMI_RANK");
    rank_ = r ? atoi(r) : 0;
    int dev = rank_ % 2;
    void *drv = dlopen("libcuda.so.1", RTLD_NOW);
    if (!drv) return printf("rank %d: FAILED no libcuda.so.1: %s\n", rank_, dlerror()), 1;
    void (*set_device)(int);
    *(void **)&set_device = dlsym(drv, "fake_driver_set_device");
    if (!set_device) return printf("rank %d: FAILED not the fake driver\n", rank_), 1;
    set_device(dev);
    EXPECT(cuInit(0) == CUDA_SUCCESS);
    if (argc > 2 && !strcmp(argv[2], "--same-address")) {
        void (*after_next_free)(void (*)(void));
        *(void **)&after_next_free = dlsym(drv, "fake_driver_after_next_free");
        CUdeviceptr first = 0, big = 0;
        EXPECT(after_next_free && cuMemAlloc_v2(&first, 8 * MiB) == CUDA_SUCCESS);
        if (after_next_free) after_next_free(allocate_between);
        EXPECT(cuMemFree_v2(first) == CUDA_SUCCESS);
        EXPECT(between != 0 && between == first); /* the freed address, given again at once */
        if (between) EXPECT(cuMemFree_v2(between) == CUDA_SUCCESS);
        EXPECT(cuMemAlloc_v2(&big, 60 * MiB) == CUDA_SUCCESS); /* nothing is held any more */
        if (big) EXPECT(cuMemFree_v2(big) == CUDA_SUCCESS);
        printf("rank %d: %s\n", rank_, failures ? "FAILED" : "same address ok");
        return failures ? 1 : 0;
    }
    if (argc > 2 && !strcmp(argv[2], "--vmm")) {
        CUmemAllocationProp prop = {0};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = dev;
        for (int round = 0; round < 10; round++) {
            CUdeviceptr va = 0;
            CUmemGenericAllocationHandle h[4] = {0};
            EXPECT(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0) == CUDA_SUCCESS);
            for (int k = 0; k < 4; k++) {
                EXPECT(cuMemCreate(&h[k], 2 * MiB, &prop, 0) == CUDA_SUCCESS);
                EXPECT(cuMemMap(va + (CUdeviceptr)k * 2 * MiB, 2 * MiB, 0, h[k], 0) == CUDA_SUCCESS);
            }
            EXPECT(cuMemUnmap(va, 8 * MiB) == CUDA_SUCCESS); /* all four at once */
            for (int k = 0; k < 4; k++) EXPECT(cuMemRelease(h[k]) == CUDA_SUCCESS);
            EXPECT(cuMemAddressFree(va, 8 * MiB) == CUDA_SUCCESS);
        }
        printf("rank %d: %s\n", rank_, failures ? "FAILED" : "vmm ok");
        return failures ? 1 : 0;
    }
    if (argc > 2 && !strcmp(argv[2], "--cap")) {
        CUdeviceptr got[8];
        int n = 0;
        while (n < 8 && cuMemAlloc_v2(&got[n], 16 * MiB) == CUDA_SUCCESS) n++;
        printf("rank %d: %d under the cap\n", rank_, n);
        for (int i = 0; i < n; i++) cuMemFree_v2(got[i]);
        return 0;
    }
    if (argc > 2 && !strcmp(argv[2], "--diverge")) {
        CUdeviceptr x1 = 0, x2 = 0, x3 = 0;
        EXPECT(cuMemAlloc_v2(&x1, 16 * MiB) == CUDA_SUCCESS && cuMemAlloc_v2(&x2, 16 * MiB) == CUDA_SUCCESS);
        if (rank_ == 2) EXPECT(cuMemAlloc_v2(&x3, 16 * MiB) == CUDA_SUCCESS); /* the bigger batch */
        printf("rank %d: %s\n", rank_, failures ? "FAILED" : "diverge ok");
        return failures ? 1 : 0;
    }
    CUdeviceptr a = 0, b = 0, c = 0, d = 0, e = 0, f = 0, g = 0;
    size_t pitch = 0;

    /* the direct export */
    EXPECT(cuMemAlloc_v2(&a, 3 * MiB) == CUDA_SUCCESS);
    /* dlsym on the driver's handle */
    alloc_fn by_dlsym;
    *(void **)&by_dlsym = dlsym(drv, "cuMemAlloc_v2");
    EXPECT(in_library((void *)by_dlsym, "libranksnap"));
    EXPECT(by_dlsym && by_dlsym(&b, 5 * MiB) == CUDA_SUCCESS);
    /* cuGetProcAddress_v2, found by dlsym as the runtimes find it */
    proc_v2_fn get_v2;
    *(void **)&get_v2 = dlsym(drv, "cuGetProcAddress_v2");
    EXPECT(in_library((void *)get_v2, "libranksnap"));
    void *fn = NULL, *again = NULL, *init = NULL;
    CUdriverProcAddressQueryResult q;
    EXPECT(get_v2 && get_v2("cuMemAlloc", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q) == CUDA_SUCCESS);
    EXPECT(in_library(fn, "libranksnap"));
    EXPECT(fn && ((alloc_fn)fn)(&c, 7 * MiB) == CUDA_SUCCESS);
    /* a name ranksnap does not wrap: the driver's own */
    EXPECT(get_v2 && get_v2("cuInit", &init, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q) == CUDA_SUCCESS);
    EXPECT(init == dlsym(drv, "cuInit") && in_library(init, "fake"));
    /* cuGetProcAddress asked for itself, then for the per-thread variant of cuMemAllocAsync */
    void *self = NULL;
    EXPECT(get_v2 && get_v2("cuGetProcAddress", &self, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q) == CUDA_SUCCESS);
    EXPECT(self == (void *)get_v2);
    void *async = NULL;
    EXPECT(self && ((proc_v2_fn)self)("cuMemAllocAsync", &async, 12000,
                                      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &q) == CUDA_SUCCESS);
    EXPECT(async == dlsym(RTLD_DEFAULT, "cuMemAllocAsync_ptsz"));
    EXPECT(async && ((async_fn)async)(&d, 9 * MiB, NULL) == CUDA_SUCCESS);
    /* an ABI older than the one ranksnap wraps (cuMemAlloc before CUDA 3.2): the driver's own */
    void *old = NULL;
    EXPECT(get_v2 && get_v2("cuMemAlloc", &old, 3010, CU_GET_PROC_ADDRESS_DEFAULT, &q) == CUDA_SUCCESS);
    EXPECT(in_library(old, "fake") && old != fn);
    /* the old cuGetProcAddress, and nothing wrapped twice */
    proc_fn get_v1;
    *(void **)&get_v1 = dlsym(drv, "cuGetProcAddress");
    EXPECT(get_v1 && get_v1("cuMemAlloc", &again, 12000, CU_GET_PROC_ADDRESS_DEFAULT) == CUDA_SUCCESS);
    EXPECT(again == fn);
    /* a pool, asked for by CUDA 11.2 */
    void *pool_fn = NULL;
    EXPECT(get_v2 && get_v2("cuMemAllocFromPoolAsync", &pool_fn, 11020, CU_GET_PROC_ADDRESS_DEFAULT, &q) == CUDA_SUCCESS);
    EXPECT(pool_fn && ((CUresult(*)(CUdeviceptr *, size_t, CUmemoryPool, CUstream))pool_fn)(
                          &e, 11 * MiB, NULL, NULL) == CUDA_SUCCESS);
    EXPECT(cuMemAllocManaged(&f, 13 * MiB, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
    EXPECT(cuMemAllocPitch_v2(&g, &pitch, MiB, 15, 4) == CUDA_SUCCESS && pitch == MiB);
    /* physical memory: created, mapped, released while mapped (still held), unmapped (gone) */
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va = 0;
    EXPECT(cuMemCreate(&h, 4 * MiB, &prop, 0) == CUDA_SUCCESS);
    EXPECT(cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0) == CUDA_SUCCESS);
    EXPECT(cuMemMap(va, 4 * MiB, 0, h, 0) == CUDA_SUCCESS);
    EXPECT(cuMemRelease(h) == CUDA_SUCCESS);

    /* CUDA arrays: 2D, 3D, and mipmapped through cuGetProcAddress_v2 */
    CUarray arr2 = NULL, arr3 = NULL;
    CUmipmappedArray mip = NULL;
    CUDA_ARRAY_DESCRIPTOR ad = {0};
    ad.Width = 4352; /* 4352 x 1024 floats: 17 MiB */
    ad.Height = 1024;
    ad.Format = CU_AD_FORMAT_FLOAT;
    ad.NumChannels = 1;
    EXPECT(cuArrayCreate_v2(&arr2, &ad) == CUDA_SUCCESS);
    CUDA_ARRAY3D_DESCRIPTOR a3 = {0};
    a3.Width = 4864; /* 4864 x 256 x 4 floats: 19 MiB */
    a3.Height = 256;
    a3.Depth = 4;
    a3.Format = CU_AD_FORMAT_FLOAT;
    a3.NumChannels = 1;
    EXPECT(cuArray3DCreate_v2(&arr3, &a3) == CUDA_SUCCESS);
    void *mip_fn = NULL;
    EXPECT(get_v2 && get_v2("cuMipmappedArrayCreate", &mip_fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q) == CUDA_SUCCESS);
    EXPECT(in_library(mip_fn, "libranksnap"));
    a3.Width = 5376; /* 5376 x 1024 floats, one level: 21 MiB */
    a3.Height = 1024;
    a3.Depth = 0;
    EXPECT(mip_fn && ((CUresult(*)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned))mip_fn)(
                         &mip, &a3, 1) == CUDA_SUCCESS);

    /* a communicator: NCCL's memory, part of it allocated on NCCL's own thread */
    const char *nccl_lib = getenv("FAKE_NCCL_LIB");
    void *comm = NULL;
    int (*comm_destroy)(void *) = NULL;
    if (nccl_lib && *nccl_lib) {
        EXPECT(dlopen(nccl_lib, RTLD_NOW | RTLD_GLOBAL) != NULL);
        int (*init_rank)(void **, int, nccl_id, int);
        *(void **)&init_rank = dlsym(RTLD_DEFAULT, "ncclCommInitRank");
        *(void **)&comm_destroy = dlsym(RTLD_DEFAULT, "ncclCommDestroy");
        EXPECT(in_library((void *)init_rank, "libranksnap"));
        nccl_id id = {{0}};
        EXPECT(init_rank && init_rank(&comm, 4, id, rank_) == 0);
    }

    dump_fn dump;
    *(void **)&dump = dlsym(RTLD_DEFAULT, "ranksnap_dump");
    char path[4096];
    snprintf(path, sizeof path, "%s/live-%d.rsnap", dir, rank_);
    EXPECT(dump && dump(path) == 0);

    EXPECT(cuMemFree_v2(a) == CUDA_SUCCESS && by_dlsym && cuMemFree_v2(b) == CUDA_SUCCESS);
    EXPECT(cuMemFree_v2(c) == CUDA_SUCCESS && cuMemFreeAsync_ptsz(d, NULL) == CUDA_SUCCESS);
    EXPECT(cuMemFreeAsync(e, NULL) == CUDA_SUCCESS && cuMemFree_v2(f) == CUDA_SUCCESS);
    EXPECT(cuMemFree_v2(g) == CUDA_SUCCESS);
    EXPECT(cuMemUnmap(va, 4 * MiB) == CUDA_SUCCESS && cuMemAddressFree(va, 4 * MiB) == CUDA_SUCCESS);
    EXPECT(cuArrayDestroy(arr2) == CUDA_SUCCESS && cuArrayDestroy(arr3) == CUDA_SUCCESS);
    EXPECT(cuMipmappedArrayDestroy(mip) == CUDA_SUCCESS);
    if (comm) EXPECT(comm_destroy && comm_destroy(comm) == 0);
    CUdeviceptr x = 0;
    EXPECT(cuMemAlloc_v2(&x, (size_t)1 << 50) == CUDA_ERROR_OUT_OF_MEMORY);
    snprintf(path, sizeof path, "%s/end-%d.rsnap", dir, rank_);
    EXPECT(dump && dump(path) == 0);
    if (!failures) printf("rank %d: routes ok\n", rank_);
    return failures ? 1 : 0;
}
