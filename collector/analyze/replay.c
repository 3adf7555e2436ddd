/*
 * replay.c — rs_replay (replay.h): the history of a snapshot, again, through rank/alloc.c.
 *
 * One table keyed by the original's block addresses carries, for each block, whether it is alive
 * in the replay, its size as counted ("allocated", replay.h) and the pointer of the block that
 * ranksnap handed out for it. The live set at the history's start is found the way
 * collector/summarize.c finds it (its functions are private to it, so the rules are repeated
 * here): a block whose first event is a free_requested was alive before the history, with that
 * event's size; a block allocated at the end with no event in the history was alive throughout,
 * with its requested size. Then the events run forward. A history with holes (a ring that wrapped
 * in the middle of a free, recording paused between step ranges) can free what is not alive or
 * allocate over what is; such events are counted and applied as well as they can be, never
 * trusted: sizes come from an untrusted file and every level saturates.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "addr_hash.h"
#include "alloc.h"
#include "backend.h"
#include "errors.h"
#include "options.h"
#include "replay.h"
#include "text.h"

/* Large enough that nothing runs out unless the trace asks for a petabyte. */
#define SIM_CAPACITY ((uint64_t)1 << 50)

enum { SLOT_USED = 1, SLOT_LIVE = 2, SLOT_SEEN = 4, SLOT_START_LIVE = 8, SLOT_END_LIVE = 16 };

typedef struct slot {
    uint64_t addr;
    uint64_t size;      /* counted bytes while alive                    */
    uint64_t start_req; /* request of a block alive at the start        */
    uint64_t start_stream;
    void *ptr;          /* ranksnap's block, NULL when none was handed out */
    uint32_t flags;
} slot;

