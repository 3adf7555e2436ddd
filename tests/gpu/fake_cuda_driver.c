/*
 * fake_cuda_driver.c — a stand-in for the CUDA driver (libcuda.so.1) on machines without a GPU:
 * the virtual memory API that expandable segments use, so that the cuda backend's path through it
 * runs in CI (label unit), next to fake_cudart.c for the runtime.
 *
 * It plays the API with the host's own virtual memory: cuMemAddressReserve reserves address space
 * (mmap PROT_NONE, no memory), cuMemCreate makes a memfd of the page's size (the handle), cuMemMap
 * maps that file at the address, cuMemSetAccess makes it read-write, cuMemUnmap puts the
 * reservation back, cuMemRelease gives the handle up. So the pages the backend maps can really be
 * written, and a page unmapped too early faults. It checks what the real driver checks (a map
 * inside a reserved range, of at most the handle's size from its start, not over another; an
 * unmap of whole mappings only) and counts what is alive as the driver does: a handle's memory
 * until it is released and unmapped everywhere (its value is not given again before), which the
 * tests read back through fake_driver_* (dlsym on the loaded library), thread-safe. The device has
 * FAKE_CUDA_DRIVER_CAPACITY bytes (default 16 GiB, the fake runtime's); FAKE_CUDA_DRIVER_NO_VMM=1
 * makes it report no virtual memory management. The first calls a process makes (cuInit, the
 * device count, the primary context) are exported by name, below.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cuda.h>
/* both cuGetProcAddress variants are defined here */
#undef cuGetProcAddress

#define FAKE_EXPORT __attribute__((visibility("default")))
#define FAKE_MAX 4096

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct range {
    uintptr_t addr;
    size_t size;
} range;

static range reserved[64];
static size_t n_reserved;
/* A handle's memory lives while it is not released or still mapped somewhere. */
static struct {
    int fd;
    size_t size;
    int device;
    int live, released;
    size_t mappings;
} handles[FAKE_MAX];
static struct {
    uintptr_t addr;
    size_t size;
    size_t handle; /* index into handles */
} maps[FAKE_MAX];
/* created_bytes: the memory of live handles, per device */
static size_t n_maps, created_bytes[2], mapped_bytes;
static size_t live_handles;
/* The handle whose memory went last (+1; 0: none): its value is given again first, as the
 * driver gives a freed address again at once. Under `mu`. */
static size_t reuse_handle;

/* Called once, by the next call that frees memory (cuMemFree_v2, cuMemFreeAsync, or the
 * cuMemRelease or cuMemUnmap after which a handle's memory is gone), after the memory is freed
 * and before the call returns: another thread's allocation in that moment, which may be given
 * the same address or handle value (fake_driver_after_next_free, for the interposer's order of
 * bookkeeping). */
typedef void (*after_free_fn)(void);
static _Atomic(after_free_fn) after_free;

FAKE_EXPORT void fake_driver_after_next_free(void (*fn)(void))
{
    atomic_store(&after_free, fn);
}

/* The hook's turn, once `freed` says memory went (outside `mu`: the hook allocates). */
static void freed_hook(int freed)
{
    after_free_fn fn = freed ? atomic_exchange(&after_free, (after_free_fn)NULL) : NULL;
    if (fn) fn();
}

static size_t capacity(void)
{
    const char *c = getenv("FAKE_CUDA_DRIVER_CAPACITY");
    return c && *c ? (size_t)strtoull(c, NULL, 10) : (size_t)16 << 30;
}

static int inside_reserved(uintptr_t p, size_t n)
{
    for (size_t i = 0; i < n_reserved; i++)
        if (p >= reserved[i].addr && n <= reserved[i].size && p - reserved[i].addr <= reserved[i].size - n)
            return 1;
    return 0;
}

static CUresult fake_device_get(CUdevice *d, int ordinal)
{
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}

static CUresult fake_get_attribute(int *v, CUdevice_attribute a, CUdevice d)
{
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    const char *no = getenv("FAKE_CUDA_DRIVER_NO_VMM");
    if (a == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)
        *v = !(no && *no == '1');
    else
        *v = 0;
    return CUDA_SUCCESS;
}

