/*
 * sites.c — sites.h: which line of code a stack is charged to, the path around it, and live
 * bytes by site at the moment that explains a rank (its peak, or its OOM), from the one history
 * walk (walk.h).
 *
 * Every frame of the snapshot is classified once (site_rules.c). A stack's site is then, in this
 * order: its innermost Python frame that may be a site; else its innermost C/C++ frame that may
 * be one; in both cases looking past allocation wrappers (below). A stack with neither (PyTorch's
 * backward pass, which runs on the autograd engine's threads with no Python frame; a native stack
 * that never leaves libtorch) is named after its innermost autograd node ("AddmmBackward0"), else
 * its outermost operator ("aten::addmm", the one the user's code called). A stack with none of
 * these falls back to its innermost Python frame, its innermost frame with a source file, its
 * innermost frame that is not ranksnap's, and at last its outermost frame.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "addr_hash.h"
#include "errors.h"
#include "sat.h"
#include "site_rules.h"
#include "sites.h"
#include "text.h"
#include "walk.h"

/* ---- the choice -------------------------------------------------------------------------------- */

/* Frame indexes of a stack's site, of the user's line above it and of the operator under it
 * (-1: none); `pos` is the site's position in the stack. */
typedef struct choice {
    int64_t site, user, under;
    size_t pos;
} choice;

static int own_frame(const rs_site_picker *p, uint32_t fi)
{
    return p->info ? p->info[fi].kind == RS_SITE_FRAME_OWN : rs_site_rules_is_ranksnaps(p->s, &p->s->frames[fi]);
}

/* A site named by what the frame stands for (its autograd node or operator) rather than by the
 * frame: only for frames that could not be a site themselves. */
static int labelled(const rs_site_picker *p, uint32_t fi)
{
    return p->info && !p->all_frames && p->info[fi].label && p->info[fi].kind == RS_SITE_FRAME_SKIPPED;
}

/* The kind of frame a stack's site comes from: Python when it has a Python frame that may be
 * one (Python frames beat C/C++ frames), else C/C++. */
static int candidate_kind(const rs_site_picker *p, const rs_snap_stack *st)
{
    for (size_t i = 0; i < st->n_frames; i++)
        if (p->info[st->frames[i]].kind == RS_SITE_FRAME_PYTHON) return RS_SITE_FRAME_PYTHON;
    return RS_SITE_FRAME_NATIVE;
}

/* When nothing else names the stack: its innermost Python frame (a torch line says more than a
 * C++ "??"), its innermost frame with a source file, its innermost frame that is not ranksnap's,
 * its outermost frame. */
static void fallback(const rs_site_picker *p, const rs_snap_stack *st, choice *c)
{
    int64_t py = -1, with_file = -1, other = -1;
    size_t py_pos = 0, file_pos = 0, other_pos = 0;
    for (size_t i = 0; i < st->n_frames; i++) {
        uint32_t fi = st->frames[i];
        const rs_snap_frame *f = &p->s->frames[fi];
        if (own_frame(p, fi)) continue;
        if (other < 0) other = fi, other_pos = i;
        if (py < 0 && p->info && p->info[fi].python) py = fi, py_pos = i;
        if (with_file < 0 && f->file[0] && strcmp(f->file, "??") != 0) with_file = fi, file_pos = i;
    }
    if (py >= 0)
        c->site = py, c->pos = py_pos;
    else if (with_file >= 0)
        c->site = with_file, c->pos = file_pos;
    else if (other >= 0)
        c->site = other, c->pos = other_pos;
    else
        c->site = st->frames[st->n_frames - 1], c->pos = st->n_frames - 1;
}

