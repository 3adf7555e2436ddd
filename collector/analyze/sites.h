/*
 * sites.h — allocation sites: the line of code a stack is charged to, and live bytes by site.
 *
 * A site is the innermost frame of a stack that is not ranksnap's own (and, for snapshots that
 * ask for it, not the framework's), keyed by function, file and line — never by pc or address —
 * so that sites match across ranks whose libraries were loaded at other addresses.
 */
#ifndef RANKSNAP_SITES_H
#define RANKSNAP_SITES_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "snapshot.h"
#include "walk.h"

#define RS_SITE_FUNC_LEN 64
#define RS_SITE_FILE_LEN 96

/* An allocation site: the innermost frame of a stack that is not ranksnap's own. */
typedef struct rs_site {
    char function[RS_SITE_FUNC_LEN]; /* "(no stack)" when the block had none */
    char file[RS_SITE_FILE_LEN];
    int32_t line;
    int32_t blocks;
    int64_t bytes; /* live bytes at the moment in question; a delta in rs_compare_divergent.sites */
} rs_site;

/* Live bytes by site at the snapshot's peak of allocated bytes (at its OOM when it has one),
 * largest first; *out is malloc'ed, the caller frees it. Blocks alive before the history began
 * count under their own stacks, or "(before recording)" when the history does not say. */
ranksnap_status rs_site_list_at_peak(const rs_snap *s, rs_site **out, size_t *n);

/* The same for a walk made already (rs_walk_init), which it moves to the moment. */
ranksnap_status rs_site_list_at_moment(rs_walk *w, rs_site **out, size_t *n);

/* Picks the sites of one snapshot's stacks: made once per snapshot, it knows the snapshot's
 * allocation wrappers (sites.c: a line that is the innermost frame of most stacks, reached from
 * several callers) and looks past them to the line that called them. */
typedef struct rs_site_picker {
    const rs_snap *s;
    uint8_t *wrapper; /* by frame index, 1 for a wrapper's frame; NULL when there is none */
} rs_site_picker;

ranksnap_status rs_site_picker_init(rs_site_picker *p, const rs_snap *s);
void rs_site_picker_free(rs_site_picker *p);
/* The site of stack id `stack` (0: "(no stack)"), bytes and blocks 0. */
void rs_site_pick(const rs_site_picker *p, uint32_t stack, rs_site *out);
/* The frame index rs_site_pick names the site after, -1 for no stack. */
int64_t rs_site_pick_frame(const rs_site_picker *p, uint32_t stack);
/* 1 when frame index `frame` is an allocation wrapper's. */
int rs_site_is_wrapper(const rs_site_picker *p, uint32_t frame);

/* rs_site_pick with a picker of its own, for one stack. */
void rs_site_of_stack(const rs_snap *s, uint32_t stack, rs_site *out);

/* 1 for a frame of ranksnap itself (ranksnap_*, rs_*, the __wrap_cuda* of ranksnap::wrap, or
 * any frame in libranksnap): sites are the innermost frame that is not. */
int rs_site_frame_is_ranksnaps(const rs_snap *s, const rs_snap_frame *f);

/* Sites are the same when function, file and line are; the order is by those three. */
int rs_site_same(const rs_site *a, const rs_site *b);
int rs_site_cmp(const rs_site *a, const rs_site *b);

#endif
