/*
 * driver.c — the CUDA driver's allocation calls, seen whatever route reached them (libranksnap.so
 * only, active when it is preloaded).
 *
 * Below the CUDA runtime every device allocation of the process is a driver call: cuMemAlloc,
 * cuMemAllocPitch, cuMemAllocManaged, the stream-ordered cuMemAllocAsync / cuMemAllocFromPoolAsync,
 * and the virtual memory API (cuMemCreate, used by NCCL's allocator and PyTorch's expandable
 * segments). A program and its libraries reach them three ways, and each gets ranksnap's wrapper:
 *
 * - direct exports: a program linked with libcuda calls cuMemAlloc_v2 & co., which the preloaded
 *   library defines first;
 * - cuGetProcAddress / cuGetProcAddress_v2: the CUDA runtime (shared or static, such as the one
 *   inside libnccl.so), NCCL and PyTorch ask the driver for entry points by base name, CUDA version
 *   and per-thread-stream flag; the wrapper of the variant they select comes back
 *   (cuMemAllocAsync_ptsz for the per-thread flag, cuMemAlloc_v2 from CUDA 3.2 on), calling the
 *   driver's export of that variant; a name not wrapped, or a version older than the wrapped ABI,
 *   gets the driver's own answer;
 * - dlsym on a handle of libcuda (dlopen("libcuda.so.1") + dlsym, which is how those runtimes find
 *   cuGetProcAddress itself): the process's dlsym is taken over by a small trampoline
 *   (platform/trampoline.h, where the processor has one) that jumps to the real dlsym for
 *   everything but wrapped names looked up in libcuda, so that the real one still sees its
 *   caller's return address (RTLD_NEXT is relative to the caller). Not in a sanitizer build,
 *   whose runtime calls dlsym before it is set up.
 *
 * Each wrapper calls the real entry point, then records what it did as memory outside ranksnap's
 * allocators (outside.h): on the device it landed on, with the caller's stack, under the library
 * that asked (NCCL, cuBLAS, ...: the label), until its free. A free (a release, an unmap) ends the
 * record before the real call, since the driver may give the address or handle to another
 * thread's allocation before the call returns. cuMemCreate counts physical memory on
 * its location's device, held until cuMemRelease and the last cuMemUnmap of the handle; address
 * reservations are not memory, imported handles are a peer's. CUDA arrays count what the driver
 * says they need. A stream-ordered pool's allocations are recorded one by one, and what the pool
 * keeps beyond them is read from its attributes at each sample. An out-of-memory answer is the
 * rank's OOM. Nothing is counted twice: the calls ranksnap's own backend makes are left to the
 * allocator's events (rs_backend_cuda_in_call), and a wrapper running inside another wrapper's
 * bookkeeping records nothing. Allocations during stream capture are passed through unrecorded
 * (they become graph memory, not live bytes).
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
/* cuda.h maps the base name to the current variant; here both are defined */
#undef cuGetProcAddress

#include "backend_cuda.h"
#include "errors.h"
#include "options.h"
#include "external.h"
#include "instance.h"
#include "launcher.h"
#include "outside.h"
#include "ptrmap.h"
#include "symver.h"
#include "trampoline.h"

#define RS_EXPORT __attribute__((visibility("default")))

/* ---- the real driver ------------------------------------------------------------------------- */

typedef void *(*rs_dlsym_fn)(void *, const char *);
static rs_dlsym_fn rs_real_dlsym_fn;
static pthread_once_t rs_real_dlsym_once = PTHREAD_ONCE_INIT;

static void rs_real_dlsym_load(void)
{
    /* the next dlsym after this library: libc's, or libdl's on older systems */
    *(void **)(&rs_real_dlsym_fn) = rs_symver_next("dlsym", rs_symver_dlsym);
}

static void *rs_real_dlsym(void *handle, const char *name)
{
    pthread_once(&rs_real_dlsym_once, rs_real_dlsym_load);
    return rs_real_dlsym_fn ? rs_real_dlsym_fn(handle, name) : NULL;
}

/* The driver's module: its load base, to tell its handle and its pointers apart. */
static void *rs_cuda_handle;
static void *rs_cuda_base;
static pthread_once_t rs_cuda_once = PTHREAD_ONCE_INIT;

static void rs_cuda_load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    rs_cuda_handle = h;
    Dl_info info;
    void *probe = rs_real_dlsym(h, "cuInit");
    if (probe && dladdr(probe, &info)) rs_cuda_base = info.dli_fbase;
}

/* The wrapped entry points, by their exact exported names; `real` is libcuda's export. */
typedef struct rs_drv_entry {
    const char *name;
    void *wrapper;
    _Atomic(void *) real;
    int loaded;
} rs_drv_entry;

RS_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes);
RS_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                      unsigned int elem);
RS_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags);
RS_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr);
RS_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s);
RS_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s);
RS_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                           CUstream s);
RS_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                                CUstream s);
RS_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s);
RS_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s);
RS_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags);
RS_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
RS_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                            CUmemGenericAllocationHandle handle, unsigned long long flags);
RS_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
RS_EXPORT CUresult cuArrayCreate_v2(CUarray *array, const CUDA_ARRAY_DESCRIPTOR *desc);
RS_EXPORT CUresult cuArray3DCreate_v2(CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc);
RS_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                          unsigned int levels);
RS_EXPORT CUresult cuArrayDestroy(CUarray array);
RS_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray array);
RS_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
RS_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                       cuuint64_t flags, CUdriverProcAddressQueryResult *status);

