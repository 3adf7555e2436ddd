/*
 * fake_cudart.c — a stand-in for the shared CUDA runtime (libcudart.so.<major>) on machines
 * without a GPU, so that the preload route runs end to end in CI (label unit).
 *
 * Host memory plays device memory on FAKE_CUDA_DEVICES devices (default 2) of 16 GiB each, with a
 * current device per thread as the real runtime keeps it: cudaMalloc is aligned_alloc charged to
 * the current device, cudaMemset writes it, cudaMemGetInfo counts the current device's,
 * events and streams complete at once. It has the soname of
 * the real runtime and a version node of the same name, so that preloading it (after
 * libranksnap.so) makes it *the* runtime of the process: the test program's calls, ranksnap's
 * RTLD_NEXT lookups and ranksnap's backend (which dlopens the runtime by soname) all reach it.
 * It implements exactly what those three call. fake_device_take/give let fake_nccl.c take device
 * memory behind the interposers' back, as NCCL does through its own runtime; fake_device_used
 * tells a test what each device holds.
 *
 * With FAKE_CUDA_SHARED=FILE the devices are shared by every process that names the same file
 * (fake_share.h), as one GPU is by two ranks of a small job: each process's bytes on each device,
 * a context of FAKE_SHARE_CONTEXT included once it used the device, are kept there, and
 * cudaMemGetInfo answers for all of them together; fake_nvml.c lists them as NVML does.
 *
 * With FAKE_CUDART_VIA_DRIVER=1 (and the fake driver loaded) every cudaMalloc first asks the
 * driver's cuMemAlloc_v2, found by name as a static runtime finds it, for the same size, and fails
 * as the driver does: so a runtime call ranksnap makes on its own behalf reaches the driver's
 * interposers, as it does in a program on the static runtime linked with ranksnap::wrap.
 *
 * With FAKE_CUDART_ASYNC_VIA_DRIVER=1 the stream-ordered calls are the driver's, as the real
 * runtime's are: cudaMallocAsync is cuMemAllocAsync, cudaFreeAsync cuMemFreeAsync (found by name,
 * the preloaded interposers first), so that the memory of a program that allocates only through
 * them (PyTorch's backend:cudaMallocAsync) is the driver's pool's, seen by the driver's
 * interposers; a refusal is cudaErrorMemoryAllocation.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "fake_share.h"

#define FAKE_EXPORT __attribute__((visibility("default")))
#define FAKE_MAX_LIVE 65536

#define FAKE_MAX_DEVICES 8

static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;
static const size_t fake_capacity = (size_t)16 << 30;
static size_t fake_used[FAKE_MAX_DEVICES];
static _Thread_local cudaError_t fake_last;
static _Thread_local int fake_dev;
static struct {
    void *p;
    size_t n;
    int dev;
} fake_live[FAKE_MAX_LIVE];

static int fake_devices(void)
{
    const char *v = getenv("FAKE_CUDA_DEVICES");
    int n = v ? atoi(v) : 2;
    return n < 1 ? 1 : n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n;
}
static int fake_pool;

/* The shared mode: this process's slot in the table, claimed at its first use of a device. */
static int fake_slot = -1;

/* fake_mu held: this process's bytes on `dev`, its context included, into the shared table. */
static void fake_share_publish(int dev)
{
    fake_share *t = fake_share_map();
    if (!t || dev < 0 || dev >= FAKE_SHARE_DEVICES) return;
    for (int i = 0; fake_slot < 0 && i < FAKE_SHARE_PROCESSES; i++) {
        uint32_t free_slot = 0;
        if (atomic_compare_exchange_strong(&t->pid[i], &free_slot, (uint32_t)getpid())) fake_slot = i;
    }
    if (fake_slot >= 0) atomic_store(&t->bytes[fake_slot][dev], fake_used[dev] + FAKE_SHARE_CONTEXT);
}

/* A process that exits lets go of its slot, as its contexts go with it. */
__attribute__((destructor)) static void fake_share_leave(void)
{
    fake_share *t = fake_share_map();
    if (!t || fake_slot < 0 || atomic_load(&t->pid[fake_slot]) != (uint32_t)getpid()) return;
    for (int d = 0; d < FAKE_SHARE_DEVICES; d++) atomic_store(&t->bytes[fake_slot][d], 0);
    atomic_store(&t->pid[fake_slot], 0);
}

static cudaError_t fake_err(cudaError_t e)
{
    if (e != cudaSuccess) fake_last = e;
    return e;
}

