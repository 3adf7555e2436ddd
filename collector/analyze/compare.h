/*
 * compare.h — the verdicts over the ranks of a job: who ran out of memory, whose peak diverges
 * from the median, since which step, growing or constant, and the allocation sites that account
 * for the difference against the reference (median) rank.
 *
 * From the summaries of the ranks present (summary.h) and the full decoded snapshots of those that
 * sent one (NULL otherwise): the two levels of the gather (docs/ARCHITECTURE.md, "Gathering at
 * scale"). The same code serves the live report (rank 0, after the gather) and `ranksnap report`
 * (files).
 */
#ifndef RANKSNAP_COMPARE_H
#define RANKSNAP_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "roles.h"
#include "shared_devices.h"
#include "site_delta.h"
#include "sites.h"
#include "snapshot.h"
#include "summary.h"
#include "notes.h"

typedef struct rs_compare_config {
    double divergence_pct; /* RANKSNAP_DIVERGENCE, e.g. 5.0 */
    double mad_k;          /* noise guard: |peak - median| must also exceed mad_k * 1.4826 * MAD; default 3 */
    size_t max_sites;      /* sites listed per divergent rank, default 10 */
    const rs_roles *roles; /* NULL: every rank is compared with the median of all; else with the
                              median of the ranks of its own role (roles.h) */
    const char *ungrouped; /* without roles: why the ranks' communicators gave none (rs_roles.basis),
                              said in a note; NULL or "": nothing to say */
} rs_compare_config;

void rs_compare_config_default(rs_compare_config *c);

typedef struct rs_compare_divergent {
    int32_t rank;
    int32_t role;                 /* its role (rs_compare_result.roles), -1 when not grouped */
    uint64_t peak_allocated;      /* what it is compared by (rs_summary_held): its peak
                                     allocated, plus its private pools' free bytes at that peak */
    uint64_t reference_peak;
    double divergence_pct;        /* (peak - median) / median * 100, signed */
    /* The private pools' part: by_pools when the rank's pools' free bytes at its peak, against
     * the reference's, make at least half the difference, in its direction. */
    int by_pools;
    int pools_graph;              /* its largest pool is named a CUDA graph's (pools.h) */
    uint64_t allocated;           /* its peak allocated (rs_summary_peak), and the reference's */
    uint64_t reference_allocated;
    uint64_t pools;               /* its private pools' reserved bytes at its peak, and the reference's */
    uint64_t reference_pools;
    int64_t first_divergent_step; /* offset: the step it appeared; growth: the step it started;
                                     -1 when the step series cannot tell */
    int growth;                   /* 1 growth (a significant per-step slope), 0 offset */
    double growth_per_step;       /* growth: bytes per step of the difference against the
                                     reference, in the direction of the divergence */
    double growth_t;              /* growth: the slope's t statistic against the residual noise */
    int64_t last_step;            /* the last step both series have, -1 without a series */
    uint64_t capacity;            /* the rank's memory limit, else its device's capacity; 0 unknown */
    int capacity_is_limit;        /* 1: `capacity` is the memory limit (RANKSNAP_MEMORY_LIMIT) */
    int64_t exhaust_step;         /* growth: the step at which its peak would reach `capacity`
                                     at its own rate, -1 when unknown */
    int64_t delta;                /* peak_allocated - reference_peak */
    int64_t unattributed;         /* delta minus the listed sites' deltas (smaller sites, blocks
                                     the history does not show) */
    size_t n_sites;
    rs_compare_site *sites;       /* site.bytes = delta against the reference, largest first */
} rs_compare_divergent;

typedef struct rs_compare_oom {
    int32_t rank;
    int32_t role;                 /* its role (rs_compare_result.roles), -1 when not grouped */
    uint64_t requested;
    int64_t step;
    uint64_t device_free, device_total, allocated, reserved, memory_limit;
    rs_compare_site site;         /* of the failing request */
    size_t n_live;
    rs_compare_site *live;        /* its largest live sites at the OOM */
} rs_compare_oom;

