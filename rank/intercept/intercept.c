/*
 * intercept.c — the core of the CUDA runtime interposers (intercept.h): what an interposed
 * cudaMalloc, cudaFree, cudaMallocAsync, cudaFreeAsync, cudaMallocFromPoolAsync and
 * cudaMemGetInfo do, whichever route (LD_PRELOAD or -Wl,--wrap) brought the call here.
 *
 * The first allocation call starts ranksnap (rs_instance_ensure, which never blocks: a call that
 * races with an init in progress, or comes from inside it, goes to the real function). Then:
 * - allocations come from the caching allocator of the device current on the calling thread, as
 *   the program's own runtime says (a static runtime keeps its own notion of it), on the stream
 *   they name (cudaMalloc: the legacy default stream, as ranksnap_malloc(NULL)); everything else
 *   (ranksnap disabled or failed, a stream being captured into a graph, a pool other than the
 *   device's default) goes to the real function;
 * - a free of a pointer ranksnap did not hand out (allocated before it started, by the real
 *   function, by another allocator) goes to the real free untouched; the caching allocator's map
 *   answers "is it mine" exactly, so nothing foreign is ever put into the cache;
 * - cudaFree synchronises with the device; ranksnap's cache instead records an event on the
 *   legacy default stream and reuses the block once it completed, i.e. once all work queued
 *   before the free on blocking streams has finished (docs/GPU.md, "Interception");
 * - cudaFreeAsync(p, s) is ordered on s the same way (an event on s unless s is the block's own);
 * - cudaMemGetInfo answers free = the device's free bytes + the bytes ranksnap holds cached but not
 *   allocated, so that programs that size themselves from free memory see the cache as
 *   available; under RANKSNAP_MEMORY_LIMIT it answers as a device of that size would.
 * Errors are cudaError_t values: out of memory is cudaErrorMemoryAllocation, left in the program
 * runtime's last-error slot as the real cudaMalloc leaves it (see ranksnap_icp_set_last_error_oom).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "alloc_api.h"
#include "backend_cuda.h"
#include "errors.h"
#include "external.h"
#include "instance.h"
#include "intercept.h"
#include "log.h"
#include "outside.h"
#include "ptrmap.h"
#include "ranksnap.h"
#include "state.h"

#ifndef RANKSNAP_CUDART_SONAME
#define RANKSNAP_CUDART_SONAME "libcudart.so"
#endif

static atomic_int ranksnap_icp_sim_ok;

/* Allocations passed through to a CUDA memory pool other than the device's default: pointer ->
 * bytes, so that their free takes them out of the "cuda_mempool" outside bytes again. */
static rs_ptrmap rs_pool_allocs = RS_PTRMAP_INIT;

void ranksnap_icp_test_serve_sim(int on)
{
    atomic_store(&ranksnap_icp_sim_ok, on ? 1 : 0);
}

/* ---- the real functions of the preload route ------------------------------------------------ */

/* What an entry the process's runtime lacks answers (an old runtime without the _ptsz variants,
 * or none found at all): the error a runtime that cannot start gives. */
static cudaError_t rs_no_malloc(void **p, size_t n)
{
    (void)n;
    if (p) *p = NULL;
    return cudaErrorInitializationError;
}
static cudaError_t rs_no_free(void *p)
{
    (void)p;
    return cudaErrorInitializationError;
}
static cudaError_t rs_no_malloc_async(void **p, size_t n, cudaStream_t s)
{
    (void)s;
    return rs_no_malloc(p, n);
}
static cudaError_t rs_no_free_async(void *p, cudaStream_t s)
{
    (void)s;
    return rs_no_free(p);
}
static cudaError_t rs_no_malloc_pool(void **p, size_t n, cudaMemPool_t pool, cudaStream_t s)
{
    (void)pool;
    (void)s;
    return rs_no_malloc(p, n);
}
static cudaError_t rs_no_mem_get_info(size_t *f, size_t *t)
{
    (void)f;
    (void)t;
    return cudaErrorInitializationError;
}
static cudaError_t rs_no_get_device(int *d)
{
    (void)d;
    return cudaErrorInitializationError;
}
static cudaError_t rs_no_default_pool(cudaMemPool_t *p, int d)
{
    (void)p;
    (void)d;
    return cudaErrorNotSupported;
}
static cudaError_t rs_no_is_capturing(cudaStream_t s, enum cudaStreamCaptureStatus *c)
{
    (void)s;
    (void)c;
    return cudaErrorNotSupported;
}
static cudaError_t rs_no_peek(void)
{
    return cudaSuccess;
}

