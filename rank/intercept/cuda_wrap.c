/*
 * cuda_wrap.c — the link-time route for programs linked with the static CUDA runtime
 * (nvcc's default), whose cudaMalloc no preloaded library can reach.
 *
 * Built into libranksnap_wrap.a, which the CMake target ranksnap::wrap (and the pkg-config
 * module ranksnap-wrap) puts on the program's link line together with libranksnap.so and
 * -Wl,--wrap=cudaMalloc,...: the linker then sends the program's calls to __wrap_cudaMalloc and
 * makes __real_cudaMalloc the program's own cudaMalloc. This object lives in the executable; it
 * hands the core in libranksnap.so (intercept.c) a table of the program's real functions,
 * so that whatever ranksnap passes through goes to the program's runtime, exactly as without
 * ranksnap.
 *
 * ranksnap's own segments still come from its backend, which dlopens the shared runtime
 * (libcudart.so.<major>): a second runtime instance in the process. Both drive the device through
 * the same primary context, so memory from either is valid for kernels and copies of the other
 * and either can free it; what is per instance (the last-error slot, the current device of a
 * thread that never set one) is handled in the core. docs/GPU.md, "Interception".
 */
#include <stdatomic.h>

#include "intercept.h"

/* The program's own functions, named by the linker's --wrap. */
cudaError_t __real_cudaMalloc(void **ptr, size_t size);
cudaError_t __real_cudaFree(void *ptr);
cudaError_t __real_cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream);
cudaError_t __real_cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream);
cudaError_t __real_cudaFreeAsync(void *ptr, cudaStream_t stream);
cudaError_t __real_cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream);
cudaError_t __real_cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool,
                                           cudaStream_t stream);
cudaError_t __real_cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
                                                cudaStream_t stream);
cudaError_t __real_cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);

cudaError_t __wrap_cudaMalloc(void **ptr, size_t size);
cudaError_t __wrap_cudaFree(void *ptr);
cudaError_t __wrap_cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream);
cudaError_t __wrap_cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream);
cudaError_t __wrap_cudaFreeAsync(void *ptr, cudaStream_t stream);
cudaError_t __wrap_cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream);
cudaError_t __wrap_cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool,
                                           cudaStream_t stream);
cudaError_t __wrap_cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
                                                cudaStream_t stream);
cudaError_t __wrap_cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);

/* cudaGetDevice and the others are not wrapped, so these names are the program's runtime's; they
 * also make the linker pull in the static runtime's object that defines cudaMalloc, so that
 * __real_cudaMalloc binds to it rather than to libranksnap.so's export (the core checks anyway). */
static const rs_cuda_real rs_wrap_table = {
    .version = RS_CUDA_REAL_VERSION,
    .malloc_ = __real_cudaMalloc,
    .free_ = __real_cudaFree,
    .malloc_async = __real_cudaMallocAsync,
    .malloc_async_ptsz = __real_cudaMallocAsync_ptsz,
    .free_async = __real_cudaFreeAsync,
    .free_async_ptsz = __real_cudaFreeAsync_ptsz,
    .malloc_from_pool_async = __real_cudaMallocFromPoolAsync,
    .malloc_from_pool_async_ptsz = __real_cudaMallocFromPoolAsync_ptsz,
    .mem_get_info = __real_cudaMemGetInfo,
    .get_device = cudaGetDevice,
    .device_get_default_mem_pool = cudaDeviceGetDefaultMemPool,
    .stream_is_capturing = cudaStreamIsCapturing,
    .peek_at_last_error = cudaPeekAtLastError,
};

static _Atomic(const rs_cuda_real *) rs_wrap_checked;

/* The table the core validated (once; a race only repeats the check). */
static const rs_cuda_real *rs_wrap(void)
{
    const rs_cuda_real *t = atomic_load_explicit(&rs_wrap_checked, memory_order_acquire);
    if (!t) {
        t = ranksnap_icp_wrap_real(&rs_wrap_table);
        atomic_store_explicit(&rs_wrap_checked, t, memory_order_release);
    }
    return t;
}

cudaError_t __wrap_cudaMalloc(void **ptr, size_t size)
{
    return ranksnap_icp_malloc(rs_wrap(), ptr, size, __builtin_return_address(0));
}

cudaError_t __wrap_cudaFree(void *ptr)
{
    return ranksnap_icp_free(rs_wrap(), ptr);
}

cudaError_t __wrap_cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream)
{
    return ranksnap_icp_malloc_async(rs_wrap(), ptr, size, stream, 0, __builtin_return_address(0));
}

cudaError_t __wrap_cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream)
{
    return ranksnap_icp_malloc_async(rs_wrap(), ptr, size, stream, 1, __builtin_return_address(0));
}

cudaError_t __wrap_cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    return ranksnap_icp_free_async(rs_wrap(), ptr, stream, 0);
}

cudaError_t __wrap_cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream)
{
    return ranksnap_icp_free_async(rs_wrap(), ptr, stream, 1);
}

cudaError_t __wrap_cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool,
                                           cudaStream_t stream)
{
    return ranksnap_icp_malloc_from_pool_async(rs_wrap(), ptr, size, pool, stream, 0, __builtin_return_address(0));
}

cudaError_t __wrap_cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
                                                cudaStream_t stream)
{
    return ranksnap_icp_malloc_from_pool_async(rs_wrap(), ptr, size, pool, stream, 1, __builtin_return_address(0));
}

cudaError_t __wrap_cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    return ranksnap_icp_mem_get_info(rs_wrap(), free_bytes, total_bytes);
}
