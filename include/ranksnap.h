/*
 * ranksnap.h — the one public header of ranksnap.
 *
 * ranksnap is a per-rank GPU caching allocator with a recorder of every allocation event, whose
 * snapshots are compared across the ranks of an MPI/NCCL job. This header is includable from C and
 * C++ without CUDA or MPI headers: streams are `void *` (a cudaStream_t), communicators are passed
 * by address (`&comm`, an MPI_Comm *), so that the header does not depend on either ABI.
 *
 * Every call returns a ranksnap_status; ranksnap_strerror() names the code and
 * ranksnap_last_error() gives the detail of the last failure on the calling thread (file, option,
 * sizes), e.g. the full out-of-memory message.
 */
#ifndef RANKSNAP_H
#define RANKSNAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RANKSNAP_BUILDING)
#define RANKSNAP_API __attribute__((visibility("default")))
#else
#define RANKSNAP_API
#endif

#define RANKSNAP_VERSION_MAJOR 0
#define RANKSNAP_VERSION_MINOR 1
#define RANKSNAP_VERSION_PATCH 0
#define RANKSNAP_VERSION_STRING "0.1.0"

/* Error codes. Stable numbers: they appear in logs and in the snapshot's last error. */
typedef enum ranksnap_status {
    RANKSNAP_OK = 0,
    RANKSNAP_ERR_INVALID_ARGUMENT = 1, /* a NULL where a pointer was needed, a bad size, ...   */
    RANKSNAP_ERR_OUT_OF_MEMORY = 2,    /* device memory (or the RANKSNAP_MEMORY_LIMIT) ran out */
    RANKSNAP_ERR_HOST_MEMORY = 3,      /* malloc of ranksnap's own bookkeeping failed          */
    RANKSNAP_ERR_NOT_INITIALIZED = 4,  /* a call that needs ranksnap_init() first              */
    RANKSNAP_ERR_OPTION = 5,           /* an environment option could not be parsed            */
    RANKSNAP_ERR_BACKEND = 6,          /* the CUDA runtime (or the sim device) returned an error */
    RANKSNAP_ERR_UNKNOWN_POINTER = 7,  /* free/record_stream of a pointer ranksnap did not hand out */
    RANKSNAP_ERR_IO = 8,               /* a file could not be opened, written, synced or renamed */
    RANKSNAP_ERR_FORMAT = 9,           /* a snapshot file is truncated, corrupt or not ours     */
    RANKSNAP_ERR_UNSUPPORTED = 10,     /* e.g. the cuda backend in a build without CUDA          */
    RANKSNAP_ERR_MPI = 11,             /* an MPI call failed                                     */
    RANKSNAP_ERR_DISABLED = 12         /* RANKSNAP_DISABLE=1: ranksnap is a pass-through         */
} ranksnap_status;

/* The name and meaning of a status code; never NULL, static storage. */
RANKSNAP_API const char *ranksnap_strerror(ranksnap_status status);

/* Detail of the last failing call on this thread ("" if none). Valid until the next call on this
 * thread that fails. */
RANKSNAP_API const char *ranksnap_last_error(void);

/* "0.1.0" */
RANKSNAP_API const char *ranksnap_version(void);

/* Starts ranksnap in this process: reads the RANKSNAP_* environment, picks the backend and
 * creates the allocator and the recorder. `mpi_comm` is the address of an MPI_Comm whose ranks
 * take part, or NULL for a process on its own (rank and world size are then read from the
 * launcher's environment when present). Calling it twice returns RANKSNAP_OK without doing
 * anything the second time. A value that does not parse (or a start that fails) never breaks the
 * program: the error is printed once on stderr, naming the variable, and ranksnap passes calls
 * through as RANKSNAP_DISABLE=1 does — ranksnap_malloc/free go to the device, the recording calls
 * succeed and do nothing, ranksnap_get_stats has none — and this returns RANKSNAP_OK (the
 * reason stays in ranksnap_last_error(); ranksnap_is_recording() says 0). */
RANKSNAP_API ranksnap_status ranksnap_init(const void *mpi_comm);

/* Releases cached device memory and the recorder. Blocks still allocated stay valid for the
 * backend but are no longer tracked. Safe to call when not initialised. */
RANKSNAP_API ranksnap_status ranksnap_finalize(void);

/* The process is going down on an error (an uncaught exception, an OOM it will not survive):
 * finalize, whenever it comes (at exit), then neither gathers an open range nor finalises the
 * MPI world ranksnap joined, so that the launcher sees a rank that died, as it would without
 * ranksnap, and ends the job (mpirun then sends the others SIGTERM, and they dump). Files
 * already written stay. Safe to call at any time. */
RANKSNAP_API void ranksnap_abandon(void);

