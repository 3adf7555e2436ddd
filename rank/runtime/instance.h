/*
 * instance.h — starting and stopping the process-wide instance (state.h), and what the
 * interposers (rank/intercept/) need from it beyond the public API.
 */
#ifndef RANKSNAP_INSTANCE_H
#define RANKSNAP_INSTANCE_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"

/* ---- for the interposers (rank/intercept/) -----------------------------------------------------
 *
 * rs_instance_ensure starts ranksnap from inside an intercepted call (the program never called
 * ranksnap_init): RANKSNAP_OK when ranksnap is running (now or already). Any other status means
 * "pass this call through to the real function": RANKSNAP_ERR_DISABLED (RANKSNAP_DISABLE=1),
 * the error that made the one attempt fail (printed once on stderr), or
 * RANKSNAP_ERR_NOT_INITIALIZED for "not now": another thread (or this one, re-entering from
 * inside the init) is initialising or finalising, ranksnap was finalised already, or the
 * program is an MPI program that has not called MPI_Init yet (its MPI_Init starts ranksnap on
 * MPI_COMM_WORLD; starting before it would make that MPI_Init fail). Never blocks. When it starts
 * ranksnap it also registers ranksnap_finalize to run at exit. */
ranksnap_status rs_instance_ensure(void);
/* For the driver's interposers, which call rs_instance_ensure and, when it says "not now", keep
 * their books all the same (rs_outside_driver_*), so that no allocation a thread makes while
 * another one starts ranksnap — or while ranksnap's own start allocates, or before the program's
 * MPI_Init — goes unrecorded or escapes the cap: 1 when ranksnap runs or has yet to start in
 * this process, 0 when it never will (RANKSNAP_DISABLE, a start that gave up, a finalize, a
 * fork's child). Never blocks. The instance, once published, begins with what they recorded
 * (held.h, rs_held_publish). */
int rs_instance_starting(void);
/* The same for callers that may wait for an init in progress (PyTorch's pluggable allocator,
 * never called from inside ranksnap's own init), and that join MPI under mpirun whatever the
 * program is. */
ranksnap_status rs_instance_ensure_wait(void);
/* 1 when ranksnap is running, with 1 in *cuda when its backend is the CUDA one (0 for the sim
 * device). */
int rs_instance_active(int *cuda);
/* After `by` (the CUDA driver, a framework's own limit) refused `size` bytes on `device`, recorded
 * as the rank's OOM (rt->drv_oom): the snapshot is written now (RANKSNAP_ON_OOM), as for the
 * allocator's own OOM. The caller makes sure the CUDA runtime the dump may ask is not the one
 * inside whose call the driver refused. */
void rs_instance_oom_dump(const char *by, uint64_t size, int device);
/* The calling thread's current device as ranksnap's backend sees it, -1 when not running. */
int rs_instance_current_device(void);
/* rs_devices_current_known of the running instance: 0 when there is none. */
int rs_instance_current_device_known(int *device);
/* Device `device`'s allocator's view for cudaMemGetInfo: bytes reserved, allocated and the memory
 * limit (0 = none). RANKSNAP_ERR_NOT_INITIALIZED when ranksnap is not running. */
ranksnap_status rs_instance_cache_bytes(int device, uint64_t *reserved, uint64_t *allocated,
                                        uint64_t *limit);
/* Device `device`'s free bytes (whatever the calling thread's current device) and its
 * allocator's reserved bytes, read together so that a caller measuring device memory taken by
 * someone else (NCCL) can take out what ranksnap reserved meanwhile. */
ranksnap_status rs_instance_device_usage(int device, uint64_t *device_free, uint64_t *reserved);
/* After ranksnap_finalize: a block handed out by the interposers is still live when finalize
 * runs (MPI_Finalize before cudaFree is common), so the allocator is kept, retired, instead of
 * releasing memory the program still uses. Returns 1 if `ptr` was a live block of a retired
 * allocator and is now back in its cache, 0 if it is not ranksnap's. */
int rs_instance_free_retired(void *ptr);

#endif
