/*
 * diff.h — two runs of a job compared rank by rank and role by role (`ranksnap diff BEFORE
 * AFTER`): which ranks and roles grew or shrank, by how much, since which step, and the sites
 * that explain it, with the attribution and names of the comparison (site_delta.h, step_trend.h).
 *
 * The ranks are paired by what they are in their job, and the result says how (diff_pair.c): by
 * rank where both runs have the same ranks in the same roles; by role and replica index where
 * both found or were given the same roles (a pipeline stage against the same stage, so that 8
 * ranks before and 16 after still pair what is comparable; the replicas one run has more of stay
 * unpaired); by rank number where the roles differ or neither run has any and the sizes agree;
 * not at all otherwise, and then only the jobs as a whole are compared; one rank's file against
 * another's, as given. Each run's roles are compared by their key (roles.h) when both runs have
 * the same keys.
 *
 * Measures, for a rank: peak allocated (rs_summary_peak), peak reserved, outside memory at the
 * peak, fragmentation (reserved at the allocated peak minus the peak) and headroom (its memory
 * limit, else its device's capacity, minus its peak; unknown where neither is known, as in
 * PyTorch's pickles). For a role or the whole job: the largest of its ranks' (the smallest
 * headroom), and its median peak.
 */
#ifndef RANKSNAP_DIFF_H
#define RANKSNAP_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "roles.h"
#include "site_delta.h"
#include "step_trend.h"
#include "summary.h"

enum { RS_DIFF_BEFORE = 0, RS_DIFF_AFTER = 1 };

/* One run as the diff reads it. */
typedef struct rs_diff_run {
    const char *source;                   /* the operand it was read from, for the reports */
    size_t n;
    const rs_summary *sums;               /* [n], one per rank, in rank order */
    const rs_summary_sites *const *sites; /* NULL, or [n]: a rank's sites in full (NULL or not ok:
                                             its summary's top sites stand in) */
    int world_size;                       /* 0: the largest the summaries name */
    const rs_roles *roles;                /* NULL: none declared or found */
} rs_diff_run;

typedef struct rs_diff_config {
    double threshold_pct; /* a change beyond this share of the before value (and 1 MiB) is one */
    size_t max_sites;     /* sites listed per explanation, default 10 */
    size_t max_explained; /* changed ranks explained site by site, the largest first; default 16 */
} rs_diff_config;

void rs_diff_config_default(rs_diff_config *c);

/* One run's measures of a rank, or of a role or the job (the largest of its ranks'). */
typedef struct rs_diff_level {
    int32_t rank;           /* the rank; of a role or the job, the one with the largest peak */
    int has_data;           /* 0: a rank that recorded nothing (no allocation, no OOM) */
    uint64_t peak;          /* peak allocated (rs_summary_peak) */
    uint64_t reserved;      /* peak reserved */
    uint64_t outside;       /* outside the allocator at the peak */
    uint64_t fragmentation; /* reserved at the allocated peak minus the peak */
    int fragmentation_known; /* 0: a summary of the totals alone (summary.h), the moment of the
                                peak not known; a role's when every rank's is */
    uint64_t capacity;      /* memory limit, else the device's capacity; 0 unknown */
    int64_t headroom;       /* capacity - peak (the smallest of a role's), when capacity != 0 */
    int oom;                /* it (one of its ranks) ran out of memory */
} rs_diff_level;

/* A listed site: a site delta (after minus before) and how it changed. */
enum { RS_DIFF_SITE_GROWN = 0, RS_DIFF_SITE_SHRUNK, RS_DIFF_SITE_ADDED, RS_DIFF_SITE_REMOVED };
typedef struct rs_diff_site {
    rs_compare_site cs; /* cs.site.bytes: after's bytes at the site minus before's */
    int kind;           /* RS_DIFF_SITE_* */
} rs_diff_site;