enum {
    RS_D_MEM_ALLOC, RS_D_MEM_ALLOC_PITCH, RS_D_MEM_ALLOC_MANAGED, RS_D_MEM_FREE, RS_D_ALLOC_ASYNC,
    RS_D_ALLOC_ASYNC_PTSZ, RS_D_POOL_ASYNC, RS_D_POOL_ASYNC_PTSZ, RS_D_FREE_ASYNC,
    RS_D_FREE_ASYNC_PTSZ, RS_D_CREATE, RS_D_RELEASE, RS_D_MAP, RS_D_UNMAP, RS_D_ARRAY,
    RS_D_ARRAY_3D, RS_D_MIPMAPPED, RS_D_ARRAY_DESTROY, RS_D_MIPMAPPED_DESTROY, RS_D_GET_PROC,
    RS_D_GET_PROC_V2, RS_D_WRAPPED_, /* the rest are used, not wrapped */
    RS_D_CTX_GET_DEVICE = RS_D_WRAPPED_, RS_D_STREAM_IS_CAPTURING, RS_D_STREAM_IS_CAPTURING_PTSZ,
    RS_D_ARRAY_REQ, RS_D_MIPMAPPED_REQ, RS_D_DEVICE_GET_MEM_POOL, RS_D_POOL_GET_ATTRIBUTE,
    RS_D_COUNT_
};

#define RS_E(name) {#name, (void *)(uintptr_t)name, NULL, 0}
static rs_drv_entry rs_drv[RS_D_COUNT_] = {
    RS_E(cuMemAlloc_v2),       RS_E(cuMemAllocPitch_v2),
    RS_E(cuMemAllocManaged),   RS_E(cuMemFree_v2),
    RS_E(cuMemAllocAsync),     RS_E(cuMemAllocAsync_ptsz),
    RS_E(cuMemAllocFromPoolAsync), RS_E(cuMemAllocFromPoolAsync_ptsz),
    RS_E(cuMemFreeAsync),      RS_E(cuMemFreeAsync_ptsz),
    RS_E(cuMemCreate),         RS_E(cuMemRelease),
    RS_E(cuMemMap),            RS_E(cuMemUnmap),
    RS_E(cuArrayCreate_v2),    RS_E(cuArray3DCreate_v2),
    RS_E(cuMipmappedArrayCreate), RS_E(cuArrayDestroy),
    RS_E(cuMipmappedArrayDestroy),
    RS_E(cuGetProcAddress),    RS_E(cuGetProcAddress_v2),
    {"cuCtxGetDevice", NULL, NULL, 0}, {"cuStreamIsCapturing", NULL, NULL, 0},
    {"cuStreamIsCapturing_ptsz", NULL, NULL, 0}, {"cuArrayGetMemoryRequirements", NULL, NULL, 0},
    {"cuMipmappedArrayGetMemoryRequirements", NULL, NULL, 0}, {"cuDeviceGetMemPool", NULL, NULL, 0},
    {"cuMemPoolGetAttribute", NULL, NULL, 0},
};
#undef RS_E

static pthread_once_t rs_drv_once = PTHREAD_ONCE_INIT;

static void rs_drv_load(void)
{
    pthread_once(&rs_cuda_once, rs_cuda_load);
    for (int i = 0; i < RS_D_COUNT_; i++) {
        void *f = rs_cuda_handle ? rs_real_dlsym(rs_cuda_handle, rs_drv[i].name) : NULL;
        /* never our own export (a driver that lacks the name: the lookup fell through to us) */
        if (f == rs_drv[i].wrapper) f = NULL;
        atomic_store_explicit(&rs_drv[i].real, f, memory_order_release);
    }
}

static void *rs_real(int i)
{
    pthread_once(&rs_drv_once, rs_drv_load);
    return atomic_load_explicit(&rs_drv[i].real, memory_order_acquire);
}

typedef CUresult (*rs_alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*rs_pitch_fn)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
typedef CUresult (*rs_managed_fn)(CUdeviceptr *, size_t, unsigned);
typedef CUresult (*rs_free_fn)(CUdeviceptr);
typedef CUresult (*rs_async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*rs_pool_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
typedef CUresult (*rs_free_async_fn)(CUdeviceptr, CUstream);
typedef CUresult (*rs_create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                                 unsigned long long);
typedef CUresult (*rs_release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*rs_map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                              unsigned long long);
typedef CUresult (*rs_unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*rs_array_fn)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
typedef CUresult (*rs_array3d_fn)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
typedef CUresult (*rs_mipmapped_fn)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned);
typedef CUresult (*rs_array_destroy_fn)(CUarray);
typedef CUresult (*rs_mipmapped_destroy_fn)(CUmipmappedArray);
typedef CUresult (*rs_proc_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*rs_proc_v2_fn)(const char *, void **, int, cuuint64_t,
                                  CUdriverProcAddressQueryResult *);

#define RS_REAL(i, fn_t, fn)                                                                       \
    fn_t fn;                                                                                       \
    *(void **)(&fn) = rs_real(i);                                                                  \
    if (!fn) return CUDA_ERROR_NOT_FOUND

/* ---- what is recorded ------------------------------------------------------------------------ */

/* A wrapper running inside another wrapper's bookkeeping (an unwinder or dladdr that allocates
 * device memory: none should, but never recurse) records nothing. */
static _Thread_local int rs_drv_busy;
/* RANKSNAP_DRIVER, read once (-1: not yet). */
static atomic_int rs_drv_on = -1;

