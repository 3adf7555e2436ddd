/*
 * walk.c — walk.h: the live-block table and the level walk every reader of a history shares.
 *
 * The table has one slot per distinct address, in the order rs_walk_init first met them (every
 * block of the end state, then every block event's), and an index from the address to its slot
 * (open addressing, linear probing, doubled whenever half full). rs_walk_init also notes each
 * block event's slot, so that a later walk reads the slot instead of hashing again. The table is
 * sized by distinct addresses, not by events (a training loop reuses some thousands of addresses
 * over a million events: 64 bytes each, plus 24 to 48 in the index), plus 4 bytes per event for
 * the noted slots and 16 per step event for the runs of steps; a walk never adds an address, so
 * slot indexes are stable once rs_walk_init returns. A decoder that walks its finished snapshot
 * keeps that walk in it (rs_walk_keep), and the walks after copy its slots and share the rest
 * instead of hashing every event's address again.
 *
 * The first pass (rs_walk_init's) also records what the decoder's totals and the summary's step
 * series used to walk the history again for: the levels and step at the peak and at the last
 * OOM, and each step run's highest level, relative to the start. Where no level stopped at 0 or
 * at the integer range on the way (rs_walk_levels_exact: every real trace), the start plus the
 * relative level is the level a walk would be at, and they read it; a history that frees more
 * than it held is walked, as before.
 */
#include <stdlib.h>
#include <string.h>

#include "addr_hash.h"
#include "errors.h"
#include "sat.h"
#include "walk.h"

static int is_block_event(uint8_t a)
{
    return a == RS_ACT_ALLOC || a == RS_ACT_FREE_REQUESTED;
}

/* Where `addr` is or belongs in the index. */
static size_t index_find(const rs_walk *w, uint64_t addr)
{
    size_t i = rs_addr_hash(addr, w->seed) & w->index_mask;
    while (w->index[i] && w->index_addr[i] != addr) i = (i + 1) & w->index_mask;
    return i;
}

/* rs_walk_init's insertion: the slot of `addr`, added when missing (the index doubled first when
 * that would make it more than half full, the slots grown by half when full). -1 when there is
 * no memory. */
static int64_t slot_add(rs_walk *w, uint64_t addr, size_t *slots_cap)
{
    size_t i = index_find(w, addr);
    if (w->index[i]) return (int64_t)w->index[i] - 1;
    if (w->n_slots >= UINT32_MAX - 1) return -1;
    if (2 * (w->n_slots + 1) > w->index_mask + 1) {
        size_t cap = 2 * (w->index_mask + 1);
        uint32_t *grown = calloc(cap, sizeof *grown);
        uint64_t *grown_addr = malloc(cap * sizeof *grown_addr);
        if (!grown || !grown_addr) {
            free(grown);
            free(grown_addr);
            return -1;
        }
        free(w->index);
        free(w->index_addr);
        w->index = grown;
        w->index_addr = grown_addr;
        w->index_mask = cap - 1;
        for (size_t k = 0; k < w->n_slots; k++) {
            size_t at = index_find(w, w->slots[k].addr);
            w->index[at] = (uint32_t)k + 1;
            w->index_addr[at] = w->slots[k].addr;
        }
        i = index_find(w, addr);
    }
    if (w->n_slots == *slots_cap) {
        size_t cap = *slots_cap ? *slots_cap + *slots_cap / 2 : 64;
        rs_walk_block *grown = realloc(w->slots, cap * sizeof *grown);
        if (!grown) return -1;
        w->slots = grown;
        *slots_cap = cap;
    }
    rs_walk_block *b = &w->slots[w->n_slots];
    memset(b, 0, sizeof *b);
    b->flags = RS_WALK_USED;
    b->addr = addr;
    w->index[i] = (uint32_t)++w->n_slots;
    w->index_addr[i] = addr;
    return (int64_t)w->n_slots - 1;
}