/* Why a rank or a role changed: the sites, and the step the two runs part at. */
typedef struct rs_diff_why {
    int32_t rank[2];        /* the ranks explained (a role's: each run's median rank), -1 none */
    int sites_full;         /* the sites come from both ranks' sites in full, not their top ones */
    size_t n_sites;
    rs_diff_site *sites;    /* largest change in the direction of the change first */
    int64_t unattributed;   /* the change of the peak minus the listed sites' */
    int has_trend;          /* both ranks have steps in common */
    rs_step_trend trend;    /* after's per-step peaks against before's */
} rs_diff_why;

typedef struct rs_diff_pair {
    size_t at[2];           /* its ranks' places in rs_diff_result.ranks[side] */
    int32_t group;          /* its role in rs_diff_result.groups, -1 when roles are not compared */
    int32_t replica;        /* its index among its role's ranks, -1 when not paired by role */
    rs_diff_level side[2];
    int changed;            /* beyond the threshold on peak, reserved or outside */
    /* within each run: a growth against the rank's peers that the run's own comparison found
     * (compare.h; a leak that the other run's warm-up can hide from `why.trend`) */
    int peer_growth[2];
    double peer_growth_per_step[2];
    int64_t peer_growth_since[2];
    int as_its_role;        /* changed as its role's median did (the role's explanation holds) */
    int explained;          /* `why` was made */
    rs_diff_why why;
} rs_diff_pair;

typedef struct rs_diff_group {
    char key[64];           /* what pairs the role ("pp=2", "group 2"), "job" for the job */
    char label[2][64];      /* each run's label of it */
    size_t n_ranks[2];      /* with data */
    uint64_t median_peak[2];
    int32_t median_rank[2]; /* the rank nearest the median, -1 */
    rs_diff_level side[2];  /* the largest of its ranks' measures, the smallest headroom */
    int changed;            /* its median or largest peak, reserved or outside changed */
    int explained;
    rs_diff_why why;        /* the median ranks, after against before */
} rs_diff_group;

enum { RS_DIFF_BY_RANK = 0, RS_DIFF_BY_ROLE, RS_DIFF_BY_NUMBER, RS_DIFF_NOT_PAIRED };

typedef struct rs_diff_result {
    char source[2][256];
    int world[2];
    size_t n_ranks[2];
    rs_summary *ranks[2];   /* [n_ranks]: copies of each run's summaries, in rank order */
    int32_t *rank_role[2];  /* [n_ranks]: each rank's role in role_labels[side], -1 */
    size_t n_role_labels[2];
    char (*role_labels[2])[64]; /* each run's roles, as it labels them */
    int paired_by;          /* RS_DIFF_BY_* */
    char pairing[1536];     /* how the ranks were paired and on what, or why they were not */
    char roles_source[2][320]; /* where each run's roles came from, "" none */
    size_t n_pairs;
    rs_diff_pair *pairs;    /* in before's rank order */
    size_t n_unpaired[2];
    int32_t *unpaired[2];   /* ranks of each run with no counterpart */
    size_t n_groups;
    rs_diff_group *groups;  /* the roles both runs have, in before's role order */
    rs_diff_group job;      /* every rank of each run */
    double threshold_pct;
    size_t n_changed;       /* pairs changed */
    int64_t parting_step;   /* the earliest step a changed pair or role parts at, -1 unknown */
    size_t n_notes;
    char **notes;
} rs_diff_result;

/* Pairs the runs and compares them. Sites are taken from each run's `sites` where given. */
ranksnap_status rs_diff(const rs_diff_run *before, const rs_diff_run *after,
                        const rs_diff_config *cfg, rs_diff_result **out);
void rs_diff_result_free(rs_diff_result *r);

/* 1 when the explanations of `r` would use the sites in full of `rank` of run `side`: the ranks
 * of the changed pairs explained and the median ranks of the changed roles. */
int rs_diff_wants_sites(const rs_diff_result *r, int side, int32_t rank);

/* after's change from before in percent of before: +inf when before is 0 and after is not, 0
 * when both are. */
double rs_diff_pct(uint64_t before, uint64_t after);
/* after - before as a signed count of bytes, saturating. */
int64_t rs_diff_delta(uint64_t before, uint64_t after);

#endif
