/*
 * compare.h — the per-rank comparison: summaries, verdicts and the allocation sites that explain
 * a difference.
 *
 * Two levels, as the gather has two phases (DESIGN.md, "Gathering at scale"):
 * - rsc_summary: a fixed-size digest of one rank (peaks, the per-step peak series downsampled to
 *   RSC_MAX_STEPS points, the OOM record, the top sites at the peak). Every rank sends one to
 *   rank 0; it is plain bytes (no pointers), so MPI can move it as MPI_BYTE.
 * - rsc_compare: from the summaries of the ranks present (and the full decoded snapshots of those
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
#include "snapshot_model.h"

#define RSC_MAX_STEPS 64
#define RSC_MAX_SITES 8
#define RSC_FUNC_LEN 64
#define RSC_FILE_LEN 96
#define RSC_MAX_OUTSIDE_LABELS 8
#define RSC_LABEL_LEN 24
/* rsc_summary.step_peak of a bucket in which no step of the rank was recorded (step ranges such
 * as 10:15,100:105 leave gaps). */
#define RSC_STEP_NO_DATA UINT64_MAX

/* Device memory outside the allocator held by a known holder (totals.outside_labels). */
typedef struct rsc_outside_label {
    char label[RSC_LABEL_LEN]; /* "nccl", "nccl_mem", "cuda_mempool", ... */
    uint64_t bytes;
} rsc_outside_label;

/* An allocation site: the innermost frame of a stack that is not ranksnap's own. */
typedef struct rsc_site {
    char function[RSC_FUNC_LEN]; /* "(no stack)" when the block had none */
    char file[RSC_FILE_LEN];
    int32_t line;
    int32_t blocks;
    int64_t bytes; /* live bytes at the moment in question; a delta in rsc_divergent.sites */
} rsc_site;

typedef struct rsc_summary {
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
     * maximum over its `stride` steps when the range has more than RSC_MAX_STEPS steps */
    int32_t n_steps;
    int32_t step_stride;
    int64_t step_first;
    uint64_t step_peak[RSC_MAX_STEPS];
    /* the OOM, when oom != 0 */
    uint64_t oom_requested;
    uint64_t oom_device_free;
    uint64_t oom_device_total;
    uint64_t oom_allocated;
    uint64_t oom_reserved;
    uint64_t oom_memory_limit;
    int64_t oom_step;
    rsc_site oom_site;           /* where the failing request came from */
    /* largest sites by live bytes at the peak (at the OOM for an OOM rank) */
    int32_t n_sites;
    rsc_site sites[RSC_MAX_SITES];
    /* the part of outside_end whose holder is known, largest first, holders with 0 bytes left out */
    int32_t n_outside_labels;
    rsc_outside_label outside_labels[RSC_MAX_OUTSIDE_LABELS];
} rsc_summary;

/* Fills `out` from a decoded snapshot. Never fails on a valid snapshot (decoders guarantee every
 * index is in range). */
void rsc_summarize(const rsn_snapshot *s, rsc_summary *out);

/* Live bytes by site at the snapshot's peak of allocated bytes (at its OOM when it has one),
 * largest first; *out is malloc'ed, the caller frees it. Replays the history from the state at
 * the end; blocks alive before the history began count under their own stacks. */
ranksnap_status rsc_sites_at_peak(const rsn_snapshot *s, rsc_site **out, size_t *n);

/* The site of stack id `stack` of `s` (0: "(no stack)"), bytes and blocks 0. */
void rsc_site_of_stack(const rsn_snapshot *s, uint32_t stack, rsc_site *out);
/* 1 for a frame of ranksnap itself (ranksnap_*, rs_*, the __wrap_cuda* of ranksnap::wrap, or
 * any frame in libranksnap): sites are the innermost frame that is not. */
int rsc_frame_is_ranksnaps(const rsn_snapshot *s, const rsn_frame *f);

/* How the reports name a holder of outside memory: "NCCL" for "nccl", "ncclMemAlloc" for
 * "nccl_mem", "cudaMallocFromPoolAsync" for "cuda_mempool"; other labels as they are. */
const char *rsc_outside_label_name(const char *label);

/* Sites are the same when function, file and line are; the order is by those three. */
int rsc_site_same(const rsc_site *a, const rsc_site *b);
int rsc_site_cmp_key(const rsc_site *a, const rsc_site *b);

typedef struct rsc_config {
    double divergence_pct; /* RANKSNAP_DIVERGENCE, e.g. 5.0 */
    double mad_k;          /* noise guard: |peak - median| must also exceed mad_k * 1.4826 * MAD; default 3 */
    size_t max_sites;      /* sites listed per divergent rank, default 10 */
} rsc_config;

void rsc_config_default(rsc_config *c);

typedef struct rsc_divergent {
    int32_t rank;
    uint64_t peak_allocated;
    uint64_t reference_peak;
    double divergence_pct;        /* (peak - median) / median * 100, signed */
    int64_t first_divergent_step; /* -1 when the step series cannot tell */
    int growth;                   /* 1 growth (grows step after step), 0 constant offset */
    size_t n_sites;
    rsc_site *sites;              /* bytes = delta against the reference, largest first */
} rsc_divergent;

typedef struct rsc_oom_verdict {
    int32_t rank;
    uint64_t requested;
    int64_t step;
    uint64_t device_free, device_total, allocated, reserved, memory_limit;
    rsc_site site;               /* of the failing request */
    size_t n_live;
    rsc_site *live;              /* its largest live sites at the OOM */
} rsc_oom_verdict;

typedef struct rsc_result {
    int world_size;
    size_t n_ranks;              /* present */
    rsc_summary *ranks;          /* copies, in rank order */
    size_t n_missing;
    int32_t *missing;            /* ranks of [0, world_size) with no data */
    int32_t reference_rank;      /* the median rank, -1 when none present */
    uint64_t median_peak;
    uint64_t mad;
    size_t n_oom;
    rsc_oom_verdict *oom;
    size_t n_divergent;
    rsc_divergent *divergent;    /* largest |divergence| first */
    size_t n_notes;
    char **notes;                /* e.g. "rank 3 snapshot is incomplete (crash path)" */
    double divergence_pct;       /* the configuration the verdicts used */
    uint64_t threshold;          /* bytes from the median beyond which a rank diverges */
} rsc_result;

/* `full[i]` is the decoded snapshot of sums[i]'s rank or NULL. world_size 0 = the largest
 * world_size the summaries name. */
ranksnap_status rsc_compare(const rsc_summary *sums, const rsn_snapshot *const *full, size_t n,
                            int world_size, const rsc_config *cfg, rsc_result **out);
void rsc_result_free(rsc_result *r);

/* Appends a note (printf format) for things the caller knows and the comparison does not, e.g. a
 * file that could not be read. */
ranksnap_status rsc_result_add_note(rsc_result *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The text report (a table of ranks, then the verdicts in plain words) and the JSON report
 * (schema in docs/FORMAT.md). */
ranksnap_status rsc_report_text(FILE *out, const rsc_result *r);
ranksnap_status rsc_report_json(FILE *out, const rsc_result *r);

#endif