static void choose(const rs_site_picker *p, uint32_t id, choice *c)
{
    c->site = c->user = c->under = -1;
    c->pos = 0;
    const rs_snap *s = p->s;
    if (id == 0 || id > s->n_stacks) return;
    const rs_snap_stack *st = &s->stacks[id - 1];
    if (st->n_frames == 0) return;
    if (!p->info || p->all_frames) {
        for (size_t i = 0; i < st->n_frames && c->site < 0; i++)
            if (!own_frame(p, st->frames[i])) c->site = st->frames[i], c->pos = i;
        /* a stack of ranksnap's frames only (cut short by RANKSNAP_STACK_DEPTH): the frame
         * nearest the application */
        if (c->site < 0) c->site = st->frames[st->n_frames - 1], c->pos = st->n_frames - 1;
        return;
    }
    const rs_site_rules_frame *info = p->info;
    int kind = candidate_kind(p, st);
    int64_t first = -1;
    size_t first_pos = 0;
    for (size_t i = 0; i < st->n_frames; i++) {
        uint32_t fi = st->frames[i];
        if (info[fi].kind != kind) continue;
        if (!p->wrapper || !p->wrapper[fi]) {
            c->site = fi, c->pos = i;
            break;
        }
        if (first < 0) first = fi, first_pos = i;
    }
    /* every candidate is a wrapper's: the innermost one */
    if (c->site < 0 && first >= 0) c->site = first, c->pos = first_pos;
    if (c->site < 0) {
        int64_t node = -1, op = -1;
        size_t node_pos = 0, op_pos = 0;
        for (size_t i = 0; i < st->n_frames; i++) {
            uint32_t fi = st->frames[i];
            if (!labelled(p, fi)) continue;
            if (info[fi].label_kind == RS_SITE_LABEL_NODE && node < 0) node = fi, node_pos = i;
            if (info[fi].label_kind == RS_SITE_LABEL_OP) op = fi, op_pos = i;
        }
        if (node >= 0)
            c->site = node, c->pos = node_pos;
        else if (op >= 0)
            c->site = op, c->pos = op_pos;
    }
    if (c->site < 0) {
        fallback(p, st, c);
        return;
    }
    /* the user's own line above a line of an installed package (a model library's) */
    if (info[c->site].python && info[c->site].installed)
        for (size_t i = c->pos + 1; i < st->n_frames && c->user < 0; i++) {
            uint32_t fi = st->frames[i];
            if (info[fi].kind == RS_SITE_FRAME_PYTHON && !info[fi].installed) c->user = fi;
        }
    /* the operator the site ran: the outermost one inside it */
    if (!(labelled(p, (uint32_t)c->site) && info[c->site].label_kind == RS_SITE_LABEL_OP))
        for (size_t i = c->pos; i > 0 && c->under < 0; i--) {
            uint32_t fi = st->frames[i - 1];
            if (labelled(p, fi) && info[fi].label_kind == RS_SITE_LABEL_OP) c->under = fi;
        }
}

