/*
 * replay.c — rs_replay (replay.h): the history of a snapshot, again, through alloc/alloc.c.
 *
 * The one history walk (collector/model/walk.h) says which blocks were live before the history
 * and what each event did to them; a side table keyed by the walk's slots holds the block that
 * ranksnap's allocator handed out for each. Blocks live before the history are allocated first,
 * in address order, then the events run forward with the original's requests and streams (stream
 * handles are the sim device's keys, so per-stream pools stay apart as on the GPU). Events the
 * walk finds inconsistent (a ring that wrapped in the middle of a free, recording paused between
 * step ranges) are counted and applied as well as they can be, never trusted: sizes come from an
 * untrusted file and every level saturates.
 *
 * A session keeps the walk's table and the side table between runs, so that trying several
 * settings on one trace (--suggest) pays for them once; what the first OOM of the trace says about
 * the device is worked out once, when the session opens.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "backend_sim.h"
#include "errors.h"
#include "pools.h"
#include "replay.h"
#include "sat.h"
#include "walk.h"

/* A device of unknown size: large enough that nothing runs out unless the trace asks for a
 * petabyte. */
#define SIM_CAPACITY ((uint64_t)1 << 50)

struct rs_replay_session {
    const rs_snap *s;
    const char *name;
    rs_walk w;
    void **ptr;           /* by walk slot: ranksnap's block, NULL when none */
    /* the trace's first OOM, for the device it implies (-1: none) */
    int64_t oom_event;
    uint64_t oom_reserved;   /* reserved when it failed (after the cache was freed)     */
    uint64_t oom_peak;       /* the highest reserved level up to it                      */
    uint64_t oom_segment;    /* the segment it needed, under the trace's settings       */
    uint64_t oom_free;       /* the device's free bytes then                             */
};

/* One run. */
typedef struct replayer {
    rs_replay_session *ss;
    rs_backend *backend;
    rs_alloc *alloc;
    uint64_t orig_base;          /* bytes of the blocks live before the history, as counted */
    uint64_t rs_level;           /* ranksnap's allocated, as counted                        */
    uint64_t rs_reserved;        /* ranksnap's reserved, from its segment events            */
    uint64_t orig_device_allocs, orig_device_frees;
    rs_replay_result *r;
} replayer;

static uint64_t stream_handle(const rs_snap *s, uint32_t idx)
{
    return idx < s->n_streams ? s->streams[idx] : 0;
}

/* The allocator's observer: only its segment events matter here (reserved, as it moves). */
static uint32_t observe_segments(void *ctx, rs_action act, uint64_t addr, uint64_t size,
                                 void *stream)
{
    replayer *rp = ctx;
    (void)addr;
    (void)stream;
    if (act == RS_ACT_SEGMENT_ALLOC) rp->rs_reserved = rs_sat_add_u64(rp->rs_reserved, size);
    if (act == RS_ACT_SEGMENT_FREE) rp->rs_reserved = rs_sat_sub_u64(rp->rs_reserved, size);
    return 0;
}

static void note_levels(replayer *rp)
{
    rs_walk *w = &rp->ss->w;
    rs_replay_side *o = &rp->r->original, *n = &rp->r->ranksnap;
    uint64_t orig = rs_sat_apply(rp->orig_base, w->rel_allocated);
    if (orig > o->peak_allocated) {
        o->peak_allocated = orig;
        o->fragmentation = rs_sat_sub_u64(w->reserved, orig);
    }
    if (rp->rs_level > n->peak_allocated) {
        n->peak_allocated = rp->rs_level;
        n->fragmentation = rs_sat_sub_u64(rp->rs_reserved, rp->rs_level);
    }
}

static void note_oom(rs_replay_side *side, uint64_t event, uint64_t request)
{
    if (side->ooms++ == 0) {
        side->first_oom_event = (int64_t)event;
        side->first_oom_request = request;
    }
}

/* Asks ranksnap for `req` bytes on `stream`; *p stays NULL when the request fails. Running out of
 * (simulated) device memory or a request the allocator refuses as too large is a result, not an
 * error. */
