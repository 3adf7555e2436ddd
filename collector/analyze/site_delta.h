/*
 * site_delta.h — one rank's sites against another's: which lines hold more, which less, matched
 * by function, file and line (sites.h). What the comparison explains a divergent rank with
 * (compare.h) and what `ranksnap diff` explains a rank of one run against the same rank of
 * another with (diff.h): the same sites, the same names, the same order.
 */
#ifndef RANKSNAP_SITE_DELTA_H
#define RANKSNAP_SITE_DELTA_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "sites.h"
#include "snapshot.h"
#include "summary.h"

/* A site of a verdict: its name and where it sits (sites.h); the path is the site alone when
 * only a summary was at hand. */
typedef struct rs_compare_site {
    rs_site site;
    rs_site_path path;
} rs_compare_site;

/* One rank's sites and their paths (paths NULL: each site is its own path). */
typedef struct rs_site_delta_list {
    rs_site *own;            /* malloc'ed when they came from a full snapshot */
    rs_site_path *own_paths; /* the same */
    const rs_site *v;
    const rs_site_path *paths;
    size_t n;
} rs_site_delta_list;

/* The sites of the rank of `s`: in full at its peak (or OOM) when `sites` (made with its summary,
 * ok) or else `full` is at hand, its summary's top sites otherwise; a rank whose memory was seen
 * only outside the allocator (rs_summary_outside_only) by its outside sites. Freed with
 * rs_site_delta_list_free. */
ranksnap_status rs_site_delta_list_of(const rs_summary *s, const rs_snap *full,
                                      const rs_summary_sites *sites, rs_site_delta_list *l);
void rs_site_delta_list_free(rs_site_delta_list *l);

/* Entry i of a list, with its path. */
void rs_site_delta_entry(const rs_site_delta_list *l, size_t i, rs_compare_site *out);

/* a's sites minus b's, matched by function + file + line; site.bytes is the difference. Ordered
 * by the difference in the direction `sign` (+1: where a holds more), those in that direction
 * kept; when none are, the largest differences either way. *out is malloc'ed (the caller frees
 * it), *n (at most `max`) the entries to list. */
ranksnap_status rs_site_deltas(const rs_site_delta_list *a, const rs_site_delta_list *b, int sign,
                               size_t max, rs_compare_site **out, size_t *n);

#endif