static int rs_drv_enabled(void)
{
    int on = atomic_load_explicit(&rs_drv_on, memory_order_relaxed);
    if (on >= 0) return on;
    rs_options o;
    /* a value that does not parse is the init's to report; the driver is then left alone */
    on = rs_options_load_one(&o, "RANKSNAP_DRIVER", NULL) == RANKSNAP_OK && o.driver;
    rs_error_clear();
    atomic_store_explicit(&rs_drv_on, on, memory_order_relaxed);
    return on;
}

/* 1 when this call is recorded: the library was preloaded, RANKSNAP_DRIVER is on, ranksnap runs
 * (started now if this is the first allocation it sees) or is yet to start, outside torch mode,
 * and the call is not the backend's own. Yet to start: another thread is starting it, this one
 * is inside its start, or the program's MPI_Init is to come; the call is recorded all the same
 * and counted against the cap, which the instance finds when it is up (a call that waited for
 * the start could wait for itself, or for a thread that waits for it). */
static int rs_drv_recorded(void)
{
    if (rs_drv_busy || rs_backend_cuda_in_call() || !rs_launcher_preloaded()) return 0;
    if (!rs_drv_enabled()) return 0;
    /* PyTorch's recorder sees its own allocations; where it cannot run, these are the record */
    if (rs_external_mode() && !rs_external_native()) return 0;
    ranksnap_status st = rs_instance_ensure();
    return st == RANKSNAP_OK || (st == RANKSNAP_ERR_NOT_INITIALIZED && rs_instance_starting());
}

static int rs_drv_device(void)
{
    CUdevice d = 0;
    CUresult (*get)(CUdevice *);
    *(void **)(&get) = rs_real(RS_D_CTX_GET_DEVICE);
    return get && get(&d) == CUDA_SUCCESS ? (int)d : 0;
}

/* Pointer (or handle) -> its bytes, device and label: bytes in the low 48 bits, the device in
 * the next 8, the label's index in the top 8. */
static const char *const rs_drv_labels[] = {"program", "nccl",  "nccl_mem", "cuda_mempool",
                                            "cublas",  "cudnn", "torch",    "managed",
                                            RS_OUTSIDE_ASYNC_LABEL};
#define RS_N_LABELS (sizeof rs_drv_labels / sizeof rs_drv_labels[0])
#define RS_BYTES_MASK ((UINT64_C(1) << 48) - 1)

static uint64_t rs_pack(uint64_t bytes, int device, const char *label)
{
    uint64_t l = 0;
    for (size_t i = 0; i < RS_N_LABELS; i++)
        if (!strcmp(label, rs_drv_labels[i])) l = i;
    return (bytes & RS_BYTES_MASK) | ((uint64_t)(device & 0xff) << 48) | (l << 56);
}

static void rs_unpack(uint64_t v, uint64_t *bytes, int *device, const char **label)
{
    *bytes = v & RS_BYTES_MASK;
    *device = (int)((v >> 48) & 0xff);
    uint64_t l = v >> 56;
    *label = rs_drv_labels[l < RS_N_LABELS ? l : 0];
}

static rs_ptrmap rs_drv_ptrs = RS_PTRMAP_INIT;    /* cuMemAlloc & co.: pointer -> packed     */
static rs_ptrmap rs_drv_handles = RS_PTRMAP_INIT; /* cuMemCreate: handle -> packed           */
static rs_ptrmap rs_drv_maps = RS_PTRMAP_INIT;    /* handle -> mappings, top bit: released    */
static rs_ptrmap rs_drv_mapped = RS_PTRMAP_INIT;  /* mapped address -> handle                 */
static rs_ptrmap rs_drv_arrays = RS_PTRMAP_INIT;  /* CUarray, CUmipmappedArray -> packed      */
#define RS_RELEASED (UINT64_C(1) << 63)
/* A handle as the maps' key (they refuse 0 and 1, and a driver's handles may be small numbers) and
 * as its events' address. */
#define RS_HKEY(h) ((uint64_t)(h) + 2)

/* Records `key`'s `bytes` on `device` in `m`, under `label` (NULL: the library the stack shows),
 * `admitted` of them counted already (rs_drv_admit). */
static void rs_drv_alloc(rs_ptrmap *m, uint64_t key, uint64_t bytes, int device, const char *label,
                         uint64_t admitted)
{
    rs_drv_busy = 1;
    label = rs_outside_driver_alloc(key, bytes, device, label, admitted);
    if (rs_ptrmap_put(m, (const void *)(uintptr_t)key, rs_pack(bytes, device, label)) != 0)
        rs_outside_driver_free(key, bytes, device, label); /* no room to remember its free */
    rs_drv_busy = 0;
}

/* The record of `key` (its packed value in *v) taken out: 1 if there was one. */
static int rs_drv_take(rs_ptrmap *m, uint64_t key, uint64_t *v)
{
    return key && rs_ptrmap_take(m, (const void *)(uintptr_t)key, v);
}

/* A free: its bytes leave the account, its held entry goes, its event is recorded. */
static void rs_drv_freed(uint64_t key, uint64_t v)
{
    uint64_t bytes;
    int device;
    const char *label;
    rs_unpack(v, &bytes, &device, &label);
    rs_drv_busy = 1;
    rs_outside_driver_free(key, bytes, device, label);
    rs_drv_busy = 0;
}