static ranksnap_status ask(replayer *rp, uint64_t event, uint64_t req, uint64_t stream, void **p)
{
    *p = NULL;
    if (req == 0) return RANKSNAP_OK;
    ranksnap_status st = req > SIZE_MAX ? RANKSNAP_ERR_INVALID_ARGUMENT
                                        : rs_alloc_malloc(rp->alloc, (size_t)req,
                                                          (void *)(uintptr_t)stream, p);
    if (st == RANKSNAP_ERR_OUT_OF_MEMORY) {
        note_oom(&rp->r->ranksnap, event, req);
        return RANKSNAP_OK;
    }
    if (st == RANKSNAP_ERR_INVALID_ARGUMENT) {
        rp->r->inconsistent++;
        return RANKSNAP_OK;
    }
    if (st != RANKSNAP_OK)
        return rs_error(st, "%s: replaying a request of %" PRIu64 " bytes: %s", rp->ss->name,
                        req, ranksnap_last_error());
    return RANKSNAP_OK;
}

/* Replays the allocation of `b` (already counted as alive) with `req` bytes. */
static ranksnap_status replay_malloc(replayer *rp, uint64_t event, const rs_walk_block *b,
                                     uint64_t req, uint64_t stream)
{
    void **slot = &rp->ss->ptr[rs_walk_index(&rp->ss->w, b)];
    RS_CHECK(ask(rp, event, req, stream, slot));
    if (*slot) rp->rs_level = rs_sat_add_u64(rp->rs_level, b->size);
    return RANKSNAP_OK;
}

/* Gives back ranksnap's block for `b`, which counted `size` bytes. */
static ranksnap_status replay_free(replayer *rp, const rs_walk_block *b, uint64_t size)
{
    void **slot = &rp->ss->ptr[rs_walk_index(&rp->ss->w, b)];
    if (!*slot) return RANKSNAP_OK;
    void *p = *slot;
    *slot = NULL;
    rp->rs_level = rs_sat_sub_u64(rp->rs_level, size);
    ranksnap_status st = rs_alloc_free(rp->alloc, p);
    if (st != RANKSNAP_OK)
        return rs_error(st, "%s: freeing a replayed block of 0x%" PRIx64 ": %s", rp->ss->name,
                        b->addr, ranksnap_last_error());
    return RANKSNAP_OK;
}

/* The original's failed request, asked again; the program went on without it, so a block it
 * gets now is given back at once. */
static ranksnap_status replay_oom(replayer *rp, uint64_t event, uint64_t req, uint64_t stream)
{
    void *p = NULL;
    RS_CHECK(ask(rp, event, req, stream, &p));
    if (p && rs_alloc_free(rp->alloc, p) != RANKSNAP_OK)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "%s: giving back the request of event %"
                        PRIu64 ": %s", rp->ss->name, event, ranksnap_last_error());
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
    rs_walk *w = &rp->ss->w;
    size_t n = (size_t)w->n_start_live;
    if (n == 0) {
        note_levels(rp);
        return RANKSNAP_OK;
    }
    const rs_walk_block **v = malloc(n * sizeof *v);
    if (!v)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory to sort %zu blocks",
                        rp->ss->name, n);
    size_t it = 0, m = 0;
    for (const rs_walk_block *b; (b = rs_walk_next_live(w, &it)) && m < n;) v[m++] = b;
    qsort(v, m, sizeof *v, cmp_block_addr);
    ranksnap_status st = RANKSNAP_OK;
    for (size_t i = 0; i < m && st == RANKSNAP_OK; i++) {
        rp->orig_base = rs_sat_add_u64(rp->orig_base, v[i]->size);
        st = replay_malloc(rp, 0, v[i], rs_walk_request(w, v[i]),
                           stream_handle(rp->ss->s, v[i]->stream));
    }
    rp->r->preexisting = m;
    free(v);
    note_levels(rp);
    return st;
}

