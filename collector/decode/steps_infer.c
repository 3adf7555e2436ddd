/*
 * steps_infer.c — finds the training iterations of a history without step markers and inserts
 * RS_ACT_STEP events at their starts (steps_infer.h; the method is in docs/PYTORCH.md).
 *
 * Only allocations take part: frees, free_completed and segment events depend on timing (stream
 * events, the caching allocator's state), allocations on the program. Each allocation becomes a
 * token, a hash of its stack id and size, and the allocated level just before it (sizes rounded
 * as the allocator rounds them).
 * 1. Candidate periods are the most common distances between two allocations of one token: a
 *    token allocated once per iteration recurs at distance P; layers repeated within the model
 *    give shorter distances, multiples of P longer ones.
 * 2. A candidate must make the last period repeat the one before it (MIN_MATCH of the tokens
 *    equal one period apart).
 * 3. Its phase: an iteration starts when the previous one has freed its activations, so at the
 *    phase of the period where the level before the allocation, summed over the last periods
 *    that repeat, is lowest. The token there is the anchor.
 * 4. Its walk: from the anchor in the last period, each neighbouring iteration start is the
 *    nearest anchor token between two thirds of a period and MAX_STRETCH periods away whose
 *    following allocations are like the current start's (MIN_SIMILAR), back to the start of the
 *    history and on to its end. Iterations need not have the same number of allocations: the
 *    first one creates the optimizer state, the last one may stop at an OOM.
 * 5. A training iteration gives back what it allocated (the activations, the gradients' work
 *    space): the candidate's iterations must keep at most MAX_RETAINED of the bytes they allocate
 *    (the median over its whole iterations). The layers of one forward pass repeat too, but each
 *    keeps its activations: without this, a rank that ran out of memory in the forward pass of its
 *    first step had its layers counted as steps.
 * 6. The candidate whose walk covers the most allocations wins; within COVER_SLACK of the best
 *    the shortest period wins (2P covers as much as P; a layer's period covers one pass).
 * 7. A history that ends in an OOM and holds no repeating iteration ran out of memory in the first
 *    iteration it holds: one step, 0, is inserted where the allocations begin to repeat (the first
 *    layer of that pass), else at its first allocation, so that the OOM has its step.
 * Each candidate costs a few passes over the allocations; there are at most MAX_CANDIDATES.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "steps_infer.h"

#define MIN_PERIOD 2
#define MAX_CANDIDATES 32
#define PHASE_WINDOWS 8
#define MIN_MATCH 0.75
#define COVER_SLACK 0.02
#define MAX_PHASE_TIES 8
#define MAX_STRETCH 3
#define SIMILAR_SPAN 64
#define MIN_SIMILAR 0.5
#define MAX_RETAINED 0.5

typedef struct allocs {
    size_t n;
    uint64_t *at;    /* history index of each allocation */
    uint64_t *token;
    double *level;   /* allocated bytes just before it, relative to the history's start */
    double *bytes;   /* its size, rounded as the allocator rounds it */
} allocs;

typedef struct candidate {
    size_t period;
    uint32_t count;
} candidate;

static void allocs_free(allocs *a)
{
    free(a->at);
    free(a->token);
    free(a->level);
    free(a->bytes);
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    x ^= x >> 33;
    return x;
}

static uint64_t rounded(uint64_t size, uint64_t min_block)
{
    if (size < min_block) return min_block;
    uint64_t r = size % min_block;
    return r == 0 || size > UINT64_MAX - min_block ? size : size + (min_block - r);
}