/* Ends `key`'s record before the real call that frees its memory: 1 (its packed value in *v) if
 * there was one. Before, because the driver may give the address (or the handle's value) to
 * another thread's call as soon as it has freed it, and that call's record must come after this
 * one's end: its held entry, and its event in the history. */
static int rs_drv_end(rs_ptrmap *m, uint64_t key, uint64_t *v)
{
    if (!rs_drv_take(m, key, v)) return 0;
    rs_drv_freed(key, *v);
    return 1;
}

/* The real call after rs_drv_end failed: the memory is still held, recorded again (under its
 * label, with the stack of this call). */
static void rs_drv_unend(rs_ptrmap *m, uint64_t key, uint64_t v)
{
    uint64_t bytes;
    int device;
    const char *label;
    rs_unpack(v, &bytes, &device, &label);
    rs_drv_alloc(m, key, bytes, device, label, 0);
}

/* A free of an address (cuMemFree, cuMemFreeAsync, an array's destroy) by the real call `call`,
 * its record ended before it (rs_drv_end). */
#define RS_DRV_FREE_AROUND(map, key, call)                                                       \
    do {                                                                                         \
        uint64_t v_ = 0;                                                                         \
        int took_ = !rs_backend_cuda_in_call() && rs_drv_end((map), (key), &v_);                 \
        r = (call);                                                                              \
        if (took_ && r != CUDA_SUCCESS) rs_drv_unend((map), (key), v_);                          \
    } while (0)

/* 1 when the call comes from inside a shared CUDA runtime (libcudart.so*): the instance
 * ranksnap's backend uses too, which a dump would then enter again from inside its own call. A
 * static runtime (a program's, NCCL's) is another instance. */
static int rs_drv_from_shared_runtime(void)
{
    void *pcs[32];
    int n = backtrace(pcs, 32);
    for (int i = 1; i < n; i++) {
        Dl_info d;
        if (!dladdr(pcs[i], &d) || !d.dli_fname) continue;
        const char *base = strrchr(d.dli_fname, '/');
        if (!strncmp(base ? base + 1 : d.dli_fname, "libcudart.so", 12)) return 1;
    }
    return 0;
}

static void rs_drv_oom(uint64_t bytes, int device)
{
    rs_drv_busy = 1;
    rs_outside_driver_oom(bytes, device);
    /* the snapshot now, as for the allocator's OOM: a program that dies of it (exit, abort)
     * leaves its state; from inside the shared runtime, at its finalize or fatal signal instead */
    if (!rs_drv_from_shared_runtime()) rs_instance_oom_dump("CUDA driver", bytes, device);
    rs_drv_busy = 0;
}

/* The outcome of an allocation call that was to be recorded, `admitted` bytes of it counted
 * already (rs_drv_admit), under `label` (NULL: its owner's). */
static CUresult rs_drv_allocated(CUresult r, const CUdeviceptr *dptr, uint64_t bytes, uint64_t admitted,
                                 const char *label)
{
    int device = rs_drv_device();
    if (r == CUDA_SUCCESS && dptr && *dptr && bytes) {
        rs_drv_alloc(&rs_drv_ptrs, (uint64_t)*dptr, bytes, device, label, admitted);
        return r;
    }
    rs_outside_driver_unadmit(admitted, device);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) rs_drv_oom(bytes, device);
    return r;
}

/* RANKSNAP_MEMORY_LIMIT at the driver: `bytes` more on the current device within the cap,
 * counted now (rs_outside_driver_admit), so that calls in flight together never pass it. */
static int rs_drv_admit(uint64_t bytes)
{
    return rs_outside_driver_admit(bytes, rs_drv_device());
}

