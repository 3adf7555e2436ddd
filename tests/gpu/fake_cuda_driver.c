/*
 * fake_cuda_driver.c — a stand-in for the CUDA driver (libcuda.so.1) on machines without a GPU:
 * the virtual memory API that expandable segments use, so that the cuda backend's path through it
 * runs in CI (label unit), next to fake_cudart.c for the runtime.
 *
 * It plays the API with the host's own virtual memory: cuMemAddressReserve reserves address space
 * (mmap PROT_NONE, no memory), cuMemCreate makes a memfd of the page's size (the handle), cuMemMap
 * maps that file at the address, cuMemSetAccess makes it read-write, cuMemUnmap puts the
 * reservation back, cuMemRelease closes the file. So the pages the backend maps can really be
 * written, and a page unmapped too early faults. It checks what the real driver checks (a map
 * inside a reserved range, of a whole handle, not over another) and counts what is alive, which
 * the test reads back through fake_driver_* (dlsym on the loaded library). The device has
 * FAKE_CUDA_DRIVER_CAPACITY bytes (default 16 GiB, the fake runtime's); FAKE_CUDA_DRIVER_NO_VMM=1
 * makes it report no virtual memory management. The first calls a process makes (cuInit, the
 * device count, the primary context) are exported by name, below.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cuda.h>

#define FAKE_EXPORT __attribute__((visibility("default")))
#define FAKE_MAX 4096

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct range {
    uintptr_t addr;
    size_t size;
} range;

static range reserved[64];
static size_t n_reserved;
static struct {
    int fd;
    size_t size;
    int live;
} handles[FAKE_MAX];
static range maps[FAKE_MAX];
static size_t n_maps, created_bytes, mapped_bytes;
static size_t live_handles;

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

static CUresult fake_create(CUmemGenericAllocationHandle *h, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    if (!h || !size || !prop || flags || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id != 0 ||
        size % ((size_t)2 << 20))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    CUresult e = CUDA_ERROR_OUT_OF_MEMORY;
    if (size <= capacity() - created_bytes) {
        for (size_t i = 0; i < FAKE_MAX; i++) {
            if (handles[i].live) continue;
            int fd = memfd_create("fake-cuda-page", MFD_CLOEXEC);
            if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
                if (fd >= 0) close(fd);
                break;
            }
            handles[i].fd = fd;
            handles[i].size = size;
            handles[i].live = 1;
            created_bytes += size;
            live_handles++;
            *h = (CUmemGenericAllocationHandle)(i + 1);
            e = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    return e;
}

static CUresult fake_release(CUmemGenericAllocationHandle h)
{
    pthread_mutex_lock(&mu);
    CUresult e = CUDA_ERROR_INVALID_VALUE;
    if (h >= 1 && h <= FAKE_MAX && handles[h - 1].live) {
        close(handles[h - 1].fd);
        handles[h - 1].live = 0;
        created_bytes -= handles[h - 1].size;
        live_handles--;
        e = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&mu);
    return e;
}

static CUresult fake_map(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                         unsigned long long flags)
{
    pthread_mutex_lock(&mu);
    CUresult e = CUDA_SUCCESS;
    uintptr_t a = (uintptr_t)p;
    if (offset || flags || h < 1 || h > FAKE_MAX || !handles[h - 1].live ||
        handles[h - 1].size != size || !inside_reserved(a, size) || n_maps == FAKE_MAX) {
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
            maps[n_maps++] = (range){a, size};
            mapped_bytes += size;
        }
    }
    pthread_mutex_unlock(&mu);
    return e;
}

static CUresult fake_unmap(CUdeviceptr p, size_t size)
{
    pthread_mutex_lock(&mu);
    CUresult e = CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < n_maps; k++) {
        if (maps[k].addr != (uintptr_t)p || maps[k].size != size) continue;
        /* back to reserved address space */
        mmap((void *)(uintptr_t)p, size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        maps[k] = maps[--n_maps];
        mapped_bytes -= size;
        e = CUDA_SUCCESS;
        break;
    }
    pthread_mutex_unlock(&mu);
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

static const struct {
    const char *name;
    void *fn;
} table[] = {
    {"cuDeviceGet", (void *)fake_device_get},
    {"cuDeviceGetAttribute", (void *)fake_get_attribute},
    {"cuMemAddressReserve", (void *)fake_address_reserve},
    {"cuMemAddressFree", (void *)fake_address_free},
    {"cuMemCreate", (void *)fake_create},
    {"cuMemRelease", (void *)fake_release},
    {"cuMemMap", (void *)fake_map},
    {"cuMemUnmap", (void *)fake_unmap},
    {"cuMemSetAccess", (void *)fake_set_access},
    {"cuGetErrorString", (void *)fake_get_error_string},
};

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    (void)flags;
    if (!symbol || !pfn || version < 12000) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(symbol, table[i].name) != 0) continue;
        *pfn = table[i].fn;
        if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    }
    *pfn = NULL;
    if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
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

/* For the test: what is alive now. */
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
