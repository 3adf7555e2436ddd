/*
 * intercept.h — the CUDA runtime interposers' shared core (intercept.c).
 *
 * ranksnap takes over cudaMalloc, cudaFree, cudaMallocAsync, cudaFreeAsync,
 * cudaMallocFromPoolAsync (and the per-thread-default-stream _ptsz variants of the async ones) and
 * answers cudaMemGetInfo, by two routes that share this core:
 *
 * - preload (cuda_preload.c, in libranksnap.so only): the exported cuda* names interpose the
 *   shared CUDA runtime of a program started with LD_PRELOAD (launch/ranksnap-run). The real
 *   functions are found with dlsym(RTLD_NEXT), else in the already loaded runtime.
 * - link time (cuda_wrap.c, in libranksnap_wrap.a, the CMake target ranksnap::wrap): the
 *   program is linked with -Wl,--wrap=cudaMalloc,...; its calls land in __wrap_cudaMalloc, and
 *   the real functions are __real_cudaMalloc etc., i.e. the program's own (static) runtime.
 *
 * Each route hands the core a table of the real functions (rs_cuda_real): whatever ranksnap does
 * not serve itself (ranksnap disabled or not started yet, another device, a pointer it did not
 * allocate, a non-default memory pool, a stream being captured into a CUDA graph) goes to them
 * unchanged. The rs_icp_* functions are exported from libranksnap.so (they are what
 * libranksnap_wrap.a calls into), but they are not API: their table layout is checked by version.
 */
#ifndef RANKSNAP_INTERCEPT_H
#define RANKSNAP_INTERCEPT_H

#include <cuda_runtime_api.h>

#include "ranksnap.h"

#define RS_ICP_API __attribute__((visibility("default")))

/* Bumped whenever rs_cuda_real changes: libranksnap_wrap.a and libranksnap.so must agree. */
#define RS_CUDA_REAL_VERSION 1

typedef struct rs_cuda_real {
    int version; /* RS_CUDA_REAL_VERSION */
    cudaError_t (*malloc_)(void **, size_t);
    cudaError_t (*free_)(void *);
    cudaError_t (*malloc_async)(void **, size_t, cudaStream_t);
    cudaError_t (*malloc_async_ptsz)(void **, size_t, cudaStream_t);
    cudaError_t (*free_async)(void *, cudaStream_t);
    cudaError_t (*free_async_ptsz)(void *, cudaStream_t);
    cudaError_t (*malloc_from_pool_async)(void **, size_t, cudaMemPool_t, cudaStream_t);
    cudaError_t (*malloc_from_pool_async_ptsz)(void **, size_t, cudaMemPool_t, cudaStream_t);
    cudaError_t (*mem_get_info)(size_t *, size_t *);
    /* used, not interposed */
    cudaError_t (*get_device)(int *);
    cudaError_t (*device_get_default_mem_pool)(cudaMemPool_t *, int);
    cudaError_t (*stream_is_capturing)(cudaStream_t, enum cudaStreamCaptureStatus *);
    cudaError_t (*peek_at_last_error)(void);
} rs_cuda_real;

/* The preload route's table: each entry from dlsym(RTLD_NEXT), else from the CUDA runtime
 * ranksnap's backend loads (libcudart.so.<major>, the same instance when the program uses the
 * shared runtime). Entries that cannot be found answer cudaErrorInitializationError. */
RS_ICP_API const rs_cuda_real *ranksnap_icp_preload_real(void);

/* The link-time route hands its table here once: returned as it is when usable, else the preload
 * table (an older libranksnap_wrap.a, or __real_* symbols the linker bound to libranksnap.so's
 * own exports instead of the program's runtime, which would loop back into ranksnap). */
RS_ICP_API const rs_cuda_real *ranksnap_icp_wrap_real(const rs_cuda_real *table);

/* The interposed calls. `ptsz`: the _ptsz entry point, on which stream 0 means the calling
 * thread's default stream (cudaStreamPerThread) instead of the legacy one. `caller`: the return
 * address of the program's call (the exported function's __builtin_return_address(0)), kept with
 * the block as its site while nothing records its stack. */
RS_ICP_API cudaError_t ranksnap_icp_malloc(const rs_cuda_real *r, void **ptr, size_t size,
                                           const void *caller);
RS_ICP_API cudaError_t ranksnap_icp_free(const rs_cuda_real *r, void *ptr);
RS_ICP_API cudaError_t ranksnap_icp_malloc_async(const rs_cuda_real *r, void **ptr, size_t size,
                                           cudaStream_t stream, int ptsz, const void *caller);
RS_ICP_API cudaError_t ranksnap_icp_free_async(const rs_cuda_real *r, void *ptr, cudaStream_t stream,
                                         int ptsz);
RS_ICP_API cudaError_t ranksnap_icp_malloc_from_pool_async(const rs_cuda_real *r, void **ptr, size_t size,
                                                     cudaMemPool_t pool, cudaStream_t stream,
                                                     int ptsz, const void *caller);
RS_ICP_API cudaError_t ranksnap_icp_mem_get_info(const rs_cuda_real *r, size_t *free_bytes,
                                           size_t *total_bytes);

/* The cudaError_t for a ranksnap status (RANKSNAP_OK -> cudaSuccess, out of memory ->
 * cudaErrorMemoryAllocation, bad argument or unknown pointer -> cudaErrorInvalidValue, ...). */
cudaError_t ranksnap_icp_cuda_error(ranksnap_status st);

/* Test hook: serve calls with the sim backend too (the CPU unit tests of the core drive it
 * with a fake table); 0, the default, passes every call through unless the backend is cuda. */
void ranksnap_icp_test_serve_sim(int on);

#endif
