/*
 * outside.h — device memory outside the allocator (outside.c).
 */
#ifndef RANKSNAP_OUTSIDE_H
#define RANKSNAP_OUTSIDE_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "snapshot_encode.h"
#include "state.h"

/* Device memory the allocator does not account for (CUDA context, NCCL buffers, other
 * libraries) given the allocator's `reserved` bytes; raises rt->outside_peak. Sampled at steps and
 * dumps, since cudaMemGetInfo is too slow for every event. */
uint64_t rs_outside_sample(rs_runtime *rt, uint64_t reserved);
/* Adds `bytes` (negative: subtracts) to the device memory held outside the allocator under
 * `label` ("nccl", "nccl_mem", "cuda_mempool"); process-wide, kept across init and finalize,
 * written to the snapshot as totals.outside_labels. Labels are [a-z0-9_], at most 23 bytes; past
 * RS_MAX_OUTSIDE_LABELS distinct labels the bytes go to "other". */
void rs_outside_add(const char *label, int64_t bytes);
/* Copies the labels into out[RS_MAX_OUTSIDE_LABELS]; returns how many there are. */
size_t rs_outside_labels_copy(rs_outside_label *out);
/* Appends an outside_alloc (is_alloc 1, with the caller's stack) or outside_free event to the
 * history: memory the program got from another allocator (ncclMemAlloc, a CUDA memory pool)
 * while ranksnap records. No-op when not recording. */
void rs_outside_record(int is_alloc, const void *ptr, uint64_t size);
/* At finalize, rank 0 of a preloaded run: says how to link when no allocation call reached
 * ranksnap while the device filled up (the program uses the static CUDA runtime). */
void rs_outside_warn_if_nothing_intercepted(rs_runtime *rt);
/* For a preloaded process (rank 0) in which ranksnap never started and no allocation call ever
 * reached it: says how to link when the process holds a CUDA context, i.e. device memory ranksnap
 * did not see, without a shared CUDA runtime loaded (whose calls the preload would have seen); a
 * process that only loaded the driver and counted the devices, or made a context and allocated
 * nothing (a launcher: torchrun's agent, accelerate's), is left in peace. Decided once: at ranksnap_finalize with no
 * instance (the PyTorch glue's exit, while the driver still answers), else at exit, when the
 * driver may have gone (the process then "used CUDA", as far as can be told). */
void rs_outside_warn_if_cuda_unseen(void);

#endif
