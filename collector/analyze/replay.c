/*
 * replay.c — rs_replay (replay.h): the history of a snapshot, again, through rank/alloc/alloc.c.
 *
 * The one history walk (collector/model/walk.h) says which blocks were live before the history
 * and what each event did to them; a side table keyed by the walk's slots holds the block that
 * ranksnap's allocator handed out for each. Blocks live before the history are allocated first,
 * in address order, then the events run forward with the original's requests and streams (stream
 * handles are the sim device's keys, so per-stream pools stay apart as on the GPU). Events the
 * walk finds inconsistent (a ring that wrapped in the middle of a free, recording paused between
 * step ranges) are counted and applied as well as they can be, never trusted: sizes come from an
 * untrusted file and every level saturates.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "errors.h"
#include "replay.h"
#include "sat.h"
#include "walk.h"

/* Large enough that nothing runs out unless the trace asks for a petabyte. */
#define SIM_CAPACITY ((uint64_t)1 << 50)

typedef struct replayer {
    const rs_snap *s;
    const char *name;
    rs_walk w;
    void **ptr;                     /* by walk slot: ranksnap's block, NULL when none */
    rs_backend *backend;
    rs_alloc *alloc;
    uint64_t orig_base;             /* bytes of the blocks live before the history, as counted */
    uint64_t orig_peak;             /* allocated, as counted */
    uint64_t rs_level, rs_peak;
    rs_replay_result *r;
} replayer;

static uint64_t stream_handle(const rs_snap *s, uint32_t idx)
{
    return idx < s->n_streams ? s->streams[idx] : 0;
}

static void note_levels(replayer *rp)
{
    uint64_t orig = rs_sat_apply(rp->orig_base, rp->w.rel_allocated);
    if (orig > rp->orig_peak) rp->orig_peak = orig;
    if (rp->rs_level > rp->rs_peak) rp->rs_peak = rp->rs_level;
}

/* Asks ranksnap for `req` bytes on `stream` for block `b`, already counted as alive. Running out
 * of (simulated) device memory or a request the allocator refuses as too large is a result, not
 * an error: the block stays without a replayed one. */
static ranksnap_status replay_malloc(replayer *rp, const rs_walk_block *b, uint64_t req,
                                     uint64_t stream)
{
    void **slot = &rp->ptr[rs_walk_index(&rp->w, b)];
    *slot = NULL;
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
    *slot = p;
    rp->rs_level = rs_sat_add_u64(rp->rs_level, b->size);
    return RANKSNAP_OK;
}

/* Gives back ranksnap's block for `b`, which counted `size` bytes. */
static ranksnap_status replay_free(replayer *rp, const rs_walk_block *b, uint64_t size)
{
    void **slot = &rp->ptr[rs_walk_index(&rp->w, b)];
    if (!*slot) return RANKSNAP_OK;
    void *p = *slot;
    *slot = NULL;
    rp->rs_level = rs_sat_sub_u64(rp->rs_level, size);
    ranksnap_status st = rs_alloc_free(rp->alloc, p);
    if (st != RANKSNAP_OK)
        return rs_error(st, "%s: freeing a replayed block of 0x%" PRIx64 ": %s", rp->name,
                        b->addr, ranksnap_last_error());
    return RANKSNAP_OK;
}

static int cmp_block_addr(const void *pa, const void *pb)
{
    const rs_walk_block *a = *(const rs_walk_block *const *)pa, *b = *(const rs_walk_block *const *)pb;
    return (a->addr > b->addr) - (a->addr < b->addr);
}

