/*
 * sites.c — sites.h: which line of code a stack is charged to, and live bytes by site at the
 * moment that explains a rank (its peak, or its OOM), from the one history walk (walk.h).
 */
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "sat.h"
#include "sites.h"
#include "text.h"
#include "walk.h"

int rs_site_frame_is_ranksnaps(const rs_snap *s, const rs_snap_frame *f)
{
    /* __wrap_cudaMalloc & co. are ranksnap's too, though linked into the program (ranksnap::wrap) */
    if (strncmp(f->function, "ranksnap_", 9) == 0 || strncmp(f->function, "rs_", 3) == 0 ||
        strncmp(f->function, "__wrap_cuda", 11) == 0)
        return 1;
    if (f->module >= 0 && (size_t)f->module < s->n_modules &&
        strstr(s->modules[f->module].path, "libranksnap"))
        return 1;
    return 0;
}

/* Frames of the framework rather than of the user's code, for snapshots that ask to skip them
 * (PyTorch's, whose stacks interleave C++ frames, torch's Python and the standard library with
 * the user's lines): C++ frames without a source file ("??"), torch and its C++ sources, the
 * Python standard library (lib/python3.X outside site-packages / dist-packages) and frozen
 * modules. Packages a user installed (transformers, ...) count as user code. */
static int framework_frame(const rs_snap_frame *f)
{
    const char *file = f->file;
    if (!file[0] || strcmp(file, "??") == 0) return 1;
    if (strstr(file, "/torch/") || strstr(file, "-packages/torch") || strstr(file, "/c10/") ||
        strstr(file, "/aten/src/") || strncmp(file, "<frozen", 7) == 0)
        return 1;
    const char *lib = strstr(file, "lib/python3");
    return lib && !strstr(lib, "-packages/");
}

/* Whether frame f may be a site at all: not ranksnap's own, and (for snapshots that ask) not the
 * framework's. */
static int eligible(const rs_snap *s, const rs_snap_frame *f)
{
    if (rs_site_frame_is_ranksnaps(s, f)) return 0;
    return !s->skip_framework_frames || !framework_frame(f);
}

/* Frame index of the site of stack `id`, -1 for no stack: the innermost eligible frame that is not
 * an allocation wrapper (`wrapper`, by frame index; NULL: none known). A stack whose eligible
 * frames are all wrappers keeps its innermost one. A stack made only of ranksnap's own frames
 * (cut short by RANKSNAP_STACK_DEPTH) falls back to its outermost frame, the one nearest the
 * application. With skip_framework_frames, a stack with no user frame falls back to its innermost
 * frame with a source file (a torch Python line says more than a C++ "??"), then to its innermost
 * frame that is not ranksnap's. */
static int64_t site_frame(const rs_snap *s, const uint8_t *wrapper, uint32_t id)
{
    if (id == 0 || id > s->n_stacks) return -1;
    const rs_snap_stack *st = &s->stacks[id - 1];
    if (st->n_frames == 0) return -1;
    int64_t first = -1, with_file = -1, other = -1;
    for (size_t i = 0; i < st->n_frames; i++) {
        uint32_t fi = st->frames[i];
        const rs_snap_frame *f = &s->frames[fi];
        if (rs_site_frame_is_ranksnaps(s, f)) continue;
        if (eligible(s, f)) {
            if (!wrapper || !wrapper[fi]) return fi;
            if (first < 0) first = fi;
            continue;
        }
        if (other < 0) other = fi;
        if (with_file < 0 && f->file[0] && strcmp(f->file, "??") != 0) with_file = fi;
    }
    if (first >= 0) return first;
    if (with_file >= 0) return with_file;
    if (other >= 0) return other;
    return st->frames[st->n_frames - 1];
}

