/*
 * compare.h — the per-rank comparison: summaries, verdicts and the allocation sites that explain
 * a difference.
 *
 * Two levels, as the gather has two phases (DESIGN.md, "Gathering at scale"):
 * - rs_summary: a fixed-size digest of one rank (peaks, the per-step peak series downsampled to
 *   RS_SUMMARY_MAX_STEPS points, the OOM record, the top sites at the peak). Every rank sends one to
 *   rank 0; it is plain bytes (no pointers), so MPI can move it as MPI_BYTE.
 * - rs_compare: from the summaries of the ranks present (and the full decoded snapshots of those
 *   that sent one, NULL otherwise), the verdicts: OOM ranks, ranks whose peak diverges from the
 *   median beyond RANKSNAP_DIVERGENCE and the median/MAD noise guard, the first step each
 *   diverged, growth (a leak) or constant offset, and the sites (function + file + line, never an
 *   address) that account for the difference against the reference (median) rank.
 * The same code serves the live report (rank 0, after the gather) and `ranksnap report` (files).
 */
#ifndef RANKSNAP_COMPARE_H
#define RANKSNAP_COMPARE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ranksnap.h"
#include "snapshot.h"

#define RS_SUMMARY_MAX_STEPS 64
#define RS_SUMMARY_MAX_SITES 8
#define RS_SITE_FUNC_LEN 64
#define RS_SITE_FILE_LEN 96
#define RS_SUMMARY_MAX_OUTSIDE_LABELS 8
#define RS_SUMMARY_LABEL_LEN 24
/* rs_summary.step_peak of a bucket in which no step of the rank was recorded (step ranges such
 * as 10:15,100:105 leave gaps). */
#define RS_SUMMARY_NO_DATA UINT64_MAX

/* Device memory outside the allocator held by a known holder (totals.outside_labels). */
typedef struct rs_summary_outside_label {
    char label[RS_SUMMARY_LABEL_LEN]; /* "nccl", "nccl_mem", "cuda_mempool", ... */
    uint64_t bytes;
} rs_summary_outside_label;

/* An allocation site: the innermost frame of a stack that is not ranksnap's own. */
typedef struct rs_site {
    char function[RS_SITE_FUNC_LEN]; /* "(no stack)" when the block had none */
    char file[RS_SITE_FILE_LEN];
    int32_t line;
    int32_t blocks;
    int64_t bytes; /* live bytes at the moment in question; a delta in rs_compare_divergent.sites */
} rs_site;

typedef struct rs_summary {
    int32_t rank;
    int32_t world_size;
    int32_t complete;            /* 0: written from a crash path / recovered ring */
    int32_t oom;
    char host[64];
    char job[64];
    uint64_t peak_allocated;
    uint64_t peak_reserved;
    uint64_t reserved_at_peak;   /* reserved bytes when allocated peaked (fragmentation = this - peak_allocated) */
    uint64_t outside_peak;       /* device memory not from the allocator */
    uint64_t outside_end;
    int64_t peak_step;
    int64_t peak_time_us;        /* on rank 0's time base (clock offset applied) */
    int64_t clock_offset_us;
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
} rs_summary;

/* Fills `out` from a decoded snapshot. Never fails on a valid snapshot (decoders guarantee every
 * index is in range). */
void rs_summary_of(const rs_snap *s, rs_summary *out);

/* Live bytes by site at the snapshot's peak of allocated bytes (at its OOM when it has one),
 * largest first; *out is malloc'ed, the caller frees it. Replays the history from the state at
 * the end; blocks alive before the history began count under their own stacks. */
ranksnap_status rs_site_list_at_peak(const rs_snap *s, rs_site **out, size_t *n);

/* The site of stack id `stack` of `s` (0: "(no stack)"), bytes and blocks 0. */
void rs_site_of_stack(const rs_snap *s, uint32_t stack, rs_site *out);
/* 1 for a frame of ranksnap itself (ranksnap_*, rs_*, the __wrap_cuda* of ranksnap::wrap, or
 * any frame in libranksnap): sites are the innermost frame that is not. */
int rs_site_frame_is_ranksnaps(const rs_snap *s, const rs_snap_frame *f);

/* How the reports name a holder of outside memory: "NCCL" for "nccl", "ncclMemAlloc" for
 * "nccl_mem", "cudaMallocFromPoolAsync" for "cuda_mempool"; other labels as they are. */
const char *rs_summary_outside_label_name(const char *label);

/* Sites are the same when function, file and line are; the order is by those three. */
int rs_site_same(const rs_site *a, const rs_site *b);
int rs_site_cmp(const rs_site *a, const rs_site *b);

typedef struct rs_compare_config {
    double divergence_pct; /* RANKSNAP_DIVERGENCE, e.g. 5.0 */
    double mad_k;          /* noise guard: |peak - median| must also exceed mad_k * 1.4826 * MAD; default 3 */
    size_t max_sites;      /* sites listed per divergent rank, default 10 */
} rs_compare_config;

void rs_compare_config_default(rs_compare_config *c);

typedef struct rs_compare_divergent {
    int32_t rank;
    uint64_t peak_allocated;
    uint64_t reference_peak;
    double divergence_pct;        /* (peak - median) / median * 100, signed */
    int64_t first_divergent_step; /* -1 when the step series cannot tell */
    int growth;                   /* 1 growth (grows step after step), 0 constant offset */
    size_t n_sites;
    rs_site *sites;              /* bytes = delta against the reference, largest first */
} rs_compare_divergent;

typedef struct rs_compare_oom {
    int32_t rank;
    uint64_t requested;
    int64_t step;
    uint64_t device_free, device_total, allocated, reserved, memory_limit;
    rs_site site;               /* of the failing request */
    size_t n_live;
    rs_site *live;              /* its largest live sites at the OOM */
} rs_compare_oom;

typedef struct rs_compare_result {
    int world_size;
    size_t n_ranks;              /* present */
    rs_summary *ranks;          /* copies, in rank order */
    size_t n_missing;
    int32_t *missing;            /* ranks of [0, world_size) with no data */
    int32_t reference_rank;      /* the median rank, -1 when none present */
    uint64_t median_peak;
    uint64_t mad;
    size_t n_oom;
    rs_compare_oom *oom;
    size_t n_divergent;
    rs_compare_divergent *divergent;    /* largest |divergence| first */
    size_t n_notes;
    char **notes;                /* e.g. "rank 3 snapshot is incomplete (crash path)" */
    double divergence_pct;       /* the configuration the verdicts used */
    uint64_t threshold;          /* bytes from the median beyond which a rank diverges */
} rs_compare_result;

/* `full[i]` is the decoded snapshot of sums[i]'s rank or NULL. world_size 0 = the largest
 * world_size the summaries name. */
ranksnap_status rs_compare(const rs_summary *sums, const rs_snap *const *full, size_t n,
                            int world_size, const rs_compare_config *cfg, rs_compare_result **out);
void rs_compare_result_free(rs_compare_result *r);

/* Appends a note (printf format) for things the caller knows and the comparison does not, e.g. a
 * file that could not be read. */
ranksnap_status rs_compare_add_note(rs_compare_result *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The text report (a table of ranks, then the verdicts in plain words) and the JSON report
 * (schema in docs/FORMAT.md). */
ranksnap_status rs_report_text(FILE *out, const rs_compare_result *r);
ranksnap_status rs_report_json(FILE *out, const rs_compare_result *r);

#endif