static ranksnap_status collect(const rs_snap *s, allocs *a)
{
    const rs_snap_history *h = &s->history;
    uint64_t min_block = s->allocator.min_block_size ? s->allocator.min_block_size : 512;
    memset(a, 0, sizeof *a);
    size_t n = 0;
    for (uint64_t i = 0; i < h->count; i++)
        if (h->action[i] == RS_ACT_ALLOC) n++;
    a->at = malloc((n ? n : 1) * sizeof *a->at);
    a->token = malloc((n ? n : 1) * sizeof *a->token);
    a->level = malloc((n ? n : 1) * sizeof *a->level);
    a->bytes = malloc((n ? n : 1) * sizeof *a->bytes);
    if (!a->at || !a->token || !a->level || !a->bytes) {
        allocs_free(a);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rank %d: no memory to look for steps in %zu "
                                                  "allocations", s->rank, n);
    }
    double level = 0;
    for (uint64_t i = 0; i < h->count; i++) {
        if (h->action[i] == RS_ACT_FREE_REQUESTED) level -= (double)rounded(h->size[i], min_block);
        if (h->action[i] != RS_ACT_ALLOC) continue;
        a->at[a->n] = i;
        a->token[a->n] = mix(h->size[i] ^ mix((uint64_t)h->stack[i] + 0x9e3779b97f4a7c15ull));
        a->level[a->n] = level;
        a->bytes[a->n] = (double)rounded(h->size[i], min_block);
        level += a->bytes[a->n];
        a->n++;
    }
    return RANKSNAP_OK;
}

/* Step 1: the MAX_CANDIDATES most common distances between equal tokens, MIN_PERIOD to n/2. */
static ranksnap_status candidates(const rs_snap *s, const allocs *a, candidate *best,
                                  size_t *n_best)
{
    size_t n = a->n, cap = 16;
    while (cap < 2 * n) cap <<= 1;
    uint64_t *keys = malloc(cap * sizeof *keys);
    size_t *last = calloc(cap, sizeof *last); /* position + 1, 0 = empty */
    uint32_t *hist = calloc(n / 2 + 1, sizeof *hist);
    if (!keys || !last || !hist) {
        free(keys);
        free(last);
        free(hist);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rank %d: no memory to look for steps in %zu "
                                                  "allocations", s->rank, n);
    }
    for (size_t j = 0; j < n; j++) {
        size_t i = (size_t)a->token[j] & (cap - 1);
        while (last[i] && keys[i] != a->token[j]) i = (i + 1) & (cap - 1);
        if (last[i]) {
            size_t gap = j - (last[i] - 1);
            if (gap >= MIN_PERIOD && gap <= n / 2 && hist[gap] < UINT32_MAX) hist[gap]++;
        }
        keys[i] = a->token[j];
        last[i] = j + 1;
    }
    *n_best = 0;
    for (size_t gap = MIN_PERIOD; gap <= n / 2; gap++) {
        if (!hist[gap]) continue;
        /* insertion into the sorted (count desc) top list */
        size_t k = *n_best < MAX_CANDIDATES ? (*n_best)++ : MAX_CANDIDATES;
        if (k == MAX_CANDIDATES) {
            if (hist[gap] <= best[MAX_CANDIDATES - 1].count) continue;
            k = MAX_CANDIDATES - 1;
        }
        while (k > 0 && best[k - 1].count < hist[gap]) {
            best[k] = best[k - 1];
            k--;
        }
        best[k] = (candidate){gap, hist[gap]};
    }
    free(keys);
    free(last);
    free(hist);
    return RANKSNAP_OK;
}

/* Step 2: the share of the last period's tokens equal to those one period before. */
static double last_period_match(const allocs *a, size_t p)
{
    size_t n = a->n, same = 0;
    for (size_t j = n - 2 * p; j < n - p; j++) same += a->token[j] == a->token[j + p];
    return (double)same / (double)p;
}