/* Internal, so that fake_nccl.c and cudaMallocPitch do not go through the interposed cudaMalloc
 * (the real runtime's own calls never do). */
static cudaError_t fake_take(size_t n, void **out)
{
    *out = NULL;
    pthread_mutex_lock(&fake_mu);
    cudaError_t e = cudaErrorMemoryAllocation;
    void *p = n <= fake_capacity - fake_used[fake_dev] ? aligned_alloc(512, (n + 511) & ~(size_t)511)
                                                       : NULL;
    for (int i = 0; p && i < FAKE_MAX_LIVE; i++)
        if (!fake_live[i].p) {
            fake_live[i].p = p;
            fake_live[i].n = n;
            fake_live[i].dev = fake_dev;
            fake_used[fake_dev] += n;
            fake_share_publish(fake_dev);
            *out = p;
            e = cudaSuccess;
            break;
        }
    if (p && e != cudaSuccess) free(p);
    pthread_mutex_unlock(&fake_mu);
    return fake_err(e);
}

static cudaError_t fake_give(void *p)
{
    if (!p) return cudaSuccess;
    pthread_mutex_lock(&fake_mu);
    cudaError_t e = cudaErrorInvalidValue;
    for (int i = 0; i < FAKE_MAX_LIVE; i++)
        if (fake_live[i].p == p) {
            fake_used[fake_live[i].dev] -= fake_live[i].n;
            fake_share_publish(fake_live[i].dev);
            fake_live[i].p = NULL;
            free(p);
            e = cudaSuccess;
            break;
        }
    pthread_mutex_unlock(&fake_mu);
    return fake_err(e);
}

/* The bytes device `dev` holds for this process: where a test reads which device memory was
 * taken from, whatever ranksnap recorded. */
FAKE_EXPORT size_t fake_device_used(int dev);
FAKE_EXPORT size_t fake_device_used(int dev)
{
    if (dev < 0 || dev >= FAKE_MAX_DEVICES) return 0;
    pthread_mutex_lock(&fake_mu);
    size_t n = fake_used[dev];
    pthread_mutex_unlock(&fake_mu);
    return n;
}

FAKE_EXPORT void *fake_device_take(size_t n);
FAKE_EXPORT void fake_device_give(void *p);
FAKE_EXPORT cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s);
FAKE_EXPORT cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s);
FAKE_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t n, cudaMemPool_t m, cudaStream_t s);

FAKE_EXPORT void *fake_device_take(size_t n)
{
    void *p = NULL;
    fake_take(n, &p);
    return p;
}

FAKE_EXPORT void fake_device_give(void *p)
{
    fake_give(p);
}

/* FAKE_CUDART_VIA_DRIVER: the driver's answer for `n` bytes (taken and given back at once). */
static cudaError_t fake_ask_driver(size_t n)
{
    const char *v = getenv("FAKE_CUDART_VIA_DRIVER");
    if (!v || strcmp(v, "1") != 0) return cudaSuccess;
    int (*alloc)(unsigned long long *, size_t);
    int (*release)(unsigned long long);
    *(void **)&alloc = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
    *(void **)&release = dlsym(RTLD_DEFAULT, "cuMemFree_v2");
    unsigned long long d = 0;
    if (!alloc || !release) return cudaSuccess;
    if (alloc(&d, n) != 0) return cudaErrorMemoryAllocation;
    release(d);
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaMalloc(void **p, size_t n)
{
    if (!p) return fake_err(cudaErrorInvalidValue);
    if (!n) {
        *p = NULL;
        return cudaSuccess;
    }
    cudaError_t e = fake_ask_driver(n);
    if (e != cudaSuccess) {
        *p = NULL;
        return fake_err(e);
    }
    return fake_take(n, p);
}

FAKE_EXPORT cudaError_t cudaFree(void *p)
{
    return fake_give(p);
}

/* FAKE_CUDART_ASYNC_VIA_DRIVER=1: the driver's entry point `name`, else NULL. */
static void *fake_async_driver(const char *name)
{
    const char *v = getenv("FAKE_CUDART_ASYNC_VIA_DRIVER");
    return v && !strcmp(v, "1") ? dlsym(RTLD_DEFAULT, name) : NULL;
}

static cudaError_t fake_malloc_async(void **p, size_t n, cudaStream_t s)
{
    int (*alloc)(unsigned long long *, size_t, void *);
    *(void **)&alloc = fake_async_driver("cuMemAllocAsync");
    if (!alloc) return cudaMalloc(p, n);
    if (!p) return fake_err(cudaErrorInvalidValue);
    unsigned long long d = 0;
    int e = alloc(&d, n, (void *)s);
    *p = e == 0 ? (void *)(uintptr_t)d : NULL;
    return e == 0 ? cudaSuccess : fake_err(e == 2 ? cudaErrorMemoryAllocation : cudaErrorUnknown);
}

static cudaError_t fake_free_async(void *p, cudaStream_t s)
{
    int (*release)(unsigned long long, void *);
    *(void **)&release = fake_async_driver("cuMemFreeAsync");
    if (!release) return fake_give(p);
    return release((unsigned long long)(uintptr_t)p, (void *)s) == 0 ? cudaSuccess
                                                                      : fake_err(cudaErrorInvalidValue);
}

FAKE_EXPORT cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s)
{
    return fake_malloc_async(p, n, s);
}