/* ---- allocation wrappers --------------------------------------------------------------------
 * Real programs allocate through helpers (alloc_buffer(), a checked cudaMalloc wrapper, a
 * framework's empty()), and an optimising compiler may fold every allocation call into one inlined
 * helper. Such a helper is the innermost candidate frame of most stacks but tells nothing: the
 * line that explains the memory is its caller's. It is found from the data, not from a list of
 * names: a line (function, file, line) that is the innermost candidate of at least half the
 * stacks (and of three at least: two stacks are no evidence) and is reached from at least two
 * different caller lines. Its frames are then looked past, and the search repeats (a wrapper of a
 * wrapper) a few times. Candidates are the frames a stack's site is taken from (Python ones when
 * the stack has any), so a wrapper is found among the frames it hides. */

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
    const uint64_t seed = rs_addr_hash_seed();
    for (size_t i = 0; i < n; i++) {
        const rs_snap_frame *f = &s->frames[i];
        /* the names' hash the decoder made (seeded, as every table keyed by a file's names:
         * addr_hash.h), with the line */
        uint64_t h = rs_addr_hash(rs_snap_frame_text_hash_of(f) ^ (uint64_t)(uint32_t)f->line, seed);
        size_t k = (size_t)h & (cap - 1);
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

/* Marks, by frame index, the frames of allocation wrappers; NULL when there is none or no memory
 * (sites are then the plain innermost candidates). */
static uint8_t *find_wrappers(const rs_site_picker *p)
{
    const rs_snap *s = p->s;
    size_t n = s->n_frames;
    if (n == 0 || s->n_stacks < 2 || !p->info) return NULL;
    uint32_t *canon = canonical_frames(s);
    uint8_t *wrap = calloc(n, 1), *multi = malloc(n), *kind = malloc(s->n_stacks);
    uint32_t *count = malloc(n * sizeof *count), *caller = malloc(n * sizeof *caller);
    int any = 0;
    if (!canon || !wrap || !multi || !kind || !count || !caller) goto done;
    for (size_t id = 0; id < s->n_stacks; id++) kind[id] = (uint8_t)candidate_kind(p, &s->stacks[id]);
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
                if (p->info[fi].kind != kind[id] || wrap[canon[fi]]) continue;
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
    free(kind);
    free(count);
    free(caller);
    if (!any) {
        free(wrap);
        return NULL;
    }
    return wrap;
}

/* ---- the picker ---------------------------------------------------------------------------------- */

void rs_site_picker_init(rs_site_picker *p, const rs_snap *s)
{
    p->s = s;
    p->all_frames = rs_site_rules_all_frames();
    p->wrapper = NULL;
    p->info = calloc(s->n_frames ? s->n_frames : 1, sizeof *p->info);
    if (!p->info) return;
    for (size_t i = 0; i < s->n_frames; i++) rs_site_rules_classify(s, (uint32_t)i, &p->info[i]);
    if (!p->all_frames) p->wrapper = find_wrappers(p);
}

void rs_site_picker_free(rs_site_picker *p)
{
    if (p->info)
        for (size_t i = 0; i < p->s->n_frames; i++) rs_site_rules_frame_free(&p->info[i]);
    free(p->info);
    free(p->wrapper);
    p->info = NULL;
    p->wrapper = NULL;
}

int rs_site_is_wrapper(const rs_site_picker *p, uint32_t frame)
{
    return p->wrapper && frame < p->s->n_frames && p->wrapper[frame];
}

const char *rs_site_frame_function(const rs_site_picker *p, uint32_t frame)
{
    if (p->info && p->info[frame].name) return p->info[frame].name;
    return p->s->frames[frame].function;
}

/* Frame `fi` named as the reports name a site: its label when it stands for a node or an
 * operator; else its function (demangled, cut to fit by leaving out arguments first) and file
 * (an unresolved frame is at least "?? in libnccl.so.2": the module is the same on every rank,
 * its pc is not). */
static void name_frame(const rs_site_picker *p, int64_t fi, rs_site_frame *out)
{
    memset(out, 0, sizeof *out);
    if (fi < 0) {
        rs_text_copy_head(out->function, sizeof out->function, "(no stack)");
        return;
    }
    const rs_snap *s = p->s;
    const rs_snap_frame *f = &s->frames[fi];
    if (labelled(p, (uint32_t)fi)) {
        rs_text_copy_head(out->function, sizeof out->function, p->info[fi].label);
        return;
    }
    /* a name the PyTorch glue gave ("optimizer state exp_avg of ... (allocated before step 2)"),
     * not a symbol: its words are kept, never shortened as a C++ signature */
    const char *paren = f->file[0] ? NULL : strstr(f->function, " (");
    if (paren) {
        /* too long for a site: the name without its parenthesis, cut at the end if need be */
        size_t len = strlen(f->function) < sizeof out->function ? strlen(f->function)
                                                                  : (size_t)(paren - f->function);
        char buf[sizeof out->function];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), f->function);
        rs_text_copy_head(out->function, sizeof out->function, buf);
        return;
    }
    rs_demangle_short(rs_site_frame_function(p, (uint32_t)fi), out->function, sizeof out->function);
    const char *file = f->file;
    if (strcmp(f->function, "??") == 0 && strcmp(f->file, "??") == 0 && f->module >= 0 &&
        (size_t)f->module < s->n_modules && s->modules[f->module].path[0])
        file = rs_text_basename(s->modules[f->module].path);
    rs_text_copy_tail(out->file, sizeof out->file, file);
    out->line = f->line;
}