/* Step 3: the phase (0..p-1) at which iterations start. */
static size_t start_phase(const allocs *a, size_t p)
{
    size_t n = a->n, windows = 1;
    /* Only the periods that repeat the last one: a first iteration with extra allocations
     * (optimizer state) is out of phase with the rest and would blur the minimum. */
    while (windows < PHASE_WINDOWS && (windows + 1) * p <= n) {
        size_t from = n - (windows + 1) * p, same = 0;
        for (size_t j = from; j < from + p; j++) same += a->token[j] == a->token[j + p];
        if ((double)same < MIN_MATCH * (double)p) break;
        windows++;
    }
    double best = 0;
    size_t phase = 0;
    for (size_t f = 0; f < p; f++) {
        double sum = 0;
        for (size_t k = 0; k < windows; k++) sum += a->level[n - (k + 1) * p + f];
        if (f == 0 || sum < best) {
            best = sum;
            phase = f;
        }
    }
    /* Equal levels (an allocation right after a free of the same size): prefer a token that
     * occurs once per period, which the walk cannot confuse with a neighbour. */
    size_t tries = 0;
    for (size_t f = phase; f < p && tries < MAX_PHASE_TIES; f++) {
        double sum = 0;
        for (size_t k = 0; k < windows; k++) sum += a->level[n - (k + 1) * p + f];
        if (sum != best) continue;
        tries++;
        uint64_t t = a->token[n - p + f];
        size_t seen = 0;
        for (size_t j = n - p; j < n && seen < 2; j++) seen += a->token[j] == t;
        if (seen == 1) return f;
    }
    return phase;
}

/* Share (0..1) of the SIMILAR_SPAN allocations from j that also occur among those from b: are
 * j and b starts of the same kind of iteration? Sets rather than positions, so that an extra
 * allocation in one iteration (lazy initialization) does not misalign the rest. */
static double similar(const allocs *a, size_t j, size_t b, size_t p)
{
    size_t q = p < SIMILAR_SPAN ? p : SIMILAR_SPAN;
    size_t far = j > b ? j : b;
    if (q > a->n - far) q = a->n - far;
    if (q == 0) return 1;
    size_t hits = 0;
    for (size_t i = 0; i < q; i++)
        for (size_t k = 0; k < q; k++)
            if (a->token[j + i] == a->token[b + k]) {
                hits++;
                break;
            }
    return (double)hits / (double)q;
}

typedef struct positions {
    size_t *v;
    size_t n, cap;
} positions;

static int positions_push(positions *p, size_t x)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        size_t *v = realloc(p->v, cap * sizeof *v);
        if (!v) return -1;
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = x;
    return 0;
}

/* Step 4: the allocation index of every iteration start, in order. From a start b, the
 * neighbouring start is the nearest anchor token at least a period minus a third away (so that an
 * anchor token that also occurs mid-iteration is passed over) and at most MAX_STRETCH periods
 * away (a first iteration that creates optimizer state is longer), whose following allocations
 * are like those after b. */
static int walk(const allocs *a, size_t p, size_t anchor, positions *out)
{
    uint64_t t = a->token[anchor];
    size_t n = a->n, near = p - p / 3, far = MAX_STRETCH * p;
    positions back = {NULL, 0, 0};
    int bad = 0;
    for (size_t b = anchor; !bad && b >= near;) {
        size_t j = b - near, found = SIZE_MAX;
        for (;; j--) {
            if (a->token[j] == t && similar(a, j, b, p) >= MIN_SIMILAR) {
                found = j;
                break;
            }
            if (j == 0 || b - j >= far) break;
        }
        if (found == SIZE_MAX) break;
        bad = positions_push(&back, found);
        b = found;
    }
    for (size_t i = back.n; i > 0 && !bad; i--) bad = positions_push(out, back.v[i - 1]);
    free(back.v);
    if (!bad) bad = positions_push(out, anchor);
    for (size_t b = anchor; !bad && b + near < n;) {
        size_t found = SIZE_MAX;
        for (size_t j = b + near; j < n && j - b <= far; j++)
            if (a->token[j] == t && similar(a, j, b, p) >= MIN_SIMILAR) {
                found = j;
                break;
            }
        if (found == SIZE_MAX) break;
        bad = positions_push(out, found);
        b = found;
    }
    return bad;
}

static int cmp_double(const void *pa, const void *pb)
{
    double x = *(const double *)pa, y = *(const double *)pb;
    return (x > y) - (x < y);
}

/* Step 5: the median share of its allocated bytes a whole iteration keeps (the last iteration
 * runs to the end of the history and is left out) into *med: 0 with fewer than two starts,
 * negative when iterations free more than they allocate. -1 without memory. */