static ranksnap_status replay_events(replayer *rp)
{
    const rs_snap *s = rp->ss->s;
    const rs_snap_history *h = &s->history;
    rs_walk *w = &rp->ss->w;
    rs_walk_change c;
    for (uint64_t i = 0; i < h->count; i++) {
        rs_walk_event(w, &c);
        switch (h->action[i]) {
        case RS_ACT_ALLOC:
            if (c.inconsistent) {
                /* its free is missing from the history */
                rp->r->inconsistent++;
                RS_CHECK(replay_free(rp, c.block, c.replaced_size));
            }
            rp->r->allocs++;
            RS_CHECK(replay_malloc(rp, i, c.block, h->size[i], stream_handle(s, h->stream[i])));
            rs_backend_sim_hints_clear(rp->backend); /* those of this request, not taken */
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
            note_oom(&rp->r->original, i, h->size[i]);
            RS_CHECK(replay_oom(rp, i, h->size[i], stream_handle(s, h->stream[i])));
            rs_backend_sim_hints_clear(rp->backend);
            break;
        case RS_ACT_SEGMENT_ALLOC:
            /* the original's segment (or mapping) for the request that follows: the same
             * address keeps PyTorch's ties between equal blocks, broken by address, the same */
            rs_backend_sim_hint(rp->backend, h->addr[i], h->size[i]);
            rp->orig_device_allocs++;
            break;
        case RS_ACT_SEGMENT_FREE:
            rp->orig_device_frees++;
            break;
        default:
            break;
        }
        note_levels(rp);
    }
    return RANKSNAP_OK;
}

/* Where the trace's first OOM was and what the device looked like then (trace settings). */
static void find_first_oom(rs_replay_session *ss)
{
    const rs_snap_history *h = &ss->s->history;
    rs_walk *w = &ss->w;
    const rs_alloc_conf *c = &ss->s->allocator.conf;
    rs_walk_change ch;
    ss->oom_event = -1;
    if (w->last_oom < 0) return;
    rs_walk_reset(w);
    uint64_t peak = w->reserved;
    for (uint64_t i = 0; i < h->count; i++) {
        rs_walk_event(w, &ch);
        if (w->reserved > peak) peak = w->reserved;
        if (h->action[i] != RS_ACT_OOM) continue;
        uint64_t size = h->size[i] < (UINT64_MAX >> 2) ? h->size[i] : (UINT64_MAX >> 2);
        ss->oom_event = (int64_t)i;
        ss->oom_reserved = w->reserved;
        ss->oom_peak = peak;
        ss->oom_segment = rs_alloc_conf_segment_size(c, rs_alloc_conf_round(c, size));
        ss->oom_free = h->addr[i];
        break;
    }
    rs_walk_reset(w);
}

/* The device of one run (replay.h): the snapshot's, the one asked for, or what the OOM says. */
static void device_for(const rs_replay_session *ss, const rs_alloc_conf *conf,
                       const rs_replay_opts *o, rs_replay_device *d)
{
    const rs_snap *s = ss->s;
    uint64_t total = o && o->device_memory ? o->device_memory : s->device.total_bytes;
    memset(d, 0, sizeof *d);
    if (o && o->unlimited) return;
    d->memory = total;
    d->has_cap = rs_alloc_conf_cap(conf, s->allocator.memory_limit, total, &d->cap);
    if ((o && o->device_memory) || ss->oom_event < 0) return;
    /* Did the trace's own cap or device explain its OOM? */
    uint64_t trace_cap = 0;
    uint64_t need = rs_sat_add_u64(ss->oom_reserved, ss->oom_segment);
    int has = rs_alloc_conf_cap(&s->allocator.conf, s->allocator.memory_limit,
                                s->device.total_bytes, &trace_cap);
    if (has && need > trace_cap) return;
    if (s->device.total_bytes && need > s->device.total_bytes) return;
    d->cap_derived = 1;
    d->cap_below = need;
    if (ss->oom_free < ss->oom_segment) {
        /* the device itself was full: this process had its reserved bytes and the free ones */
        uint64_t room = rs_sat_add_u64(ss->oom_reserved, ss->oom_free);
        d->memory = room > ss->oom_peak ? room : ss->oom_peak;
        d->has_cap = 0;
        return;
    }
    d->has_cap = 1;
    d->cap = ss->oom_peak;
}

ranksnap_status rs_replay_open(const rs_snap *s, const char *name_for_errors,
                               rs_replay_session **out)
{
    if (!s || !out) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_replay_open: NULL argument");
    *out = NULL;
    rs_replay_session *ss = calloc(1, sizeof *ss);
    if (!ss) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rs_replay_open: out of host memory");
    ss->s = s;
    ss->name = name_for_errors ? name_for_errors : "snapshot";
    ranksnap_status st = rs_walk_init(&ss->w, s);
    if (st == RANKSNAP_OK) {
        ss->ptr = calloc(rs_walk_capacity(&ss->w), sizeof *ss->ptr);
        if (!ss->ptr)
            st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory to replay %" PRIu64 " events",
                          ss->name, s->history.count);
    }
    if (st != RANKSNAP_OK) {
        rs_replay_close(ss);
        return st;
    }
    find_first_oom(ss);
    *out = ss;
    return RANKSNAP_OK;
}