static void site_of_frame(const rs_site_picker *p, int64_t fi, rs_site *out)
{
    rs_site_frame f;
    name_frame(p, fi, &f);
    memset(out, 0, sizeof *out);
    memcpy(out->function, f.function, sizeof out->function);
    memcpy(out->file, f.file, sizeof out->file);
    out->line = f.line;
}

static void path_of_choice(const rs_site_picker *p, uint32_t stack, const choice *c, rs_site_path *out)
{
    memset(out, 0, sizeof *out);
    out->stack = c->site >= 0 ? stack : 0;
    if (c->user >= 0) name_frame(p, c->user, &out->frames[out->n++]);
    out->at = out->n;
    name_frame(p, c->site, &out->frames[out->n++]);
    if (c->under >= 0) name_frame(p, c->under, &out->frames[out->n++]);
}

int64_t rs_site_pick_frame(const rs_site_picker *p, uint32_t stack)
{
    choice c;
    choose(p, stack, &c);
    return c.site;
}

void rs_site_pick(const rs_site_picker *p, uint32_t stack, rs_site *out)
{
    site_of_frame(p, rs_site_pick_frame(p, stack), out);
}

void rs_site_pick_path(const rs_site_picker *p, uint32_t stack, rs_site *site, rs_site_path *path)
{
    choice c;
    choose(p, stack, &c);
    site_of_frame(p, c.site, site);
    if (path) path_of_choice(p, stack, &c, path);
}

void rs_site_of_stack(const rs_snap *s, uint32_t stack, rs_site *out)
{
    rs_site_picker p;
    rs_site_picker_init(&p, s);
    rs_site_pick(&p, stack, out);
    rs_site_picker_free(&p);
}

void rs_site_path_of_site(const rs_site *site, rs_site_path *out)
{
    memset(out, 0, sizeof *out);
    out->n = 1;
    memcpy(out->frames[0].function, site->function, sizeof out->frames[0].function);
    memcpy(out->frames[0].file, site->file, sizeof out->frames[0].file);
    out->frames[0].line = site->line;
}

/* ---- names for people ---------------------------------------------------------------------------- */

static void format_parts(const char *function, const char *file, int32_t line, char *buf, size_t n)
{
    if (!file[0] || strcmp(file, "??") == 0)
        snprintf(buf, n, "%s", function);
    else if (line > 0)
        snprintf(buf, n, "%s (%s:%d)", function, rs_site_rules_display_file(file), (int)line);
    else
        snprintf(buf, n, "%s (%s)", function, rs_site_rules_display_file(file));
}

void rs_site_format(const rs_site *s, char *buf, size_t n)
{
    format_parts(s->function, s->file, s->line, buf, n);
}

void rs_site_frame_format(const rs_site_frame *f, char *buf, size_t n)
{
    format_parts(f->function, f->file, f->line, buf, n);
}

void rs_site_path_format(const rs_site_path *p, char *buf, size_t n)
{
    if (n == 0) return;
    buf[0] = '\0';
    size_t used = 0;
    for (int32_t i = 0; i < p->n && i < RS_SITE_PATH_MAX && used + 1 < n; i++) {
        if (i) {
            snprintf(buf + used, n - used, " \xe2\x86\x92 ");
            used += strlen(buf + used);
        }
        rs_site_frame_format(&p->frames[i], buf + used, n - used);
        used += strlen(buf + used);
    }
}