static rs_cuda_real rs_preload;
static pthread_once_t rs_preload_once = PTHREAD_ONCE_INIT;

/* The runtime the program already loaded (under any of the sonames it may have), else the one
 * ranksnap was built against (the one its backend dlopens: the same handle). */
static void *ranksnap_icp_cudart_handle(void)
{
    static const char *const names[] = {RANKSNAP_CUDART_SONAME, "libcudart.so.13", "libcudart.so.12",
                                        "libcudart.so.11.0", "libcudart.so", NULL};
    for (const char *const *n = names; *n; n++) {
        void *h = dlopen(*n, RTLD_NOW | RTLD_NOLOAD);
        if (h) return h;
    }
    void *h = dlopen(RANKSNAP_CUDART_SONAME, RTLD_NOW | RTLD_LOCAL);
    return h ? h : dlopen("libcudart.so", RTLD_NOW | RTLD_LOCAL);
}

/* RTLD_NEXT first: the next definition after libranksnap.so in the global scope, which is the
 * program's shared runtime (or another interposer, which then gets its turn). A runtime loaded
 * in a local scope (a Python extension's dependency) is not there, hence the handle. */
static void *ranksnap_icp_sym(void **handle, const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (f) return f;
    if (!*handle) *handle = ranksnap_icp_cudart_handle();
    return *handle ? dlsym(*handle, name) : NULL;
}

static void ranksnap_icp_preload_load(void)
{
    rs_cuda_real *r = &rs_preload;
    void *h = NULL;
    r->version = RS_CUDA_REAL_VERSION;
#define RS_REAL(field, name, fallback)                                                             \
    do {                                                                                           \
        *(void **)(&r->field) = ranksnap_icp_sym(&h, name);                                              \
        if (!r->field) r->field = fallback;                                                        \
    } while (0)
    RS_REAL(malloc_, "cudaMalloc", rs_no_malloc);
    RS_REAL(free_, "cudaFree", rs_no_free);
    RS_REAL(malloc_async, "cudaMallocAsync", rs_no_malloc_async);
    RS_REAL(malloc_async_ptsz, "cudaMallocAsync_ptsz", rs_no_malloc_async);
    RS_REAL(free_async, "cudaFreeAsync", rs_no_free_async);
    RS_REAL(free_async_ptsz, "cudaFreeAsync_ptsz", rs_no_free_async);
    RS_REAL(malloc_from_pool_async, "cudaMallocFromPoolAsync", rs_no_malloc_pool);
    RS_REAL(malloc_from_pool_async_ptsz, "cudaMallocFromPoolAsync_ptsz", rs_no_malloc_pool);
    RS_REAL(mem_get_info, "cudaMemGetInfo", rs_no_mem_get_info);
    RS_REAL(get_device, "cudaGetDevice", rs_no_get_device);
    RS_REAL(device_get_default_mem_pool, "cudaDeviceGetDefaultMemPool", rs_no_default_pool);
    RS_REAL(stream_is_capturing, "cudaStreamIsCapturing", rs_no_is_capturing);
    RS_REAL(peek_at_last_error, "cudaPeekAtLastError", rs_no_peek);
#undef RS_REAL
    if (r->malloc_ == rs_no_malloc)
        fprintf(stderr, "ranksnap: no CUDA runtime found behind the interposed cudaMalloc (%s); "
                "its calls answer cudaErrorInitializationError\n", dlerror());
}

const rs_cuda_real *ranksnap_icp_preload_real(void)
{
    pthread_once(&rs_preload_once, ranksnap_icp_preload_load);
    return &rs_preload;
}

/* 1 when the function at `fn` lies in the same module as this file (libranksnap.so). */
static int ranksnap_icp_is_ours(const void *fn)
{
    Dl_info self, other;
    if (!fn || !dladdr((const void *)(uintptr_t)ranksnap_icp_is_ours, &self) || !dladdr(fn, &other))
        return 0;
    return self.dli_fbase == other.dli_fbase;
}

