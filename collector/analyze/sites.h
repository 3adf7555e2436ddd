/*
 * sites.h — allocation sites: the line of code a stack is charged to, the short path that shows
 * where that line sits, and live bytes by site.
 *
 * A site is the user's line: the innermost frame of a stack that site_rules.h lets be one (not
 * ranksnap's, a runtime's or the framework's machinery), a Python frame before a C/C++ one, and
 * not an allocation wrapper (a helper most stacks pass through, found from the data). A stack
 * with no such frame (PyTorch's backward pass, a native stack that stays inside libtorch) is
 * named after the autograd node or the operator it runs. Sites are keyed by function, file and
 * line — never by pc or address — so that they match across ranks whose libraries were loaded at
 * other addresses.
 */
#ifndef RANKSNAP_SITES_H
#define RANKSNAP_SITES_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "site_rules.h"
#include "snapshot.h"
#include "walk.h"

#define RS_SITE_FUNC_LEN 64
#define RS_SITE_FILE_LEN 96
/* Frames of a site's path: the user's line, the site, the operator under it. */
#define RS_SITE_PATH_MAX 3

/* An allocation site. */
typedef struct rs_site {
    char function[RS_SITE_FUNC_LEN]; /* "(no stack)" when the block had none */
    char file[RS_SITE_FILE_LEN];
    int32_t line;
    int32_t blocks;
    int64_t bytes; /* live bytes at the moment in question; a delta in rs_compare_divergent.sites */
    int32_t held;  /* 1: bytes the rank held when its range began (history.held), a site of their
                    * own beside the same line's allocations in the range */
    int32_t held_step; /* with held: held since before this step, the range's first (int32: the
                        * summary of a rank must fit MPI's eager limit) */
} rs_site;

/* One frame of a path, named as a site is. */
typedef struct rs_site_frame {
    char function[RS_SITE_FUNC_LEN];
    char file[RS_SITE_FILE_LEN];
    int32_t line;
} rs_site_frame;

/* Where a site sits, outermost first: the user's own line when the site is in an installed
 * package ("train.py:47 → modeling_gpt2.py:212"), the site itself, and the operator it ran
 * ("→ aten::addmm") when the stack shows one. `at` is the site's index in `frames`; `stack` the
 * stack id the path was taken from (for a site of many stacks, the one with the most bytes), 0
 * when none. */
typedef struct rs_site_path {
    int32_t n;
    int32_t at;
    uint32_t stack;
    rs_site_frame frames[RS_SITE_PATH_MAX];
} rs_site_path;

/* Live bytes by site at the snapshot's peak of allocated bytes (at its OOM when it has one),
 * largest first; *out is malloc'ed, the caller frees it. Blocks alive before the history began
 * count under their own stacks, or "(before recording)" when the history does not say. With
 * `paths` not NULL, (*paths)[i] is the path of (*out)[i], malloc'ed too. */
ranksnap_status rs_site_list_at_peak(const rs_snap *s, rs_site **out, rs_site_path **paths, size_t *n);

/* The same for a walk made already (rs_walk_init), which it moves to the moment. */
ranksnap_status rs_site_list_at_moment(rs_walk *w, rs_site **out, rs_site_path **paths, size_t *n);

/* Picks the sites of one snapshot's stacks: made once per snapshot, it classifies every frame
 * (site_rules.h, under the rules of the moment), knows the snapshot's allocation wrappers (a line
 * that is the innermost candidate of most stacks, reached from several callers) and looks past
 * them to the line that called them. */
typedef struct rs_site_picker {
    const rs_snap *s;
    int all_frames;
    rs_site_rules_frame *info; /* by frame index; NULL without memory (sites are then the innermost
                            frame that is not ranksnap's, as recorded) */
    uint8_t *wrapper;    /* by frame index, 1 for a wrapper's frame; NULL when there is none */
} rs_site_picker;

/* Never fails: without memory the picker works without classification (see `info`). */
void rs_site_picker_init(rs_site_picker *p, const rs_snap *s);
void rs_site_picker_free(rs_site_picker *p);
/* The site of stack id `stack` (0: "(no stack)"), bytes and blocks 0. */
void rs_site_pick(const rs_site_picker *p, uint32_t stack, rs_site *out);
/* Its path; `path` may be NULL. */
void rs_site_pick_path(const rs_site_picker *p, uint32_t stack, rs_site *site, rs_site_path *path);
/* The frame index rs_site_pick names the site after, -1 for no stack. */
int64_t rs_site_pick_frame(const rs_site_picker *p, uint32_t stack);
/* 1 when frame index `frame` is an allocation wrapper's. */
int rs_site_is_wrapper(const rs_site_picker *p, uint32_t frame);
/* Frame `frame`'s function as the reports show it: demangled (C++), the recorded name otherwise. */
const char *rs_site_frame_function(const rs_site_picker *p, uint32_t frame);

/* rs_site_list_at_moment with the picker `pk`, made over the walk's snapshot (NULL: one of its
 * own), which it leaves as it is: one classification of the frames for several questions. */
ranksnap_status rs_site_list_at_moment_by(rs_walk *w, const rs_site_picker *pk, rs_site **out,
                                          rs_site_path **paths, size_t *n);

/* rs_site_pick with a picker of its own, for one stack. */
void rs_site_of_stack(const rs_snap *s, uint32_t stack, rs_site *out);

/* The path of a site known only by name (a summary's): the site alone. */
void rs_site_path_of_site(const rs_site *site, rs_site_path *out);

/* "function (file:line)" with the file as rs_site_rules_display_file shows it, "function" without a
 * file; a path is its frames so written, joined by " → ". Always NUL-terminated. */
void rs_site_format(const rs_site *s, char *buf, size_t n);
void rs_site_frame_format(const rs_site_frame *f, char *buf, size_t n);
void rs_site_path_format(const rs_site_path *p, char *buf, size_t n);

/* The step a snapshot's held bytes were held since before: its last range's first (the history
 * begins there), 0 when it names no range. */
int64_t rs_site_held_step(const rs_snap *s);
/* ", held since before step N" for a held site, "" otherwise. */
void rs_site_held_note(const rs_site *s, char *buf, size_t n);

/* Sites are the same when function, file, line and held are; the order is by those. */
int rs_site_same(const rs_site *a, const rs_site *b);
int rs_site_cmp(const rs_site *a, const rs_site *b);
/* How well a site names code: 0 a source line, 1 a name with no line (an autograd node, an
 * operator, a C function), 2 no stack at all. Lists of sites order bytes first, then this. */
int rs_site_naming(const rs_site *s);
/* The order of site lists: sites with a stack before those with none (bytes with no stack name
 * no code: they stay listed, after the rest), then more bytes, then the better name. */
int rs_site_cmp_listing(const rs_site *a, int64_t a_bytes, const rs_site *b, int64_t b_bytes);

#endif
