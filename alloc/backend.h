/*
 * backend.h — where device segments come from.
 *
 * The allocator never talks to the CUDA runtime itself: it reserves and releases whole segments
 * through a backend, and asks the backend for events to order cross-stream frees. `cuda`
 * (backend_cuda.c, the only file that calls the CUDA runtime for memory) and `sim`
 * (backend_sim.c, a simulated device: synthetic addresses, a capacity, no memory touched) share
 * this vtable, so that every policy, OOM and MPI path runs in CI without a GPU. Their
 * constructors: backend_sim.h, backend_cuda.h.
 */
#ifndef RANKSNAP_BACKEND_H
#define RANKSNAP_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"

typedef struct rs_backend rs_backend;

/* An event recorded on a stream; opaque to the allocator. (rs_event is the recorder's.) */
typedef void *rs_dev_event;

typedef struct rs_device_info {
    int index;             /* device ordinal                                   */
    char name[96];         /* "NVIDIA H100 80GB HBM3", "ranksnap-sim"          */
    char uuid[48];         /* "GPU-xxxxxxxx-..." or a synthetic one for sim    */
    uint64_t total_bytes;  /* capacity                                          */
} rs_device_info;

typedef struct rs_backend_ops {
    const char *name; /* "cuda" or "sim" */
    /* Reserves `size` bytes of device memory. RANKSNAP_ERR_OUT_OF_MEMORY when the device has no
     * room (a recoverable failure: the allocator frees its cache and retries); any other error is
     * fatal for the request. */
    ranksnap_status (*reserve)(rs_backend *b, size_t size, void **ptr);
    ranksnap_status (*release)(rs_backend *b, void *ptr, size_t size);
    ranksnap_status (*mem_info)(rs_backend *b, uint64_t *free_bytes, uint64_t *total_bytes);
    /* Records an event on `stream` now; `*ev` is later queried and destroyed. */
    ranksnap_status (*event_record)(rs_backend *b, void *stream, rs_dev_event *ev);
    /* 1 = complete, 0 = pending, <0 = error (status negated). */
    int (*event_query)(rs_backend *b, rs_dev_event ev);
    ranksnap_status (*event_synchronize)(rs_backend *b, rs_dev_event ev);
    void (*event_destroy)(rs_backend *b, rs_dev_event ev);
    ranksnap_status (*device_info)(rs_backend *b, rs_device_info *out);
    void (*destroy)(rs_backend *b);
    /* Expandable segments (CUDA's virtual memory API: cuMemAddressReserve, cuMemCreate, cuMemMap,
     * cuMemSetAccess); NULL where the backend cannot (the allocator then keeps them off).
     * va_reserve takes `size` bytes of address space and no memory; map backs [ptr, ptr+size)
     * with physical memory in handles of `page` bytes, all or nothing (OUT_OF_MEMORY when the
     * device has no room: nothing stays mapped); unmap first waits for `stream`'s work, as
     * PyTorch does, then unmaps and releases the pages of [ptr, ptr+size); va_release gives the
     * address space back, every page of it unmapped. */
    ranksnap_status (*va_reserve)(rs_backend *b, size_t size, void **ptr);
    ranksnap_status (*va_release)(rs_backend *b, void *ptr, size_t size);
    ranksnap_status (*map)(rs_backend *b, void *ptr, size_t size, size_t page);
    ranksnap_status (*unmap)(rs_backend *b, void *ptr, size_t size, size_t page, void *stream);
} rs_backend_ops;

struct rs_backend {
    const rs_backend_ops *ops;
};

#endif