FAKE_EXPORT cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s)
{
    return fake_malloc_async(p, n, s);
}

FAKE_EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
    return fake_free_async(p, s);
}

FAKE_EXPORT cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s)
{
    return fake_free_async(p, s);
}

FAKE_EXPORT cudaError_t cudaMallocFromPoolAsync(void **p, size_t n, cudaMemPool_t m, cudaStream_t s)
{
    (void)m;
    (void)s;
    return cudaMalloc(p, n);
}

FAKE_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t n, cudaMemPool_t m, cudaStream_t s)
{
    (void)m;
    (void)s;
    return cudaMalloc(p, n);
}

FAKE_EXPORT cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t w, size_t h)
{
    *pitch = (w + 511) & ~(size_t)511;
    return fake_take(*pitch * h, p);
}

FAKE_EXPORT cudaError_t cudaMemGetInfo(size_t *f, size_t *t)
{
    pthread_mutex_lock(&fake_mu);
    fake_share *shared = fake_share_map();
    fake_share_publish(fake_dev);
    uint64_t used = shared ? fake_share_device_used(shared, fake_dev) : fake_used[fake_dev];
    *f = used < fake_capacity ? fake_capacity - used : 0;
    *t = fake_capacity;
    pthread_mutex_unlock(&fake_mu);
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaGetDeviceCount(int *n)
{
    *n = fake_devices();
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaGetDevice(int *d)
{
    *d = fake_dev;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaSetDevice(int d)
{
    if (d < 0 || d >= fake_devices()) return fake_err(cudaErrorInvalidDevice);
    fake_dev = d;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaGetDeviceProperties_v2(struct cudaDeviceProp *p, int d)
{
    if (d < 0 || d >= fake_devices()) return fake_err(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "ranksnap fake device %d", d);
    p->uuid.bytes[0] = (char)(d + 1);
    p->totalGlobalMem = fake_capacity;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    (void)flags;
    *e = (cudaEvent_t)malloc(16);
    return *e ? cudaSuccess : fake_err(cudaErrorMemoryAllocation);
}

FAKE_EXPORT cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    (void)e;
    (void)s;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaEventQuery(cudaEvent_t e)
{
    (void)e;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    (void)e;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    free(e);
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t e = fake_last;
    fake_last = cudaSuccess;
    return e;
}

FAKE_EXPORT cudaError_t cudaPeekAtLastError(void)
{
    return fake_last;
}

FAKE_EXPORT const char *cudaGetErrorString(cudaError_t e)
{
    return e == cudaSuccess ? "no error" : e == cudaErrorMemoryAllocation ? "out of memory" : "error";
}

FAKE_EXPORT const char *cudaGetErrorName(cudaError_t e)
{
    return e == cudaSuccess                 ? "cudaSuccess"
           : e == cudaErrorMemoryAllocation ? "cudaErrorMemoryAllocation"
                                            : "cudaErrorUnknown";
}

FAKE_EXPORT cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *m, int d)
{
    (void)d;
    *m = (cudaMemPool_t)(void *)&fake_pool;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *c)
{
    (void)s;
    *c = cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    *s = (cudaStream_t)malloc(16);
    return *s ? cudaSuccess : fake_err(cudaErrorMemoryAllocation);
}

FAKE_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    free(s);
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    (void)s;
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaDeviceSynchronize(void)
{
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaMemset(void *p, int v, size_t n)
{
    memset(p, v, n);
    return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    (void)s;
    memset(p, v, n);
    return cudaSuccess;
}