static CUresult fake_address_reserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                                     unsigned long long flags)
{
    (void)align;
    (void)addr;
    if (!p || !size || flags) return CUDA_ERROR_INVALID_VALUE;
    void *m = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&mu);
    CUresult e = CUDA_SUCCESS;
    if (n_reserved == sizeof reserved / sizeof reserved[0]) {
        munmap(m, size);
        e = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        reserved[n_reserved++] = (range){(uintptr_t)m, size};
        *p = (CUdeviceptr)(uintptr_t)m;
    }
    pthread_mutex_unlock(&mu);
    return e;
}

static CUresult fake_address_free(CUdeviceptr p, size_t size)
{
    pthread_mutex_lock(&mu);
    CUresult e = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n_reserved; i++) {
        if (reserved[i].addr != (uintptr_t)p || reserved[i].size != size) continue;
        for (size_t k = 0; k < n_maps; k++)
            if (maps[k].addr >= reserved[i].addr && maps[k].addr < reserved[i].addr + size) {
                pthread_mutex_unlock(&mu);
                return CUDA_ERROR_INVALID_VALUE; /* still mapped */
            }
        munmap((void *)(uintptr_t)p, size);
        reserved[i] = reserved[--n_reserved];
        e = CUDA_SUCCESS;
        break;
    }
    pthread_mutex_unlock(&mu);
    return e;
}

static size_t created_total(void)
{
    return created_bytes[0] + created_bytes[1];
}

static size_t live_bytes_total(void);

