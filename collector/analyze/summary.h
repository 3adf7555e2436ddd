/*
 * summary.h — a fixed-size digest of one rank: what every rank sends rank 0 in the gather's first
 * phase, and what the comparison reads.
 *
 * Peaks, the per-step peak series downsampled to RS_SUMMARY_MAX_STEPS points, the OOM record and
 * the top sites at the peak. Plain bytes (no pointers), so that MPI can move it as MPI_BYTE.
 */
#ifndef RANKSNAP_SUMMARY_H
#define RANKSNAP_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "sites.h"
#include "snapshot.h"

#define RS_SUMMARY_MAX_STEPS 64
#define RS_SUMMARY_MAX_SITES 8
#define RS_SUMMARY_MAX_OUTSIDE_LABELS 8
#define RS_SUMMARY_MAX_OUTSIDE_SITES 4
#define RS_SUMMARY_LABEL_LEN 24
/* rs_summary.step_peak of a bucket in which no step of the rank was recorded (step ranges such
 * as 10:15,100:105 leave gaps). */
#define RS_SUMMARY_NO_DATA UINT64_MAX

/* rs_summary.async_pool: not such a rank; such a rank whose peak reserved is the pool's reserved
 * bytes read at its peak (totals.async_pool.reserved_at_peak); or, not read, its peak allocated. */
#define RS_SUMMARY_ASYNC_NONE 0
#define RS_SUMMARY_ASYNC_POOL_RESERVED 1
#define RS_SUMMARY_ASYNC_AS_ALLOCATED 2

/* Device memory outside the allocator held by a known holder (totals.outside_labels). */
typedef struct rs_summary_outside_label {
    char label[RS_SUMMARY_LABEL_LEN]; /* "nccl", "nccl_mem", "cuda_mempool", ... */
    uint64_t bytes;
} rs_summary_outside_label;

typedef struct rs_summary {
    int32_t rank;
    int32_t world_size;
    int32_t complete;            /* 0: written from a crash path / recovered ring */
    int32_t recovered;           /* 1: rebuilt from the event ring a dead rank left (ring_decode.c) */
    int32_t oom;
    int32_t driver;              /* RANKSNAP_DRIVER in force: 1, 0 (set off), -1 the file does not say */
    char host[64];
    char job[64];
    char steps_from[96];         /* how the rank numbered its steps, "" = not said */
    char recorded_by[128];       /* how it was recorded when not the usual way, "" = usual */
    uint64_t peak_allocated;
    uint64_t peak_reserved;
    uint64_t reserved_at_peak;   /* reserved bytes when allocated peaked */
    uint64_t pools_at_peak;      /* of those, private pools' (CUDA graphs', pools.h) ...      */
    uint64_t pools_free_at_peak; /* ... and of theirs, what no block held: reserved by design */
    uint64_t outside_peak;       /* device memory not from the allocator */
    uint64_t outside_end;
    int64_t peak_step;
    int64_t peak_time_us;        /* on rank 0's time base (clock offset applied) */
    int64_t clock_offset_us;
    uint64_t device_total;       /* the device's capacity, 0 when the file does not say (PyTorch) */
    uint64_t memory_limit;       /* the rank's cap of reserved bytes, 0 = none */
    uint64_t events;
    uint64_t dropped;
    /* per-step peak of allocated bytes: step_first, step_first+stride, ...; a bucket holds the
     * maximum over its `stride` steps when the range has more than RS_SUMMARY_MAX_STEPS steps */
    int32_t n_steps;
    int32_t step_stride;
    int64_t step_first;
    uint64_t step_peak[RS_SUMMARY_MAX_STEPS];
    /* the OOM, when oom != 0 */
    uint64_t oom_requested;
    uint64_t oom_device_free;
    uint64_t oom_device_total;
    uint64_t oom_allocated;
    uint64_t oom_reserved;
    uint64_t oom_memory_limit;
    int64_t oom_step;
    rs_site oom_site;           /* where the failing request came from */
    /* largest sites by live bytes at the peak (at the OOM for an OOM rank) */
    int32_t n_sites;
    rs_site sites[RS_SUMMARY_MAX_SITES];
    /* the part of outside_end whose holder is known, largest first, holders with 0 bytes left out */
    int32_t n_outside_labels;
    rs_summary_outside_label outside_labels[RS_SUMMARY_MAX_OUTSIDE_LABELS];
    /* memory recorded outside the allocator as it was allocated (the CUDA driver's interposers,
     * ncclMemAlloc, CUDA pools): the highest level the history shows, and the largest sites then */
    uint64_t recorded_outside_peak;
    int32_t n_outside_sites;
    rs_site outside_sites[RS_SUMMARY_MAX_OUTSIDE_SITES];
    /* the library each was taken through ("NCCL", ...; "" for the program's own calls) */
    char outside_site_owners[RS_SUMMARY_MAX_OUTSIDE_SITES][16];
    /* the file's communicators were malformed (rs_snap.comms_error); the communicators
     * themselves, any number of them, travel beside the summary (roles_found.h) */
    int32_t comms_unreadable;
    /* What outside_peak and outside_end are measured against (rs_outside_of), and for the
     * device's whole use why the process's own was not known (rs_outside_why). Then what NVML
     * listed on the rank's device: the processes with a context there (this one included; 0: none
     * listed), those of them it gave no figure for, and what the others held, in KiB: the fields
     * are packed, the summary is at MPI's eager limit. */
    int8_t outside_of;
    uint8_t outside_why;
    /* RS_SUMMARY_ASYNC_*: a rank recorded natively whose allocator served it from a
     * stream-ordered pool: its peaks, step and sites are the pool's allocations' */
    int8_t async_pool;
    uint16_t device_processes;
    uint16_t device_others_unknown;
    uint8_t device_uuid[16];     /* the device's UUID, all 0 when not known or simulated */
    uint32_t device_others_kib;
    rs_end end;                  /* how the process ended, as far as its file says (format.h) */
    int32_t totals_only;      /* made from the file's totals alone (rs_snap.totals_only): no step
                                 series, no sites, and reserved_at_peak is the reserved peak */
} rs_summary;
/* The summary is sent whole in the live gather: past MPI's eager limit (4 KiB on shared memory)
 * a send to a rank 0 that gave up on this rank could no longer be cancelled. */
