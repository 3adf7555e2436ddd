/*
 * backend_cuda.c — device segments from the CUDA runtime; the only file that calls it for memory.
 *
 * The runtime is reached through dlopen("libcudart.so.<major>") and dlsym on that handle, not by
 * linking: libranksnap.so then loads on machines without CUDA (auto falls back to sim), and when
 * ranksnap itself interposes cudaMalloc (LD_PRELOAD) the backend still reaches the real one.
 * A backend serves one device, named at create time (one per device a rank uses: the runtime's
 * devices.c); calls made from a thread whose current device differs switch to ours and back, as
 * PyTorch's device guard does.
 *
 * Expandable segments use CUDA's virtual memory API (cuMemAddressReserve, cuMemCreate, cuMemMap,
 * cuMemSetAccess, cuMemUnmap, cuMemRelease, cuMemAddressFree), a driver API: libcuda.so.1 is
 * dlopened and its entry points taken through cuGetProcAddress for the version we were compiled
 * against, as the runtime itself does. Where the driver or the device lacks it, the backend has
 * no map operation and the allocator keeps segments plain (as PyTorch warns and does). As in
 * PyTorch's ExpandableSegment, every page is a handle of its own, mapped read-write for our
 * device, and a range's handles are kept by page index so that unmapping releases exactly them.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "backend.h"
#include "backend_cuda.h"
#include "errors.h"
#include "log.h"
#include "text.h"

typedef struct rs_cudart {
    void *handle;
    cudaError_t (*malloc_)(void **, size_t);
    cudaError_t (*free_)(void *);
    cudaError_t (*mem_get_info)(size_t *, size_t *);
    cudaError_t (*get_device)(int *);
    cudaError_t (*set_device)(int);
    cudaError_t (*get_device_count)(int *);
    cudaError_t (*get_properties)(struct cudaDeviceProp *, int);
    cudaError_t (*event_create)(cudaEvent_t *, unsigned int);
    cudaError_t (*event_record)(cudaEvent_t, cudaStream_t);
    cudaError_t (*event_query)(cudaEvent_t);
    cudaError_t (*event_synchronize)(cudaEvent_t);
    cudaError_t (*event_destroy)(cudaEvent_t);
    cudaError_t (*get_last_error)(void);
    const char *(*get_error_string)(cudaError_t);
    cudaError_t (*stream_synchronize)(cudaStream_t);
} rs_cudart;

/* The driver's virtual memory API. */
typedef struct rs_cudrv {
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*get_attribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*address_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*address_free)(CUdeviceptr, size_t);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                       unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*get_error_string)(CUresult, const char **);
    /* optional (the current-device fast path): the device of the thread's current context */
    CUresult (*ctx_get_device)(CUdevice *);
} rs_cudrv;

/* An address range of an expandable segment and the handle of each of its mapped pages. */
typedef struct rs_cuda_va {
    CUdeviceptr base;
    size_t size;
    size_t page;                          /* set by the first map                  */
    CUmemGenericAllocationHandle *handle; /* by page index, valid where mapped[i]  */
    unsigned char *mapped;
    struct rs_cuda_va *next;
} rs_cuda_va;

typedef struct rs_cuda_backend {
    rs_backend base;
    rs_backend_ops ops; /* rs_cuda_ops, with the virtual memory members where usable */
    int device;
    int rdma;           /* the device takes gpuDirectRDMACapable with cuMemCreate */
    rs_cuda_va *vas;
} rs_cuda_backend;

static rs_cudart rs_rt_;
static int rs_rt_state_; /* 0 not tried, 1 loaded, -1 failed */
static pthread_once_t rs_rt_once_ = PTHREAD_ONCE_INIT;
static char rs_rt_why_[256];

static rs_cudrv rs_drv_;
static int rs_drv_state_; /* 0 not tried, 1 loaded, -1 failed */
static pthread_once_t rs_drv_once_ = PTHREAD_ONCE_INIT;
static char rs_drv_why_[256];

/* Set by CMake from the toolkit we compile against ("libcudart.so.13"). */
#ifndef RANKSNAP_CUDART_SONAME
#define RANKSNAP_CUDART_SONAME "libcudart.so"
#endif