static CUresult fake_create(CUmemGenericAllocationHandle *h, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    if (!h || !size || !prop || flags || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 || prop->location.id > 1 ||
        size % ((size_t)2 << 20))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    CUresult e = CUDA_ERROR_OUT_OF_MEMORY;
    if (size <= capacity() - created_total() - live_bytes_total()) {
        for (size_t k = 0; k < FAKE_MAX; k++) {
            size_t i = reuse_handle && !handles[reuse_handle - 1].live ? reuse_handle - 1 : k;
            reuse_handle = 0;
            if (handles[i].live) continue;
            int fd = memfd_create("fake-cuda-page", MFD_CLOEXEC);
            if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
                if (fd >= 0) close(fd);
                break;
            }
            handles[i].fd = fd;
            handles[i].size = size;
            handles[i].device = prop->location.id;
            handles[i].live = 1;
            handles[i].released = 0;
            handles[i].mappings = 0;
            created_bytes[handles[i].device] += size;
            live_handles++;
            *h = (CUmemGenericAllocationHandle)(i + 1);
            e = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    return e;
}

/* mu held: the handle's memory goes once it is released and no longer mapped; 1 if it went. */
static int handle_maybe_gone(size_t i)
{
    if (!handles[i].released || handles[i].mappings) return 0;
    close(handles[i].fd);
    handles[i].live = 0;
    created_bytes[handles[i].device] -= handles[i].size;
    live_handles--;
    reuse_handle = i + 1;
    return 1;
}

static CUresult fake_release(CUmemGenericAllocationHandle h)
{
    pthread_mutex_lock(&mu);
    CUresult e = CUDA_ERROR_INVALID_VALUE;
    int gone = 0;
    if (h >= 1 && h <= FAKE_MAX && handles[h - 1].live && !handles[h - 1].released) {
        handles[h - 1].released = 1;
        gone = handle_maybe_gone(h - 1);
        e = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&mu);
    freed_hook(gone);
    return e;
}

static CUresult fake_map(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                         unsigned long long flags)
{
    pthread_mutex_lock(&mu);
    CUresult e = CUDA_SUCCESS;
    uintptr_t a = (uintptr_t)p;
    if (offset || flags || !size || size % ((size_t)2 << 20) || h < 1 || h > FAKE_MAX ||
        !handles[h - 1].live || handles[h - 1].released || size > handles[h - 1].size ||
        !inside_reserved(a, size) || n_maps == FAKE_MAX) {
        e = CUDA_ERROR_INVALID_VALUE;
    } else {
        for (size_t k = 0; k < n_maps; k++)
            if (a < maps[k].addr + maps[k].size && maps[k].addr < a + size) e = CUDA_ERROR_ALREADY_MAPPED;
    }
    if (e == CUDA_SUCCESS) {
        void *m = mmap((void *)a, size, PROT_NONE, MAP_SHARED | MAP_FIXED, handles[h - 1].fd, 0);
        if (m == MAP_FAILED) {
            e = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            maps[n_maps].addr = a;
            maps[n_maps].size = size;
            maps[n_maps].handle = h - 1;
            n_maps++;
            handles[h - 1].mappings++;
            mapped_bytes += size;
        }
    }
    pthread_mutex_unlock(&mu);
    return e;
}

/* As the driver: every mapping inside [p, p + size) goes (one call may end several, mapped side
 * by side); a range that cuts a mapping, or holds none, is refused. */
static CUresult fake_unmap(CUdeviceptr p, size_t size)
{
    uintptr_t lo = (uintptr_t)p, hi = lo + size;
    pthread_mutex_lock(&mu);
    CUresult e = CUDA_ERROR_INVALID_VALUE;
    int cut = 0, gone = 0;
    for (size_t k = 0; k < n_maps; k++)
        if (maps[k].addr < hi && lo < maps[k].addr + maps[k].size &&
            (maps[k].addr < lo || maps[k].addr + maps[k].size > hi))
            cut = 1;
    for (size_t k = 0; !cut && k < n_maps;) {
        if (maps[k].addr < lo || maps[k].addr + maps[k].size > hi) {
            k++;
            continue;
        }
        /* back to reserved address space */
        mmap((void *)maps[k].addr, maps[k].size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        mapped_bytes -= maps[k].size;
        size_t i = maps[k].handle;
        handles[i].mappings--;
        gone |= handle_maybe_gone(i);
        maps[k] = maps[--n_maps];
        e = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&mu);
    freed_hook(gone);
    return e;
}

static CUresult fake_set_access(CUdeviceptr p, size_t size, const CUmemAccessDesc *d, size_t n)
{
    if (!d || n != 1 || d->location.type != CU_MEM_LOCATION_TYPE_DEVICE || d->location.id != 0 ||
        d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
        return CUDA_ERROR_INVALID_VALUE;
    /* every page of the range must be mapped */
    pthread_mutex_lock(&mu);
    size_t covered = 0;
    for (size_t k = 0; k < n_maps; k++)
        if (maps[k].addr >= (uintptr_t)p && maps[k].addr + maps[k].size <= (uintptr_t)p + size)
            covered += maps[k].size;
    pthread_mutex_unlock(&mu);
    if (covered != size) return CUDA_ERROR_INVALID_VALUE;
    return mprotect((void *)(uintptr_t)p, size, PROT_READ | PROT_WRITE) == 0 ? CUDA_SUCCESS
                                                                             : CUDA_ERROR_INVALID_VALUE;
}

static CUresult fake_get_error_string(CUresult e, const char **s)
{
    *s = e == CUDA_SUCCESS ? "no error" : e == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory"
                                                                      : "fake driver error";
    return CUDA_SUCCESS;
}

/* ---- device memory: cuMemAlloc & co. -------------------------------------------------------
 *
 * Host memory plays device memory, charged to the thread's current device (fake_driver_set_device,
 * standing in for cuCtxSetCurrent) against the same capacity as cuMemCreate's; a request beyond it
 * answers CUDA_ERROR_OUT_OF_MEMORY. Streams are never captured. Exported by their exact names, and
 * given out by cuGetProcAddress below by base name, version and per-thread flag, as the real
 * driver does: the wrappers a preloaded ranksnap puts in front must be reached by every route. */
static _Thread_local int cur_device;
static struct {
    void *p;
    size_t n;
    int device;
} live[FAKE_MAX];
static size_t live_bytes[2]; /* per device */

static size_t live_bytes_total(void)
{
    return live_bytes[0] + live_bytes[1];
}

FAKE_EXPORT void fake_driver_set_device(int d)
{
    cur_device = d;
}

FAKE_EXPORT CUresult cuCtxGetDevice(CUdevice *d)
{
    *d = cur_device;
    return CUDA_SUCCESS;
}

/* The last block freed, kept for the next allocation of its size: as the driver, the fake gives a
 * freed address again at once (malloc would not: glibc moves a size it has seen freed from mmap to
 * the heap). Under `mu`. */
static void *reuse_p;
static size_t reuse_n;

static CUresult fake_alloc(CUdeviceptr *dp, size_t n)
{
    if (!dp || !n) return CUDA_ERROR_INVALID_VALUE;
    *dp = 0;
    pthread_mutex_lock(&mu);
    CUresult e = CUDA_ERROR_OUT_OF_MEMORY;
    void *p = NULL;
    if (n <= capacity() - created_total() - live_bytes_total()) {
        if (reuse_p && reuse_n == n) {
            p = reuse_p;
            reuse_p = NULL;
        } else {
            p = malloc(n);
        }
    }
    for (size_t i = 0; p && i < FAKE_MAX; i++)
        if (!live[i].p) {
            live[i].p = p;
            live[i].n = n;
            live[i].device = cur_device & 1;
            live_bytes[live[i].device] += n;
            *dp = (CUdeviceptr)(uintptr_t)p;
            e = CUDA_SUCCESS;
            break;
        }
    if (p && e != CUDA_SUCCESS) free(p);
    pthread_mutex_unlock(&mu);
    return e;
}

static CUresult fake_mem_free(CUdeviceptr dp);

FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dp)
{
    CUresult e = fake_mem_free(dp);
    freed_hook(e == CUDA_SUCCESS);
    return e;
}

static CUresult fake_mem_free(CUdeviceptr dp)
{
    pthread_mutex_lock(&mu);
    CUresult e = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; dp && i < FAKE_MAX; i++)
        if (live[i].p == (void *)(uintptr_t)dp) {
            free(reuse_p);
            reuse_p = live[i].p;
            reuse_n = live[i].n;
            live_bytes[live[i].device] -= live[i].n;
            live[i].p = NULL;
            e = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&mu);
    return e;
}

FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dp, size_t n)
{
    return fake_alloc(dp, n);
}