_Static_assert(sizeof(rs_summary) <= 4000, "the summary must stay under MPI's eager limit");

/* Reserved bytes no block held when allocated peaked, outside the private pools (whose free bytes
 * a CUDA graph keeps by design): reserved_at_peak - peak_allocated - pools_free_at_peak. */
uint64_t rs_summary_fragmentation(const rs_summary *s);

/* Fills `out` from a decoded snapshot. Never fails on a valid snapshot (decoders guarantee every
 * index is in range); without memory for the walk it keeps the totals. */
void rs_summary_of(const rs_snap *s, rs_summary *out);

/* A rank's sites in full, made with its summary while the snapshot is at hand: what the
 * comparison would otherwise take from the whole snapshot (rs_compare_ex), at the cost of a
 * second walk and classification of its frames. */
typedef struct rs_summary_sites {
    int ok;                /* 0: none made (no memory): the comparison uses the snapshot or the summary */
    size_t n;
    rs_site *sites;        /* every site at the peak (the OOM), as rs_site_list_at_peak lists them */
    rs_site_path *paths;   /* paths[i] is the path of sites[i] */
    rs_site_path oom_path; /* the path of the summary's oom_site, when it has an OOM */
    int has_pool;          /* the snapshot has a private pool, named by `pool` (rs_pools_site) */
    rs_site pool;
} rs_summary_sites;

/* rs_summary_of, and the sites in `sites` (freed with rs_summary_sites_free, made or not). */
void rs_summary_of_sites(const rs_snap *s, rs_summary *out, rs_summary_sites *sites);
void rs_summary_sites_free(rs_summary_sites *sites);

/* 1 for a rank whose memory ranksnap saw only as it was taken outside the allocator (at the CUDA
 * driver: a program on a static runtime that was not relinked). */
int rs_summary_outside_only(const rs_summary *s);
/* What a rank is compared by: its allocator's peak, or for an outside-only rank the peak of what
 * was taken outside. */
uint64_t rs_summary_peak(const rs_summary *s);
/* What the comparison weighs a rank by: rs_summary_peak plus its private pools' free bytes at
 * that peak (pools.h). A CUDA graph keeps its pool for its replays (its intermediates live there,
 * freed as blocks after the capture but reserved): memory the rank cannot give back, which its
 * allocated bytes do not show. Equal to rs_summary_peak for a rank with no private pool. */
uint64_t rs_summary_held(const rs_summary *s);

/* 0 for a rank that recorded nothing: no allocation, no reservation, no memory outside the
 * allocator recorded as it was taken, no OOM (killed at start-up, a ring recovered before its
 * first event). */
int rs_summary_has_data(const rs_summary *s);
/* What the rank could fill: its memory limit, else its device's capacity (for a rank that ran out
 * of memory and says neither, those in force at the OOM); 0 when unknown. */
uint64_t rs_summary_capacity(const rs_summary *s);

/* How the reports name a holder of outside memory: "NCCL" for "nccl", "ncclMemAlloc" for
 * "nccl_mem", "cudaMallocFromPoolAsync" for "cuda_mempool"; other labels as they are. */
const char *rs_summary_outside_label_name(const char *label);

#endif
