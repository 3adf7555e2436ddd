/*
 * backend_cuda.c — device segments from the CUDA runtime; the only file that calls it for memory.
 *
 * The runtime is reached through dlopen("libcudart.so.<major>") and dlsym on that handle, not by
 * linking: libranksnap.so then loads on machines without CUDA (auto falls back to sim), and when
 * ranksnap itself interposes cudaMalloc (LD_PRELOAD) the backend still reaches the real one.
 * Segments are taken on the device that was current at create time; calls made from a thread
 * whose current device differs switch to ours and back, as PyTorch's device guard does.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "errors.h"
#include "log.h"

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
} rs_cudart;

typedef struct rs_cuda_backend {
    rs_backend base;
    int device;
} rs_cuda_backend;

static rs_cudart rs_rt_;
static int rs_rt_state_; /* 0 not tried, 1 loaded, -1 failed */
static pthread_once_t rs_rt_once_ = PTHREAD_ONCE_INIT;
static char rs_rt_why_[256];

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
    /* CUDA 12+ exports the _v2 entry point; cuda_runtime_api.h maps the name onto it. */
    *(void **)(&r->get_properties) = dlsym(h, "cudaGetDeviceProperties_v2");
    if (!r->get_properties) RS_SYM(get_properties, "cudaGetDeviceProperties");
#undef RS_SYM
    rs_rt_state_ = ok ? 1 : -1;
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

/* Runs on `device`; returns the device to restore, or -1 when no switch was needed. */
static int rs_cuda_enter(int device)
{
    int cur = -1;
    if (rs_rt_.get_device(&cur) != cudaSuccess || cur == device) return -1;
    if (rs_rt_.set_device(device) != cudaSuccess) return -1;
    return cur;
}

static void rs_cuda_leave(int prev)
{
    if (prev >= 0) rs_rt_.set_device(prev);
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
    const unsigned char *u = (const unsigned char *)prop.uuid.bytes;
    snprintf(out->uuid, sizeof out->uuid,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    out->total_bytes = (uint64_t)prop.totalGlobalMem;
    return RANKSNAP_OK;
}

static void rs_cuda_destroy(rs_backend *b)
{
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

int rs_backend_cuda_available(void)
{
    rs_cudart *r;
    if (rs_cudart_get(&r) != RANKSNAP_OK) return 0;
    int n = 0;
    cudaError_t e = r->get_device_count(&n);
    if (e != cudaSuccess) r->get_last_error();
    return e == cudaSuccess && n > 0;
}

ranksnap_status rs_backend_cuda_create(rs_backend **out)
{
    *out = NULL;
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
    int dev = 0;
    if ((e = r->get_device(&dev)) != cudaSuccess) return rs_cuda_fail("cudaGetDevice", e);
    rs_cuda_backend *cb = calloc(1, sizeof *cb);
    if (!cb) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "cuda backend: out of host memory");
    cb->base.ops = &rs_cuda_ops;
    cb->device = dev;
    *out = &cb->base;
    return RANKSNAP_OK;
}
