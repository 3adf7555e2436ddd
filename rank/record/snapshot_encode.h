/*
 * snapshot_encode.h — a rank's snapshot encoded as msgpack (docs/FORMAT.md).
 *
 * The encoder reads the allocator state, the recorder and the resolved symbols it is handed and
 * packs them straight into a msgpack_sbuffer (large arrays packed element by element, no
 * intermediate objects). common/atomic_file.h writes the bytes to disk.
 */
#ifndef RANKSNAP_SNAPSHOT_ENCODE_H
#define RANKSNAP_SNAPSHOT_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "backend.h"
#include "format.h"
#include "options.h"
#include "recorder.h"
#include "stacks.h"
#include "symbols.h"

typedef struct rs_step_range {
    int64_t begin; /* first step recorded              */
    int64_t end;   /* one past the last, -1 = open end */
} rs_step_range;

/* Device memory held outside the allocator by a known holder (outside.h, rs_outside_add). */
#define RS_MAX_OUTSIDE_LABELS 8
typedef struct rs_outside_label {
    char label[24];  /* "nccl", "nccl_mem", "cuda_mempool", "other" */
    uint64_t bytes;  /* held when the snapshot was taken              */
} rs_outside_label;

/* What NVML listed on a device (rank/runtime/device_share.h): the processes with a context there
 * and what they hold, this process among them. */
typedef struct rs_device_share {
    int listed;              /* 0: NVML did not list the device's processes (the rest is 0) */
    uint32_t processes;      /* listed, this one included when it was found */
    int own_known;           /* this process was found, with a figure: own_bytes */
    uint64_t own_bytes;
    uint64_t others_bytes;   /* what the other processes hold, those NVML gives a figure for
                              * (0 when this one was not found among them: none is known to be
                              * another's) */
    uint32_t others_unknown; /* other processes NVML gives no figure for */
} rs_device_share;

/* One device the rank allocated on: what it is, its cap and its allocator's statistics. */
typedef struct rs_snapshot_device {
    rs_device_info info;
    uint64_t memory_limit; /* the cap in force on it, 0 = none */
    ranksnap_stats stats;
} rs_snapshot_device;

/* A communicator the rank belonged to (docs/FORMAT.md, "communicators"). */
typedef struct rs_snapshot_comm {
    uint64_t id;        /* the same on every member */
    int32_t size, rank; /* its members, this rank's index among them */
    char kind[8];       /* "mpi", "nccl" */
    char name[16];      /* "" when unnamed */
    uint64_t allreduces; /* made while the range recorded */
} rs_snapshot_comm;

/* Everything the encoder needs; pointers are borrowed. */
typedef struct rs_snapshot_src {
    int rank;
    int world_size;
    const char *host;
    int64_t pid;
    const char *job;            /* launcher's job id, "" if none                     */
    rs_device_info device;      /* the primary device (index -1: none was used)       */
    size_t n_devices;           /* every device used, in order of first use          */
    const rs_snapshot_device *devices;
    const char *backend;        /* "cuda" or "sim"                                   */
    const rs_options *options;  /* allocator settings and recorder settings          */
    uint64_t memory_limit;      /* resolved for this rank                            */
    int complete;               /* 0 when written from a crash path                  */
    int64_t clock_offset_us;    /* to rank 0                                         */
    int64_t clock_uncertainty_us;
    size_t n_ranges;
    const rs_step_range *ranges;
    int64_t current_step;
    const char *steps_from;         /* how the steps were numbered, NULL or "" = none  */
    const char *recorded_by;        /* how a framework's rank was recorded when not by the
                                     * framework's own recorder, NULL or "" = the usual way */
    ranksnap_stats stats;
    uint64_t device_used_bytes;     /* device total - free, now                       */
    uint64_t outside_bytes_peak;    /* device memory used outside the allocator        */
    uint64_t outside_bytes_end;
    int outside_of;                 /* rs_outside_of (format.h): what they are measured against */
    int outside_why;                /* RS_OUTSIDE_DEVICE: why not the process's own (rs_outside_why) */
    const char *outside_why_detail; /* ... in NVML's words, or NULL                    */
    rs_device_share share;          /* what NVML listed on the primary device          */
    size_t n_outside_labels;        /* the part of the outside bytes whose holder is known */
    const rs_outside_label *outside_labels;
    uint64_t async_bytes_peak;      /* a rank recorded natively: its stream-ordered pool's peak
                                     * of live bytes (0: none, totals.async_pool not written) */
    uint64_t async_reserved_at_peak; /* ... and the pool's reserved bytes then, 0: not read */
    int has_oom;
    rs_oom_info oom;                /* the last OOM, of any device                   */
    int oom_device;
    uint32_t oom_stack_id;
    int64_t oom_step;
    const rs_alloc_state *state;
    const rs_recorder *recorder;    /* may be NULL                                   */
    const rs_symbols *symbols;      /* may be NULL (no stacks)                        */
    uint64_t time_us;               /* when the snapshot was taken                   */
    size_t n_comms;                 /* those alive while the range recorded (comms.h) */
    const rs_snapshot_comm *comms;
    uint64_t comms_left_out;        /* the others the rank recorded                  */
    rs_end end;                     /* how the process is ending (format.h); 0: it is not */
} rs_snapshot_src;

/* Encodes into a malloc'ed buffer the caller frees. */
ranksnap_status rs_snapshot_encode(const rs_snapshot_src *src, char **buf, size_t *len);

#endif