void rs_replay_close(rs_replay_session *ss)
{
    if (!ss) return;
    free(ss->ptr);
    rs_walk_free(&ss->w);
    free(ss);
}

ranksnap_status rs_replay_run(rs_replay_session *ss, const rs_replay_opts *o, rs_replay_result *out)
{
    if (!ss || !out) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_replay_run: NULL argument");
    const rs_snap *s = ss->s;
    memset(out, 0, sizeof *out);
    out->original.first_oom_event = out->ranksnap.first_oom_event = -1;
    out->events = s->history.count;
    out->dropped = s->history.dropped > s->totals.events_dropped ? s->history.dropped
                                                                  : s->totals.events_dropped;
    out->incomplete = out->dropped > 0;
    out->conf = o && o->conf ? *o->conf : s->allocator.conf;
    device_for(ss, &out->conf, o, &out->device);

    replayer rp;
    memset(&rp, 0, sizeof rp);
    rp.ss = ss;
    rp.r = out;
    rs_walk_reset(&ss->w);
    memset(ss->ptr, 0, rs_walk_capacity(&ss->w) * sizeof *ss->ptr);

    /* The cap is worked out here, so the allocator gets it as a limit and no fraction. */
    rs_alloc_conf conf = out->conf;
    conf.has_fraction = 0;
    rs_alloc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.conf = &conf;
    cfg.memory_limit = out->device.has_cap ? (out->device.cap ? out->device.cap : 1) : 0;
    cfg.device_index = s->device.index;
    cfg.observer = observe_segments;
    cfg.observer_ctx = &rp;
    ranksnap_status st = rs_backend_sim_create(out->device.memory ? out->device.memory
                                                                  : SIM_CAPACITY, &rp.backend);
    if (st == RANKSNAP_OK) {
        rs_backend_sim_hints_enable(rp.backend);
        st = rs_alloc_create(rp.backend, &cfg, &rp.alloc);
    }
    if (st != RANKSNAP_OK)
        st = rs_error(st, "%s: cannot start the simulated device: %s", ss->name,
                      ranksnap_last_error());
    if (st == RANKSNAP_OK) st = allocate_start(&rp);
    if (st == RANKSNAP_OK) st = replay_events(&rp);
    if (st == RANKSNAP_OK) {
        ranksnap_stats stats;
        memset(&stats, 0, sizeof stats);
        rs_alloc_get_stats(rp.alloc, &stats);
        out->original.peak_reserved = ss->w.peak_reserved;
        out->original.device_allocs = rp.orig_device_allocs;
        out->original.device_frees = rp.orig_device_frees;
        out->ranksnap.peak_reserved = stats.reserved_bytes_peak;
        out->ranksnap.device_allocs = stats.num_segment_allocs;
        out->ranksnap.device_frees = stats.num_segment_frees;
        out->ranksnap_peak_allocated_blocks = stats.allocated_bytes_peak;
        out->original_ooms = out->original.ooms;
        rs_pools_use pools;
        if (rs_pools_any(s) && rs_pools_at(&ss->w, ss->w.peak_event, &pools) == RANKSNAP_OK) {
            out->pools_at_peak = pools.reserved;
            out->pools_free_at_peak = pools.reserved - pools.allocated;
            out->original.fragmentation = rs_sat_sub_u64(out->original.fragmentation, out->pools_free_at_peak);
        }
        out->ranksnap_ooms = out->ranksnap.ooms;
    }
    rs_alloc_destroy(rp.alloc);
    if (rp.backend) rp.backend->ops->destroy(rp.backend);
    return st;
}

ranksnap_status rs_replay_with(const rs_snap *s, const char *name_for_errors,
                               const rs_replay_opts *o, rs_replay_result *out)
{
    if (!s || !out) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_replay: NULL argument");
    rs_replay_session *ss = NULL;
    RS_CHECK(rs_replay_open(s, name_for_errors, &ss));
    ranksnap_status st = rs_replay_run(ss, o, out);
    rs_replay_close(ss);
    return st;
}

ranksnap_status rs_replay(const rs_snap *s, const char *name_for_errors, rs_replay_result *out)
{
    return rs_replay_with(s, name_for_errors, NULL, out);
}