typedef struct replayer {
    const rs_snap *s;
    const char *name;
    slot *slots;
    size_t mask;
    uint64_t min_block;
    rs_backend *backend;
    rs_alloc *alloc;
    uint64_t orig_level, orig_peak; /* allocated, as counted */
    uint64_t rs_level, rs_peak;
    rs_replay_result *r;
} replayer;

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t sub_sat(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

/* The allocator's rounding of a request to its minimum block; 0 stays 0 (no block at all). */
static uint64_t counted(const replayer *rp, uint64_t req)
{
    uint64_t m = rp->min_block, r = req % m;
    if (r == 0) return req;
    return add_sat(req, m - r);
}

/* The slot of `addr`, created when missing (the table is sized so that it never fills). */
static slot *slot_get(replayer *rp, uint64_t addr)
{
    size_t i = rs_addr_hash(addr) & rp->mask;
    while (rp->slots[i].flags & SLOT_USED) {
        if (rp->slots[i].addr == addr) return &rp->slots[i];
        i = (i + 1) & rp->mask;
    }
    rp->slots[i].flags = SLOT_USED;
    rp->slots[i].addr = addr;
    return &rp->slots[i];
}

static uint64_t stream_handle(const rs_snap *s, uint32_t idx)
{
    return idx < s->n_streams ? s->streams[idx] : 0;
}

static void note_levels(replayer *rp)
{
    if (rp->orig_level > rp->orig_peak) rp->orig_peak = rp->orig_level;
    if (rp->rs_level > rp->rs_peak) rp->rs_peak = rp->rs_level;
}

/* Asks ranksnap for `req` bytes on `stream` for slot `sl`, already counted as alive. Running out
 * of (simulated) device memory or a request the allocator refuses as too large is a result, not
 * an error: the slot stays without a block. */
static ranksnap_status replay_malloc(replayer *rp, slot *sl, uint64_t req, uint64_t stream)
{
    sl->ptr = NULL;
    if (req == 0) return RANKSNAP_OK;
    void *p = NULL;
    ranksnap_status st = req > SIZE_MAX ? RANKSNAP_ERR_INVALID_ARGUMENT
                                        : rs_alloc_malloc(rp->alloc, (size_t)req,
                                                          (void *)(uintptr_t)stream, &p);
    if (st == RANKSNAP_ERR_OUT_OF_MEMORY) {
        rp->r->ranksnap_ooms++;
        return RANKSNAP_OK;
    }
    if (st == RANKSNAP_ERR_INVALID_ARGUMENT) {
        rp->r->inconsistent++;
        return RANKSNAP_OK;
    }
    if (st != RANKSNAP_OK)
        return rs_error(st, "%s: replaying a request of %" PRIu64 " bytes: %s", rp->name, req,
                        ranksnap_last_error());
    sl->ptr = p;
    rp->rs_level = add_sat(rp->rs_level, sl->size);
    return RANKSNAP_OK;
}

static ranksnap_status replay_free(replayer *rp, slot *sl)
{
    sl->flags &= ~(uint32_t)SLOT_LIVE;
    rp->orig_level = sub_sat(rp->orig_level, sl->size);
    if (!sl->ptr) return RANKSNAP_OK;
    void *p = sl->ptr;
    sl->ptr = NULL;
    rp->rs_level = sub_sat(rp->rs_level, sl->size);
    ranksnap_status st = rs_alloc_free(rp->alloc, p);
    if (st != RANKSNAP_OK)
        return rs_error(st, "%s: freeing a replayed block of 0x%" PRIx64 ": %s", rp->name,
                        sl->addr, ranksnap_last_error());
    return RANKSNAP_OK;
}

static int is_block_event(uint8_t a)
{
    return a == RS_ACT_ALLOC || a == RS_ACT_FREE_REQUESTED;
}

/* The table, the live set at the start, and the original's reserved level at the start. */
static ranksnap_status find_start(replayer *rp, uint64_t *reserved0)
{
    const rs_snap *s = rp->s;
    const rs_snap_history *h = &s->history;
    uint64_t keys = 1;
    for (size_t i = 0; i < s->n_segments; i++) keys += s->segments[i].n_blocks;
    for (uint64_t i = 0; i < h->count; i++)
        if (is_block_event(h->action[i])) keys++;
    size_t cap = 16;
    while (cap < 2 * keys && cap < ((size_t)1 << 62)) cap <<= 1;
    rp->slots = calloc(cap, sizeof *rp->slots);
    if (!rp->slots)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY,
                        "%s: no memory to replay %" PRIu64 " events over %" PRIu64 " blocks",
                        rp->name, h->count, keys);
    rp->mask = cap - 1;

    uint64_t end_reserved = 0;
    for (size_t i = 0; i < s->n_segments; i++) {
        const rs_snap_segment *sg = &s->segments[i];
        end_reserved = add_sat(end_reserved, sg->total_size);
        for (size_t k = 0; k < sg->n_blocks; k++) {
            const rs_snap_block *b = &sg->blocks[k];
            if (b->state != RS_BLOCK_ACTIVE_ALLOCATED) continue;
            slot *sl = slot_get(rp, b->addr);
            sl->flags |= SLOT_END_LIVE;
            sl->start_req = b->requested_size ? b->requested_size : b->size;
            sl->start_stream = stream_handle(s, sg->stream);
        }
    }
    /* The reserved changes of the whole history, to find where it started. */
    uint64_t up = 0, down = 0;
    for (uint64_t i = 0; i < h->count; i++) {
        uint8_t a = h->action[i];
        if (a == RS_ACT_SEGMENT_ALLOC) up = add_sat(up, h->size[i]);
        if (a == RS_ACT_SEGMENT_FREE) down = add_sat(down, h->size[i]);
        if (!is_block_event(a)) continue;
        slot *sl = slot_get(rp, h->addr[i]);
        if (sl->flags & SLOT_SEEN) continue;
        sl->flags |= SLOT_SEEN;
        if (a == RS_ACT_FREE_REQUESTED) {
            sl->flags |= SLOT_START_LIVE;
            sl->start_req = h->size[i];
            sl->start_stream = stream_handle(s, h->stream[i]);
        }
    }
    *reserved0 = sub_sat(add_sat(end_reserved, down), up);
    for (size_t i = 0; i <= rp->mask; i++) {
        slot *sl = &rp->slots[i];
        if ((sl->flags & SLOT_END_LIVE) && !(sl->flags & SLOT_SEEN)) sl->flags |= SLOT_START_LIVE;
    }
    return RANKSNAP_OK;
}

static int cmp_slot_addr(const void *pa, const void *pb)
{
    const slot *a = *(const slot *const *)pa, *b = *(const slot *const *)pb;
    return (a->addr > b->addr) - (a->addr < b->addr);
}

/* Allocates the blocks alive before the history, in address order. */
static ranksnap_status allocate_start(replayer *rp)
{
    size_t n = 0;
    for (size_t i = 0; i <= rp->mask; i++)
        if (rp->slots[i].flags & SLOT_START_LIVE) n++;
    if (n == 0) return RANKSNAP_OK;
    slot **v = malloc(n * sizeof *v);
    if (!v)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory to sort %zu blocks", rp->name, n);
    n = 0;
    for (size_t i = 0; i <= rp->mask; i++)
        if (rp->slots[i].flags & SLOT_START_LIVE) v[n++] = &rp->slots[i];
    qsort(v, n, sizeof *v, cmp_slot_addr);
    ranksnap_status st = RANKSNAP_OK;
    for (size_t i = 0; i < n && st == RANKSNAP_OK; i++) {
        slot *sl = v[i];
        sl->flags |= SLOT_LIVE;
        sl->size = counted(rp, sl->start_req);
        rp->orig_level = add_sat(rp->orig_level, sl->size);
        st = replay_malloc(rp, sl, sl->start_req, sl->start_stream);
    }
    rp->r->preexisting = n;
    free(v);
    note_levels(rp);
    return st;
}

