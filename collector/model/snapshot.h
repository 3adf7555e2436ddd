/*
 * snapshot.h — one rank's snapshot, decoded: what the comparison and the reports read.
 *
 * A plain tree of structs and arrays, independent of the file it came from (a .rsnap today, a
 * PyTorch pickle through torch_decode.c), so that everything downstream has one shape to read.
 * Ownership: every pointer in it was obtained from malloc (strings NUL-terminated, arrays exactly
 * n elements) and belongs to the snapshot; rs_snap_free (rsnap_decode.h) frees all of it, so any
 * decoder may build one with calloc + malloc and hand it out.
 *
 * Indexes are validated on decode: a stream index is < n_streams, a stack id is 0 (none) or
 * 1..n_stacks (stacks[id - 1]), a frame index is < n_frames, a module index is -1 or < n_modules,
 * an annotation's addr is < n_strings. Field meanings and units: docs/FORMAT.md.
 */
#ifndef RANKSNAP_SNAPSHOT_H
#define RANKSNAP_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "alloc_conf.h"
#include "format.h"

typedef struct rs_snap_device {
    int index;
    char *name;
    char *uuid;
    uint64_t total_bytes;
    /* what NVML listed on it when the snapshot was taken; all 0 where it listed nothing (older
     * files, the sim backend, no NVML) */
    uint32_t processes;       /* with a context there, this one included */
    uint64_t others_bytes;    /* what the other processes held */
    uint32_t others_unknown;  /* other processes NVML gave no figure for */
    uint64_t own_bytes;       /* this process's, 0 when not given */
} rs_snap_device;

/* A device the rank allocated on (the file's devices[]; absent in files before the field, which
 * had one device, the snapshot's `device`). */
typedef struct rs_snap_used_device {
    int index;
    char *name;
    char *uuid;
    uint64_t total_bytes;
    uint64_t memory_limit;    /* the cap in force on it, 0 = none          */
    uint64_t allocated_bytes_peak, reserved_bytes_peak;
    uint64_t num_allocs, num_ooms;
} rs_snap_used_device;

typedef struct rs_snap_allocator {
    uint64_t memory_limit;    /* RANKSNAP_MEMORY_LIMIT's cap, 0 = none; conf's fraction of the
                                 device may cap lower (rs_alloc_conf_cap) */
    uint64_t max_split_size;  /* UINT64_MAX = unlimited (nil in the file); = conf's  */
    uint64_t min_block_size;
    uint64_t small_size;
    uint64_t small_buffer;
    uint64_t large_buffer;    /* = conf's large segment size                  */
    uint64_t min_large_alloc;
    uint64_t round_large;
    /* PyTorch's settings in force (all zero = PyTorch's defaults); conf.text is the string the
     * job gave (PYTORCH_CUDA_ALLOC_CONF / RANKSNAP_ALLOC_CONF), "" when none or unknown */
    rs_alloc_conf conf;
} rs_snap_allocator;

typedef struct rs_snap_recorder {
    uint64_t max_entries;
    char *stacks;             /* "native", "fp", "none"                    */
    int stack_depth;
    int driver;               /* RANKSNAP_DRIVER: 1 the driver's allocations were recorded, 0 the
                                 setting turned it off, -1 the file does not say */
} rs_snap_recorder;

typedef struct rs_snap_range {
    int64_t begin;
    int64_t end;              /* one past the last step, -1 = open end     */
} rs_snap_range;

typedef struct rs_snap_time {
    int64_t clock_offset_us;  /* add to this rank's times to get rank 0's  */
    int64_t clock_uncertainty_us;
    size_t n_ranges;
    rs_snap_range *ranges;
    int64_t current_step;
    char *steps_from;         /* how the rank numbered its steps, NULL = the file does not say */
    char *recorded_by;        /* how a framework's rank was recorded instead of by the framework's
                               * recorder ("recorded at the CUDA runtime: ..."), NULL = usual */
} rs_snap_time;

/* Device memory outside the allocator held by a known holder (totals.outside_labels). */
typedef struct rs_snap_outside_label {
    char *label;              /* "nccl", "nccl_mem", "cuda_mempool", "other" */
    uint64_t bytes;
} rs_snap_outside_label;