/* The process is about to exit with `status`, from a hook that runs before the C library's exit
 * path (a framework's glue that finalizes ranksnap in its own exit hook: Python's atexit,
 * os._exit): noted as how this rank ended, so that the snapshot written next and the report say
 * it. The C library's exit path notes exit() by itself; a call here is only for what it would see
 * too late. Safe at any time; does nothing in a forked child. */
RANKSNAP_API void ranksnap_exiting(int status);

/* Device memory from the caching allocator, ordered on `stream` (NULL = the default stream).
 * size 0 gives *ptr = NULL and RANKSNAP_OK, as cudaMalloc does. On OOM the message of
 * ranksnap_last_error() has PyTorch's parts: the request, the device capacity and free memory,
 * the bytes allocated and the bytes reserved but unallocated. */
RANKSNAP_API ranksnap_status ranksnap_malloc(void **ptr, size_t size, void *stream);

/* Returns a block to the cache. NULL is a no-op. A block used on other streams (see
 * ranksnap_record_stream) is reused only after the work queued on those streams has finished. */
RANKSNAP_API ranksnap_status ranksnap_free(void *ptr);

/* Marks `ptr` as used on `stream` (PyTorch's recordStream). */
RANKSNAP_API ranksnap_status ranksnap_record_stream(void *ptr, void *stream);

/* Releases every cached segment that holds no allocated block (PyTorch's empty_cache). */
RANKSNAP_API ranksnap_status ranksnap_empty_cache(void);

/* Marks the start of training step `step` (monotonic, chosen by the application). */
RANKSNAP_API ranksnap_status ranksnap_step(int64_t step);

/* What the application's steps are, in its own words, for the snapshot (time.steps_from), the
 * report and the warning about a range never reached: what its ranksnap_step calls count
 * ("optimizer steps (AdamW)"), or, while it has marked none, why ("none: ..."). PyTorch's glue
 * says it; NULL or "" gives the words back to ranksnap. At most 159 bytes are kept. */
RANKSNAP_API ranksnap_status ranksnap_steps_from(const char *how);

/* Named ranges in the history ("forward", "optimizer"); begin and end must nest. */
RANKSNAP_API ranksnap_status ranksnap_annotate_begin(const char *name);
RANKSNAP_API ranksnap_status ranksnap_annotate_end(const char *name);

/* Switches the recorder on (1) or off (0) at run time. The allocator keeps working either way. */
RANKSNAP_API ranksnap_status ranksnap_record(int on);
RANKSNAP_API int ranksnap_is_recording(void);

/* Statistics, named as PyTorch's memory_stats() names them. */
typedef struct ranksnap_stats {
    uint64_t allocated_bytes;       /* bytes in blocks handed out (rounded sizes)   */
    uint64_t allocated_bytes_peak;
    uint64_t requested_bytes;       /* bytes the program asked for (unrounded)      */
    uint64_t requested_bytes_peak;
    uint64_t reserved_bytes;        /* bytes in segments taken from the device      */
    uint64_t reserved_bytes_peak;
    uint64_t active_bytes;          /* allocated + freed but awaiting stream events */
    uint64_t active_bytes_peak;
    uint64_t inactive_split_bytes;  /* free parts of split segments                 */
    uint64_t num_allocs;
    uint64_t num_frees;
    uint64_t num_alloc_retries;     /* device reservations retried after emptying the cache */
    uint64_t num_ooms;
    uint64_t num_segment_allocs;
    uint64_t num_segment_frees;
    uint64_t num_sync_all_streams;  /* times the cache was flushed waiting for events */
    uint64_t peak_time_us;          /* wall clock (µs since the epoch) of allocated_bytes_peak */
    int64_t peak_step;              /* step current at allocated_bytes_peak, -1 before any step */
    uint64_t events_recorded;       /* events written to the ring since init        */
    uint64_t events_dropped;        /* events overwritten because the ring was full */
    uint64_t device_total_bytes;    /* capacity as the backend reports it           */
    uint64_t memory_limit_bytes;    /* RANKSNAP_MEMORY_LIMIT for this rank, 0 = none */
} ranksnap_stats;

RANKSNAP_API ranksnap_status ranksnap_get_stats(ranksnap_stats *out);
RANKSNAP_API ranksnap_status ranksnap_reset_peak_stats(void);

/* PyTorch's pluggable allocator:
 *   torch.cuda.memory.change_current_allocator(torch.cuda.memory.CUDAPluggableAllocator(
 *       "libranksnap.so", "ranksnap_torch_malloc", "ranksnap_torch_free"))
 * The signatures are those of torch/csrc/cuda/CUDAPluggableAllocator.h (MallocFuncType,
 * FreeFuncType) with the cudaStream_t as void *. The first call starts ranksnap as
 * ranksnap_init(NULL) does (joining MPI when launched by mpirun). Each `device` has its own caching
 * allocator, as in PyTorch. On any failure, out of memory
 * included, malloc prints ranksnap_last_error() on stderr and returns NULL (C cannot raise
 * PyTorch's OutOfMemoryError; docs/GPU.md says what follows); with RANKSNAP_ON_OOM=dump (the
 * default) the snapshot is on disk before it returns. free ignores NULL and uses only `ptr`. */