/* The answer past the cap: out of memory, as the driver's own, recorded as the rank's OOM. */
static CUresult rs_drv_refused(CUdeviceptr *dptr, uint64_t bytes)
{
    if (dptr) *dptr = 0;
    rs_drv_oom(bytes, rs_drv_device());
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* A stream being captured: its allocations become graph memory nodes, not live bytes. */
static int rs_drv_capturing(CUstream s, int ptsz)
{
    if (!s || s == CU_STREAM_LEGACY) return 0;
    CUresult (*is)(CUstream, CUstreamCaptureStatus *);
    *(void **)(&is) = rs_real(ptsz ? RS_D_STREAM_IS_CAPTURING_PTSZ : RS_D_STREAM_IS_CAPTURING);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    return is && is(s, &st) == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* ---- stream-ordered pools -------------------------------------------------------------------
 * A pool keeps the memory its frees give back, up to its release threshold: reserved on the
 * device, allocated to nobody. The allocations are recorded one by one; what a pool keeps beyond
 * them is read from its attributes whenever the outside bytes are sampled. */
#define RS_MAX_POOLS 32
static _Atomic(CUmemoryPool) rs_drv_pools[RS_MAX_POOLS];

/* The pools' reserved bytes together, or with `cached` only what they keep beyond their
 * allocations. */
static uint64_t rs_drv_pools_sum(int cached)
{
    CUresult (*get)(CUmemoryPool, CUmemPool_attribute, void *);
    *(void **)(&get) = rs_real(RS_D_POOL_GET_ATTRIBUTE);
    uint64_t sum = 0;
    for (int i = 0; get && i < RS_MAX_POOLS; i++) {
        CUmemoryPool p = atomic_load_explicit(&rs_drv_pools[i], memory_order_acquire);
        if (!p) break;
        cuuint64_t reserved = 0, used = 0;
        /* a pool destroyed since answers an error, and holds nothing */
        if (get(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS) continue;
        if (!cached)
            sum += reserved;
        else if (get(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) == CUDA_SUCCESS && reserved > used)
            sum += reserved - used;
    }
    return sum;
}

static uint64_t rs_drv_pools_cached(void)
{
    return rs_drv_pools_sum(1);
}

/* What a rank recorded natively allocates from: its pools' reserved bytes. */
static uint64_t rs_drv_pools_reserved(void)
{
    return rs_drv_pools_sum(0);
}

/* The label of a stream-ordered allocation: in a rank recorded natively its framework's
 * allocator serves every request from the pool (outside.h, RS_OUTSIDE_ASYNC_LABEL); elsewhere
 * its owner's. Not on the path of a call that is not recorded. */
static const char *rs_drv_async_label(void)
{
    if (!rs_external_native()) return NULL;
    rs_outside_set_async_reserved(rs_drv_pools_reserved);
    return RS_OUTSIDE_ASYNC_LABEL;
}

/* Remembers `pool` (NULL: the current pool of the current device) for rs_drv_pools_cached. */
static void rs_drv_pool_seen(CUmemoryPool pool)
{
    if (!pool) {
        CUresult (*get)(CUmemoryPool *, CUdevice);
        *(void **)(&get) = rs_real(RS_D_DEVICE_GET_MEM_POOL);
        if (!get || get(&pool, (CUdevice)rs_drv_device()) != CUDA_SUCCESS || !pool) return;
    }
    for (int i = 0; i < RS_MAX_POOLS; i++) {
        CUmemoryPool cur = atomic_load_explicit(&rs_drv_pools[i], memory_order_acquire);
        if (cur == pool) return;
        CUmemoryPool none = NULL;
        if (!cur && atomic_compare_exchange_strong(&rs_drv_pools[i], &none, pool)) {
            if (i == 0) rs_outside_set_pool_sampler(rs_drv_pools_cached);
            return;
        }
        if (atomic_load_explicit(&rs_drv_pools[i], memory_order_acquire) == pool) return;
    }
}

/* ---- the wrappers ---------------------------------------------------------------------------- */

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
    RS_REAL(RS_D_MEM_ALLOC, rs_alloc_fn, real);
    if (!rs_drv_recorded()) return real(dptr, bytes);
    if (!rs_drv_admit(bytes)) return rs_drv_refused(dptr, bytes);
    return rs_drv_allocated(real(dptr, bytes), dptr, bytes, bytes, NULL);
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                            unsigned int elem)
{
    RS_REAL(RS_D_MEM_ALLOC_PITCH, rs_pitch_fn, real);
    if (!rs_drv_recorded()) return real(dptr, pitch, width, height, elem);
    if (!rs_drv_admit((uint64_t)width * height)) return rs_drv_refused(dptr, (uint64_t)width * height);
    CUresult r = real(dptr, pitch, width, height, elem);
    uint64_t bytes = r == CUDA_SUCCESS && pitch ? (uint64_t)*pitch * height : (uint64_t)width * height;
    return rs_drv_allocated(r, dptr, bytes, (uint64_t)width * height, NULL);
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags)
{
    RS_REAL(RS_D_MEM_ALLOC_MANAGED, rs_managed_fn, real);
    if (!rs_drv_recorded()) return real(dptr, bytes, flags);
    const char *prev = rs_outside_driver_label("managed");
    CUresult r = rs_drv_allocated(real(dptr, bytes, flags), dptr, bytes, 0, NULL);
    rs_outside_driver_label(prev);
    return r;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    RS_REAL(RS_D_MEM_FREE, rs_free_fn, real);
    CUresult r;
    RS_DRV_FREE_AROUND(&rs_drv_ptrs, (uint64_t)dptr, real(dptr));
    return r;
}

static CUresult rs_alloc_async(int i, CUdeviceptr *dptr, size_t bytes, CUstream s, int ptsz)
{
    RS_REAL(i, rs_async_fn, real);
    if (!rs_drv_recorded() || rs_drv_capturing(s, ptsz)) return real(dptr, bytes, s);
    if (!rs_drv_admit(bytes)) return rs_drv_refused(dptr, bytes);
    rs_drv_pool_seen(NULL);
    return rs_drv_allocated(real(dptr, bytes, s), dptr, bytes, bytes, rs_drv_async_label());
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s)
{
    return rs_alloc_async(RS_D_ALLOC_ASYNC, dptr, bytes, s, 0);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s)
{
    return rs_alloc_async(RS_D_ALLOC_ASYNC_PTSZ, dptr, bytes, s, 1);
}

static CUresult rs_pool_async(int i, CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream s,
                              int ptsz)
{
    RS_REAL(i, rs_pool_fn, real);
    if (!rs_drv_recorded() || rs_drv_capturing(s, ptsz)) return real(dptr, bytes, pool, s);
    if (!rs_drv_admit(bytes)) return rs_drv_refused(dptr, bytes);
    rs_drv_pool_seen(pool);
    return rs_drv_allocated(real(dptr, bytes, pool, s), dptr, bytes, bytes, rs_drv_async_label());
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream s)
{
    return rs_pool_async(RS_D_POOL_ASYNC, dptr, bytes, pool, s, 0);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream s)
{
    return rs_pool_async(RS_D_POOL_ASYNC_PTSZ, dptr, bytes, pool, s, 1);
}

static CUresult rs_free_async(int i, CUdeviceptr dptr, CUstream s)
{
    RS_REAL(i, rs_free_async_fn, real);
    CUresult r;
    RS_DRV_FREE_AROUND(&rs_drv_ptrs, (uint64_t)dptr, real(dptr, s));
    return r;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
    return rs_free_async(RS_D_FREE_ASYNC, dptr, s);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
    return rs_free_async(RS_D_FREE_ASYNC_PTSZ, dptr, s);
}

/* The virtual memory API: physical memory is made by cuMemCreate on its location's device and
 * is gone once released and no longer mapped anywhere. */
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    RS_REAL(RS_D_CREATE, rs_create_fn, real);
    int on_device = prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
    if (!on_device || !rs_drv_recorded()) return real(handle, size, prop, flags);
    if (!rs_outside_driver_admit(size, prop->location.id)) {
        rs_drv_oom(size, prop->location.id);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult r = real(handle, size, prop, flags);
    if (r == CUDA_SUCCESS && handle && *handle && size) {
        rs_drv_alloc(&rs_drv_handles, RS_HKEY(*handle), size, prop->location.id, NULL, size);
        rs_ptrmap_put(&rs_drv_maps, (const void *)(uintptr_t)RS_HKEY(*handle), 0);
        return r;
    }
    rs_outside_driver_unadmit(size, prop->location.id);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) rs_drv_oom(size, prop->location.id);
    return r;
}

/* A change of a handle's word in rs_drv_maps (its mappings, RS_RELEASED once released) before
 * the real call that makes it (cuMemRelease, cuMemUnmap): when the word says released and
 * unmapped, the handle's memory is gone, and its record ends now, before the driver can give
 * the handle's value to another thread's cuMemCreate (rs_drv_end). Of two threads whose calls
 * end it (a release and the last unmap), the one whose change leaves the word so ends it. */
typedef struct rs_drv_change {
    uint64_t key, delta, v;
    int counted, gone, had;
} rs_drv_change;

static void rs_drv_handle_change(rs_drv_change *c, uint64_t handle, uint64_t delta)
{
    c->key = RS_HKEY(handle);
    c->delta = delta;
    /* only handles made here are counted: an imported one is a peer's memory */
    int t = rs_ptrmap_add_take(&rs_drv_maps, (const void *)(uintptr_t)c->key, delta, RS_RELEASED);
    c->counted = t >= 0;
    c->gone = t == 1;
    c->had = c->gone && rs_drv_end(&rs_drv_handles, c->key, &c->v);
}

/* The real call failed: the change is undone. */
static void rs_drv_handle_undo(const rs_drv_change *c)
{
    if (c->gone) {
        rs_ptrmap_put(&rs_drv_maps, (const void *)(uintptr_t)c->key, RS_RELEASED);
        if (c->had) rs_drv_unend(&rs_drv_handles, c->key, c->v);
    }
    if (c->counted) rs_ptrmap_add(&rs_drv_maps, (const void *)(uintptr_t)c->key, (uint64_t)0 - c->delta);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    RS_REAL(RS_D_RELEASE, rs_release_fn, real);
    if (rs_backend_cuda_in_call()) return real(handle);
    rs_drv_change c;
    rs_drv_handle_change(&c, (uint64_t)handle, RS_RELEASED);
    CUresult r = real(handle);
    if (r != CUDA_SUCCESS) rs_drv_handle_undo(&c);
    return r;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    RS_REAL(RS_D_MAP, rs_map_fn, real);
    CUresult r = real(ptr, size, offset, handle, flags);
    if (r == CUDA_SUCCESS && rs_ptrmap_add(&rs_drv_maps, (const void *)(uintptr_t)RS_HKEY(handle), 1))
        rs_ptrmap_put(&rs_drv_mapped, (const void *)(uintptr_t)ptr, (uint64_t)handle);
    return r;
}

/* One cuMemUnmap may end several mappings: every mapping that begins in its range (the driver
 * refuses a range that cuts one), as NVIDIA's vectorAddMMAP sample frees four handles mapped
 * side by side. They leave the books before the call (rs_drv_handle_change) and come back if
 * the driver refuses it. */
#define RS_UNMAP_BATCH 16
typedef struct rs_drv_unmapped {
    uintptr_t addr;
    uint64_t handle;
    rs_drv_change c;
} rs_drv_unmapped;

/* Room for one more in *u (first: the caller's array of RS_UNMAP_BATCH, *cap entries, n used);
 * 0 without host memory. */
static int rs_drv_unmap_room(rs_drv_unmapped **u, rs_drv_unmapped *first, size_t *cap, size_t n)
{
    if (n < *cap) return 1;
    rs_drv_unmapped *more = malloc(2 * *cap * sizeof *more);
    if (!more) return 0;
    memcpy(more, *u, n * sizeof *more);
    if (*u != first) free(*u);
    *u = more;
    *cap *= 2;
    return 1;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    RS_REAL(RS_D_UNMAP, rs_unmap_fn, real);
    uintptr_t lo = (uintptr_t)ptr, hi = size > UINTPTR_MAX - lo ? UINTPTR_MAX : lo + size;
    rs_drv_unmapped first[RS_UNMAP_BATCH], *u = first;
    size_t n = 0, cap = RS_UNMAP_BATCH, got;
    do {
        uintptr_t addr[RS_UNMAP_BATCH];
        uint64_t h[RS_UNMAP_BATCH];
        got = rs_ptrmap_take_range(&rs_drv_mapped, lo, hi, addr, h, RS_UNMAP_BATCH);
        for (size_t i = 0; i < got; i++) {
            rs_drv_change c;
            rs_drv_handle_change(&c, h[i], (uint64_t)-1);
            /* without host memory to keep it, ended for good: wrong only if the call is refused */
            if (!rs_drv_unmap_room(&u, first, &cap, n)) continue;
            u[n++] = (rs_drv_unmapped){addr[i], h[i], c};
        }
    } while (got == RS_UNMAP_BATCH);
    CUresult r = real(ptr, size);
    for (size_t i = 0; r != CUDA_SUCCESS && i < n; i++) {
        rs_drv_handle_undo(&u[i].c);
        rs_ptrmap_put(&rs_drv_mapped, (const void *)u[i].addr, u[i].handle);
    }
    if (u != first) free(u);
    return r;
}

/* ---- arrays ---------------------------------------------------------------------------------
 * CUDA arrays (textures, surfaces) are device memory with a layout of the driver's: their bytes
 * are what the driver says they need, or their extent when it cannot say. */

static uint64_t rs_drv_format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        return 1;
    }
}