/* PyTorch's memory_stats() vocabulary. */
typedef struct rs_snap_totals {
    uint64_t allocated_bytes_current, allocated_bytes_peak;
    uint64_t reserved_bytes_current, reserved_bytes_peak;
    uint64_t active_bytes_current, active_bytes_peak;
    uint64_t requested_bytes_current, requested_bytes_peak;
    uint64_t inactive_split_bytes;
    uint64_t num_allocs, num_frees, num_alloc_retries, num_ooms;
    uint64_t num_segment_allocs, num_segment_frees, num_sync_all_streams;
    uint64_t peak_time_us;
    int64_t peak_step;        /* -1 before any step                       */
    uint64_t events_recorded, events_dropped;
    uint64_t device_total_bytes, device_used_bytes, memory_limit_bytes;
    uint64_t outside_bytes_peak, outside_bytes_end;
    int outside_of;           /* rs_outside_of (format.h): what the outside bytes are measured
                                 against; RS_OUTSIDE_UNSAID in files before the field */
    int outside_why;          /* of RS_OUTSIDE_DEVICE: why the process's own figure was not known
                                 (rs_outside_why; UNSAID when the file does not say) */
    char *outside_why_detail; /* the same in NVML's words, NULL when not said */
    /* totals.async_pool of a rank recorded natively: its stream-ordered pool's peak of live
     * bytes (0: not written) and the pool's reserved bytes then (0: not read) */
    uint64_t async_bytes_peak, async_reserved_at_peak;
    size_t n_outside_labels;  /* 0 for files written before the field existed */
    rs_snap_outside_label *outside_labels;
} rs_snap_totals;

typedef struct rs_snap_block {
    uint64_t addr;
    uint64_t size;
    uint64_t requested_size;
    uint32_t stack;           /* stack id, 0 = none                        */
    uint8_t state;            /* rs_block_state                            */
} rs_snap_block;

typedef struct rs_snap_segment {
    uint64_t addr;
    uint64_t total_size;
    uint64_t allocated_size;
    uint64_t active_size;
    uint64_t requested_size;
    uint32_t stream;          /* index into streams                        */
    int device;               /* the device it is on (older files: the snapshot's device) */
    int is_small;             /* segment_type "small" (1) or "large" (0)   */
    uint64_t pool_id[2];      /* PyTorch's segment_pool_id: (0, 0) its default pool, else a
                                 private pool (a CUDA graph's, a MemPool's): pools.h */
    uint32_t stack;
    size_t n_blocks;
    rs_snap_block *blocks;        /* address order                             */
} rs_snap_segment;

/* The recorded events, oldest first, one array per field (all `count` long, deltas decoded). */
typedef struct rs_snap_history {
    uint64_t count;
    uint64_t dropped;         /* older events overwritten in the ring      */
    uint64_t capacity;
    uint64_t held;            /* the first `held` events: what the rank held when the range began
                                 (allocations made before it, listed at its start), 0 = none */
    uint64_t room;            /* entries the columns have room for, where a decoder left some for
                                 step events (step_events.h); 0: count      */
    uint64_t *time_us;        /* wall clock, µs since the epoch             */
    uint8_t *action;          /* rs_action; unknown codes are kept         */
    uint64_t *addr;
    uint64_t *size;
    uint32_t *stream;
    uint32_t *stack;
} rs_snap_history;

typedef struct rs_snap_stack {
    size_t n_frames;
    uint32_t *frames;         /* indexes into frames, innermost first      */
} rs_snap_stack;

typedef struct rs_snap_frame {
    uint64_t pc;
    int32_t module;           /* index into modules, -1 = unknown          */
    char *function;           /* "??" if unknown                            */
    char *file;               /* "??" if unknown                            */
    int32_t line;             /* 0 if unknown                               */
    uint64_t text_hash;       /* rs_snap_frame_text_hash of function and file; 0: not made */
} rs_snap_frame;

typedef struct rs_snap_module {
    char *path;
    uint64_t base;
    char *build_id;           /* hex, "" if none                           */
} rs_snap_module;