static void rs_cudart_load(void)
{
    /* The major version we were compiled against first: its structs (cudaDeviceProp) match. */
    static const char *const names[] = {RANKSNAP_CUDART_SONAME, "libcudart.so", NULL};
    void *h = NULL;
    for (const char *const *n = names; *n && !h; n++) h = dlopen(*n, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(rs_rt_why_, sizeof rs_rt_why_, "cannot load the CUDA runtime: %s", dlerror());
        rs_rt_state_ = -1;
        return;
    }
    rs_cudart *r = &rs_rt_;
    r->handle = h;
    int ok = 1;
#define RS_SYM(field, name)                                                                        \
    do {                                                                                           \
        *(void **)(&r->field) = dlsym(h, name);                                                    \
        if (!r->field) {                                                                           \
            snprintf(rs_rt_why_, sizeof rs_rt_why_, "the CUDA runtime lacks %s", name);            \
            ok = 0;                                                                                \
        }                                                                                          \
    } while (0)
    RS_SYM(malloc_, "cudaMalloc");
    RS_SYM(free_, "cudaFree");
    RS_SYM(mem_get_info, "cudaMemGetInfo");
    RS_SYM(get_device, "cudaGetDevice");
    RS_SYM(set_device, "cudaSetDevice");
    RS_SYM(get_device_count, "cudaGetDeviceCount");
    RS_SYM(event_create, "cudaEventCreateWithFlags");
    RS_SYM(event_record, "cudaEventRecord");
    RS_SYM(event_query, "cudaEventQuery");
    RS_SYM(event_synchronize, "cudaEventSynchronize");
    RS_SYM(event_destroy, "cudaEventDestroy");
    RS_SYM(get_last_error, "cudaGetLastError");
    RS_SYM(get_error_string, "cudaGetErrorString");
    RS_SYM(stream_synchronize, "cudaStreamSynchronize");
    /* CUDA 12+ exports the _v2 entry point; cuda_runtime_api.h maps the name onto it. */
    *(void **)(&r->get_properties) = dlsym(h, "cudaGetDeviceProperties_v2");
    if (!r->get_properties) RS_SYM(get_properties, "cudaGetDeviceProperties");
#undef RS_SYM
    rs_rt_state_ = ok ? 1 : -1;
}

typedef CUresult (*rs_get_proc_fn)(const char *, void **, int, cuuint64_t,
                                   CUdriverProcAddressQueryResult *);

static void rs_cudrv_load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(rs_drv_why_, sizeof rs_drv_why_, "cannot load the CUDA driver: %s", dlerror());
        rs_drv_state_ = -1;
        return;
    }
    rs_get_proc_fn get = NULL;
    *(void **)(&get) = dlsym(h, "cuGetProcAddress_v2");
    if (!get) {
        snprintf(rs_drv_why_, sizeof rs_drv_why_, "the CUDA driver lacks cuGetProcAddress_v2 "
                                                  "(older than CUDA 12)");
        rs_drv_state_ = -1;
        return;
    }
    rs_cudrv *d = &rs_drv_;
    int ok = 1;
#define RS_DRV(field, name)                                                                        \
    do {                                                                                           \
        CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                   \
        if (get(name, (void **)(&d->field), CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &q) !=       \
                CUDA_SUCCESS ||                                                                    \
            !d->field) {                                                                           \
            snprintf(rs_drv_why_, sizeof rs_drv_why_, "the CUDA driver lacks %s", name);          \
            ok = 0;                                                                                \
        }                                                                                          \
    } while (0)
    RS_DRV(device_get, "cuDeviceGet");
    RS_DRV(get_attribute, "cuDeviceGetAttribute");
    RS_DRV(address_reserve, "cuMemAddressReserve");
    RS_DRV(address_free, "cuMemAddressFree");
    RS_DRV(create, "cuMemCreate");
    RS_DRV(release, "cuMemRelease");
    RS_DRV(map, "cuMemMap");
    RS_DRV(unmap, "cuMemUnmap");
    RS_DRV(set_access, "cuMemSetAccess");
    RS_DRV(get_error_string, "cuGetErrorString");