RANKSNAP_API void *ranksnap_torch_malloc(size_t size, int device, void *stream);
RANKSNAP_API void ranksnap_torch_free(void *ptr, size_t size, int device, void *stream);

/* Writes this rank's snapshot (msgpack, docs/FORMAT.md) to `path` atomically: a temporary file
 * in the same directory, fsync, rename. The file is created 0600. NULL = the default path,
 * RANKSNAP_DIR/rank-RRRRR.rsnap (the directory is created 0700 when missing). With an external
 * recorder (below) the snapshot is the framework's, RANKSNAP_DIR/rank-RRRRR.pickle. */
RANKSNAP_API ranksnap_status ranksnap_dump(const char *path);

/* ---- an external recorder: frameworks that keep their own allocator and recorder -----------
 *
 * PyTorch has its own caching allocator and records its history itself
 * (torch.cuda.memory._record_memory_history); with RANKSNAP_RECORDER=torch ranksnap drives that
 * recorder instead of standing in front of cudaMalloc. ranksnap keeps what it does for C
 * programs — the schedule of RANKSNAP_STEPS and ranksnap_step, triggers, clocks, RANKSNAP_DIR and
 * its checks, the dumps on OOM and on fatal signals, the gather and the live report — and calls
 * these functions for what the framework does: start and stop recording, and the snapshot's
 * bytes. The CUDA interposers then pass every call through; NCCL's memory is still measured.
 *
 * Every function returns 0 on success and -1 on failure (the framework says why on stderr), and
 * is called without any ranksnap lock held, from the thread that called ranksnap_step,
 * ranksnap_dump or ranksnap_finalize, or from ranksnap's post-mortem thread after a fatal signal.
 * Optional entries may be NULL. The Python glue (python/ranksnap/_torch.py) is the user. */
typedef struct ranksnap_recorder_ops {
    void *ctx;
    /* Starts recording, keeping the last `max_entries` events; `stacks_all` 1: native frames
     * too (RANKSNAP_STACKS=all), 0: the framework's own (python), -1: none. */
    int (*start)(void *ctx, uint64_t max_entries, int stacks_all);
    /* Stops recording; the snapshot was taken first (PyTorch clears its history on stop). */
    int (*stop)(void *ctx);
    /* Takes the snapshot, adds `meta_json` (the rank, the job, steps, memory outside the
     * framework's allocator: docs/PYTORCH.md) and hands the file's bytes to put(arg, ...), once;
     * ranksnap writes them atomically, 0600. */
    int (*dump)(void *ctx, const char *meta_json, void *arg,
                void (*put)(void *arg, const void *buf, size_t len));
    /* Bytes the framework's allocator holds from the device (torch.cuda.memory_reserved()):
     * device memory used beyond them is outside it (CUDA context, NCCL, other libraries). */
    uint64_t (*reserved)(void *ctx);
    /* Optional, for jobs without MPI (torchrun): a collective over the framework's own process
     * group. gather: every rank gives `len` bytes; on rank 0 take(arg, rank, ...) receives each
     * rank's, its own included. bcast: rank 0's `len` bytes to every rank. `timeout_s` bounds
     * each. -1 when there is no process group (ranksnap then meets in RANKSNAP_DIR's files). */
    int (*gather)(void *ctx, const void *buf, size_t len, int timeout_s, void *arg,
                  void (*take)(void *arg, int rank, const void *buf, size_t len));
    int (*bcast)(void *ctx, void *buf, size_t len, int timeout_s);
    /* Optional, called from a signal handler (async-signal-safe, no ctx): 1 when the calling
     * thread holds a lock that dump needs (Python's GIL: PyGILState_Check). The post-mortem
     * dump is then skipped rather than waited for in vain. */
    int (*holds_lock)(void);
} ranksnap_recorder_ops;

/* Registers the framework's recorder (copied; NULL unregisters it, as the glue does at exit).
 * RANKSNAP_OK when RANKSNAP_RECORDER=torch; RANKSNAP_ERR_UNSUPPORTED when RANKSNAP_RECORDER is
 * ranksnap (ranksnap's own allocator and recorder are the ones in use: the pluggable route);
 * RANKSNAP_ERR_OPTION for a RANKSNAP_RECORDER that does not parse. May be called before
 * ranksnap_init. */