static uint64_t rs_drv_extent(size_t w, size_t h, size_t d, unsigned channels, CUarray_format f)
{
    return (uint64_t)w * (h ? h : 1) * (d ? d : 1) * (channels ? channels : 1) *
           rs_drv_format_bytes(f);
}

static uint64_t rs_drv_array_bytes(int i, void *array, uint64_t extent)
{
    CUDA_ARRAY_MEMORY_REQUIREMENTS req;
    memset(&req, 0, sizeof req);
    CUresult (*get)(CUDA_ARRAY_MEMORY_REQUIREMENTS *, void *, CUdevice);
    *(void **)(&get) = rs_real(i);
    if (get && get(&req, array, (CUdevice)rs_drv_device()) == CUDA_SUCCESS && req.size)
        return req.size;
    return extent;
}

/* The outcome of an array creation that was to be recorded, its `extent` admitted. */
static CUresult rs_drv_array_made(CUresult r, void *array, int req, uint64_t extent)
{
    uint64_t bytes = r == CUDA_SUCCESS && array ? rs_drv_array_bytes(req, array, extent) : 0;
    if (bytes) {
        rs_drv_alloc(&rs_drv_arrays, (uint64_t)(uintptr_t)array, bytes, rs_drv_device(), NULL, extent);
        return r;
    }
    rs_outside_driver_unadmit(extent, rs_drv_device());
    if (r == CUDA_ERROR_OUT_OF_MEMORY) rs_drv_oom(extent, rs_drv_device());
    return r;
}