/* cuMemAlloc's ABI before CUDA 3.2 (32-bit pointers and sizes), which cuGetProcAddress gives for
 * an older version: ranksnap must pass it through, unwrapped. */
static CUresult fake_mem_alloc_v1(unsigned int *dp, unsigned int n)
{
    CUdeviceptr p = 0;
    CUresult e = fake_alloc(&p, n);
    if (dp) *dp = (unsigned int)p; /* never called: handed out, compared */
    return e;
}

FAKE_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dp, size_t *pitch, size_t w, size_t h,
                                        unsigned elem)
{
    (void)elem;
    *pitch = (w + 511) & ~(size_t)511;
    return fake_alloc(dp, *pitch * h);
}

FAKE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dp, size_t n, unsigned flags)
{
    (void)flags;
    return fake_alloc(dp, n);
}

/* Stream-ordered allocations come from one pool per device (whatever pool is named), which keeps
 * what is freed reserved (a release threshold of "everything"), as a real pool does until it is
 * trimmed: its attributes say how much is reserved and how much of that is used. */
static struct fake_pool {
    int device;
    size_t used, reserved;
} pools[2] = {{0, 0, 0}, {1, 0, 0}};
static struct {
    CUdeviceptr p;
    size_t n;
    struct fake_pool *pool;
} pooled[FAKE_MAX];

