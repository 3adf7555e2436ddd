/*
 * outside.h — device memory outside the allocator (outside.c).
 */
#ifndef RANKSNAP_OUTSIDE_H
#define RANKSNAP_OUTSIDE_H

#include <stddef.h>
#include <stdint.h>

#include "devices.h"
#include "ranksnap.h"
#include "snapshot_encode.h"
#include "state.h"

/* What the rank's devices hold now, and how much of it is this process's own. */
typedef struct rs_outside_use {
    int of;                /* RS_OUTSIDE_PROCESS: `own` is this process's use of its devices
                            * (NVML's figure; on the sim backend the simulated device is the
                            * process's alone); RS_OUTSIDE_DEVICE: it is not known, `why` says why */
    uint64_t own;
    uint64_t device_used;  /* the devices' used bytes (total - free): every process's together */
    rs_device_share share; /* what NVML listed on the primary device (or `only`) */
    int why;               /* RS_OUTSIDE_DEVICE: why (rs_outside_why), in NVML's words in `detail` */
    char detail[200];
} rs_outside_use;

/* Measures the device `only`, or with NULL every device the rank used, keeping NVML's list of
 * `primary` (NULL: of the first) in out->share. On the cuda backend NVML is asked again only after
 * 100 times as long as its last answer took, so that asking costs a run at most 1%: with `force` 0
 * a measurement that comes sooner is not made (0 returned, *out untouched); 1 when made. */
int rs_outside_use_now(rs_runtime *rt, rs_rt_device *only, rs_rt_device *primary, int force,
                       rs_outside_use *out);
/* The bytes beyond the framework's or the allocator's `reserved`: of the process's own use, or
 * when that is not known, of the devices' (every process on them counted). */
uint64_t rs_outside_use_beyond(const rs_outside_use *u, uint64_t reserved);
/* Device memory the allocator does not account for (CUDA context, NCCL buffers, other libraries)
 * given the allocator's `reserved` bytes, when measured (rs_outside_use_now; else 0): raises
 * rt->outside_peak[of], and fills *use when not NULL. Sampled at steps (force 0) and dumps
 * (force 1), since neither cudaMemGetInfo nor NVML is fast enough for every event. */
uint64_t rs_outside_sample(rs_runtime *rt, uint64_t reserved, rs_rt_device *primary, int force,
                           rs_outside_use *use);
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
/* Allocations the CUDA driver made outside every allocator ranksnap serves (the driver's
 * interposers, rank/intercept/driver.c): the bytes held under `label`, or when NULL under the
 * library the caller's stack shows (nccl, cublas, cudnn, torch, program), which is returned; an
 * outside_alloc event on `device`, keyed by `key` (the pointer, or cuMemCreate's handle), with the
 * stack; `admitted` of the bytes were counted by rs_outside_driver_admit already. The free takes
 * them out again under the label the allocation got. */
const char *rs_outside_driver_alloc(uint64_t key, uint64_t size, int device, const char *label,
                                    uint64_t admitted);
void rs_outside_driver_free(uint64_t key, uint64_t size, int device, const char *label);
/* The label a stream-ordered pool's allocation takes in a rank recorded natively (its framework's
 * allocator serves every request from the pool: ranksnap_record_natively): given as `label` to
 * rs_outside_driver_alloc, it holds where the caller's stack shows the program or PyTorch (NCCL's,
 * cuBLAS's, cuDNN's stay theirs), and the allocation and its free are recorded as async_alloc and
 * async_free events, its bytes in the pool's live bytes and their peak (rs_outside_async). */
#define RS_OUTSIDE_ASYNC_LABEL "async_pool"
/* The pool's reserved bytes now (the driver's interposers read the pools' attributes), 0 when
 * not known; called when the live bytes reach a new peak. */
typedef uint64_t (*rs_outside_reserved_fn)(void);
void rs_outside_set_async_reserved(rs_outside_reserved_fn fn);
/* The pool's allocations so far: the peak of their live bytes, and the pool's reserved bytes read
 * when it was reached (0: not read, or read below the peak). */