#undef RS_DRV
    rs_drv_state_ = ok ? 1 : -1;
    /* CUdevice values are the ordinals the runtime numbers devices by (both enumerate what
     * CUDA_VISIBLE_DEVICES leaves, in one order); checked rather than assumed, since the fast path
     * stands in for cudaGetDevice */
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult (*count)(int *) = NULL;
    int n = 0, same = ok;
    if (same && (get("cuDeviceGetCount", (void **)&count, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS ||
                 !count || count(&n) != CUDA_SUCCESS))
        same = 0;
    for (int i = 0; same && i < n; i++) {
        CUdevice dev = -1;
        same = d->device_get(&dev, i) == CUDA_SUCCESS && dev == i;
    }
    /* the one-argument form (CUDA 2.0's); asked at CUDA_VERSION, a CUDA 13 driver hands out
     * cuCtxGetDevice_v2, which takes the context as a second argument */
    if (same && get("cuCtxGetDevice", (void **)&d->ctx_get_device, 2000, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS)
        d->ctx_get_device = NULL;
}

static ranksnap_status rs_cudart_get(rs_cudart **out)
{
    pthread_once(&rs_rt_once_, rs_cudart_load);
    if (rs_rt_state_ != 1) return rs_error(RANKSNAP_ERR_BACKEND, "cuda backend: %s", rs_rt_why_);
    *out = &rs_rt_;
    return RANKSNAP_OK;
}

static ranksnap_status rs_cuda_fail(const char *what, cudaError_t e)
{
    return rs_error(RANKSNAP_ERR_BACKEND, "cuda backend: %s failed: %s (%d)", what,
                    rs_rt_.get_error_string ? rs_rt_.get_error_string(e) : "?", (int)e);
}

static ranksnap_status rs_drv_fail(const char *what, CUresult e)
{
    const char *msg = NULL;
    if (!rs_drv_.get_error_string || rs_drv_.get_error_string(e, &msg) != CUDA_SUCCESS || !msg)
        msg = "?";
    return rs_error(RANKSNAP_ERR_BACKEND, "cuda backend: %s failed: %s (%d)", what, msg, (int)e);
}

/* Depth of this thread's calls into the runtime and driver on the backend's behalf: the driver
 * interposers (rank/intercept/driver.c) leave those allocations to the allocator's own events. */
static _Thread_local int rs_in_backend;

int rs_backend_cuda_in_call(void)
{
    return rs_in_backend;
}

void rs_backend_cuda_own_call(int entering)
{
    rs_in_backend += entering ? 1 : -1;
}

/* Runs on `device`; returns the device to restore, or -1 when no switch was needed. Every call
 * into CUDA below is made between rs_cuda_enter and rs_cuda_leave. */
static int rs_cuda_enter(int device)
{
    int cur = -1;
    rs_in_backend++;
    if (rs_rt_.get_device(&cur) != cudaSuccess || cur == device) return -1;
    if (rs_rt_.set_device(device) != cudaSuccess) return -1;
    return cur;
}

static void rs_cuda_leave(int prev)
{
    if (prev >= 0) rs_rt_.set_device(prev);
    rs_in_backend--;
}

static ranksnap_status rs_cuda_reserve(rs_backend *b, size_t size, void **ptr)
{
    rs_cuda_backend *cb = (rs_cuda_backend *)b;
    int prev = rs_cuda_enter(cb->device);
    cudaError_t e = rs_rt_.malloc_(ptr, size);
    rs_cuda_leave(prev);
    if (e == cudaErrorMemoryAllocation) {
        rs_rt_.get_last_error(); /* an OOM is not sticky: clear it so later calls do not see it */
        *ptr = NULL;
        return RANKSNAP_ERR_OUT_OF_MEMORY;
    }
    if (e != cudaSuccess) return rs_cuda_fail("cudaMalloc", e);
    return RANKSNAP_OK;
}

static ranksnap_status rs_cuda_release(rs_backend *b, void *ptr, size_t size)
{
    rs_cuda_backend *cb = (rs_cuda_backend *)b;
    int prev = rs_cuda_enter(cb->device);
    cudaError_t e = rs_rt_.free_(ptr);
    rs_cuda_leave(prev);
    return e == cudaSuccess ? RANKSNAP_OK : rs_cuda_fail("cudaFree", e);
}

static ranksnap_status rs_cuda_mem_info(rs_backend *b, uint64_t *free_bytes, uint64_t *total_bytes)
{
    rs_cuda_backend *cb = (rs_cuda_backend *)b;
    size_t f = 0, t = 0;
    int prev = rs_cuda_enter(cb->device);
    cudaError_t e = rs_rt_.mem_get_info(&f, &t);
    rs_cuda_leave(prev);
    if (e != cudaSuccess) return rs_cuda_fail("cudaMemGetInfo", e);
    *free_bytes = f;
    *total_bytes = t;
    return RANKSNAP_OK;
}

static ranksnap_status rs_cuda_event_record(rs_backend *b, void *stream, rs_dev_event *ev)
{
    rs_cuda_backend *cb = (rs_cuda_backend *)b;
    cudaEvent_t e = NULL;
    int prev = rs_cuda_enter(cb->device);
    cudaError_t err = rs_rt_.event_create(&e, cudaEventDisableTiming);
    if (err == cudaSuccess) {
        err = rs_rt_.event_record(e, (cudaStream_t)stream);
        if (err != cudaSuccess) rs_rt_.event_destroy(e);
    }
    rs_cuda_leave(prev);
    if (err != cudaSuccess) return rs_cuda_fail("cudaEventRecord", err);
    *ev = (rs_dev_event)e;
    return RANKSNAP_OK;
}

static int rs_cuda_event_query(rs_backend *b, rs_dev_event ev)
{
    cudaError_t e = rs_rt_.event_query((cudaEvent_t)ev);
    if (e == cudaSuccess) return 1;
    if (e == cudaErrorNotReady) {
        rs_rt_.get_last_error(); /* NotReady is reported through the last-error slot too */
        return 0;
    }
    rs_cuda_fail("cudaEventQuery", e);
    return -(int)RANKSNAP_ERR_BACKEND;
}

static ranksnap_status rs_cuda_event_synchronize(rs_backend *b, rs_dev_event ev)
{
    cudaError_t e = rs_rt_.event_synchronize((cudaEvent_t)ev);
    return e == cudaSuccess ? RANKSNAP_OK : rs_cuda_fail("cudaEventSynchronize", e);
}

static void rs_cuda_event_destroy(rs_backend *b, rs_dev_event ev)
{
    rs_rt_.event_destroy((cudaEvent_t)ev);
}

static ranksnap_status rs_cuda_device_info(rs_backend *b, rs_device_info *out)
{
    rs_cuda_backend *cb = (rs_cuda_backend *)b;
    struct cudaDeviceProp prop;
    memset(&prop, 0, sizeof prop);
    cudaError_t e = rs_rt_.get_properties(&prop, cb->device);
    if (e != cudaSuccess) return rs_cuda_fail("cudaGetDeviceProperties", e);
    memset(out, 0, sizeof *out);
    out->index = cb->device;
    snprintf(out->name, sizeof out->name, "%.95s", prop.name);
    rs_text_uuid_format((const uint8_t *)prop.uuid.bytes, out->uuid, sizeof out->uuid);
    out->total_bytes = (uint64_t)prop.totalGlobalMem;
    return RANKSNAP_OK;
}

/* ---- expandable segments: the driver's virtual memory API ---------------------------------- */

static ranksnap_status rs_cuda_va_reserve(rs_backend *b, size_t size, void **ptr)
{
    rs_cuda_backend *cb = (rs_cuda_backend *)b;
    rs_cuda_va *va = calloc(1, sizeof *va);
    if (!va) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "cuda backend: out of host memory");
    int prev = rs_cuda_enter(cb->device);
    CUresult e = rs_drv_.address_reserve(&va->base, size, 0, 0, 0);
    rs_cuda_leave(prev);
    if (e != CUDA_SUCCESS) {
        free(va);
        if (e == CUDA_ERROR_OUT_OF_MEMORY) return RANKSNAP_ERR_OUT_OF_MEMORY;
        return rs_drv_fail("cuMemAddressReserve", e);
    }
    va->size = size;
    va->next = cb->vas;
    cb->vas = va;
    *ptr = (void *)(uintptr_t)va->base;
    return RANKSNAP_OK;
}