typedef struct rs_snap_oom {
    int device;               /* the device that ran out (older files: the snapshot's device) */
    uint64_t requested, rounded;
    uint64_t device_free, device_total;
    uint64_t allocated, reserved, memory_limit;
    uint64_t time_us;
    uint32_t stream;
    uint32_t stack;
    int64_t step;
} rs_snap_oom;

/* A communicator the rank belonged to, as the rank saw it: how the ranks of a job group into
 * roles (roles.h) is found from these when no grouping is declared. The members of one
 * communicator share its id across their files; rank 0 puts them together. */
typedef struct rs_snap_comm {
    uint64_t id;              /* the same on every member (a hash of NCCL's unique id, of the
                               * MPI split's parent and color, of a mesh dimension's ranks)     */
    int32_t size;             /* its members                                                   */
    int32_t rank;             /* this rank's index among them                                  */
    char kind[8];             /* "nccl", "mpi", "torch"                                        */
    char name[16];            /* the dimension's name where the framework gives one ("pp",
                               * "dp", "tp"); "" else                                           */
    uint64_t allreduces;      /* all-reduce calls made on it while the range recorded (files
                               * written before that was tracked: in the whole run); the
                               * data-parallel replicas all-reduce their gradients; 0 when not
                               * counted                                                        */
} rs_snap_comm;

typedef struct rs_snap {
    unsigned version;
    int rank;
    int world_size;
    char *host;
    int64_t pid;
    char *job;
    int complete;             /* 0 when written from a crash path           */
    uint64_t time_us;         /* when the snapshot was taken                */
    rs_snap_device device;    /* the primary device (index -1: none was used) */
    size_t n_devices;         /* every device used; 0 in files before the field */
    rs_snap_used_device *devices;
    char *backend;
    rs_snap_allocator allocator;
    rs_snap_recorder recorder;
    rs_snap_time time;
    rs_snap_totals totals;

    size_t n_streams;
    uint64_t *streams;        /* stream handles (cudaStream_t as integers) */
    size_t n_segments;
    rs_snap_segment *segments;    /* address order                             */
    rs_snap_history history;
    size_t n_strings;
    char **strings;           /* annotation names                          */
    size_t n_stacks;
    rs_snap_stack *stacks;        /* stack id i is stacks[i - 1]               */
    size_t n_frames;
    rs_snap_frame *frames;
    size_t n_modules;
    rs_snap_module *modules;
    size_t n_comms;
    rs_snap_comm *comms;      /* optional: empty in files that say nothing of communicators;
                               * those alive while the range recorded (files written before
                               * frees were tracked: every one made)                           */
    uint64_t comms_left_out;  /* the others the rank recorded: freed before the range or made
                               * after it; 0 when the file does not say                        */
    /* why the file's communicators could not be read ("" when they could, or there are none):
     * an optional field that is malformed costs the rank its roles, never the rank itself */
    char comms_error[256];

    int has_oom;
    rs_snap_oom oom;
    /* how the process ended, as far as it saw (format.h): all zero when the file was not written
     * on its way out, and in files before the field */
    rs_end end;
    /* 1: only the file's identity, settings, totals, OOM record (its stack not named) and
     * communicators were read, not its history, segments or symbol tables
     * (rs_rsnap_decode_totals): enough for the peaks, not for a step or a site */
    int totals_only;

    /* The walk the decoder made of the finished snapshot, at its start (walk.h: rs_walk_keep),
     * which rs_walk_init copies instead of building the same table again; NULL: none. */
    struct rs_walk *walk;
} rs_snap;

/* Frees a snapshot and everything it owns; NULL is fine. Safe on a half-built snapshot whose
 * counts say how many of each array's elements are owned. */
void rs_snap_free(rs_snap *s);

/* A seeded hash (addr_hash.h) of a frame's function and file, never 0: a decoder that hashed them
 * for its own table keeps it in the frame (text_hash), and the tables of the analysis (sites'
 * lines, the classified frames) start from it instead of hashing the names again. */
uint64_t rs_snap_frame_text_hash(const char *function, size_t function_len, const char *file,
                                 size_t file_len);
/* f's text_hash, or the hash made now when the decoder left it 0. */
uint64_t rs_snap_frame_text_hash_of(const rs_snap_frame *f);

#endif