/* One role of a grouped comparison: its ranks' peaks and how near the fullest is to its limit. */
typedef struct rs_compare_role {
    char label[64];              /* e.g. "pp=0" */
    size_t n_ranks;              /* present, with data */
    uint64_t median_peak;
    uint64_t threshold;          /* bytes from its median beyond which a rank diverges */
    int32_t reference_rank;      /* its median rank, -1 when none */
    int32_t max_rank;            /* its fullest rank, -1 when none */
    uint64_t max_peak;
    uint64_t capacity;           /* of max_rank: its memory limit, else its device's; 0 unknown */
    int64_t headroom;            /* capacity - max_peak when capacity is known */
} rs_compare_role;

typedef struct rs_compare_result {
    int world_size;
    size_t n_ranks;              /* present */
    rs_summary *ranks;          /* copies, in rank order */
    rs_site *pools;              /* [n_ranks]: the largest private pool of each (pools.h), its
                                    function "" when it has none or only its summary was at hand */
    int32_t *rank_roles;         /* [n_ranks]: each one's role, NULL when ranks were not grouped */
    size_t n_missing;
    int32_t *missing;            /* ranks of [0, world_size) with no file or summary */
    size_t n_no_data;
    int32_t *no_data;            /* ranks present that recorded nothing (no allocation, no OOM):
                                    left out of the median and of the verdicts */
    int32_t reference_rank;      /* the median rank, -1 when none present */
    uint64_t median_peak;        /* of what ranks are compared by (rs_summary_held), over the
                                    ranks with data that did not OOM (all ranks with data when
                                    every one OOMed) */
    int by_held;                 /* a rank with data has private pools' free bytes at its peak:
                                    median_peak is not of allocated bytes alone */
    uint64_t mad;
    size_t n_oom;
    rs_compare_oom *oom;
    size_t n_divergent;
    rs_compare_divergent *divergent;    /* largest |divergence| first */
    size_t n_notes;
    char **notes;                /* e.g. "rank 3 snapshot is incomplete (crash path)" */
    double divergence_pct;       /* the configuration the verdicts used */
    uint64_t threshold;          /* bytes from the median beyond which a rank diverges */
    char grouping[320];          /* where the roles came from, "" when ranks were not grouped */
    char grouping_basis[512];    /* found roles: the communicators they came from and those left
                                    out (rs_roles.basis); "" for a declared grouping */
    char replicas[96];           /* the declared dimensions taken as the replicas ("dp"), or "" */
    size_t n_roles;              /* 0 when ranks were not grouped */
    rs_compare_role *roles;      /* in role order */
    int32_t nearest_role;        /* the role with the least headroom (of those with a known
                                    capacity), else the largest peak; -1 when none */
    /* What makes the heaviest role heavier than the lightest (by their median peaks): the
     * sites of the one's reference rank against the other's, largest first. -1: fewer than two
     * roles with data. */
    int32_t heavy_role, light_role;
    int64_t role_gap;            /* heavy's median peak - light's */
    size_t n_role_gap_sites;
    rs_compare_site *role_gap_sites;
    size_t n_shared;             /* devices more than one process used (shared_devices.h) */
    rs_shared_device *shared;
} rs_compare_result;

/* `full[i]` is the decoded snapshot of sums[i]'s rank or NULL. world_size 0 = the largest
 * world_size the summaries name. */
ranksnap_status rs_compare(const rs_summary *sums, const rs_snap *const *full, size_t n,
                            int world_size, const rs_compare_config *cfg, rs_compare_result **out);
/* rs_compare, where `sites[i]` (NULL, or NULL entries: none) are sums[i]'s rank's sites made with
 * its summary (rs_summary_of_sites): used instead of full[i]'s, which are then not made again. A
 * rank with either is compared site by site. */
ranksnap_status rs_compare_ex(const rs_summary *sums, const rs_snap *const *full,
                              const rs_summary_sites *const *sites, size_t n, int world_size,
                              const rs_compare_config *cfg, rs_compare_result **out);
void rs_compare_result_free(rs_compare_result *r);

/* Appends a note (printf format) for things the caller knows and the comparison does not, e.g. a
 * file that could not be read. */
#define rs_compare_add_note(r, ...) rs_notes_add(&(r)->notes, &(r)->n_notes, __VA_ARGS__)

#endif
