/*
 * cuda_preload.c — the exported CUDA runtime names that take over a program's allocation
 * calls when libranksnap.so is preloaded (LD_PRELOAD, which launch/ranksnap-run sets).
 *
 * Only in libranksnap.so, never in libranksnap.a, and active only when the library was preloaded
 * (ranksnap_icp_preloaded): a program linked with ranksnap to call its API keeps its own cudaMalloc
 * (alloc_bench compares ranksnap with the real cudaMallocAsync, for one). Each function hands the
 * call to the core (intercept.c) with the table of the real functions found behind
 * libranksnap.so (dlsym(RTLD_NEXT)). The _ptsz names are
 * what cuda_runtime_api.h turns the async calls into when a program is compiled with
 * --default-stream per-thread (CUDA_API_PER_THREAD_DEFAULT_STREAM).
 *
 * A program linked with the static CUDA runtime (nvcc's default) resolves cudaMalloc inside its
 * own executable, where no preloaded library can reach it; such programs link ranksnap::wrap
 * instead (cuda_wrap.c). A preloaded run that saw no call is told so: by finalize when
 * ranksnap started (through MPI_Init) and the device filled up anyway, by the destructor below
 * when it never started.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "instance.h"
#include "intercept.h"
#include "launcher.h"
#include "outside.h"
#include "state.h"

#define RS_EXPORT __attribute__((visibility("default")))

/* Not declared by cuda_runtime_api.h unless the program is compiled for per-thread default
 * streams; the runtime exports them either way. */
RS_EXPORT cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream);
RS_EXPORT cudaError_t cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream);
RS_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
                                                   cudaStream_t stream);

/* The program's call site, kept with the block it gets (intercept.h). */
#define RS_CALLER __builtin_return_address(0)

RS_EXPORT cudaError_t cudaMalloc(void **ptr, size_t size)
{
    const rs_cuda_real *r = ranksnap_icp_preload_real();
    return rs_launcher_preloaded() ? ranksnap_icp_malloc(r, ptr, size, RS_CALLER) : r->malloc_(ptr, size);
}

RS_EXPORT cudaError_t cudaFree(void *ptr)
{
    const rs_cuda_real *r = ranksnap_icp_preload_real();
    return rs_launcher_preloaded() ? ranksnap_icp_free(r, ptr) : r->free_(ptr);
}

RS_EXPORT cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream)
{
    const rs_cuda_real *r = ranksnap_icp_preload_real();
    return rs_launcher_preloaded() ? ranksnap_icp_malloc_async(r, ptr, size, stream, 0, RS_CALLER)
                              : r->malloc_async(ptr, size, stream);
}

RS_EXPORT cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream)
{
    const rs_cuda_real *r = ranksnap_icp_preload_real();
    return rs_launcher_preloaded() ? ranksnap_icp_malloc_async(r, ptr, size, stream, 1, RS_CALLER)
                              : r->malloc_async_ptsz(ptr, size, stream);
}

RS_EXPORT cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    const rs_cuda_real *r = ranksnap_icp_preload_real();
    return rs_launcher_preloaded() ? ranksnap_icp_free_async(r, ptr, stream, 0) : r->free_async(ptr, stream);
}

RS_EXPORT cudaError_t cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream)
{
    const rs_cuda_real *r = ranksnap_icp_preload_real();
    return rs_launcher_preloaded() ? ranksnap_icp_free_async(r, ptr, stream, 1)
                              : r->free_async_ptsz(ptr, stream);
}

RS_EXPORT cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool,
                                              cudaStream_t stream)
{
    const rs_cuda_real *r = ranksnap_icp_preload_real();
    return rs_launcher_preloaded() ? ranksnap_icp_malloc_from_pool_async(r, ptr, size, pool, stream, 0,
                                                                         RS_CALLER)
                              : r->malloc_from_pool_async(ptr, size, pool, stream);
}

RS_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
                                                   cudaStream_t stream)
{
    const rs_cuda_real *r = ranksnap_icp_preload_real();
    return rs_launcher_preloaded() ? ranksnap_icp_malloc_from_pool_async(r, ptr, size, pool, stream, 1,
                                                                         RS_CALLER)
                              : r->malloc_from_pool_async_ptsz(ptr, size, pool, stream);
}

RS_EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    const rs_cuda_real *r = ranksnap_icp_preload_real();
    return rs_launcher_preloaded() ? ranksnap_icp_mem_get_info(r, free_bytes, total_bytes)
                              : r->mem_get_info(free_bytes, total_bytes);
}

/* At exit, for a preloaded process in which no allocation call ever reached ranksnap, so that
 * ranksnap never started and finalize's own check could not run: rank/runtime/outside.c says
 * how to link, once, on rank 0, unless the driver was never used or the shared runtime is
 * loaded. Runs after the atexit handlers (the glue's finalize asked already, for PyTorch). */
__attribute__((destructor)) static void ranksnap_icp_check_at_exit(void)
{
    rs_outside_warn_if_cuda_unseen(1);
}
