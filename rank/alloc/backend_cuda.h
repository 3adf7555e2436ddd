/*
 * backend_cuda.h — the CUDA runtime as a backend (backend_cuda.c; backend_nocuda.c in a build
 * without CUDA).
 */
#ifndef RANKSNAP_BACKEND_CUDA_H
#define RANKSNAP_BACKEND_CUDA_H

#include "backend.h"
#include "ranksnap.h"

/* The CUDA runtime on the current device. RANKSNAP_ERR_UNSUPPORTED in a build without CUDA,
 * RANKSNAP_ERR_BACKEND when no device is present. */
ranksnap_status rs_backend_cuda_create(rs_backend **out);
/* 1 if a CUDA device can be used (for RANKSNAP_BACKEND=auto). */
int rs_backend_cuda_available(void);

#endif