/* The range holding [p, p+size), with its handle table for pages of `page` bytes. */
static ranksnap_status rs_cuda_va_of(rs_cuda_backend *cb, CUdeviceptr p, size_t size, size_t page,
                                     rs_cuda_va **out)
{
    rs_cuda_va *va = cb->vas;
    while (va && !(p >= va->base && size <= va->size && p - va->base <= va->size - size))
        va = va->next;
    if (!va || !page || (p - va->base) % page || size % page || (va->page && va->page != page))
        return rs_error(RANKSNAP_ERR_BACKEND, "cuda backend: 0x%llx (%zu bytes): expected whole "
                        "%zu-byte pages of a reserved range", (unsigned long long)p, size, page);
    if (!va->page) {
        size_t n = va->size / page;
        va->handle = calloc(n ? n : 1, sizeof *va->handle);
        va->mapped = calloc(n ? n : 1, 1);
        if (!va->handle || !va->mapped) {
            free(va->handle);
            free(va->mapped);
            va->handle = NULL;
            va->mapped = NULL;
            return rs_error(RANKSNAP_ERR_HOST_MEMORY, "cuda backend: out of host memory for the "
                                                      "handles of %zu pages", n);
        }
        va->page = page;
    }
    *out = va;
    return RANKSNAP_OK;
}