static CUresult fake_alloc_pooled(CUdeviceptr *dp, size_t n)
{
    CUresult e = fake_alloc(dp, n);
    if (e != CUDA_SUCCESS) return e;
    pthread_mutex_lock(&mu);
    struct fake_pool *pool = &pools[cur_device & 1];
    for (size_t i = 0; i < FAKE_MAX; i++)
        if (!pooled[i].p) {
            pooled[i].p = *dp;
            pooled[i].n = n;
            pooled[i].pool = pool;
            break;
        }
    pool->used += n;
    /* memory the pool kept from earlier frees is used first */
    if (pool->used > pool->reserved) pool->reserved = pool->used;
    pthread_mutex_unlock(&mu);
    return e;
}

static CUresult fake_free_pooled(CUdeviceptr dp)
{
    pthread_mutex_lock(&mu);
    for (size_t i = 0; dp && i < FAKE_MAX; i++)
        if (pooled[i].p == dp) {
            pooled[i].pool->used -= pooled[i].n;
            pooled[i].p = 0;
            break;
        }
    pthread_mutex_unlock(&mu);
    return cuMemFree_v2(dp);
}

FAKE_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice d)
{
    if (!pool || d < 0 || d > 1) return CUDA_ERROR_INVALID_VALUE;
    *pool = (CUmemoryPool)(void *)&pools[d];
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    struct fake_pool *p = (struct fake_pool *)(void *)pool;
    if (!value || (p != &pools[0] && p != &pools[1])) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    CUresult e = CUDA_SUCCESS;
    if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
        *(cuuint64_t *)value = p->reserved;
    else if (attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT)
        *(cuuint64_t *)value = p->used;
    else
        e = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&mu);
    return e;
}

FAKE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dp, size_t n, CUstream s)
{
    (void)s;
    return fake_alloc_pooled(dp, n);
}

FAKE_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dp, size_t n, CUstream s)
{
    (void)s;
    return fake_alloc_pooled(dp, n);
}

FAKE_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dp, size_t n, CUmemoryPool pool, CUstream s)
{
    (void)pool;
    (void)s;
    return fake_alloc_pooled(dp, n);
}

FAKE_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dp, size_t n, CUmemoryPool pool,
                                                  CUstream s)
{
    (void)pool;
    (void)s;
    return fake_alloc_pooled(dp, n);
}

FAKE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dp, CUstream s)
{
    (void)s;
    return fake_free_pooled(dp);
}

FAKE_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dp, CUstream s)
{
    (void)s;
    return fake_free_pooled(dp);
}

/* CUDA arrays: host memory of their extent, which is also what the driver says they need. */
static size_t fake_format_bytes(CUarray_format f)
{
    return f == CU_AD_FORMAT_FLOAT || f == CU_AD_FORMAT_UNSIGNED_INT32 ? 4 : 1;
}

static CUresult fake_array(void **a, size_t w, size_t h, size_t d, unsigned ch, CUarray_format f)
{
    if (!a) return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr p = 0;
    CUresult e = fake_alloc(&p, w * (h ? h : 1) * (d ? d : 1) * ch * fake_format_bytes(f));
    *a = (void *)(uintptr_t)p;
    return e;
}

static size_t fake_array_bytes(void *a)
{
    size_t n = 0;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; a && i < FAKE_MAX; i++)
        if (live[i].p == a) n = live[i].n;
    pthread_mutex_unlock(&mu);
    return n;
}

FAKE_EXPORT CUresult cuArrayCreate_v2(CUarray *a, const CUDA_ARRAY_DESCRIPTOR *d)
{
    return fake_array((void **)a, d->Width, d->Height, 1, d->NumChannels, d->Format);
}

FAKE_EXPORT CUresult cuArray3DCreate_v2(CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    return fake_array((void **)a, d->Width, d->Height, d->Depth, d->NumChannels, d->Format);
}

FAKE_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *a, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                            unsigned levels)
{
    (void)levels; /* one level's memory here */
    return fake_array((void **)a, d->Width, d->Height, d->Depth, d->NumChannels, d->Format);
}