int64_t rs_site_held_step(const rs_snap *s)
{
    const rs_snap_time *t = &s->time;
    int64_t b = t->n_ranges > 0 ? t->ranges[t->n_ranges - 1].begin : 0;
    return b < 0 ? 0 : b > INT32_MAX ? INT32_MAX : b;
}

void rs_site_held_note(const rs_site *s, char *buf, size_t n)
{
    if (n == 0) return;
    if (s->held)
        snprintf(buf, n, ", held since before step %lld", (long long)s->held_step);
    else
        buf[0] = '\0';
}

int rs_site_same(const rs_site *a, const rs_site *b)
{
    return a->line == b->line && a->held == b->held && strcmp(a->function, b->function) == 0 &&
           strcmp(a->file, b->file) == 0;
}

int rs_site_cmp(const rs_site *a, const rs_site *b)
{
    int c = strcmp(a->function, b->function);
    if (c) return c;
    c = strcmp(a->file, b->file);
    if (c) return c;
    if (a->line != b->line) return (a->line > b->line) - (a->line < b->line);
    return (a->held > b->held) - (a->held < b->held);
}

int rs_site_naming(const rs_site *s)
{
    if (s->line > 0 && s->file[0]) return 0;
    return strcmp(s->function, "(no stack)") == 0 && !s->file[0] ? 2 : 1;
}

int rs_site_cmp_listing(const rs_site *a, int64_t a_bytes, const rs_site *b, int64_t b_bytes)
{
    int na = rs_site_naming(a), nb = rs_site_naming(b);
    if ((na == 2) != (nb == 2)) return na == 2 ? 1 : -1;
    if (a_bytes != b_bytes) return a_bytes > b_bytes ? -1 : 1;
    if (na != nb) return na < nb ? -1 : 1;
    return rs_site_cmp(a, b);
}

/* ---- live bytes by site ------------------------------------------------------------------------- */

/* A site being summed: its frame's bytes and blocks, and the stack that brought it the most
 * bytes (its path is the site's). */
typedef struct entry {
    rs_site site;
    uint32_t stack;
    uint64_t stack_bytes;
} entry;

/* Per-frame counters, turned into merged, sorted sites. Index n_frames is "(no stack)",
 * n_frames + 1 "(before recording)"; the held bytes (RS_WALK_HELD) count at the same index plus
 * n_frames + 2. */
typedef struct tally {
    const rs_site_picker *pk; /* `own`, or the caller's */
    rs_site_picker own;
    int64_t *frame_of_stack; /* [n_stacks + 1] */
    uint64_t *bytes, *blocks;
    uint32_t *best_stack;    /* by frame: the stack with the most bytes so far */
    uint64_t *best_bytes;
    uint64_t *stack_bytes;   /* by stack id */
} tally;

static void tally_free(tally *t)
{
    if (t->pk == &t->own) rs_site_picker_free(&t->own);
    free(t->frame_of_stack);
    free(t->bytes);
    free(t->blocks);
    free(t->best_stack);
    free(t->best_bytes);
    free(t->stack_bytes);
}

/* With `pk` NULL the tally makes a picker of its own. */
static ranksnap_status tally_init(tally *t, const rs_snap *s, const rs_site_picker *pk)
{
    memset(t, 0, sizeof *t);
    if (!pk) {
        rs_site_picker_init(&t->own, s);
        pk = &t->own;
    }
    t->pk = pk;
    t->frame_of_stack = malloc((s->n_stacks + 1) * sizeof *t->frame_of_stack);
    size_t nk = 2 * (s->n_frames + 2);
    t->bytes = calloc(nk, sizeof *t->bytes);
    t->blocks = calloc(nk, sizeof *t->blocks);
    t->best_stack = calloc(nk, sizeof *t->best_stack);
    t->best_bytes = calloc(nk, sizeof *t->best_bytes);
    t->stack_bytes = calloc(s->n_stacks + 1, sizeof *t->stack_bytes);
    if (!t->frame_of_stack || !t->bytes || !t->blocks || !t->best_stack || !t->best_bytes ||
        !t->stack_bytes) {
        tally_free(t);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY,
                        "rank %d: no memory to tally %zu frames of %zu stacks", s->rank,
                        s->n_frames, s->n_stacks);
    }
    for (size_t i = 0; i <= s->n_stacks; i++)
        t->frame_of_stack[i] = rs_site_pick_frame(t->pk, (uint32_t)i);
    return RANKSNAP_OK;
}