/* Unmaps (when `was_mapped`) and releases pages [first, end) of `va`. */
static CUresult rs_cuda_pages_drop(rs_cuda_va *va, size_t first, size_t end, int was_mapped)
{
    CUresult bad = CUDA_SUCCESS;
    for (size_t i = first; i < end; i++) {
        if (!va->mapped[i]) continue;
        CUresult e = CUDA_SUCCESS;
        if (was_mapped) e = rs_drv_.unmap(va->base + i * va->page, va->page);
        if (e == CUDA_SUCCESS) e = rs_drv_.release(va->handle[i]);
        if (e != CUDA_SUCCESS && bad == CUDA_SUCCESS) bad = e;
        va->mapped[i] = 0;
    }
    return bad;
}

static ranksnap_status rs_cuda_map(rs_backend *b, void *ptr, size_t size, size_t page)
{
    rs_cuda_backend *cb = (rs_cuda_backend *)b;
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
    rs_cuda_va *va = NULL;
    RS_CHECK(rs_cuda_va_of(cb, p, size, page, &va));
    size_t first = (p - va->base) / page, end = first + size / page, i = first;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE; /* no IPC: ranksnap shares nothing */
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = cb->device;
    prop.allocFlags.gpuDirectRDMACapable = cb->rdma ? 1 : 0;
    int prev = rs_cuda_enter(cb->device);
    CUresult e = CUDA_SUCCESS;
    const char *what = "cuMemCreate";
    for (; i < end && e == CUDA_SUCCESS; i++) {
        if (va->mapped[i]) {
            e = CUDA_ERROR_ALREADY_MAPPED;
            break;
        }
        e = rs_drv_.create(&va->handle[i], page, &prop, 0);
        if (e == CUDA_SUCCESS) va->mapped[i] = 1;
    }
    size_t created = i;
    if (e == CUDA_SUCCESS) {
        what = "cuMemMap";
        for (i = first; i < end && e == CUDA_SUCCESS; i++)
            e = rs_drv_.map(va->base + i * page, page, 0, va->handle[i], 0);
        if (e != CUDA_SUCCESS) {
            /* the pages mapped so far are unmapped, the rest only released */
            rs_cuda_pages_drop(va, first, i - 1, 1);
            rs_cuda_pages_drop(va, i - 1, end, 0);
        }
    } else {
        rs_cuda_pages_drop(va, first, created, 0);
    }
    if (e == CUDA_SUCCESS) {
        CUmemAccessDesc desc;
        memset(&desc, 0, sizeof desc);
        desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        desc.location.id = cb->device;
        desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        what = "cuMemSetAccess";
        e = rs_drv_.set_access(p, size, &desc, 1);
        if (e != CUDA_SUCCESS) rs_cuda_pages_drop(va, first, end, 1);
    }
    rs_cuda_leave(prev);
    if (e == CUDA_ERROR_OUT_OF_MEMORY) return RANKSNAP_ERR_OUT_OF_MEMORY;
    return e == CUDA_SUCCESS ? RANKSNAP_OK : rs_drv_fail(what, e);
}