FAKE_EXPORT CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *r, CUarray a,
                                                  CUdevice d)
{
    (void)d;
    memset(r, 0, sizeof *r);
    r->size = fake_array_bytes((void *)a);
    r->alignment = 512;
    return r->size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_EXPORT CUresult cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *r,
                                                           CUmipmappedArray a, CUdevice d)
{
    return cuArrayGetMemoryRequirements(r, (CUarray)(void *)a, d);
}

FAKE_EXPORT CUresult cuArrayDestroy(CUarray a)
{
    return cuMemFree_v2((CUdeviceptr)(uintptr_t)(void *)a);
}

FAKE_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray a)
{
    return cuMemFree_v2((CUdeviceptr)(uintptr_t)(void *)a);
}

FAKE_EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st)
{
    (void)s;
    *st = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *st)
{
    return cuStreamIsCapturing(s, st);
}

/* The virtual memory API by name too, as the real driver exports it. */
FAKE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
                                 const CUmemAllocationProp *prop, unsigned long long flags)
{
    return fake_create(h, size, prop, flags);
}

FAKE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
    return fake_release(h);
}

FAKE_EXPORT CUresult cuMemMap(CUdeviceptr p, size_t size, size_t offset,
                              CUmemGenericAllocationHandle h, unsigned long long flags)
{
    return fake_map(p, size, offset, h, flags);
}

FAKE_EXPORT CUresult cuMemUnmap(CUdeviceptr p, size_t size)
{
    return fake_unmap(p, size);
}

FAKE_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                                         unsigned long long flags)
{
    return fake_address_reserve(p, size, align, addr, flags);
}

FAKE_EXPORT CUresult cuMemAddressFree(CUdeviceptr p, size_t size)
{
    return fake_address_free(p, size);
}

FAKE_EXPORT CUresult cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *d, size_t n)
{
    return fake_set_access(p, size, d, n);
}

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult *status);
FAKE_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);

/* base name -> the variant for CUDA >= `since`, and the per-thread one; for an older version the
 * next row of the name (cuMemAlloc's first ABI), else none. The library is linked with
 * -Bsymbolic-functions: the functions it hands out are its own, as the real driver's are, never
 * the exports of a library preloaded in front of it (ranksnap's wrappers must come from
 * ranksnap's cuGetProcAddress, not from this one). */
static const struct {
    const char *name;
    void *fn, *ptsz;
    int since;
} table[] = {
    {"cuDeviceGet", (void *)fake_device_get, NULL, 0},
    {"cuDeviceGetAttribute", (void *)fake_get_attribute, NULL, 0},
    {"cuMemAddressReserve", (void *)fake_address_reserve, NULL, 0},
    {"cuMemAddressFree", (void *)fake_address_free, NULL, 0},
    {"cuMemCreate", (void *)cuMemCreate, NULL, 0},
    {"cuMemRelease", (void *)cuMemRelease, NULL, 0},
    {"cuMemMap", (void *)cuMemMap, NULL, 0},
    {"cuMemUnmap", (void *)cuMemUnmap, NULL, 0},
    {"cuMemSetAccess", (void *)fake_set_access, NULL, 0},
    {"cuGetErrorString", (void *)fake_get_error_string, NULL, 0},
    {"cuInit", NULL, NULL, 0}, /* filled below: defined after the table */
    {"cuCtxGetDevice", (void *)cuCtxGetDevice, NULL, 0},
    {"cuMemAlloc", (void *)cuMemAlloc_v2, NULL, 3020},
    {"cuMemAlloc", (void *)fake_mem_alloc_v1, NULL, 0},
    {"cuMemAllocPitch", (void *)cuMemAllocPitch_v2, NULL, 3020},
    {"cuMemFree", (void *)cuMemFree_v2, NULL, 3020},
    {"cuMemAllocManaged", (void *)cuMemAllocManaged, NULL, 0},
    {"cuMemAllocAsync", (void *)cuMemAllocAsync, (void *)cuMemAllocAsync_ptsz, 0},
    {"cuMemAllocFromPoolAsync", (void *)cuMemAllocFromPoolAsync, (void *)cuMemAllocFromPoolAsync_ptsz, 0},
    {"cuMemFreeAsync", (void *)cuMemFreeAsync, (void *)cuMemFreeAsync_ptsz, 0},
    {"cuStreamIsCapturing", (void *)cuStreamIsCapturing, (void *)cuStreamIsCapturing_ptsz, 0},
    {"cuDeviceGetMemPool", (void *)cuDeviceGetMemPool, NULL, 0},
    {"cuMemPoolGetAttribute", (void *)cuMemPoolGetAttribute, NULL, 0},
    {"cuArrayCreate", (void *)cuArrayCreate_v2, NULL, 3020},
    {"cuArray3DCreate", (void *)cuArray3DCreate_v2, NULL, 3020},
    {"cuMipmappedArrayCreate", (void *)cuMipmappedArrayCreate, NULL, 0},
    {"cuArrayGetMemoryRequirements", (void *)cuArrayGetMemoryRequirements, NULL, 0},
    {"cuMipmappedArrayGetMemoryRequirements", (void *)cuMipmappedArrayGetMemoryRequirements, NULL, 0},
    {"cuArrayDestroy", (void *)cuArrayDestroy, NULL, 0},
    {"cuMipmappedArrayDestroy", (void *)cuMipmappedArrayDestroy, NULL, 0},
    {"cuGetProcAddress", (void *)cuGetProcAddress_v2, NULL, 12000},
};