CUresult cuArrayCreate_v2(CUarray *array, const CUDA_ARRAY_DESCRIPTOR *desc)
{
    RS_REAL(RS_D_ARRAY, rs_array_fn, real);
    if (!desc || !rs_drv_recorded()) return real(array, desc);
    uint64_t extent = rs_drv_extent(desc->Width, desc->Height, 1, desc->NumChannels, desc->Format);
    if (!rs_drv_admit(extent)) return rs_drv_refused(NULL, extent);
    CUresult r = real(array, desc);
    return rs_drv_array_made(r, array ? (void *)*array : NULL, RS_D_ARRAY_REQ, extent);
}

CUresult cuArray3DCreate_v2(CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
    RS_REAL(RS_D_ARRAY_3D, rs_array3d_fn, real);
    /* a sparse array has no memory until cuMemMapArrayAsync maps some in */
    if (!desc || (desc->Flags & CUDA_ARRAY3D_SPARSE) || !rs_drv_recorded()) return real(array, desc);
    uint64_t extent =
        rs_drv_extent(desc->Width, desc->Height, desc->Depth, desc->NumChannels, desc->Format);
    if (!rs_drv_admit(extent)) return rs_drv_refused(NULL, extent);
    CUresult r = real(array, desc);
    return rs_drv_array_made(r, array ? (void *)*array : NULL, RS_D_ARRAY_REQ, extent);
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                unsigned int levels)
{
    RS_REAL(RS_D_MIPMAPPED, rs_mipmapped_fn, real);
    if (!desc || (desc->Flags & CUDA_ARRAY3D_SPARSE) || !rs_drv_recorded())
        return real(array, desc, levels);
    /* each level halves every extent: at most 8/7 of the first one's bytes */
    uint64_t extent =
        rs_drv_extent(desc->Width, desc->Height, desc->Depth, desc->NumChannels, desc->Format);
    uint64_t all = levels > 1 ? extent + extent / 7 : extent;
    if (!rs_drv_admit(all)) return rs_drv_refused(NULL, all);
    CUresult r = real(array, desc, levels);
    return rs_drv_array_made(r, array ? (void *)*array : NULL, RS_D_MIPMAPPED_REQ, all);
}

CUresult cuArrayDestroy(CUarray array)
{
    RS_REAL(RS_D_ARRAY_DESTROY, rs_array_destroy_fn, real);
    CUresult r;
    RS_DRV_FREE_AROUND(&rs_drv_arrays, (uint64_t)(uintptr_t)array, real(array));
    return r;
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray array)
{
    RS_REAL(RS_D_MIPMAPPED_DESTROY, rs_mipmapped_destroy_fn, real);
    CUresult r;
    RS_DRV_FREE_AROUND(&rs_drv_arrays, (uint64_t)(uintptr_t)array, real(array));
    return r;
}

/* ---- the routes -------------------------------------------------------------------------------- */