const rs_cuda_real *ranksnap_icp_wrap_real(const rs_cuda_real *t)
{
    if (!t || t->version != RS_CUDA_REAL_VERSION) {
        fprintf(stderr, "ranksnap: libranksnap_wrap.a does not match libranksnap.so (table version "
                "%d, expected %d): relink with the same ranksnap; using the shared CUDA runtime\n",
                t ? t->version : -1, RS_CUDA_REAL_VERSION);
        return ranksnap_icp_preload_real();
    }
    /* A program that uses nothing of the static runtime but the wrapped calls can have its
     * __real_cudaMalloc bound to libranksnap.so's own cudaMalloc (the linker met that definition
     * first), which would bring pass-through calls back into ranksnap. */
    const void *fns[] = {(const void *)(uintptr_t)t->malloc_,
                         (const void *)(uintptr_t)t->free_,
                         (const void *)(uintptr_t)t->malloc_async,
                         (const void *)(uintptr_t)t->free_async,
                         (const void *)(uintptr_t)t->malloc_from_pool_async,
                         (const void *)(uintptr_t)t->mem_get_info};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (ranksnap_icp_is_ours(fns[i])) {
            RS_INFO(RS_SUB_INIT, "ranksnap::wrap: __real_cuda* were bound to libranksnap.so; "
                    "passing calls through to the shared CUDA runtime instead");
            return ranksnap_icp_preload_real();
        }
    return t;
}

/* ---- the interposed calls ------------------------------------------------------------------- */

cudaError_t ranksnap_icp_cuda_error(ranksnap_status st)
{
    switch (st) {
    case RANKSNAP_OK:
        return cudaSuccess;
    case RANKSNAP_ERR_OUT_OF_MEMORY:
    case RANKSNAP_ERR_HOST_MEMORY:
        return cudaErrorMemoryAllocation;
    case RANKSNAP_ERR_INVALID_ARGUMENT:
    case RANKSNAP_ERR_UNKNOWN_POINTER:
        return cudaErrorInvalidValue;
    case RANKSNAP_ERR_NOT_INITIALIZED:
        return cudaErrorInitializationError;
    case RANKSNAP_ERR_UNSUPPORTED:
        return cudaErrorNotSupported;
    default:
        return cudaErrorUnknown;
    }
}

/* 1 when ranksnap is running on a backend the interposers may serve from. */
static int ranksnap_icp_running(void)
{
    int cuda = 0;
    if (rs_external_mode()) return 0; /* ranksnap torch mode: every call passes through */
    return rs_instance_active(&cuda) &&
           (cuda || atomic_load_explicit(&ranksnap_icp_sim_ok, memory_order_relaxed));
}

/* The device an allocation made now on the calling thread is served on, or -1 when ranksnap does
 * not serve it: it runs (started now if it was not), and the program's runtime names the
 * thread's current device. */
static int ranksnap_icp_serving(const rs_cuda_real *r)
{
    /* ranksnap torch mode: PyTorch's allocator serves; ranksnap never stands in front of it.
     * Its first cudaMalloc starts ranksnap all the same. */
    if (rs_external_mode()) {
        (void)rs_instance_ensure();
        return -1;
    }
    if (rs_instance_ensure() != RANKSNAP_OK || !ranksnap_icp_running()) return -1;
    /* the devices layer knows it without the runtime where it can (devices.h): the program's
     * cudaGetDevice answers the same from the thread's current context, at three times the cost */
    int cur = -1;
    if (rs_instance_current_device_known(&cur)) return cur;
    return r->get_device(&cur) == cudaSuccess && cur >= 0 ? cur : -1;
}

/* On the _ptsz entry points stream 0 is the calling thread's default stream. */
static void *ranksnap_icp_stream(cudaStream_t stream, int ptsz)
{
    return ptsz && !stream ? (void *)cudaStreamPerThread : (void *)stream;
}

/* A stream being captured into a CUDA graph gets the real stream-ordered allocator, whose
 * allocations become graph memory nodes; ranksnap's events cannot be recorded there. The legacy
 * stream is never captured (and querying it during a capture elsewhere is an error). */
static int ranksnap_icp_capturing(const rs_cuda_real *r, cudaStream_t stream, int ptsz)
{
    if ((!stream && !ptsz) || stream == cudaStreamLegacy) return 0;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    /* an error (the query itself refused during a capture) counts as capturing: the real
     * allocator then decides */
    cudaStream_t s = (cudaStream_t)ranksnap_icp_stream(stream, ptsz);
    if (r->stream_is_capturing(s, &cs) != cudaSuccess) return 1;
    return cs != cudaStreamCaptureStatusNone;
}