uint64_t rs_walk_round(const rs_walk *w, uint64_t request)
{
    /* the minimum block is a power of two in every allocator there is: no division then */
    uint64_t m = w->min_block, r = (m & (m - 1)) == 0 ? request & (m - 1) : request % m;
    if (request == 0) return 0;
    if (request < m) return m;
    return r == 0 ? request : rs_sat_add_u64(request, m - r);
}

uint64_t rs_walk_request(const rs_walk *w, const rs_walk_block *b)
{
    const rs_snap_history *h = &w->s->history;
    if ((b->flags & RS_WALK_LIVE) && b->stack != RS_WALK_STACK_BEFORE &&
        (b->flags & RS_WALK_SEEN) && w->next > b->first) {
        /* live from an alloc applied by this walk: find it (the last alloc before `next`) */
        uint64_t i = b->last < w->next ? b->last : w->next - 1;
        for (;; i--) {
            if (h->addr[i] == b->addr && h->action[i] == RS_ACT_ALLOC) return h->size[i];
            if (i == b->first) break;
        }
    }
    if ((b->flags & RS_WALK_SEEN) && h->action[b->first] == RS_ACT_FREE_REQUESTED)
        return h->size[b->first];
    if (b->end) return b->end->requested_size ? b->end->requested_size : b->end->size;
    return b->size;
}

/* The block's state before the first event. */
static void start_state(const rs_walk *w, rs_walk_block *b)
{
    const rs_snap_history *h = &w->s->history;
    b->flags &= ~(uint32_t)(RS_WALK_LIVE | RS_WALK_HELD);
    if (!(b->flags & RS_WALK_START_LIVE)) return;
    b->flags |= RS_WALK_LIVE;
    if ((b->flags & RS_WALK_SEEN) && h->action[b->first] == RS_ACT_FREE_REQUESTED) {
        b->size = rs_walk_round(w, h->size[b->first]);
        b->stack = RS_WALK_STACK_BEFORE;
        b->stream = h->stream[b->first];
    } else {
        b->size = b->end->size;
        b->stack = b->end->stack;
        b->stream = b->end_stream;
    }
}

void rs_walk_reset(rs_walk *w)
{
    for (size_t i = 0; i < w->n_slots; i++) start_state(w, &w->slots[i]);
    w->next = 0;
    w->allocated = w->start_allocated;
    w->reserved = w->start_reserved;
    w->rel_allocated = 0;
    w->rel_reserved = 0;
}

/* rs_walk_event's body, inlined into this file's own loops (rs_walk_to, the first pass), which
 * run it millions of times. */
static inline __attribute__((always_inline)) void walk_event(rs_walk *w, rs_walk_change *c)
{
    const rs_snap_history *h = &w->s->history;
    uint64_t i = w->next++;
    memset(c, 0, sizeof *c);
    switch (h->action[i]) {
    case RS_ACT_ALLOC: {
        rs_walk_block *b = &w->slots[w->event_slot[i]];
        if (b->flags & RS_WALK_LIVE) {
            /* allocated over a live block: its free was not recorded */
            c->inconsistent = 1;
            c->replaced_size = b->size;
            c->d_allocated = -rs_sat_i64(b->size);
        }
        b->size = (b->flags & RS_WALK_END_LIVE) && b->last == i ? b->end->size
                                                                 : rs_walk_round(w, h->size[i]);
        b->stack = h->stack[i];
        b->stream = h->stream[i];
        b->flags = (b->flags & ~(uint32_t)RS_WALK_HELD) | RS_WALK_LIVE | (i < h->held ? RS_WALK_HELD : 0);
        c->d_allocated = rs_sat_add_i64(c->d_allocated, rs_sat_i64(b->size));
        c->block = b;
        break;
    }
    case RS_ACT_FREE_REQUESTED: {
        rs_walk_block *b = &w->slots[w->event_slot[i]];
        c->block = b;
        if (!(b->flags & RS_WALK_LIVE)) {
            c->inconsistent = 1;
            break;
        }
        b->flags &= ~(uint32_t)RS_WALK_LIVE;
        c->d_allocated = -rs_sat_i64(b->size);
        break;
    }
    case RS_ACT_SEGMENT_ALLOC:
        c->d_reserved = rs_sat_i64(h->size[i]);
        break;
    case RS_ACT_SEGMENT_FREE:
        c->d_reserved = -rs_sat_i64(h->size[i]);
        break;
    default:
        break;
    }
    if (c->d_allocated) {
        w->rel_allocated = rs_sat_add_i64(w->rel_allocated, c->d_allocated);
        w->allocated = rs_sat_apply(w->allocated, c->d_allocated);
    }
    if (c->d_reserved) {
        w->rel_reserved = rs_sat_add_i64(w->rel_reserved, c->d_reserved);
        w->reserved = rs_sat_apply(w->reserved, c->d_reserved);
    }
}