static int retained(const allocs *a, const positions *starts, double *med)
{
    *med = 0;
    if (starts->n < 2) return 0;
    size_t n = starts->n - 1, m = 0;
    double *share = malloc(n * sizeof *share);
    if (!share) return -1;
    for (size_t i = 0; i < n; i++) {
        size_t from = starts->v[i], to = starts->v[i + 1];
        double got = 0;
        for (size_t j = from; j < to; j++) got += a->bytes[j];
        if (got > 0) share[m++] = (a->level[to] - a->level[from]) / got;
    }
    if (m) {
        qsort(share, m, sizeof *share, cmp_double);
        *med = share[(m - 1) / 2];
    }
    free(share);
    return 0;
}

/* Rewrites the history with a step event before each start. */
static ranksnap_status insert_steps(rs_snap *s, const allocs *a, const positions *starts)
{
    rs_snap_history *h = &s->history;
    uint64_t n = h->count + starts->n;
    uint64_t *time_us = malloc(n * sizeof *time_us), *addr = malloc(n * sizeof *addr);
    uint64_t *size = malloc(n * sizeof *size);
    uint8_t *action = malloc(n);
    uint32_t *stream = malloc(n * sizeof *stream), *stack = malloc(n * sizeof *stack);
    rs_snap_range *range = malloc(sizeof *range);
    if (!time_us || !addr || !size || !action || !stream || !stack || !range) {
        free(time_us);
        free(addr);
        free(size);
        free(action);
        free(stream);
        free(stack);
        free(range);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rank %d: no memory to add %zu step events",
                        s->rank, starts->n);
    }
    uint64_t o = 0;
    size_t k = 0;
    for (uint64_t i = 0; i < h->count; i++) {
        /* The step begins before the segment events the allocator made for its first
         * allocation (the cache flush and the new segment right before it). */
        uint64_t at = k < starts->n ? a->at[starts->v[k]] : UINT64_MAX;
        while (at > 0 && at != UINT64_MAX && at - 1 >= i &&
               (h->action[at - 1] == RS_ACT_SEGMENT_ALLOC || h->action[at - 1] == RS_ACT_SEGMENT_FREE))
            at--;
        if (k < starts->n && at == i) {
            uint64_t first = a->at[starts->v[k]];
            time_us[o] = h->time_us[first];
            action[o] = RS_ACT_STEP;
            addr[o] = 0;
            size[o] = k;
            stream[o] = h->stream[first];
            stack[o] = 0;
            o++;
            k++;
        }
        time_us[o] = h->time_us[i];
        action[o] = h->action[i];
        addr[o] = h->addr[i];
        size[o] = h->size[i];
        stream[o] = h->stream[i];
        stack[o] = h->stack[i];
        o++;
    }
    free(h->time_us);
    free(h->action);
    free(h->addr);
    free(h->size);
    free(h->stream);
    free(h->stack);
    h->time_us = time_us;
    h->action = action;
    h->addr = addr;
    h->size = size;
    h->stream = stream;
    h->stack = stack;
    h->count = n;
    if (h->capacity < n) h->capacity = n;
    free(s->time.ranges);
    range->begin = 0;
    range->end = (int64_t)starts->n;
    s->time.ranges = range;
    s->time.n_ranges = 1;
    s->time.current_step = (int64_t)starts->n - 1;
    return RANKSNAP_OK;
}