static ranksnap_status rs_cuda_unmap(rs_backend *b, void *ptr, size_t size, size_t page,
                                     void *stream)
{
    rs_cuda_backend *cb = (rs_cuda_backend *)b;
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
    rs_cuda_va *va = NULL;
    RS_CHECK(rs_cuda_va_of(cb, p, size, page, &va));
    size_t first = (p - va->base) / page, end = first + size / page;
    for (size_t i = first; i < end; i++)
        if (!va->mapped[i])
            return rs_error(RANKSNAP_ERR_BACKEND, "cuda backend: unmapping 0x%llx: page %zu of "
                            "its range is not mapped", (unsigned long long)p, i);
    int prev = rs_cuda_enter(cb->device);
    /* unlike cudaFree, unmapping does not wait for the work that may still use the pages */
    cudaError_t se = rs_rt_.stream_synchronize((cudaStream_t)stream);
    CUresult e = se == cudaSuccess ? rs_cuda_pages_drop(va, first, end, 1) : CUDA_SUCCESS;
    rs_cuda_leave(prev);
    if (se != cudaSuccess) return rs_cuda_fail("cudaStreamSynchronize", se);
    return e == CUDA_SUCCESS ? RANKSNAP_OK : rs_drv_fail("cuMemUnmap/cuMemRelease", e);
}

static ranksnap_status rs_cuda_va_release(rs_backend *b, void *ptr, size_t size)
{
    rs_cuda_backend *cb = (rs_cuda_backend *)b;
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
    rs_cuda_va **link = &cb->vas;
    while (*link && (*link)->base != p) link = &(*link)->next;
    rs_cuda_va *va = *link;
    if (!va || va->size != size)
        return rs_error(RANKSNAP_ERR_BACKEND, "cuda backend: releasing 0x%llx (%zu bytes): expected "
                        "a reserved range of that size", (unsigned long long)p, size);
    for (size_t i = 0; va->page && i < va->size / va->page; i++)
        if (va->mapped[i])
            return rs_error(RANKSNAP_ERR_BACKEND, "cuda backend: releasing 0x%llx: page %zu is "
                            "still mapped", (unsigned long long)p, i);
    int prev = rs_cuda_enter(cb->device);
    CUresult e = rs_drv_.address_free(p, size);
    rs_cuda_leave(prev);
    if (e != CUDA_SUCCESS) return rs_drv_fail("cuMemAddressFree", e);
    *link = va->next;
    free(va->handle);
    free(va->mapped);
    free(va);
    return RANKSNAP_OK;
}

static void rs_cuda_destroy(rs_backend *b)
{
    rs_cuda_backend *cb = (rs_cuda_backend *)b;
    while (cb->vas) {
        rs_cuda_va *va = cb->vas;
        cb->vas = va->next;
        free(va->handle);
        free(va->mapped);
        free(va);
    }
    free(b);
}

static const rs_backend_ops rs_cuda_ops = {
    .name = "cuda",
    .reserve = rs_cuda_reserve,
    .release = rs_cuda_release,
    .mem_info = rs_cuda_mem_info,
    .event_record = rs_cuda_event_record,
    .event_query = rs_cuda_event_query,
    .event_synchronize = rs_cuda_event_synchronize,
    .event_destroy = rs_cuda_event_destroy,
    .device_info = rs_cuda_device_info,
    .destroy = rs_cuda_destroy,
};