/* ---- allocation wrappers --------------------------------------------------------------------
 * Real programs allocate through helpers (alloc_buffer(), a checked cudaMalloc wrapper, a
 * framework's empty()), and an optimising compiler may fold every allocation call into one inlined
 * helper. Such a helper is the innermost frame of most stacks but tells nothing: the line that
 * explains the memory is its caller's. It is found from the data, not from a list of names: a
 * line (function, file, line) that is the innermost eligible frame of at least half the stacks
 * (and of three at least: two stacks are no evidence) and is reached from at least two different
 * caller lines. Its frames are then looked past, and
 * the search repeats (a wrapper of a wrapper) a few times. */

#define WRAPPER_ROUNDS 4

/* canon[i]: the first frame index with frame i's function, file and line. */
static uint32_t *canonical_frames(const rs_snap *s)
{
    size_t n = s->n_frames, cap = 16;
    while (cap < 2 * n) cap <<= 1;
    uint32_t *canon = malloc((n ? n : 1) * sizeof *canon);
    uint32_t *table = malloc(cap * sizeof *table);
    if (!canon || !table) {
        free(canon);
        free(table);
        return NULL;
    }
    memset(table, 0xff, cap * sizeof *table);
    for (size_t i = 0; i < n; i++) {
        const rs_snap_frame *f = &s->frames[i];
        uint64_t h = 1469598103934665603ull ^ (uint64_t)(uint32_t)f->line;
        for (const char *c = f->function; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
        h = (h ^ 0xff) * 1099511628211ull;
        for (const char *c = f->file; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
        size_t k = (size_t)(h ^ (h >> 29)) & (cap - 1);
        for (;;) {
            uint32_t j = table[k];
            if (j == UINT32_MAX) {
                table[k] = (uint32_t)i;
                canon[i] = (uint32_t)i;
                break;
            }
            const rs_snap_frame *g = &s->frames[j];
            if (g->line == f->line && !strcmp(g->function, f->function) && !strcmp(g->file, f->file)) {
                canon[i] = j;
                break;
            }
            k = (k + 1) & (cap - 1);
        }
    }
    free(table);
    return canon;
}

/* Marks, by frame index, the frames of allocation wrappers; NULL when there is no memory (sites are
 * then the plain innermost eligible frames). */
static uint8_t *find_wrappers(const rs_snap *s)
{
    size_t n = s->n_frames;
    if (n == 0 || s->n_stacks < 2) return NULL;
    uint32_t *canon = canonical_frames(s);
    uint8_t *wrap = calloc(n, 1), *multi = malloc(n);
    uint32_t *count = malloc(n * sizeof *count), *caller = malloc(n * sizeof *caller);
    int any = 0;
    if (!canon || !wrap || !multi || !count || !caller) goto done;
    for (int round = 0; round < WRAPPER_ROUNDS; round++) {
        memset(count, 0, n * sizeof *count);
        memset(caller, 0xff, n * sizeof *caller);
        memset(multi, 0, n);
        uint64_t total = 0;
        for (size_t id = 0; id < s->n_stacks; id++) {
            const rs_snap_stack *st = &s->stacks[id];
            int64_t c0 = -1, c1 = -1;
            for (size_t i = 0; i < st->n_frames && c1 < 0; i++) {
                uint32_t fi = st->frames[i];
                if (!eligible(s, &s->frames[fi]) || wrap[canon[fi]]) continue;
                if (c0 < 0)
                    c0 = canon[fi];
                else if (canon[fi] != c0)
                    c1 = canon[fi];
            }
            if (c0 < 0) continue;
            total++;
            count[c0]++;
            if (c1 < 0) continue;
            if (caller[c0] == UINT32_MAX)
                caller[c0] = (uint32_t)c1;
            else if (caller[c0] != (uint32_t)c1)
                multi[c0] = 1;
        }
        int found = 0;
        for (size_t k = 0; k < n; k++)
            if (multi[k] && count[k] >= 3 && 2 * (uint64_t)count[k] >= total) wrap[k] = found = 1;
        if (!found) break;
        any = 1;
    }
    /* from canonical frames to every frame of the same line */
    for (size_t i = 0; any && i < n; i++) wrap[i] = wrap[canon[i]];
done:
    free(canon);
    free(multi);
    free(count);
    free(caller);
    if (!any) {
        free(wrap);
        return NULL;
    }
    return wrap;
}

ranksnap_status rs_site_picker_init(rs_site_picker *p, const rs_snap *s)
{
    p->s = s;
    p->wrapper = find_wrappers(s);
    return RANKSNAP_OK;
}

void rs_site_picker_free(rs_site_picker *p)
{
    free(p->wrapper);
    p->wrapper = NULL;
}

int rs_site_is_wrapper(const rs_site_picker *p, uint32_t frame)
{
    return p->wrapper && frame < p->s->n_frames && p->wrapper[frame];
}

static void site_from_frame(const rs_snap *s, int64_t frame, rs_site *out)
{
    memset(out, 0, sizeof *out);
    if (frame < 0) {
        rs_text_copy_head(out->function, sizeof out->function, "(no stack)");
        return;
    }
    const rs_snap_frame *f = &s->frames[frame];
    rs_text_copy_head(out->function, sizeof out->function, f->function);
    /* An unresolved frame is at least "?? in libnccl.so.2": the module is the same on every
     * rank, its pc is not. */
    const char *file = f->file;
    if (strcmp(f->function, "??") == 0 && strcmp(f->file, "??") == 0 && f->module >= 0 &&
        (size_t)f->module < s->n_modules && s->modules[f->module].path[0])
        file = rs_text_basename(s->modules[f->module].path);
    rs_text_copy_tail(out->file, sizeof out->file, file);
    out->line = f->line;
}

int rs_site_same(const rs_site *a, const rs_site *b)
{
    return a->line == b->line && strcmp(a->function, b->function) == 0 &&
           strcmp(a->file, b->file) == 0;
}

int rs_site_cmp(const rs_site *a, const rs_site *b)
{
    int c = strcmp(a->function, b->function);
    if (c) return c;
    c = strcmp(a->file, b->file);
    if (c) return c;
    return (a->line > b->line) - (a->line < b->line);
}

static int cmp_key(const void *pa, const void *pb)
{
    return rs_site_cmp(pa, pb);
}

static int cmp_bytes_desc(const void *pa, const void *pb)
{
    const rs_site *a = pa, *b = pb;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    return rs_site_cmp(a, b);
}

int64_t rs_site_pick_frame(const rs_site_picker *p, uint32_t stack)
{
    return site_frame(p->s, p->wrapper, stack);
}

void rs_site_pick(const rs_site_picker *p, uint32_t stack, rs_site *out)
{
    site_from_frame(p->s, site_frame(p->s, p->wrapper, stack), out);
}

void rs_site_of_stack(const rs_snap *s, uint32_t stack, rs_site *out)
{
    rs_site_picker p;
    rs_site_picker_init(&p, s);
    rs_site_pick(&p, stack, out);
    rs_site_picker_free(&p);
}

/* Per-frame byte counters, turned into merged, sorted sites. Index n_frames is "(no stack)",
 * n_frames + 1 "(before recording)". */
typedef struct tally {
    const rs_snap *s;
    int64_t *frame_of_stack; /* [n_stacks + 1] */
    uint64_t *bytes;
    uint64_t *blocks;
} tally;

static ranksnap_status tally_init(tally *t, const rs_snap *s)
{
    memset(t, 0, sizeof *t);
    t->s = s;
    t->frame_of_stack = malloc((s->n_stacks + 1) * sizeof *t->frame_of_stack);
    t->bytes = calloc(s->n_frames + 2, sizeof *t->bytes);
    t->blocks = calloc(s->n_frames + 2, sizeof *t->blocks);
    if (!t->frame_of_stack || !t->bytes || !t->blocks) {
        free(t->frame_of_stack);
        free(t->bytes);
        free(t->blocks);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY,
                        "rank %d: no memory to tally %zu frames of %zu stacks", s->rank,
                        s->n_frames, s->n_stacks);
    }
    rs_site_picker p;
    rs_site_picker_init(&p, s);
    for (size_t i = 0; i <= s->n_stacks; i++) t->frame_of_stack[i] = site_frame(s, p.wrapper, (uint32_t)i);
    rs_site_picker_free(&p);
    return RANKSNAP_OK;
}

static void tally_add(tally *t, uint32_t stack, uint64_t bytes)
{
    size_t i;
    if (stack == RS_WALK_STACK_BEFORE)
        i = t->s->n_frames + 1;
    else if (stack > t->s->n_stacks || t->frame_of_stack[stack] < 0)
        i = t->s->n_frames;
    else
        i = (size_t)t->frame_of_stack[stack];
    t->bytes[i] = rs_sat_add_u64(t->bytes[i], bytes);
    t->blocks[i]++;
}

/* Consumes the tally. */
static ranksnap_status tally_finish(tally *t, rs_site **out, size_t *n_out)
{
    const rs_snap *s = t->s;
    size_t n = 0;
    for (size_t i = 0; i < s->n_frames + 2; i++)
        if (t->blocks[i]) n++;
    rs_site *v = calloc(n ? n : 1, sizeof *v);
    if (!v) {
        free(t->frame_of_stack);
        free(t->bytes);
        free(t->blocks);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rank %d: no memory for %zu sites", s->rank, n);
    }
    n = 0;
    for (size_t i = 0; i < s->n_frames + 2; i++) {
        if (!t->blocks[i]) continue;
        if (i == s->n_frames + 1) {
            memset(&v[n], 0, sizeof v[n]);
            rs_text_copy_head(v[n].function, sizeof v[n].function, "(before recording)");
        } else {
            site_from_frame(s, i == s->n_frames ? -1 : (int64_t)i, &v[n]);
        }
        v[n].bytes = rs_sat_i64(t->bytes[i]);
        v[n].blocks = t->blocks[i] > INT32_MAX ? INT32_MAX : (int32_t)t->blocks[i];
        n++;
    }
    free(t->frame_of_stack);
    free(t->bytes);
    free(t->blocks);
    /* Two pcs on one source line are one site. */
    qsort(v, n, sizeof *v, cmp_key);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && rs_site_same(&v[m - 1], &v[i])) {
            v[m - 1].bytes = rs_sat_add_i64(v[m - 1].bytes, v[i].bytes);
            v[m - 1].blocks = v[m - 1].blocks > INT32_MAX - v[i].blocks
                                  ? INT32_MAX
                                  : v[m - 1].blocks + v[i].blocks;
        } else {
            v[m++] = v[i];
        }
    }
    qsort(v, m, sizeof *v, cmp_bytes_desc);
    *out = v;
    *n_out = m;
    return RANKSNAP_OK;
}