static ranksnap_status replay_events(replayer *rp, uint64_t reserved0)
{
    const rs_snap *s = rp->s;
    const rs_snap_history *h = &s->history;
    uint64_t res = reserved0, res_peak = reserved0;
    for (uint64_t i = 0; i < h->count; i++) {
        switch (h->action[i]) {
        case RS_ACT_ALLOC: {
            slot *sl = slot_get(rp, h->addr[i]);
            if (sl->flags & SLOT_LIVE) {
                /* Its free is missing from the history. */
                rp->r->inconsistent++;
                RS_CHECK(replay_free(rp, sl));
            }
            sl->flags |= SLOT_LIVE;
            sl->size = counted(rp, h->size[i]);
            rp->orig_level = add_sat(rp->orig_level, sl->size);
            rp->r->allocs++;
            RS_CHECK(replay_malloc(rp, sl, h->size[i], stream_handle(s, h->stream[i])));
            break;
        }
        case RS_ACT_FREE_REQUESTED: {
            slot *sl = slot_get(rp, h->addr[i]);
            if (!(sl->flags & SLOT_LIVE)) {
                rp->r->inconsistent++;
                break;
            }
            rp->r->frees++;
            RS_CHECK(replay_free(rp, sl));
            break;
        }
        case RS_ACT_SEGMENT_ALLOC:
            res = add_sat(res, h->size[i]);
            if (res > res_peak) res_peak = res;
            break;
        case RS_ACT_SEGMENT_FREE:
            res = sub_sat(res, h->size[i]);
            break;
        case RS_ACT_OOM:
            rp->r->original_ooms++;
            break;
        default:
            break;
        }
        note_levels(rp);
    }
    rp->r->original.peak_reserved = res_peak;
    return RANKSNAP_OK;
}

ranksnap_status rs_replay(const rs_snap *s, const char *name_for_errors, rs_replay_result *out)
{
    if (!s || !out) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_replay: NULL argument");
    memset(out, 0, sizeof *out);
    replayer rp;
    memset(&rp, 0, sizeof rp);
    rp.s = s;
    rp.r = out;
    rp.name = name_for_errors ? name_for_errors : "snapshot";
    rp.min_block = s->allocator.min_block_size ? s->allocator.min_block_size : RS_MIN_BLOCK_SIZE;
    out->events = s->history.count;
    out->dropped = s->history.dropped > s->totals.events_dropped ? s->history.dropped
                                                                  : s->totals.events_dropped;
    out->incomplete = out->dropped > 0;

    rs_alloc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    /* The original's own split limit, so that only the policy differs; 0 (unset) = none. */
    cfg.max_split_size = s->allocator.max_split_size ? s->allocator.max_split_size : UINT64_MAX;
    cfg.device_index = s->device.index;
    uint64_t reserved0 = 0;
    ranksnap_status st = rs_backend_sim_create(SIM_CAPACITY, &rp.backend);
    if (st == RANKSNAP_OK) st = rs_alloc_create(rp.backend, &cfg, &rp.alloc);
    if (st != RANKSNAP_OK) {
        st = rs_error(st, "%s: cannot start the simulated device: %s", rp.name,
                      ranksnap_last_error());
    }
    if (st == RANKSNAP_OK) st = find_start(&rp, &reserved0);
    if (st == RANKSNAP_OK) st = allocate_start(&rp);
    if (st == RANKSNAP_OK) st = replay_events(&rp, reserved0);
    if (st == RANKSNAP_OK) {
        ranksnap_stats stats;
        memset(&stats, 0, sizeof stats);
        rs_alloc_get_stats(rp.alloc, &stats);
        out->original.peak_allocated = rp.orig_peak;
        out->ranksnap.peak_allocated = rp.rs_peak;
        out->ranksnap.peak_reserved = stats.reserved_bytes_peak;
        out->ranksnap_peak_allocated_blocks = stats.allocated_bytes_peak;
    }
    rs_alloc_destroy(rp.alloc);
    if (rp.backend) rp.backend->ops->destroy(rp.backend);
    free(rp.slots);
    return st;
}

/* ---- output ------------------------------------------------------------------------------ */