/* 1 when the driver and the device can map memory (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_
 * SUPPORTED); says why not in the log otherwise. */
static int rs_cuda_vmm_usable(rs_cuda_backend *cb)
{
    pthread_once(&rs_drv_once_, rs_cudrv_load);
    if (rs_drv_state_ != 1) {
        RS_INFO(RS_SUB_ALLOC, "cuda backend: no expandable segments: %s", rs_drv_why_);
        return 0;
    }
    CUdevice dev = 0;
    int vmm = 0, rdma = 0;
    if (rs_drv_.device_get(&dev, cb->device) != CUDA_SUCCESS ||
        rs_drv_.get_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) !=
            CUDA_SUCCESS ||
        !vmm) {
        RS_INFO(RS_SUB_ALLOC, "cuda backend: device %d has no virtual memory management: no "
                              "expandable segments", cb->device);
        return 0;
    }
    if (rs_drv_.get_attribute(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                              dev) == CUDA_SUCCESS)
        cb->rdma = rdma != 0;
    return 1;
}

ranksnap_status rs_backend_cuda_check(void)
{
    rs_cudart *r;
    RS_CHECK(rs_cudart_get(&r));
    int n = 0;
    cudaError_t e = r->get_device_count(&n);
    if (e != cudaSuccess || n <= 0) {
        r->get_last_error();
        return rs_error(RANKSNAP_ERR_BACKEND,
                        "RANKSNAP_BACKEND=cuda: no CUDA device is visible (%s); use RANKSNAP_BACKEND=sim",
                        e != cudaSuccess ? r->get_error_string(e) : "device count 0");
    }
    return RANKSNAP_OK;
}

int rs_backend_cuda_available(void)
{
    int ok = rs_backend_cuda_check() == RANKSNAP_OK;
    if (!ok) rs_error_clear();
    return ok;
}

int rs_backend_cuda_device_count(void)
{
    rs_cudart *r;
    int n = 0;
    if (rs_cudart_get(&r) != RANKSNAP_OK) {
        rs_error_clear();
        return 0;
    }
    if (r->get_device_count(&n) != cudaSuccess) {
        r->get_last_error();
        return 0;
    }
    return n;
}

int rs_backend_cuda_context_device(int *device)
{
    /* Every allocation asks. The driver answers from the thread's current context, which is
     * what cudaGetDevice reports too (cudaSetDevice makes the device's primary context current),
     * in a third of the runtime's cost. */
    pthread_once(&rs_drv_once_, rs_cudrv_load);
    CUdevice dev;
    if (!rs_drv_.ctx_get_device || rs_drv_.ctx_get_device(&dev) != CUDA_SUCCESS) return 0;
    *device = dev;
    return 1;
}

ranksnap_status rs_backend_cuda_current_device(int *device)
{
    /* a thread with no context yet: the runtime's answer (device 0, or the one set) is the one
     * its first call will use */
    if (rs_backend_cuda_context_device(device)) return RANKSNAP_OK;
    rs_cudart *r;
    RS_CHECK(rs_cudart_get(&r));
    cudaError_t e = r->get_device(device);
    return e == cudaSuccess ? RANKSNAP_OK : rs_cuda_fail("cudaGetDevice", e);
}

ranksnap_status rs_backend_cuda_create(int device, rs_backend **out)
{
    *out = NULL;
    RS_CHECK(rs_backend_cuda_check());
    int dev = device;
    if (dev < 0) RS_CHECK(rs_backend_cuda_current_device(&dev));
    rs_cuda_backend *cb = calloc(1, sizeof *cb);
    if (!cb) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "cuda backend: out of host memory");
    cb->ops = rs_cuda_ops;
    cb->base.ops = &cb->ops;
    cb->device = dev;
    if (rs_cuda_vmm_usable(cb)) {
        cb->ops.va_reserve = rs_cuda_va_reserve;
        cb->ops.va_release = rs_cuda_va_release;
        cb->ops.map = rs_cuda_map;
        cb->ops.unmap = rs_cuda_unmap;
    }
    *out = &cb->base;
    return RANKSNAP_OK;
}