void rs_outside_async(uint64_t *peak, uint64_t *reserved_at_peak);
/* Net bytes the driver's interposers recorded on the calling thread so far: a caller that
 * measures or labels memory itself (NCCL's communicators, ncclMemAlloc, CUDA pools) takes out what
 * the driver already showed, so that nothing is counted twice. */
int64_t rs_outside_driver_net(void);
/* The same for the whole process: what a measurement spanning NCCL's threads takes out. */
int64_t rs_outside_driver_net_all(void);
/* Around the user's calls into NCCL that make it allocate (communicator creation, a first
 * collective): what NCCL's own threads allocate meanwhile, and until the next such call, is
 * recorded with this call's stack after their own frames, so that it has the user's line. */
void rs_outside_nccl_call_begin(void);
void rs_outside_nccl_call_end(void);
/* The bytes CUDA memory pools keep reserved beyond what is allocated from them now; the driver's
 * interposers set it once they saw a pool, and every sample of the outside bytes puts its answer
 * under the label "cuda_pool_cached". */
typedef uint64_t (*rs_outside_pool_fn)(void);
void rs_outside_set_pool_sampler(rs_outside_pool_fn fn);
/* The label the calling thread's next driver allocations take instead of their owner's (NULL:
 * the owner's again); returns the previous one. */
const char *rs_outside_driver_label(const char *label);
/* 0 when `size` more bytes on `device` would take the rank past RANKSNAP_MEMORY_LIMIT (before the
 * instance is up, the options' cap for the launcher's rank), counting what the driver's
 * interposers hold there (with the requests admitted and not yet answered) and what the caching
 * allocator reserved: the interposer then answers out of memory, as the allocator does at its
 * cap, so that a program ranksnap sees only at the driver can be made to run out of memory on
 * one rank. 1: the `size` bytes are counted from now, in the same step as the check, until
 * rs_outside_driver_alloc takes them over or rs_outside_driver_unadmit gives them back (the
 * call failed). */
int rs_outside_driver_admit(uint64_t size, int device);
void rs_outside_driver_unadmit(uint64_t size, int device);
/* The driver refused `size` bytes on `device`: the rank's OOM, with the caller's stack, in the
 * history and in the snapshot's oom record when it is the last one. Before the instance is up
 * (the driver's interposers record then: instance.h, rs_instance_starting), kept for it. */
void rs_outside_driver_oom(uint64_t size, int device);
/* The framework's allocator refused a request itself, as its error says (`said`: requested, 0
 * when not known; allocated, the framework's own count, which its limit counts; memory_limit, its
 * own limit, 0 for none; device_free and device_total, 0 when not known; each within `rounding`
 * of the exact figure), on `device`, with the stack pcs[0..n) (the Python frames of the request):
 * the rank's OOM, in the history and in rt->drv_oom as the driver's refusal is, unless it is the
 * driver's refusal recorded last, which PyTorch's cudaMallocAsync backend reports with the same
 * error. 1 when recorded, 0 when it was the driver's (recorded already). */
int rs_outside_framework_oom(rs_runtime *rt, const rs_oom_info *said, int device, uint64_t rounding,
                             const uintptr_t *pcs, int n);
/* After `rt` is published: the driver OOMs kept from before, into its oom record. */
void rs_outside_adopt(rs_runtime *rt);
/* At finalize, rank 0 of a preloaded run: says how to link when no allocation call reached
 * ranksnap while the device filled up (the program uses the static CUDA runtime). */
void rs_outside_warn_if_nothing_intercepted(rs_runtime *rt);
/* For a preloaded process (rank 0) in which ranksnap never started and no allocation call ever
 * reached it, with no shared CUDA runtime loaded (whose calls the preload would have seen): says
 * how to link when it holds a CUDA context, i.e. device memory ranksnap did not see. Decided once:
 * at ranksnap_finalize with no instance (at_exit 0: the PyTorch glue's exit, while the driver
 * still answers), where a process that only counted the GPUs or made a context on the shared
 * runtime (a launcher: torchrun's agent, accelerate's) is left in peace; else at exit (at_exit 1),
 * where a runtime may have released its context already, so any use of the driver counts (the
 * process then "used CUDA"). */
void rs_outside_warn_if_cuda_unseen(int at_exit);

#endif