static void ratio(char *buf, size_t n, uint64_t reserved, uint64_t allocated)
{
    if (allocated == 0)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%.3f", (double)reserved / (double)allocated);
}

void rs_replay_report_text(FILE *out, const char *name, const rs_replay_result *r)
{
    char a[32], b[32], ra[16], rb[16];
    fprintf(out, "replay of %s: %" PRIu64 " events, %" PRIu64 " allocations, %" PRIu64
                 " frees, %" PRIu64 " blocks alive before the history\n",
            name, r->events, r->allocs, r->frees, r->preexisting);
    fprintf(out, "%-26s %18s %18s\n", "", "original", "ranksnap");
    rs_text_format_bytes(r->original.peak_allocated, a, sizeof a);
    rs_text_format_bytes(r->ranksnap.peak_allocated, b, sizeof b);
    fprintf(out, "%-26s %18s %18s\n", "peak allocated", a, b);
    rs_text_format_bytes(r->original.peak_reserved, a, sizeof a);
    rs_text_format_bytes(r->ranksnap.peak_reserved, b, sizeof b);
    fprintf(out, "%-26s %18s %18s\n", "peak reserved", a, b);
    ratio(ra, sizeof ra, r->original.peak_reserved, r->original.peak_allocated);
    ratio(rb, sizeof rb, r->ranksnap.peak_reserved, r->ranksnap.peak_allocated);
    fprintf(out, "%-26s %18s %18s\n", "reserved / allocated", ra, rb);
    fprintf(out, "%-26s %18" PRIu64 " %18" PRIu64 "\n", "peak allocated, bytes",
            r->original.peak_allocated, r->ranksnap.peak_allocated);
    fprintf(out, "%-26s %18" PRIu64 " %18" PRIu64 "\n", "peak reserved, bytes",
            r->original.peak_reserved, r->ranksnap.peak_reserved);
    rs_text_format_bytes(r->ranksnap_peak_allocated_blocks, b, sizeof b);
    fprintf(out, "(allocated = live requests rounded up to 512 B; ranksnap's blocks, with the tails "
                 "of segments too small to split, peaked at %s)\n", b);
    if (r->original.peak_reserved && r->ranksnap.peak_reserved != r->original.peak_reserved) {
        double d = ((double)r->ranksnap.peak_reserved - (double)r->original.peak_reserved) /
                   (double)r->original.peak_reserved * 100.0;
        fprintf(out, "ranksnap reserves %.1f%% %s than the original at the peak\n",
                d < 0 ? -d : d, d < 0 ? "less" : "more");
    }
    if (r->incomplete)
        fprintf(out, "incomplete: the ring dropped %" PRIu64 " older events; replayed what is "
                     "there, from the blocks alive at its start\n", r->dropped);
    if (r->inconsistent)
        fprintf(out, "note: %" PRIu64 " events did not fit the blocks alive at that moment (frees "
                     "of blocks not alive, allocations over live ones): the history has gaps\n",
                r->inconsistent);
    if (r->original_ooms || r->ranksnap_ooms)
        fprintf(out, "out of memory: %" PRIu64 " times in the original, %" PRIu64
                     " replayed requests failed in ranksnap\n",
                r->original_ooms, r->ranksnap_ooms);
}

static void json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

void rs_replay_report_json(FILE *out, const char *name, const rs_replay_result *r)
{
    fprintf(out, "{\n  \"file\": ");
    json_str(out, name);
    fprintf(out,
            ",\n  \"original\": {\"peak_allocated\": %" PRIu64 ", \"peak_reserved\": %" PRIu64
            "},\n  \"ranksnap\": {\"peak_allocated\": %" PRIu64 ", \"peak_reserved\": %" PRIu64
            ", \"peak_allocated_blocks\": %" PRIu64 "},\n",
            r->original.peak_allocated, r->original.peak_reserved, r->ranksnap.peak_allocated,
            r->ranksnap.peak_reserved, r->ranksnap_peak_allocated_blocks);
    fprintf(out,
            "  \"events\": %" PRIu64 ",\n  \"allocs\": %" PRIu64 ",\n  \"frees\": %" PRIu64
            ",\n  \"preexisting_blocks\": %" PRIu64 ",\n  \"incomplete\": %s,\n  \"dropped\": %" PRIu64
            ",\n  \"inconsistent_events\": %" PRIu64 ",\n  \"original_ooms\": %" PRIu64
            ",\n  \"ranksnap_ooms\": %" PRIu64 "\n}\n",
            r->events, r->allocs, r->frees, r->preexisting, r->incomplete ? "true" : "false",
            r->dropped, r->inconsistent, r->original_ooms, r->ranksnap_ooms);
}
