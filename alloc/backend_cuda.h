/*
 * backend_cuda.h — the CUDA runtime as a backend (backend_cuda.c; backend_nocuda.c in a build
 * without CUDA).
 */
#ifndef RANKSNAP_BACKEND_CUDA_H
#define RANKSNAP_BACKEND_CUDA_H

#include "backend.h"
#include "ranksnap.h"

/* The CUDA runtime on device `device` (< 0: the calling thread's current device).
 * RANKSNAP_ERR_UNSUPPORTED in a build without CUDA, RANKSNAP_ERR_BACKEND when no device is
 * present. */
ranksnap_status rs_backend_cuda_create(int device, rs_backend **out);
/* RANKSNAP_OK when the CUDA runtime loads and shows a device; else why not. Touches no device. */
ranksnap_status rs_backend_cuda_check(void);
/* 1 if a CUDA device can be used (for RANKSNAP_BACKEND=auto), the thread's last error left clear. */
int rs_backend_cuda_available(void);
/* Non-zero while the calling thread is inside a backend call into CUDA (its segments are the
 * allocator's, recorded as such: the driver's interposers leave them alone). */
int rs_backend_cuda_in_call(void);
/* Around a call ranksnap makes into the program's own runtime on its own behalf (entering 1,
 * then 0): counted as a backend call, so that the driver's interposers do not take it for the
 * program's. */
void rs_backend_cuda_own_call(int entering);
/* The devices CUDA shows the process (CUDA_VISIBLE_DEVICES applied); 0 when it shows none. */
int rs_backend_cuda_device_count(void);
/* 1 and the device of the calling thread's current context, as the driver says; 0 when no
 * context is current or the driver cannot say. */
int rs_backend_cuda_context_device(int *device);
/* The calling thread's current device: the device of the driver's current context, else (no
 * context current yet) what the CUDA runtime the backend loaded says. */
ranksnap_status rs_backend_cuda_current_device(int *device);

#endif
