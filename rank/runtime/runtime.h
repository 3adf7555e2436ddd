/* runtime.h — what the rest of rank/ (post-mortem, gather, intercept) needs from the
 * process-wide instance of runtime.c beyond the public API. */
#ifndef RANKSNAP_RUNTIME_H
#define RANKSNAP_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"

/* RANKSNAP_DIR/rank-RRRRR.rsnap, creating RANKSNAP_DIR (0700) if missing. */
ranksnap_status rs_runtime_default_path(char *buf, size_t n);

/* Writes the snapshot; `complete` = 0 marks one written from a crash path. NULL path = the
 * default path above. */
ranksnap_status rs_runtime_dump(const char *path, int complete);

/* pmpi.c, intercept_nccl.c: a wrapped collective completed (RANKSNAP_STEP_ON counts them). */
void rs_runtime_collective_done(const char *name);

/* ---- for the interposers (intercept_*.c) ------------------------------------------------------
 *
 * rs_runtime_ensure starts ranksnap from inside an intercepted call (the program never called
 * ranksnap_init): RANKSNAP_OK when ranksnap is running (now or already). Any other status means
 * "pass this call through to the real function": RANKSNAP_ERR_DISABLED (RANKSNAP_DISABLE=1),
 * the error that made the one attempt fail (printed once on stderr), or
 * RANKSNAP_ERR_NOT_INITIALIZED for "not now": another thread (or this one, re-entering from
 * inside the init) is initialising or finalising, ranksnap was finalised already, or the
 * program is an MPI program that has not called MPI_Init yet (its MPI_Init starts ranksnap on
 * MPI_COMM_WORLD; starting before it would make that MPI_Init fail). Never blocks. When it starts
 * ranksnap it also registers ranksnap_finalize to run at exit. */
ranksnap_status rs_runtime_ensure(void);
/* The same for callers that may wait for an init in progress (PyTorch's pluggable allocator,
 * never called from inside ranksnap's own init), and that join MPI under mpirun whatever the
 * program is. */
ranksnap_status rs_runtime_ensure_wait(void);
/* 1 when ranksnap is running, with the device index of its backend in *device and 1 in *cuda
 * when that backend is the CUDA one (0 for the sim device). */
int rs_runtime_active(int *device, int *cuda);
/* Counts one allocation call that reached ranksnap through an interposer or the PyTorch entry
 * points; finalize warns when a preloaded run counted none (see ranksnap_finalize). */
void rs_runtime_note_intercepted(void);
uint64_t rs_runtime_intercepted(void);
/* 1 once ranksnap has started in this process (by any route), even if finalised since. */
int rs_runtime_ever_started(void);
/* The allocator's view for cudaMemGetInfo: bytes reserved, allocated and the memory limit
 * (0 = none). RANKSNAP_ERR_NOT_INITIALIZED when ranksnap is not running. */
ranksnap_status rs_runtime_cache_bytes(uint64_t *reserved, uint64_t *allocated, uint64_t *limit);
/* The device's free bytes (on ranksnap's device, whatever the calling thread's current device)
 * and the allocator's reserved bytes, read together so that a caller measuring device memory
 * taken by someone else (NCCL) can take out what ranksnap reserved meanwhile. */
ranksnap_status rs_runtime_device_usage(uint64_t *device_free, uint64_t *reserved);
/* Adds `bytes` (negative: subtracts) to the device memory held outside the allocator under
 * `label` ("nccl", "nccl_mem", "cuda_mempool"); process-wide, kept across init and finalize,
 * written to the snapshot as totals.outside_labels. Labels are [a-z0-9_], at most 23 bytes; past
 * RS_MAX_OUTSIDE_LABELS distinct labels the bytes go to "other". */
void rs_runtime_outside_add(const char *label, int64_t bytes);
/* Appends an outside_alloc (is_alloc 1, with the caller's stack) or outside_free event to the
 * history: memory the program got from another allocator (ncclMemAlloc, a CUDA memory pool)
 * while ranksnap records. No-op when not recording. */
void rs_runtime_record_outside(int is_alloc, const void *ptr, uint64_t size);
/* After ranksnap_finalize: a block handed out by the interposers is still live when finalize
 * runs (MPI_Finalize before cudaFree is common), so the allocator is kept, retired, instead of
 * releasing memory the program still uses. Returns 1 if `ptr` was a live block of a retired
 * allocator and is now back in its cache, 0 if it is not ranksnap's. */
int rs_runtime_free_retired(void *ptr);

#endif
