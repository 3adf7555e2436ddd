/*
 * fake_cublas.c — a stand-in for cuBLAS's one habit that matters to ranksnap: it takes device
 * memory for its workspace from the CUDA driver itself, on the caller's thread, the first time
 * it is used. Built as libcublas.so (the name is what tells ranksnap whose memory it is), linked
 * to the fake driver (fake_cuda_driver.c); the stand-in torch calls it through ctypes with the GIL
 * released, as PyTorch's matmul reaches cuBLAS.
 */
#include <stddef.h>

#include <cuda.h>

__attribute__((visibility("default"))) int fake_cublas_workspace(size_t bytes)
{
    CUdeviceptr p;
    return cuMemAlloc_v2(&p, bytes) == CUDA_SUCCESS ? 0 : -1;
}