/* Live bytes by site after walking to `moment` (RS_WALK_END: the state at the end, whose blocks
 * are exact). */
static ranksnap_status sites_at(rs_walk *w, int64_t moment, rs_site **out, size_t *n)
{
    const rs_snap *s = w->s;
    tally t;
    RS_CHECK(tally_init(&t, s));
    if (moment == RS_WALK_END) {
        for (size_t i = 0; i < s->n_segments; i++)
            for (size_t k = 0; k < s->segments[i].n_blocks; k++) {
                const rs_snap_block *b = &s->segments[i].blocks[k];
                if (b->state == RS_BLOCK_ACTIVE_ALLOCATED) tally_add(&t, b->stack, b->size);
            }
    } else {
        rs_walk_to(w, moment);
        size_t it = 0;
        for (rs_walk_block *b; (b = rs_walk_next_live(w, &it));) tally_add(&t, b->stack, b->size);
    }
    return tally_finish(&t, out, n);
}

ranksnap_status rs_site_list_at_moment(rs_walk *w, rs_site **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    return sites_at(w, rs_walk_moment(w), out, n);
}

ranksnap_status rs_site_list_at_peak(const rs_snap *s, rs_site **out, size_t *n)
{
    if (!s || !out || !n)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_site_list_at_peak: NULL argument");
    *out = NULL;
    *n = 0;
    rs_walk w;
    RS_CHECK(rs_walk_init(&w, s));
    ranksnap_status st = rs_site_list_at_moment(&w, out, n);
    rs_walk_free(&w);
    return st;
}