void rs_walk_event(rs_walk *w, rs_walk_change *c)
{
    walk_event(w, c);
}

void rs_walk_to(rs_walk *w, int64_t moment)
{
    uint64_t count = w->s->history.count;
    uint64_t until = moment == RS_WALK_END ? count : moment < 0 ? 0 : (uint64_t)moment + 1;
    if (until > count) until = count;
    if (w->next > until) rs_walk_reset(w);
    rs_walk_change c;
    while (w->next < until) walk_event(w, &c);
}

int64_t rs_walk_moment(const rs_walk *w)
{
    const rs_snap *s = w->s;
    if (s->has_oom) return w->last_oom >= 0 ? w->last_oom : RS_WALK_END;
    if (s->history.count == 0 || !w->any_block_event) return RS_WALK_END;
    return w->peak_event;
}

rs_walk_block *rs_walk_find(rs_walk *w, uint64_t addr)
{
    size_t i = index_find(w, addr);
    return w->index[i] ? &w->slots[w->index[i] - 1] : NULL;
}

rs_walk_block *rs_walk_next_live(rs_walk *w, size_t *it)
{
    while (*it < w->n_slots) {
        rs_walk_block *b = &w->slots[(*it)++];
        if (b->flags & RS_WALK_LIVE) return b;
    }
    return NULL;
}

void rs_walk_free(rs_walk *w)
{
    if (!w) return;
    free(w->slots);
    if (!w->borrowed) {
        free(w->index);
        free(w->index_addr);
        free(w->event_slot); /* and the runs, which follow the noted slots */
    }
    w->slots = NULL;
    w->index = NULL;
    w->index_addr = NULL;
    w->event_slot = NULL;
    w->run_step = w->run_peak = NULL;
    w->n_runs = 0;
    w->n_slots = 0;
}

int rs_walk_levels_exact(const rs_walk *w)
{
    /* a relative level at the integer range may have stopped there; one that keeps the
     * absolute level in [0, UINT64_MAX] never made the walk stop it */
    if (w->rel_allocated_min == INT64_MIN || w->rel_allocated_max == INT64_MAX ||
        w->rel_reserved_min == INT64_MIN || w->rel_reserved_max == INT64_MAX)
        return 0;
    return (uint64_t)-w->rel_allocated_min <= w->start_allocated &&
           (uint64_t)w->rel_allocated_max <= UINT64_MAX - w->start_allocated &&
           (uint64_t)-w->rel_reserved_min <= w->start_reserved &&
           (uint64_t)w->rel_reserved_max <= UINT64_MAX - w->start_reserved;
}

/* The pass that finds the sums of the changes (hence the start levels), the first peak, the last
 * OOM, the span of step numbers, and what rs_walk_levels_exact lets the summary and the decoder
 * read instead of walking again (walk.h). */