RANKSNAP_API ranksnap_status ranksnap_set_recorder(const ranksnap_recorder_ops *ops);

/* The framework's recorder cannot run in this process (PyTorch's cudaMallocAsync backend has
 * none): ranksnap records the rank itself instead, at the CUDA driver, with the framework's
 * allocator left serving every request, and writes rank-RRRRR.rsnap, whose report says how it
 * was recorded and `why` (at most 119 bytes kept). The registered ops still gather and broadcast;
 * their start, stop and dump are not called. RANKSNAP_RECORDER=torch only, and before ranksnap
 * started (the glue calls it when torch is imported): RANKSNAP_ERR_UNSUPPORTED otherwise. Call
 * it from Python holding the GIL (ctypes.PyDLL): allocations made by threads that released the
 * GIL then get their Python frames too, where ranksnap can read this Python's frames without it
 * (3.11 to 3.13, checked here against the interpreter's own walk); the file says when not. */
RANKSNAP_API ranksnap_status ranksnap_record_natively(const char *why);

/* An out-of-memory error the framework's allocator raised in a rank ranksnap records natively
 * (ranksnap_record_natively), as the error gives it: PyTorch's cudaMallocAsync backend checks
 * its own limit (torch.cuda.set_per_process_memory_fraction) before it calls CUDA, so a request
 * over that limit never reaches the driver, where ranksnap sees the others refused. The Python
 * glue reads the figures from the error's message and the frames from its traceback. */
typedef struct ranksnap_framework_oom_info {
    int device;
    uint64_t requested;      /* bytes asked for; 0: the error did not say */
    uint64_t allocated;      /* the framework's allocated bytes then, which its limit counts */
    uint64_t limit;          /* the framework's own limit; 0: none */
    uint64_t device_free;    /* the device's free and total bytes; 0: not known */
    uint64_t device_total;
    uint64_t rounding;       /* how far each figure above may be from the exact one (PyTorch's
                              * message gives two decimals of KiB, MiB or GiB) */
    const uintptr_t *codes;  /* the request's Python frames, innermost first: code objects
                              * (id(frame.f_code)), alive through the call */
    const int *lines;        /* the line of each */
    int n;
} ranksnap_framework_oom_info;

/* Records that error as the rank's OOM, with those frames as the request's stack, as a refusal of
 * the CUDA driver is recorded (the history's oom event, the snapshot's oom record; the rank's
 * reserved bytes are those it holds at the driver), and writes the snapshot now
 * (RANKSNAP_ON_OOM). PyTorch raises the same error when CUDA refused the request: when the
 * figures keep the request within the limit (or are too close to it to tell) and the driver's
 * last refusal on that device was of that size, it is that refusal, recorded already, and
 * nothing is added. Call it holding the Python interpreter's lock (ctypes.PyDLL), which the
 * frames' names are read under. RANKSNAP_ERR_UNSUPPORTED in a rank not recorded natively (the
 * framework's OOM observer serves there), RANKSNAP_ERR_NOT_INITIALIZED before ranksnap started,
 * RANKSNAP_ERR_INVALID_ARGUMENT for frames without that lock. */
RANKSNAP_API ranksnap_status ranksnap_framework_oom(const ranksnap_framework_oom_info *oom);

/* This rank's identity as the framework's process group gives it (torch.distributed's
 * get_rank() and get_world_size()), and the job id all its ranks agreed on (NULL: this
 * process's own, ranksnap_job). It replaces what the launcher's environment said, for the
 * launchers that say nothing or something else: Lightning starts its ranks itself with
 * LOCAL_RANK and WORLD_SIZE only and passes the rank to torch.distributed, and each of its
 * processes has another parent, hence another job id. In a PyTorch job (RANKSNAP_RECORDER=torch),
 * a process its launcher started as one of several without a rank does not start ranksnap
 * before this is called (ranksnap_init returns RANKSNAP_ERR_NOT_INITIALIZED, saying so, and the
 * interposers pass calls through), so that it never writes a rank's files under a guessed rank.
 * May be called before ranksnap_init, and again with the same identity. On a running instance
 * the identity changes until this rank wrote a file; after that a different one is
 * RANKSNAP_ERR_UNSUPPORTED (the files keep the identity they were written under). */
RANKSNAP_API ranksnap_status ranksnap_set_identity(int rank, int world_size, const char *job);

/* This process's job id into buf (at most n bytes with the NUL): the one ranksnap_set_identity
 * gave, else RANKSNAP_JOB, the batch system's id, torchrun's run id, or local-HOST-PPID (the
 * ranks one launcher process started share it). RANKSNAP_ERR_INVALID_ARGUMENT when it does not
 * fit. */
RANKSNAP_API ranksnap_status ranksnap_job(char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* RANKSNAP_H */