/* The real cudaMalloc leaves cudaErrorMemoryAllocation in the runtime's last-error slot (not
 * sticky: the next cudaGetLastError returns it and clears it). ranksnap's OOM did not pass
 * through the program's runtime, so that runtime is asked for a size no device has, which fails
 * the same way and leaves the same error behind. */
static void ranksnap_icp_set_last_error_oom(const rs_cuda_real *r)
{
    ranksnap_stats s;
    if (ranksnap_get_stats(&s) != RANKSNAP_OK) return;
    size_t impossible = (size_t)s.device_total_bytes * 4 + ((size_t)1 << 40);
    void *p = NULL;
    /* ranksnap's call, not the program's: the driver's interposers must not record its refusal
     * as the rank's OOM (a static runtime's cudaMalloc reaches them) */
    rs_backend_cuda_own_call(1);
    if (r->malloc_(&p, impossible) == cudaSuccess && p) r->free_(p);
    rs_backend_cuda_own_call(0);
}

/* A ranksnap status as the interposed call returns it. */
static cudaError_t ranksnap_icp_result(const rs_cuda_real *r, ranksnap_status st, const char *what)
{
    if (st == RANKSNAP_OK) return cudaSuccess;
    cudaError_t e = ranksnap_icp_cuda_error(st);
    if (st == RANKSNAP_ERR_OUT_OF_MEMORY) {
        RS_INFO(RS_SUB_ALLOC, "%s: %s", what, ranksnap_last_error());
        ranksnap_icp_set_last_error_oom(r);
        return e;
    }
    /* the device call that failed left its own error behind when it went through the same
     * runtime instance: return that rather than cudaErrorUnknown */
    if (st == RANKSNAP_ERR_BACKEND) {
        cudaError_t last = r->peek_at_last_error();
        if (last != cudaSuccess) e = last;
    }
    RS_WARN(RS_SUB_ALLOC, "%s: %s (returning cudaError_t %d)", what, ranksnap_last_error(), (int)e);
    return e;
}

static cudaError_t ranksnap_icp_alloc(const rs_cuda_real *r, int device, void **ptr, size_t size,
                                      void *stream, const char *what, const void *caller)
{
    return ranksnap_icp_result(r, rs_alloc_api_malloc_on(device, ptr, size, stream, caller), what);
}

/* A free ranksnap does not serve: the real one, and the pool accounting of what it frees. */
static cudaError_t ranksnap_icp_real_free(const rs_cuda_real *r, void *ptr, cudaStream_t stream,
                                    int async, int ptsz)
{
    cudaError_t e = !async ? r->free_(ptr)
                  : ptsz   ? r->free_async_ptsz(ptr, stream)
                           : r->free_async(ptr, stream);
    uint64_t bytes = 0;
    if (e == cudaSuccess && ptr && rs_ptrmap_take(&rs_pool_allocs, ptr, &bytes)) {
        rs_outside_add("cuda_mempool", -(int64_t)bytes);
        rs_outside_record(0, ptr, bytes);
    }
    return e;
}

/* ranksnap's side of a free ordered on `stream`: 1 and *e when the pointer was ranksnap's. */
static int ranksnap_icp_free_ours(const rs_cuda_real *r, void *ptr, void *stream, cudaError_t *e)
{
    if (!ranksnap_icp_running()) {
        /* after finalize: a block of the retired allocator goes back to it */
        if (!rs_instance_free_retired(ptr)) return 0;
        *e = cudaSuccess;
        return 1;
    }
    ranksnap_status st = ranksnap_record_stream(ptr, stream);
    if (st == RANKSNAP_OK) st = ranksnap_free(ptr);
    if (st == RANKSNAP_ERR_UNKNOWN_POINTER) {
        /* not the running allocator's: perhaps one retired by an earlier finalize */
        if (!rs_instance_free_retired(ptr)) return 0;
        st = RANKSNAP_OK;
    }
    *e = ranksnap_icp_result(r, st, "cudaFree");
    return 1;
}

cudaError_t ranksnap_icp_malloc(const rs_cuda_real *r, void **ptr, size_t size, const void *caller)
{
    rs_state_note_intercepted();
    int dev = ptr ? ranksnap_icp_serving(r) : -1;
    if (dev < 0) return r->malloc_(ptr, size);
    return ranksnap_icp_alloc(r, dev, ptr, size, NULL, "cudaMalloc", caller);
}

