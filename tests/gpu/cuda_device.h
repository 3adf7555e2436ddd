/*
 * cuda_device.h — where the GPU tests start: a machine without a usable CUDA device is not a
 * failure but a skip (exit 77, SKIP_RETURN_CODE in tests/gpu/CMakeLists.txt), with the reason
 * printed so that a skipped run says why.
 */
#ifndef RANKSNAP_TEST_CUDA_DEVICE_H
#define RANKSNAP_TEST_CUDA_DEVICE_H

#include <stdio.h>

#include <cuda_runtime_api.h>

/* 77 with the reason printed where no device is usable, else 0. */
static inline int skip_without_a_cuda_device(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("SKIPPED: no usable CUDA device (%s); run on a GPU machine\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "device count 0");
        return 77;
    }
    return 0;
}

#endif