static void tally_add(tally *t, uint32_t stack, uint64_t bytes, int held)
{
    const rs_snap *s = t->pk->s;
    size_t i;
    if (stack == RS_WALK_STACK_BEFORE)
        i = s->n_frames + 1;
    else if (stack > s->n_stacks || t->frame_of_stack[stack] < 0)
        i = s->n_frames;
    else
        i = (size_t)t->frame_of_stack[stack];
    int framed = i < s->n_frames;
    if (held) i += s->n_frames + 2;
    t->bytes[i] = rs_sat_add_u64(t->bytes[i], bytes);
    t->blocks[i]++;
    if (framed) {
        /* running totals only grow: the stack with the most bytes in the end wins, the lowest
         * id among equals, whatever order the walk's table gives the blocks in */
        t->stack_bytes[stack] = rs_sat_add_u64(t->stack_bytes[stack], bytes);
        uint64_t sb = t->stack_bytes[stack];
        if (!t->best_stack[i] || sb > t->best_bytes[i] ||
            (sb == t->best_bytes[i] && stack < t->best_stack[i])) {
            t->best_bytes[i] = t->stack_bytes[stack];
            t->best_stack[i] = stack;
        }
    }
}

static int cmp_entry_key(const void *pa, const void *pb)
{
    return rs_site_cmp(&((const entry *)pa)->site, &((const entry *)pb)->site);
}

static int cmp_entry_bytes(const void *pa, const void *pb)
{
    const entry *a = pa, *b = pb;
    return rs_site_cmp_listing(&a->site, a->site.bytes, &b->site, b->site.bytes);
}

/* Consumes the tally. */
static ranksnap_status tally_finish(tally *t, rs_site **out, rs_site_path **paths, size_t *n_out)
{
    const rs_snap *s = t->pk->s;
    size_t n = 0, nk = 2 * (s->n_frames + 2);
    for (size_t i = 0; i < nk; i++)
        if (t->blocks[i]) n++;
    entry *v = calloc(n ? n : 1, sizeof *v);
    rs_site *sites = calloc(n ? n : 1, sizeof *sites);
    rs_site_path *pv = paths ? calloc(n ? n : 1, sizeof *pv) : NULL;
    if (!v || !sites || (paths && !pv)) {
        free(v);
        free(sites);
        free(pv);
        tally_free(t);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rank %d: no memory for %zu sites", s->rank, n);
    }
    n = 0;
    int32_t held_step = (int32_t)rs_site_held_step(s);
    for (size_t i = 0; i < nk; i++) {
        if (!t->blocks[i]) continue;
        size_t f = i % (s->n_frames + 2);
        if (f == s->n_frames + 1)
            rs_text_copy_head(v[n].site.function, sizeof v[n].site.function, "(before recording)");
        else
            site_of_frame(t->pk, f == s->n_frames ? -1 : (int64_t)f, &v[n].site);
        if (i >= s->n_frames + 2) {
            v[n].site.held = 1;
            v[n].site.held_step = held_step;
        }
        v[n].site.bytes = rs_sat_i64(t->bytes[i]);
        v[n].site.blocks = t->blocks[i] > INT32_MAX ? INT32_MAX : (int32_t)t->blocks[i];
        v[n].stack = f < s->n_frames ? t->best_stack[i] : 0;
        v[n].stack_bytes = f < s->n_frames ? t->best_bytes[i] : 0;
        n++;
    }
    /* Two pcs on one source line are one site. */
    qsort(v, n, sizeof *v, cmp_entry_key);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && rs_site_same(&v[m - 1].site, &v[i].site)) {
            rs_site *a = &v[m - 1].site;
            a->bytes = rs_sat_add_i64(a->bytes, v[i].site.bytes);
            a->blocks = a->blocks > INT32_MAX - v[i].site.blocks ? INT32_MAX : a->blocks + v[i].site.blocks;
            if (v[i].stack_bytes > v[m - 1].stack_bytes ||
                (v[i].stack_bytes == v[m - 1].stack_bytes && v[i].stack < v[m - 1].stack)) {
                v[m - 1].stack = v[i].stack;
                v[m - 1].stack_bytes = v[i].stack_bytes;
            }
        } else {
            v[m++] = v[i];
        }
    }
    qsort(v, m, sizeof *v, cmp_entry_bytes);
    for (size_t i = 0; i < m; i++) {
        sites[i] = v[i].site;
        if (!pv) continue;
        if (v[i].stack) {
            rs_site unused;
            rs_site_pick_path(t->pk, v[i].stack, &unused, &pv[i]);
        } else {
            rs_site_path_of_site(&v[i].site, &pv[i]);
        }
    }
    free(v);
    tally_free(t);
    *out = sites;
    if (paths) *paths = pv;
    *n_out = m;
    return RANKSNAP_OK;
}