cudaError_t ranksnap_icp_free(const rs_cuda_real *r, void *ptr)
{
    rs_state_note_intercepted();
    cudaError_t e = cudaSuccess;
    /* cudaFree(NULL) is the common "create the context now" idiom: the real one does that */
    if (ptr && ranksnap_icp_free_ours(r, ptr, (void *)cudaStreamLegacy, &e)) return e;
    return ranksnap_icp_real_free(r, ptr, NULL, 0, 0);
}

cudaError_t ranksnap_icp_malloc_async(const rs_cuda_real *r, void **ptr, size_t size,
                                cudaStream_t stream, int ptsz, const void *caller)
{
    rs_state_note_intercepted();
    int dev = ptr ? ranksnap_icp_serving(r) : -1;
    if (dev >= 0 && !ranksnap_icp_capturing(r, stream, ptsz))
        return ranksnap_icp_alloc(r, dev, ptr, size, ranksnap_icp_stream(stream, ptsz), "cudaMallocAsync",
                                  caller);
    return ptsz ? r->malloc_async_ptsz(ptr, size, stream) : r->malloc_async(ptr, size, stream);
}

cudaError_t ranksnap_icp_free_async(const rs_cuda_real *r, void *ptr, cudaStream_t stream, int ptsz)
{
    rs_state_note_intercepted();
    cudaError_t e = cudaSuccess;
    if (ptr && ranksnap_icp_free_ours(r, ptr, ranksnap_icp_stream(stream, ptsz), &e)) return e;
    return ranksnap_icp_real_free(r, ptr, stream, 1, ptsz);
}

cudaError_t ranksnap_icp_malloc_from_pool_async(const rs_cuda_real *r, void **ptr, size_t size,
                                          cudaMemPool_t pool, cudaStream_t stream, int ptsz,
                                          const void *caller)
{
    rs_state_note_intercepted();
    cudaError_t (*real)(void **, size_t, cudaMemPool_t, cudaStream_t) =
        ptsz ? r->malloc_from_pool_async_ptsz : r->malloc_from_pool_async;
    int dev = ptr ? ranksnap_icp_serving(r) : -1;
    if (dev < 0 || ranksnap_icp_capturing(r, stream, ptsz)) return real(ptr, size, pool, stream);
    /* The device's default pool is what cudaMallocAsync allocates from: ranksnap serves it. */
    cudaMemPool_t def = NULL;
    if (r->device_get_default_mem_pool(&def, dev) == cudaSuccess && def == pool)
        return ranksnap_icp_alloc(r, dev, ptr, size, ranksnap_icp_stream(stream, ptsz),
                                  "cudaMallocFromPoolAsync", caller);
    /* Another pool has properties the program chose (IPC export, a location, a release
     * threshold): the pool serves it, and ranksnap counts the bytes as memory outside the cache. */
    const char *label = rs_outside_driver_label("cuda_mempool");
    int64_t seen = rs_outside_driver_net();
    cudaError_t e = real(ptr, size, pool, stream);
    rs_outside_driver_label(label);
    /* the driver's interposers recorded it already, under the same label */
    if (e == cudaSuccess && *ptr && size && rs_outside_driver_net() == seen) {
        if (rs_ptrmap_put(&rs_pool_allocs, *ptr, size) == 0) {
            rs_outside_add("cuda_mempool", (int64_t)size);
            rs_outside_record(1, *ptr, size);
        }
    }
    return e;
}

cudaError_t ranksnap_icp_mem_get_info(const rs_cuda_real *r, size_t *free_bytes, size_t *total_bytes)
{
    cudaError_t e = r->mem_get_info(free_bytes, total_bytes);
    int cur = -1;
    if (e != cudaSuccess || !free_bytes || !total_bytes || !ranksnap_icp_running() ||
        r->get_device(&cur) != cudaSuccess || cur < 0)
        return e;
    uint64_t reserved = 0, allocated = 0, limit = 0;
    if (rs_instance_cache_bytes(cur, &reserved, &allocated, &limit) != RANKSNAP_OK) return e;
    uint64_t f = (uint64_t)*free_bytes + (reserved > allocated ? reserved - allocated : 0);
    uint64_t t = *total_bytes;
    if (limit) {
        /* a device of `limit` bytes: what is not allocated of it is free, cache included */
        if (t > limit) t = limit;
        uint64_t room = limit > allocated ? limit - allocated : 0;
        if (f > room) f = room;
    }
    if (f > t) f = t;
    *free_bytes = (size_t)f;
    *total_bytes = (size_t)t;
    return e;
}