static void first_pass(rs_walk *w)
{
    const rs_snap *s = w->s;
    const rs_snap_history *h = &s->history;
    w->start_allocated = 0;
    w->start_reserved = 0;
    rs_walk_reset(w);
    int64_t best = 0, best_res = 0;
    w->peak_event = -1;
    w->last_oom = -1;
    w->rel_reserved_at_peak = 0;
    w->peak_step = w->oom_step = -1;
    w->rel_allocated_at_oom = w->rel_reserved_at_oom = 0;
    w->rel_allocated_min = w->rel_allocated_max = w->rel_reserved_min = w->rel_reserved_max = 0;
    w->n_runs = 0;
    int64_t step = -1;
    rs_walk_change c;
    for (uint64_t i = 0; i < h->count; i++) {
        uint8_t a = h->action[i];
        walk_event(w, &c);
        if (is_block_event(a)) w->any_block_event = 1;
        if (a == RS_ACT_STEP) {
            /* a step number two ways, each as its reader's walk took it: the summary's series
             * (step_min, step_max, the runs) the bits as signed, the decoders' peak and OOM
             * steps saturated; they differ only for a size above INT64_MAX */
            int64_t st = (int64_t)h->size[i];
            step = rs_sat_i64(h->size[i]);
            if (!w->any_step || st < w->step_min) w->step_min = st;
            if (!w->any_step || st > w->step_max) w->step_max = st;
            w->any_step = 1;
            if (w->run_step) {
                w->run_step[w->n_runs] = st;
                w->run_peak[w->n_runs++] = w->rel_allocated;
            }
        } else if (w->n_runs && w->rel_allocated > w->run_peak[w->n_runs - 1]) {
            w->run_peak[w->n_runs - 1] = w->rel_allocated;
        }
        if (w->rel_allocated > best) {
            best = w->rel_allocated;
            w->peak_event = (int64_t)i;
            w->rel_reserved_at_peak = w->rel_reserved;
            w->peak_step = step;
        }
        if (w->rel_allocated < w->rel_allocated_min) w->rel_allocated_min = w->rel_allocated;
        if (w->rel_reserved > best_res) best_res = w->rel_reserved;
        if (w->rel_reserved < w->rel_reserved_min) w->rel_reserved_min = w->rel_reserved;
        if (a == RS_ACT_OOM) {
            w->last_oom = (int64_t)i;
            w->rel_allocated_at_oom = w->rel_allocated;
            w->rel_reserved_at_oom = w->rel_reserved;
            w->oom_step = step;
        }
    }
    w->rel_allocated_max = best;
    w->rel_reserved_max = best_res;
    w->start_allocated = rs_sat_apply(s->totals.allocated_bytes_current,
                                      rs_sat_neg_i64(w->rel_allocated));
    w->start_reserved = rs_sat_apply(s->totals.reserved_bytes_current,
                                     rs_sat_neg_i64(w->rel_reserved));
    w->peak_allocated = rs_sat_apply(w->start_allocated, best);
    w->peak_reserved = rs_sat_apply(w->start_reserved, best_res);
}

static ranksnap_status no_memory(rs_walk *w)
{
    const rs_snap *s = w->s;
    size_t blocks = w->n_slots;
    rs_walk_free(w);
    return rs_error(RANKSNAP_ERR_HOST_MEMORY,
                    "rank %d: no memory to walk %llu events over %zu blocks", s->rank,
                    (unsigned long long)s->history.count, blocks);
}

void rs_walk_keep(rs_walk *w)
{
    rs_snap *s = (rs_snap *)w->s; /* the decoder's own snapshot, still being made */
    rs_walk *k = w->borrowed ? NULL : malloc(sizeof *k);
    if (!k) {
        rs_walk_free(w);
        return;
    }
    rs_walk_reset(w);
    *k = *w;
    if (s->walk) {
        rs_walk_free(s->walk);
        free(s->walk);
    }
    s->walk = k;
    memset(w, 0, sizeof *w);
}

