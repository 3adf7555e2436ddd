/*
 * timeline.h — one rank's memory over time, reduced to what a page can draw: the allocated and
 * reserved levels downsampled into buckets (min, max and last level per bucket), the step
 * markers, the recorded ranges, the peak and the OOM moment, and the largest live blocks at the
 * moment that explains the rank (its peak, or its OOM) with their stacks. report_html.c writes
 * it into report.html.
 *
 * A timeline is bounded whatever the history's length (at most `max_points` buckets, RSC_TL_*
 * for the rest), so that a page for many ranks of 100,000 events each stays a few MB. Times are
 * on rank 0's time base (the rank's clock_offset_us applied), in µs since the epoch.
 *
 * The levels come from the one history walk (collector/model/walk.h), as the summary's do, so the
 * page's peak is the report's and the curve ends exactly at the allocator's current value.
 */
#ifndef RANKSNAP_TIMELINE_H
#define RANKSNAP_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "sites.h"
#include "ranksnap.h"
#include "snapshot.h"

/* Buckets per rank when the caller has no better idea: about one per pixel column of a wide
 * screen. */
#define RS_TIMELINE_DEFAULT_POINTS 2000
/* Step markers kept per rank; a longer run keeps every k-th (the page marks boundaries, it is not
 * the place to count 100,000 steps). */
#define RS_TIMELINE_MAX_STEPS 4096
/* Largest live blocks kept at the moment, frames kept per stack, sites kept (with a stack each). */
#define RS_TIMELINE_MAX_LIVE 24
#define RS_TIMELINE_MAX_FRAMES 32
#define RS_TIMELINE_MAX_SITES 64
/* big_site of a bucket without an allocation. */
#define RS_TIMELINE_NO_SITE UINT32_MAX

/* A level downsampled: bucket index[i] (increasing), which began at time t[i] (its first event),
 * saw levels from lo[i] to hi[i] and ended at last[i]. Buckets without an event of this level are
 * left out: the level carries over from the previous one. */
typedef struct rs_timeline_series {
    size_t n;
    uint32_t *index;
    int64_t *t;
    uint64_t *lo, *hi, *last;
} rs_timeline_series;

typedef struct rs_timeline_frame {
    char *function;
    char *file;
    int32_t line;
} rs_timeline_frame;

typedef struct rs_timeline_stack {
    size_t n_frames;
    uint32_t *frames; /* indexes into rs_timeline.frames, innermost first */
} rs_timeline_stack;

typedef struct rs_timeline_block {
    uint64_t addr;
    uint64_t size;   /* as the allocator counts it (rounded) */
    uint32_t stack;  /* index into rs_timeline.stacks, RS_TIMELINE_NO_SITE for none */
    uint32_t site;   /* index into rs_timeline.site_names: the site the reports name */
} rs_timeline_block;

typedef struct rs_timeline {
    int32_t rank;
    int complete;
    uint64_t events, dropped;
    int64_t t_first, t_last;      /* first and last event, rank 0's time base; equal when empty */
    uint32_t n_buckets;           /* buckets used (timeline.c: by event count and by time) */
    uint64_t alloc_start, reserved_start; /* levels before the first event */
    rs_timeline_series alloc, reserved;
    /* per entry of `alloc`: the largest allocation in that bucket (requested bytes) and its site
     * (index into site_names), 0 / RS_TIMELINE_NO_SITE when the bucket only freed */
    uint64_t *big_size;
    uint32_t *big_site;
    size_t n_site_names;
    char **site_names;            /* the site's path, as the text report writes it (rs_site_path_format) */

    size_t n_steps;               /* step markers: step_no[i] began at step_t[i] */
    int64_t *step_t;
    int64_t *step_no;
    size_t n_ranges;              /* recorded ranges seen in the history, as time spans */
    int64_t *range_t0, *range_t1;
    int64_t *range_begin, *range_end; /* their step numbers, end -1 = open */

    int64_t peak_t;               /* first maximum of the replayed allocated level */
    uint64_t peak_bytes;
    int64_t peak_step;            /* -1 before any step */
    int oom;
    int64_t oom_t;                /* 0 when the file does not say when */
    uint64_t oom_requested;
    int64_t oom_step;

    int moment_is_oom;            /* live blocks and sites are at the OOM, not the peak */
    int64_t moment_t;
    size_t n_live;
    rs_timeline_block *live;           /* largest first */
    size_t n_stacks;
    rs_timeline_stack *stacks;
    size_t n_frames;
    rs_timeline_frame *frames;
    size_t n_sites;
    rs_site *sites;              /* live bytes by site at the moment (rs_site_list_at_peak) */
    rs_site_path *site_paths;    /* the path of each site */
    uint32_t *site_stack;        /* the stack (index into stacks) each path was taken from,
                                    RS_TIMELINE_NO_SITE for none */
} rs_timeline;

/* Builds the timeline of `s` with at most `max_points` buckets (0: RS_TIMELINE_DEFAULT_POINTS). On
 * success *out belongs to the caller (rs_timeline_free); on failure it is NULL and
 * ranksnap_last_error() names the rank. */
ranksnap_status rs_timeline_build(const rs_snap *s, uint32_t max_points, rs_timeline **out);
void rs_timeline_free(rs_timeline *t);

/* Buckets per rank for a page of `n_ranks` ranks: RS_TIMELINE_DEFAULT_POINTS up to 64 ranks, then
 * fewer, so that the page grows by about 128,000 buckets at most (never under 200 per rank). */
uint32_t rs_timeline_points_for(size_t n_ranks);

#endif