FAKE_EXPORT CUresult cuInit(unsigned flags);

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(symbol, table[i].name) != 0) continue;
        void *f = !strcmp(symbol, "cuInit") ? (void *)cuInit : table[i].fn;
        if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && table[i].ptsz) f = table[i].ptsz;
        if (version < table[i].since) continue; /* an older ABI: the name's next row */
        if (!f) break;
        *pfn = f;
        if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    }
    *pfn = NULL;
    if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}

FAKE_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}

/* ---- what a process asks the driver first, exported by name as the real driver's are ----------
 *
 * Initialising it, counting the devices, and whether the process holds a context: what a
 * preloaded ranksnap asks at exit of a process it never started in (rank/runtime/outside.c), for
 * tests/cli/torch_jobs.sh, whose stand-in torch loads this library as PyTorch loads the driver.
 * Before cuInit every call answers CUDA_ERROR_NOT_INITIALIZED; cuDevicePrimaryCtxRetain makes the
 * device's primary context active. */
static int initialised, context_active;

FAKE_EXPORT CUresult cuInit(unsigned flags)
{
    (void)flags;
    initialised = 1;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetCount(int *n)
{
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    *n = 1;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    return initialised ? fake_device_get(d, ordinal) : CUDA_ERROR_NOT_INITIALIZED;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d)
{
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    context_active = 1;
    *ctx = (CUcontext)&context_active;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned *flags, int *active)
{
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    *flags = 0;
    *active = context_active;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx)
{
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    *ctx = NULL;
    return CUDA_SUCCESS;
}

/* For the tests: what is alive now. fake_driver_held_bytes: the device memory the process holds
 * on `device` (-1: on both), cuMemAlloc's & co. and the handles' not yet gone. */
FAKE_EXPORT size_t fake_driver_held_bytes(int device)
{
    pthread_mutex_lock(&mu);
    size_t n = device < 0 ? live_bytes_total() + created_total()
                          : live_bytes[device & 1] + created_bytes[device & 1];
    pthread_mutex_unlock(&mu);
    return n;
}

FAKE_EXPORT size_t fake_driver_mapped_bytes(void)
{
    pthread_mutex_lock(&mu);
    size_t n = mapped_bytes;
    pthread_mutex_unlock(&mu);
    return n;
}

FAKE_EXPORT size_t fake_driver_live_handles(void)
{
    pthread_mutex_lock(&mu);
    size_t n = live_handles;
    pthread_mutex_unlock(&mu);
    return n;
}

FAKE_EXPORT size_t fake_driver_reserved_ranges(void)
{
    pthread_mutex_lock(&mu);
    size_t n = n_reserved;
    pthread_mutex_unlock(&mu);
    return n;
}
