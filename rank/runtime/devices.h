/*
 * devices.h — a rank's devices: one caching allocator per device the program allocates on, as
 * PyTorch keeps one per device.
 *
 * A device's allocator and backend are made at its first allocation, never at init: programs
 * choose their device after MPI_Init (cudaSetDevice(local_rank)), and a context made on device 0
 * at init would cost every rank of the node memory on GPU 0. Each allocation is served on the
 * device current on the calling thread at that moment; a rank may use several. The allocators
 * share the runtime's lock (state.h), so the recorder still has one writer at a time and events
 * of every device land in one history, each tagged with its device.
 */
#ifndef RANKSNAP_DEVICES_H
#define RANKSNAP_DEVICES_H

#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "backend.h"
#include "ranksnap.h"

#define RS_MAX_DEVICES 64

struct rs_runtime;

typedef struct rs_rt_device {
    struct rs_runtime *rt;
    int index;
    rs_backend *backend;
    rs_alloc *alloc;
    rs_device_info info;
    uint64_t outside_at_init; /* device memory in use when ranksnap first used the device */
} rs_rt_device;

/* Checks at init that the backend RANKSNAP_BACKEND names can serve (auto: cuda where a device is
 * visible, else sim), touching no device; each device's allocator will report to `observer`, with
 * the device as its context. */
ranksnap_status rs_devices_init(struct rs_runtime *rt, rs_alloc_observer observer);
/* Releases every device's allocator and backend. */
void rs_devices_destroy(struct rs_runtime *rt);

/* Device `index`, made on first use; an error when the index is out of range or the backend
 * cannot open that device (*out NULL). */
ranksnap_status rs_devices_get(struct rs_runtime *rt, int index, rs_rt_device **out);
/* The calling thread's current device: the device of the driver's current context on the cuda
 * backend (the CUDA runtime's when no context is current); on the sim backend the one a CUDA
 * runtime loaded in the process by the first call says (a test's stand-in), else 0. */
int rs_devices_current(struct rs_runtime *rt);
/* 1 and the calling thread's current device where the cuda backend knows it without asking the
 * CUDA runtime (one device visible, or a context current); else 0. */
int rs_devices_current_known(const struct rs_runtime *rt, int *device);
/* rs_devices_get(rt, rs_devices_current(rt), out). */
ranksnap_status rs_devices_get_current(struct rs_runtime *rt, rs_rt_device **out);

/* The devices used so far, in the order of their first use: i < rs_devices_count(). */
size_t rs_devices_count(const struct rs_runtime *rt);
rs_rt_device *rs_devices_at(const struct rs_runtime *rt, size_t i);
/* The device whose allocator handed out `ptr` and has not taken it back, or NULL; one probe of
 * the block map the devices share, however many there are. */
rs_rt_device *rs_devices_owner(const struct rs_runtime *rt, const void *ptr);
/* The device the rank's snapshot names first: the highest peak reserved, the first used on ties;
 * NULL when no device was used. */
rs_rt_device *rs_devices_primary(const struct rs_runtime *rt);

/* The allocators' statistics added up (peak time and step those of the device with the highest
 * allocated peak, capacity that of the primary device). */
void rs_devices_stats(const struct rs_runtime *rt, ranksnap_stats *out);
/* The step every allocator records with a new peak (each takes the lock: call without it). */
void rs_devices_set_step(const struct rs_runtime *rt, int64_t step);
void rs_devices_reset_peak_stats(const struct rs_runtime *rt);
/* RANKSNAP_MEMORY_LIMIT's cap for the rank, on every device it has and will have. */
void rs_devices_set_memory_limit(struct rs_runtime *rt, uint64_t limit);

#endif