/* Live bytes by site after walking to `moment` (RS_WALK_END: the state at the end, whose blocks
 * are exact). */
static ranksnap_status sites_at(rs_walk *w, const rs_site_picker *pk, int64_t moment, rs_site **out,
                                rs_site_path **paths, size_t *n)
{
    const rs_snap *s = w->s;
    tally t;
    RS_CHECK(tally_init(&t, s, pk));
    if (moment == RS_WALK_END) {
        /* which of the end's blocks are still the held ones: the walk's, at the end */
        int any_held = s->history.held > 0;
        if (any_held) rs_walk_to(w, RS_WALK_END);
        for (size_t i = 0; i < s->n_segments; i++)
            for (size_t k = 0; k < s->segments[i].n_blocks; k++) {
                const rs_snap_block *b = &s->segments[i].blocks[k];
                if (b->state != RS_BLOCK_ACTIVE_ALLOCATED) continue;
                const rs_walk_block *wb = any_held ? rs_walk_find(w, b->addr) : NULL;
                tally_add(&t, b->stack, b->size,
                          wb && (wb->flags & (RS_WALK_LIVE | RS_WALK_HELD)) == (RS_WALK_LIVE | RS_WALK_HELD));
            }
    } else {
        rs_walk_to(w, moment);
        size_t it = 0;
        for (rs_walk_block *b; (b = rs_walk_next_live(w, &it));)
            tally_add(&t, b->stack, b->size, (b->flags & RS_WALK_HELD) != 0);
    }
    return tally_finish(&t, out, paths, n);
}

ranksnap_status rs_site_list_at_moment(rs_walk *w, rs_site **out, rs_site_path **paths, size_t *n)
{
    return rs_site_list_at_moment_by(w, NULL, out, paths, n);
}

ranksnap_status rs_site_list_at_moment_by(rs_walk *w, const rs_site_picker *pk, rs_site **out,
                                          rs_site_path **paths, size_t *n)
{
    *out = NULL;
    if (paths) *paths = NULL;
    *n = 0;
    return sites_at(w, pk, rs_walk_moment(w), out, paths, n);
}

ranksnap_status rs_site_list_at_peak(const rs_snap *s, rs_site **out, rs_site_path **paths, size_t *n)
{
    if (!s || !out || !n)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_site_list_at_peak: NULL argument");
    *out = NULL;
    if (paths) *paths = NULL;
    *n = 0;
    rs_walk w;
    RS_CHECK(rs_walk_init(&w, s));
    ranksnap_status st = rs_site_list_at_moment(&w, out, paths, n);
    rs_walk_free(&w);
    return st;
}