ranksnap_status rs_steps_infer(rs_snap *s, rs_steps_infer_result *out)
{
    memset(out, 0, sizeof *out);
    const rs_snap_history *h = &s->history;
    for (uint64_t i = 0; i < h->count; i++)
        if (h->action[i] == RS_ACT_STEP) {
            snprintf(out->why_not, sizeof out->why_not, "the history has step events already");
            return RANKSNAP_OK;
        }
    allocs a;
    RS_CHECK(collect(s, &a));
    if (a.n < 2 * MIN_PERIOD) {
        snprintf(out->why_not, sizeof out->why_not,
                 "%zu allocations are too few to repeat", a.n);
        allocs_free(&a);
        return RANKSNAP_OK;
    }
    candidate cand[MAX_CANDIDATES];
    size_t n_cand = 0;
    ranksnap_status st = candidates(s, &a, cand, &n_cand);
    if (st != RANKSNAP_OK) {
        allocs_free(&a);
        return st;
    }
    /* Steps 2 to 5 for every candidate; the winner's walk is run again at the end. */
    size_t cover[MAX_CANDIDATES] = {0}, best_cover = 0;
    double best_match = 0;
    positions starts = {NULL, 0, 0};
    size_t pass_start = SIZE_MAX; /* step 7: where a pass of repeating layers begins */
    int kept_too_much = 0;
    for (size_t i = 0; i < n_cand; i++) {
        size_t p = cand[i].period;
        double match = last_period_match(&a, p);
        if (match > best_match) best_match = match;
        if (match < MIN_MATCH) continue;
        starts.n = 0;
        if (walk(&a, p, a.n - p + start_phase(&a, p), &starts) != 0) goto no_memory;
        if (starts.n < 2) continue;
        double keep;
        if (retained(&a, &starts, &keep) != 0) goto no_memory;
        if (keep > MAX_RETAINED) {
            kept_too_much = 1;
            if (starts.v[0] < pass_start) pass_start = starts.v[0];
            continue;
        }
        size_t last = starts.v[starts.n - 1], tail = a.n - last < p ? a.n - last : p;
        cover[i] = last - starts.v[0] + tail;
        if (cover[i] > best_cover) best_cover = cover[i];
    }
    size_t pick = n_cand;
    for (size_t i = 0; i < n_cand; i++)
        if (cover[i] && (double)cover[i] >= (1 - COVER_SLACK) * (double)best_cover &&
            (pick == n_cand || cand[i].period < cand[pick].period))
            pick = i;
    int oom = 0;
    for (uint64_t i = 0; i < h->count && !oom; i++) oom = h->action[i] == RS_ACT_OOM;
    if (pick == n_cand && oom && a.n > 0) {
        /* step 7: the OOM came in the first iteration the history holds */
        starts.n = 0;
        if (positions_push(&starts, pass_start == SIZE_MAX ? 0 : pass_start) != 0) goto no_memory;
        st = insert_steps(s, &a, &starts);
        if (st == RANKSNAP_OK) {
            out->found = 1;
            out->period = 0;
            out->n_steps = 1;
        }
        free(starts.v);
        allocs_free(&a);
        return st;
    }
    if (pick == n_cand) {
        if (kept_too_much && best_match >= MIN_MATCH)
            snprintf(out->why_not, sizeof out->why_not,
                     "the %zu allocations repeat, but each repetition keeps more than %.0f%% of "
                     "what it allocates (the layers of one pass, not training iterations)",
                     a.n, MAX_RETAINED * 100);
        else if (best_match < MIN_MATCH)
            snprintf(out->why_not, sizeof out->why_not,
                     "no pattern of the %zu allocations repeats (the best period is %.0f%% "
                     "alike the one before it, %.0f%% needed)",
                     a.n, best_match * 100, MIN_MATCH * 100);
        else
            snprintf(out->why_not, sizeof out->why_not,
                     "a pattern repeats at the end of the %zu allocations, but fewer than two "
                     "iteration starts were found",
                     a.n);
        free(starts.v);
        allocs_free(&a);
        return RANKSNAP_OK;
    }
    size_t p = cand[pick].period;
    starts.n = 0;
    if (walk(&a, p, a.n - p + start_phase(&a, p), &starts) != 0) goto no_memory;
    st = insert_steps(s, &a, &starts);
    if (st == RANKSNAP_OK) {
        out->found = 1;
        out->period = p;
        out->match = last_period_match(&a, p);
        out->n_steps = starts.n;
    }
    free(starts.v);
    allocs_free(&a);
    return st;
no_memory:
    free(starts.v);
    allocs_free(&a);
    return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rank %d: no memory for the steps found", s->rank);
}