/* A copy of the walk the snapshot keeps, at its start. */
static ranksnap_status walk_copy(rs_walk *w, const rs_walk *k)
{
    *w = *k;
    w->borrowed = 1;
    w->slots = malloc((k->n_slots ? k->n_slots : 1) * sizeof *w->slots);
    if (!w->slots) return no_memory(w);
    if (k->n_slots) memcpy(w->slots, k->slots, k->n_slots * sizeof *w->slots);
    return RANKSNAP_OK;
}

ranksnap_status rs_walk_init(rs_walk *w, const rs_snap *s)
{
    if (s->walk && s->walk->s == s) return walk_copy(w, s->walk);
    memset(w, 0, sizeof *w);
    w->s = s;
    w->min_block = s->allocator.min_block_size ? s->allocator.min_block_size : 512;
    w->seed = rs_addr_hash_seed();
    const rs_snap_history *h = &s->history;

    /* an index for the end state's blocks to start with; the history's addresses grow it */
    uint64_t keys = 1;
    for (size_t i = 0; i < s->n_segments; i++) keys = rs_sat_add_u64(keys, s->segments[i].n_blocks);
    size_t cap = 64, slots_cap = 0;
    while (cap < 2 * keys && cap < ((size_t)1 << 32)) cap <<= 1;
    w->index = calloc(cap, sizeof *w->index);
    w->index_addr = malloc(cap * sizeof *w->index_addr);
    /* the runs of steps (first_pass) after the noted slots, in one block: two small blocks
     * a file between the large ones left holes that the next file's columns did not fit in */
    size_t steps = 0;
    for (uint64_t i = 0; i < h->count; i++) steps += h->action[i] == RS_ACT_STEP;
    size_t slots_bytes = ((h->count ? (size_t)h->count : 1) * sizeof *w->event_slot + 7) & ~(size_t)7;
    w->event_slot = malloc(slots_bytes + 2 * steps * sizeof(int64_t));
    if (!w->index || !w->index_addr || !w->event_slot) return no_memory(w);
    if (steps) {
        w->run_step = (int64_t *)(void *)((char *)w->event_slot + slots_bytes);
        w->run_peak = w->run_step + steps;
    }
    w->index_mask = cap - 1;

    for (size_t i = 0; i < s->n_segments; i++) {
        const rs_snap_segment *g = &s->segments[i];
        for (size_t k = 0; k < g->n_blocks; k++) {
            const rs_snap_block *b = &g->blocks[k];
            if (b->state != RS_BLOCK_ACTIVE_ALLOCATED) continue;
            int64_t at = slot_add(w, b->addr, &slots_cap);
            if (at < 0) return no_memory(w);
            rs_walk_block *sl = &w->slots[at];
            sl->flags |= RS_WALK_END_LIVE;
            sl->end = b;
            sl->end_stream = g->stream;
        }
    }
    for (uint64_t i = 0; i < h->count; i++) {
        uint8_t a = h->action[i];
        if (!is_block_event(a)) continue;
        int64_t at = slot_add(w, h->addr[i], &slots_cap);
        if (at < 0) return no_memory(w);
        w->event_slot[i] = (uint32_t)at;
        rs_walk_block *sl = &w->slots[at];
        if (!(sl->flags & RS_WALK_SEEN)) {
            sl->flags |= RS_WALK_SEEN;
            sl->first = i;
            if (a == RS_ACT_FREE_REQUESTED) sl->flags |= RS_WALK_START_LIVE;
        }
        sl->last = i;
    }
    for (size_t i = 0; i < w->n_slots; i++) {
        rs_walk_block *sl = &w->slots[i];
        if ((sl->flags & RS_WALK_END_LIVE) && !(sl->flags & RS_WALK_SEEN))
            sl->flags |= RS_WALK_START_LIVE;
        if (sl->flags & RS_WALK_START_LIVE) w->n_start_live++;
    }
    first_pass(w);
    rs_walk_reset(w);
    return RANKSNAP_OK;
}