/* Allocates the blocks alive before the history, in address order. */
static ranksnap_status allocate_start(replayer *rp)
{
    rs_walk *w = &rp->w;
    size_t n = (size_t)w->n_start_live;
    if (n == 0) return RANKSNAP_OK;
    const rs_walk_block **v = malloc(n * sizeof *v);
    if (!v)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory to sort %zu blocks", rp->name, n);
    size_t it = 0, m = 0;
    for (const rs_walk_block *b; (b = rs_walk_next_live(w, &it)) && m < n;) v[m++] = b;
    qsort(v, m, sizeof *v, cmp_block_addr);
    ranksnap_status st = RANKSNAP_OK;
    for (size_t i = 0; i < m && st == RANKSNAP_OK; i++) {
        rp->orig_base = rs_sat_add_u64(rp->orig_base, v[i]->size);
        st = replay_malloc(rp, v[i], rs_walk_request(w, v[i]), stream_handle(rp->s, v[i]->stream));
    }
    rp->r->preexisting = m;
    free(v);
    note_levels(rp);
    return st;
}

static ranksnap_status replay_events(replayer *rp)
{
    const rs_snap *s = rp->s;
    const rs_snap_history *h = &s->history;
    rs_walk_change c;
    for (uint64_t i = 0; i < h->count; i++) {
        rs_walk_event(&rp->w, &c);
        switch (h->action[i]) {
        case RS_ACT_ALLOC:
            if (c.inconsistent) {
                /* its free is missing from the history */
                rp->r->inconsistent++;
                RS_CHECK(replay_free(rp, c.block, c.replaced_size));
            }
            rp->r->allocs++;
            RS_CHECK(replay_malloc(rp, c.block, h->size[i], stream_handle(s, h->stream[i])));
            break;
        case RS_ACT_FREE_REQUESTED:
            if (c.inconsistent) {
                rp->r->inconsistent++;
                break;
            }
            rp->r->frees++;
            RS_CHECK(replay_free(rp, c.block, c.block->size));
            break;
        case RS_ACT_OOM:
            rp->r->original_ooms++;
            break;
        default:
            break;
        }
        note_levels(rp);
    }
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
    out->events = s->history.count;
    out->dropped = s->history.dropped > s->totals.events_dropped ? s->history.dropped
                                                                  : s->totals.events_dropped;
    out->incomplete = out->dropped > 0;

    rs_alloc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    /* The original's own split limit, so that only the policy differs; 0 (unset) = none. */
    cfg.max_split_size = s->allocator.max_split_size ? s->allocator.max_split_size : UINT64_MAX;
    cfg.device_index = s->device.index;
    ranksnap_status st = rs_walk_init(&rp.w, s);
    if (st == RANKSNAP_OK) {
        rp.ptr = calloc(rs_walk_capacity(&rp.w), sizeof *rp.ptr);
        if (!rp.ptr)
            st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory to replay %" PRIu64 " events",
                          rp.name, s->history.count);
    }
    if (st == RANKSNAP_OK) {
        st = rs_backend_sim_create(SIM_CAPACITY, &rp.backend);
        if (st == RANKSNAP_OK) st = rs_alloc_create(rp.backend, &cfg, &rp.alloc);
        if (st != RANKSNAP_OK)
            st = rs_error(st, "%s: cannot start the simulated device: %s", rp.name,
                          ranksnap_last_error());
    }
    if (st == RANKSNAP_OK) st = allocate_start(&rp);
    if (st == RANKSNAP_OK) st = replay_events(&rp);
    if (st == RANKSNAP_OK) {
        ranksnap_stats stats;
        memset(&stats, 0, sizeof stats);
        rs_alloc_get_stats(rp.alloc, &stats);
        out->original.peak_allocated = rp.orig_peak;
        out->original.peak_reserved = rp.w.peak_reserved;
        out->ranksnap.peak_allocated = rp.rs_peak;
        out->ranksnap.peak_reserved = stats.reserved_bytes_peak;
        out->ranksnap_peak_allocated_blocks = stats.allocated_bytes_peak;
    }
    rs_alloc_destroy(rp.alloc);
    if (rp.backend) rp.backend->ops->destroy(rp.backend);
    free(rp.ptr);
    rs_walk_free(&rp.w);
    return st;
}