/* cuGetProcAddress answers a base name for a CUDA version and a per-thread-stream flag with one
 * variant of it; the variants ranksnap wraps, by base name: the default one, the per-thread one,
 * and the first version that has the default one (older versions get older ABIs, which are passed
 * through unwrapped). */
static const struct {
    const char *base;
    int dflt, ptsz, since;
} rs_drv_bases[] = {
    {"cuMemAlloc", RS_D_MEM_ALLOC, RS_D_MEM_ALLOC, 3020},
    {"cuMemAllocPitch", RS_D_MEM_ALLOC_PITCH, RS_D_MEM_ALLOC_PITCH, 3020},
    {"cuMemFree", RS_D_MEM_FREE, RS_D_MEM_FREE, 3020},
    {"cuMemAllocManaged", RS_D_MEM_ALLOC_MANAGED, RS_D_MEM_ALLOC_MANAGED, 0},
    {"cuMemAllocAsync", RS_D_ALLOC_ASYNC, RS_D_ALLOC_ASYNC_PTSZ, 0},
    {"cuMemAllocFromPoolAsync", RS_D_POOL_ASYNC, RS_D_POOL_ASYNC_PTSZ, 0},
    {"cuMemFreeAsync", RS_D_FREE_ASYNC, RS_D_FREE_ASYNC_PTSZ, 0},
    {"cuMemCreate", RS_D_CREATE, RS_D_CREATE, 0},
    {"cuMemRelease", RS_D_RELEASE, RS_D_RELEASE, 0},
    {"cuMemMap", RS_D_MAP, RS_D_MAP, 0},
    {"cuMemUnmap", RS_D_UNMAP, RS_D_UNMAP, 0},
    {"cuArrayCreate", RS_D_ARRAY, RS_D_ARRAY, 3020},
    {"cuArray3DCreate", RS_D_ARRAY_3D, RS_D_ARRAY_3D, 3020},
    {"cuMipmappedArrayCreate", RS_D_MIPMAPPED, RS_D_MIPMAPPED, 0},
    {"cuArrayDestroy", RS_D_ARRAY_DESTROY, RS_D_ARRAY_DESTROY, 0},
    {"cuMipmappedArrayDestroy", RS_D_MIPMAPPED_DESTROY, RS_D_MIPMAPPED_DESTROY, 0},
    {"cuGetProcAddress", RS_D_GET_PROC_V2, RS_D_GET_PROC_V2, 12000},
};

/* cuGetProcAddress's answer `real` for `symbol`: the wrapper of the variant the version and flags
 * select, where ranksnap wraps it and the driver has it; else `real` itself. */
static void *rs_drv_wrap_proc(const char *symbol, int version, cuuint64_t flags, void *real)
{
    if (!real || !symbol || !rs_launcher_preloaded()) return real;
    for (size_t i = 0; i < sizeof rs_drv_bases / sizeof rs_drv_bases[0]; i++) {
        if (strcmp(symbol, rs_drv_bases[i].base) != 0) continue;
        if (version < rs_drv_bases[i].since) return real;
        int k = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM ? rs_drv_bases[i].ptsz
                                                                      : rs_drv_bases[i].dflt;
        return rs_real(k) ? rs_drv[k].wrapper : real;
    }
    return real;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    RS_REAL(RS_D_GET_PROC, rs_proc_fn, real);
    CUresult r = real(symbol, pfn, version, flags);
    if (r == CUDA_SUCCESS && pfn) *pfn = rs_drv_wrap_proc(symbol, version, flags, *pfn);
    return r;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    RS_REAL(RS_D_GET_PROC_V2, rs_proc_v2_fn, real);
    CUresult r = real(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS && pfn) *pfn = rs_drv_wrap_proc(symbol, version, flags, *pfn);
    return r;
}

/* The dlsym trampoline's decision: the wrapper for a wrapped name looked up in libcuda, else NULL
 * (the trampoline then jumps to the real dlsym, as if it had been called directly). */
void *ranksnap_drv_dlsym_hook(void *handle, const char *name);
void *ranksnap_drv_dlsym_hook(void *handle, const char *name)
{
    if (!name || name[0] != 'c' || name[1] != 'u' || handle == RTLD_DEFAULT || handle == RTLD_NEXT)
        return NULL;
    int i = 0;
    while (i < RS_D_WRAPPED_ && strcmp(rs_drv[i].name, name)) i++;
    if (i == RS_D_WRAPPED_ || !rs_launcher_preloaded()) return NULL;
    pthread_once(&rs_cuda_once, rs_cuda_load);
    void *f = rs_real_dlsym(handle, name);
    if (!f || !rs_cuda_base) return NULL;
    Dl_info info;
    if (!dladdr(f, &info) || info.dli_fbase != rs_cuda_base) return NULL;
    return rs_real(i) ? rs_drv[i].wrapper : NULL;
}

void *ranksnap_drv_real_dlsym_target(void);
void *ranksnap_drv_real_dlsym_target(void)
{
    pthread_once(&rs_real_dlsym_once, rs_real_dlsym_load);
    return (void *)(uintptr_t)rs_real_dlsym_fn;
}

#if defined(RS_TRAMPOLINE) && !defined(RANKSNAP_SANITIZED)
/* dlsym(handle, name): the hook decides; when it has nothing to say, a tail jump to the real dlsym
 * keeps the caller's return address, which glibc's dlsym uses for RTLD_NEXT. */
RS_TRAMPOLINE(dlsym, ranksnap_drv_dlsym_hook, ranksnap_drv_real_dlsym_target);
#endif
