/*
 * export_torch.c — rs_snap → the dict torch.cuda.memory._snapshot() returns, pickled.
 *
 * Layout (field names checked against torch/csrc/cuda/Module.cpp and memory_snapshot.cpp, and
 * against what torch/utils/viz/MemoryViz.js and torch/cuda/_memory_viz.py read):
 *   {'segments': [segment...], 'device_traces': [[], ..., [entry...]],
 *    'allocator_settings': {...}, 'external_annotations': [annotation...]}
 * with our trace at device_traces[device.index]. Block states use PyTorch's C++ names
 * (`active_pending_free`, not the `active_awaiting_free` of some docstrings): the viewer keeps
 * only blocks in `active_allocated` or `active_pending_free` and fails on a free_requested whose
 * block it lost. Step markers become `ProfilerStep#N` START/END annotations (what
 * torch.profiler's step() records) and our annotations START/END annotations, as
 * record_function's memory-history callback writes them.
 *
 * The viewer's "Allocator State History" replays the trace backwards from the segments, and
 * throws when an event refers to a block or segment that is not there at that moment. A full
 * ring is a suffix of the real history, so ours is always consistent; a history with a gap
 * (recording paused between step ranges) need not be. consistent_events() runs the viewer's
 * backward replay first and leaves out exactly the events that would break it, counting them.
 *
 * A PyTorch rank recorded at the CUDA driver (time.recorded_by: its backend:cudaMallocAsync has no
 * recorder) has its allocator's memory in the driver's outside_alloc/outside_free events: there
 * each allocation is what PyTorch's cudaMallocAsync backend makes of it, one cudaMallocAsync, so
 * it is written as a segment of one block (segment_alloc + alloc, free_requested +
 * free_completed + segment_free), and those alive at the end as such segments (driver_segments).
 *
 * Size: frame dicts and stack lists are memoized (each written once, then a 2-5 byte memo
 * reference), as are repeated strings; PyTorch's own pickles share them the same way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr_hash.h"
#include "errors.h"
#include "export_torch.h"
#include "pickler.h"
#include "site_rules.h"

/* A device index beyond this is a corrupt snapshot, not a machine: device_traces would be a list
 * of that many lists. */
#define MAX_DEVICE_INDEX 1023

/* ---- the viewer's backward replay, to find the events it cannot take ------------------------ */

typedef struct seg_ent {
    uint64_t addr, size;
    uint64_t n_blocks; /* blocks present inside it at the current moment */
} seg_ent;

typedef struct blk_ent {
    uint64_t addr;
    uint64_t seg_addr; /* segment counted for it while present */
    int used, present;
} blk_ent;

typedef struct backward {
    seg_ent *segs; /* address order */
    size_t n_segs, cap_segs;
    blk_ent *blks;
    size_t mask;
} backward;

/* Index of the last segment whose address is <= addr, or -1. */
static ptrdiff_t seg_floor(const backward *b, uint64_t addr)
{
    size_t lo = 0, hi = b->n_segs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->segs[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (ptrdiff_t)lo - 1;
}

static seg_ent *seg_containing(backward *b, uint64_t addr)
{
    ptrdiff_t i = seg_floor(b, addr);
    if (i < 0) return NULL;
    seg_ent *s = &b->segs[i];
    return addr - s->addr < s->size ? s : NULL;
}

static seg_ent *seg_exact(backward *b, uint64_t addr)
{
    ptrdiff_t i = seg_floor(b, addr);
    return i >= 0 && b->segs[i].addr == addr ? &b->segs[i] : NULL;
}

/* Inserts [addr, addr + size) unless it overlaps a present segment: 1 inserted, 0 overlap,
 * -1 out of memory. */
static int seg_insert(backward *b, uint64_t addr, uint64_t size)
{
    ptrdiff_t i = seg_floor(b, addr);
    if (i >= 0 && addr - b->segs[i].addr < b->segs[i].size) return 0;
    if (i >= 0 && b->segs[i].addr == addr) return 0;
    size_t at = (size_t)(i + 1);
    if (at < b->n_segs && b->segs[at].addr - addr < size) return 0;
    if (b->n_segs == b->cap_segs) {
        size_t cap = b->cap_segs ? 2 * b->cap_segs : 64;
        seg_ent *v = realloc(b->segs, cap * sizeof *v);
        if (!v) return -1;
        b->segs = v;
        b->cap_segs = cap;
    }
    memmove(&b->segs[at + 1], &b->segs[at], (b->n_segs - at) * sizeof *b->segs);
    b->segs[at] = (seg_ent){addr, size, 0};
    b->n_segs++;
    return 1;
}

static size_t hash_addr(uint64_t a)
{
    return rs_addr_hash(a, rs_addr_hash_seed()); /* seeded: the addresses come from a file */
}

/* The table is sized for every key it can see, so it never fills. */
static blk_ent *blk_get(backward *b, uint64_t addr)
{
    size_t i = hash_addr(addr) & b->mask;
    while (b->blks[i].used) {
        if (b->blks[i].addr == addr) return &b->blks[i];
        i = (i + 1) & b->mask;
    }
    b->blks[i].used = 1;
    b->blks[i].addr = addr;
    return &b->blks[i];
}

static void blk_remove(backward *b, blk_ent *e)
{
    e->present = 0;
    seg_ent *s = seg_exact(b, e->seg_addr);
    if (s && s->n_blocks) s->n_blocks--;
}

static int cmp_seg(const void *pa, const void *pb)
{
    const seg_ent *a = pa, *b = pb;
    return (a->addr > b->addr) - (a->addr < b->addr);
}

/* Fills keep[i] (1 = write event i). Returns the number left out, or -1 when out of memory. */
static int64_t consistent_events(const rs_snap *s, uint8_t *keep)
{
    const rs_snap_history *h = &s->history;
    backward b;
    memset(&b, 0, sizeof b);
    uint64_t keys = 1;
    for (size_t i = 0; i < s->n_segments; i++) keys += s->segments[i].n_blocks;
    for (uint64_t i = 0; i < h->count; i++)
        if (h->action[i] == RS_ACT_FREE_COMPLETED) keys++;
    size_t cap = 16;
    while (cap < 2 * keys && cap < ((size_t)1 << 62)) cap <<= 1;
    b.blks = calloc(cap, sizeof *b.blks);
    b.cap_segs = s->n_segments ? s->n_segments : 1;
    b.segs = malloc(b.cap_segs * sizeof *b.segs);
    if (!b.blks || !b.segs) {
        free(b.blks);
        free(b.segs);
        return -1;
    }
    b.mask = cap - 1;

    for (size_t i = 0; i < s->n_segments; i++)
        b.segs[i] = (seg_ent){s->segments[i].addr, s->segments[i].total_size, 0};
    b.n_segs = s->n_segments;
    qsort(b.segs, b.n_segs, sizeof *b.segs, cmp_seg);
    for (size_t i = 0; i < s->n_segments; i++) {
        const rs_snap_segment *sg = &s->segments[i];
        for (size_t k = 0; k < sg->n_blocks; k++) {
            if (sg->blocks[k].state == RS_BLOCK_INACTIVE) continue;
            blk_ent *e = blk_get(&b, sg->blocks[k].addr);
            seg_ent *se = seg_exact(&b, sg->addr);
            e->present = 1;
            e->seg_addr = sg->addr;
            if (se) se->n_blocks++;
        }
    }

    int64_t left_out = 0;
    for (uint64_t n = h->count; n-- > 0;) {
        uint64_t addr = h->addr[n];
        int ok = 1;
        switch (h->action[n]) {
        case RS_ACT_ALLOC: {
            /* Backwards, an alloc removes its block (the viewer deletes, present or not). */
            size_t i = hash_addr(addr) & b.mask;
            while (b.blks[i].used && b.blks[i].addr != addr) i = (i + 1) & b.mask;
            if (b.blks[i].used && b.blks[i].present) blk_remove(&b, &b.blks[i]);
            break;
        }
        case RS_ACT_FREE_REQUESTED: {
            size_t i = hash_addr(addr) & b.mask;
            while (b.blks[i].used && b.blks[i].addr != addr) i = (i + 1) & b.mask;
            ok = b.blks[i].used && b.blks[i].present;
            break;
        }
        case RS_ACT_FREE_COMPLETED: {
            /* Backwards, the block comes back; it must not be there already and must lie in a
             * segment present at that moment. */
            blk_ent *e = blk_get(&b, addr);
            seg_ent *se = e->present ? NULL : seg_containing(&b, addr);
            ok = se != NULL;
            if (ok) {
                e->present = 1;
                e->seg_addr = se->addr;
                se->n_blocks++;
            }
            break;
        }
        case RS_ACT_SEGMENT_FREE: {
            int r = seg_insert(&b, addr, h->size[n]);
            if (r < 0) {
                free(b.blks);
                free(b.segs);
                return -1;
            }
            ok = r == 1;
            break;
        }
        case RS_ACT_SEGMENT_ALLOC: {
            seg_ent *se = seg_exact(&b, addr);
            ok = se && se->n_blocks == 0;
            if (ok) {
                size_t at = (size_t)(se - b.segs);
                memmove(&b.segs[at], &b.segs[at + 1], (b.n_segs - at - 1) * sizeof *b.segs);
                b.n_segs--;
            }
            break;
        }
        default:
            break;
        }
        keep[n] = (uint8_t)ok;
        if (!ok) left_out++;
    }
    free(b.blks);
    free(b.segs);
    return left_out;
}

/* ---- a rank recorded at the CUDA driver ----------------------------------------------------- */

typedef struct live_ent {
    uint64_t addr, event;
} live_ent;

static int cmp_live(const void *pa, const void *pb)
{
    const live_ent *a = pa, *b = pb;
    return (a->addr > b->addr) - (a->addr < b->addr);
}

/* emit[i] = 1 for each outside event to write (an allocation, or the free of one the history
 * allocated), and the allocations alive at the end in *live (malloc'ed, address order), *n_live
 * of them. -1 when out of memory. */
static int driver_events(const rs_snap *s, uint8_t *emit, live_ent **live, size_t *n_live)
{
    const rs_snap_history *h = &s->history;
    size_t cap = 16;
    while (cap < 2 * h->count + 2) cap <<= 1;
    uint64_t *slot = calloc(cap, sizeof *slot); /* event index + 1; 0 empty, UINT64_MAX deleted */
    *live = NULL;
    *n_live = 0;
    if (!slot) return -1;
    for (uint64_t i = 0; i < h->count; i++) {
        uint8_t a = h->action[i];
        emit[i] = 0;
        if (!rs_action_outside_alloc(a) && !rs_action_outside_free(a)) continue;
        size_t j = hash_addr(h->addr[i]) & (cap - 1), del = cap;
        for (; slot[j]; j = (j + 1) & (cap - 1)) {
            if (slot[j] == UINT64_MAX) {
                if (del == cap) del = j;
                continue;
            }
            if (h->addr[slot[j] - 1] == h->addr[i]) break;
        }
        if (rs_action_outside_alloc(a)) {
            /* an address given again without its free seen: the older one is not written */
            if (slot[j]) emit[slot[j] - 1] = 0;
            else if (del != cap) j = del;
            slot[j] = i + 1;
            emit[i] = 1;
        } else if (slot[j]) {
            slot[j] = UINT64_MAX;
            emit[i] = 1;
        }
    }
    size_t n = 0;
    for (size_t j = 0; j < cap; j++) n += slot[j] && slot[j] != UINT64_MAX;
    live_ent *v = malloc((n ? n : 1) * sizeof *v);
    if (v) {
        for (size_t j = 0; j < cap; j++)
            if (slot[j] && slot[j] != UINT64_MAX) v[(*n_live)++] = (live_ent){h->addr[slot[j] - 1], slot[j] - 1};
        qsort(v, *n_live, sizeof *v, cmp_live); /* address order, as segments are listed */
    }
    free(slot);
    *live = v;
    return v ? 0 : -1;
}

/* ---- writing ---------------------------------------------------------------------------- */

typedef struct exporter {
    const rs_snap *s;
    const rs_export_torch_options *opt;
    rs_pickler w;
    int64_t *stack_memo; /* [n_stacks + 1]: memo index of the frames list, -1 = not written */
    int64_t *frame_memo; /* [n_frames]: memo index of the frame dict, -1 = not written     */
    int device;
} exporter;

/* The viewer prints filename:line:name. A frame without debug information still has its
 * module, which says more than "??". */
static const char *frame_file(const rs_snap *s, const rs_snap_frame *f)
{
    if ((f->file[0] == '\0' || strcmp(f->file, "??") == 0) && f->module >= 0 &&
        (size_t)f->module < s->n_modules && s->modules[f->module].path[0])
        return s->modules[f->module].path;
    return f->file;
}

static void key(exporter *x, rs_pickler_seq *q, const char *k)
{
    rs_pickler_item(&x->w, q);
    rs_pickler_str_shared(&x->w, k);
}

static void write_frame(exporter *x, uint32_t fi)
{
    if (x->frame_memo[fi] >= 0) {
        rs_pickler_get(&x->w, (uint32_t)x->frame_memo[fi]);
        return;
    }
    const rs_snap_frame *f = &x->s->frames[fi];
    rs_pickler_seq d;
    rs_pickler_dict_open(&x->w, &d);
    x->frame_memo[fi] = rs_pickler_memoize(&x->w);
    key(x, &d, "name");
    rs_pickler_str_shared(&x->w, f->function);
    key(x, &d, "filename");
    rs_pickler_str_shared(&x->w, frame_file(x->s, f));
    key(x, &d, "line");
    rs_pickler_int(&x->w, f->line);
    rs_pickler_close(&x->w, &d);
}

/* The frames list of stack `id`, innermost first; one shared empty list for "no stack". */
static void write_frames(exporter *x, uint32_t id)
{
    const rs_snap *s = x->s;
    if (id > s->n_stacks) id = 0;
    if (x->stack_memo[id] >= 0) {
        rs_pickler_get(&x->w, (uint32_t)x->stack_memo[id]);
        return;
    }
    rs_pickler_seq l;
    rs_pickler_list_open(&x->w, &l);
    x->stack_memo[id] = rs_pickler_memoize(&x->w);
    if (id > 0) {
        const rs_snap_stack *st = &s->stacks[id - 1];
        size_t first = 0;
        if (!x->opt->keep_own_frames) {
            while (first < st->n_frames && rs_site_rules_is_ranksnaps(s, &s->frames[st->frames[first]])) first++;
            if (first == st->n_frames) first = 0; /* only our frames: keep them all */
        }
        for (size_t k = first; k < st->n_frames; k++) {
            rs_pickler_item(&x->w, &l);
            write_frame(x, st->frames[k]);
        }
    }
    rs_pickler_close(&x->w, &l);
}

/* cudaStream_t as PyTorch writes it: int64_t(stream). */
static void write_stream(exporter *x, uint32_t idx)
{
    uint64_t handle = idx < x->s->n_streams ? x->s->streams[idx] : 0;
    rs_pickler_int(&x->w, (int64_t)handle);
}

static void write_block(exporter *x, const rs_snap_block *bl)
{
    rs_pickler_seq d;
    rs_pickler_dict_open(&x->w, &d);
    key(x, &d, "address");
    rs_pickler_uint(&x->w, bl->addr);
    key(x, &d, "size");
    rs_pickler_uint(&x->w, bl->size);
    key(x, &d, "requested_size");
    rs_pickler_uint(&x->w, bl->requested_size);
    key(x, &d, "state");
    rs_pickler_str_shared(&x->w, bl->state == RS_BLOCK_ACTIVE_ALLOCATED      ? "active_allocated"
                            : bl->state == RS_BLOCK_ACTIVE_AWAITING_FREE ? "active_pending_free"
                                                                         : "inactive");
    key(x, &d, "frames");
    write_frames(x, bl->state == RS_BLOCK_INACTIVE ? 0 : bl->stack);
    rs_pickler_close(&x->w, &d);
}

static void write_segment(exporter *x, const rs_snap_segment *sg)
{
    rs_pickler *w = &x->w;
    rs_pickler_seq d, bl;
    rs_pickler_dict_open(w, &d);
    key(x, &d, "device");
    rs_pickler_int(w, x->device);
    key(x, &d, "address");
    rs_pickler_uint(w, sg->addr);
    key(x, &d, "total_size");
    rs_pickler_uint(w, sg->total_size);
    key(x, &d, "allocated_size");
    rs_pickler_uint(w, sg->allocated_size);
    key(x, &d, "active_size");
    rs_pickler_uint(w, sg->active_size);
    key(x, &d, "requested_size");
    rs_pickler_uint(w, sg->requested_size);
    key(x, &d, "stream");
    write_stream(x, sg->stream);
    key(x, &d, "segment_type");
    rs_pickler_str_shared(w, sg->is_small ? "small" : "large");
    key(x, &d, "segment_pool_id");
    rs_pickler_uint(w, sg->pool_id[0]);
    rs_pickler_uint(w, sg->pool_id[1]);
    rs_pickler_tuple2(w);
    key(x, &d, "is_expandable");
    rs_pickler_bool(w, 0);
    key(x, &d, "frames");
    write_frames(x, sg->stack);
    key(x, &d, "blocks");
    rs_pickler_list_open(w, &bl);
    for (size_t k = 0; k < sg->n_blocks; k++) {
        rs_pickler_item(w, &bl);
        write_block(x, &sg->blocks[k]);
    }
    rs_pickler_close(w, &bl);
    rs_pickler_close(w, &d);
}

/* History event i as a trace entry of action `a` (its own, or what a driver event stands for). */
static void write_entry_as(exporter *x, uint64_t i, uint8_t a)
{
    const rs_snap_history *h = &x->s->history;
    rs_pickler *w = &x->w;
    rs_pickler_seq d;
    rs_pickler_dict_open(w, &d);
    key(x, &d, "action");
    rs_pickler_str_shared(w, rs_action_name(a));
    /* An oom entry's address slot is the device's free memory, under that name. */
    key(x, &d, a == RS_ACT_OOM ? "device_free" : "addr");
    rs_pickler_uint(w, h->addr[i]);
    key(x, &d, "size");
    rs_pickler_uint(w, h->size[i]);
    key(x, &d, "stream");
    write_stream(x, h->stream[i]);
    key(x, &d, "time_us");
    rs_pickler_uint(w, h->time_us[i]);
    key(x, &d, "compile_context");
    rs_pickler_str_shared(w, "N/A");
    key(x, &d, "user_metadata");
    rs_pickler_str_shared(w, "");
    key(x, &d, "frames");
    write_frames(x, h->stack[i]);
    rs_pickler_close(w, &d);
}

static void write_entry(exporter *x, uint64_t i)
{
    write_entry_as(x, i, x->s->history.action[i]);
}

/* A driver allocation alive at the end (history event i): a segment of one block. */
static void write_driver_segment(exporter *x, uint64_t i)
{
    const rs_snap_history *h = &x->s->history;
    rs_snap_block bl = {h->addr[i], h->size[i], h->size[i], h->stack[i], RS_BLOCK_ACTIVE_ALLOCATED};
    rs_snap_segment sg;
    memset(&sg, 0, sizeof sg);
    sg.addr = bl.addr;
    sg.total_size = sg.allocated_size = sg.active_size = sg.requested_size = bl.size;
    sg.stream = h->stream[i];
    sg.stack = bl.stack;
    sg.n_blocks = 1;
    sg.blocks = &bl;
    write_segment(x, &sg);
}

static int is_trace_action(uint8_t a)
{
    return a <= RS_ACT_OOM;
}

static void write_annotation(exporter *x, rs_pickler_seq *list, const char *name, const char *stage,
                             uint64_t time_us)
{
    rs_pickler *w = &x->w;
    rs_pickler_seq d;
    rs_pickler_item(w, list);
    rs_pickler_dict_open(w, &d);
    key(x, &d, "name");
    rs_pickler_str_shared(w, name);
    key(x, &d, "stage");
    rs_pickler_str_shared(w, stage);
    key(x, &d, "device");
    rs_pickler_int(w, x->device);
    key(x, &d, "time_us");
    rs_pickler_uint(w, time_us);
    rs_pickler_close(w, &d);
}

/* Step markers as the profiler's ProfilerStep#N ranges, annotations as themselves. */
static uint64_t write_annotations(exporter *x)
{
    const rs_snap *s = x->s;
    const rs_snap_history *h = &s->history;
    rs_pickler_seq l;
    uint64_t n = 0;
    char open_step[40] = "";
    rs_pickler_list_open(&x->w, &l);
    for (uint64_t i = 0; i < h->count; i++) {
        uint8_t a = h->action[i];
        if (a == RS_ACT_STEP) {
            if (open_step[0]) {
                write_annotation(x, &l, open_step, "END", h->time_us[i]);
                n++;
            }
            snprintf(open_step, sizeof open_step, "ProfilerStep#%lld", (long long)(int64_t)h->size[i]);
            write_annotation(x, &l, open_step, "START", h->time_us[i]);
            n++;
        } else if ((a == RS_ACT_ANNOTATION_BEGIN || a == RS_ACT_ANNOTATION_END) &&
                   h->addr[i] < s->n_strings) {
            write_annotation(x, &l, s->strings[h->addr[i]],
                             a == RS_ACT_ANNOTATION_BEGIN ? "START" : "END", h->time_us[i]);
            n++;
        }
    }
    rs_pickler_close(&x->w, &l);
    return n;
}

/* PyTorch 2.11's allocator_settings, in its key order, from the settings the snapshot recorded
 * (PYTORCH_CUDA_ALLOC_CONF: the string the job gave, else the settings in force written in its
 * syntax). */
static void write_settings(exporter *x)
{
    rs_pickler *w = &x->w;
    rs_pickler_seq d, r;
    const rs_alloc_conf *c = &x->s->allocator.conf;
    uint64_t mss = x->s->allocator.max_split_size;
    char conf[RS_CONF_TEXT_MAX];
    if (c->text[0])
        snprintf(conf, sizeof conf, "%s", c->text);
    else
        rs_alloc_conf_describe(c, NULL, conf, sizeof conf);
    rs_pickler_dict_open(w, &d);
    key(x, &d, "PYTORCH_CUDA_ALLOC_CONF");
    rs_pickler_str(w, conf);
    key(x, &d, "max_split_size");
    /* PyTorch writes int64_t(SIZE_MAX), i.e. -1, for "no limit". */
    rs_pickler_int(w, mss == UINT64_MAX || mss > (uint64_t)INT64_MAX ? -1 : (int64_t)mss);
    key(x, &d, "garbage_collection_threshold");
    rs_pickler_float(w, c->garbage_collection_threshold);
    key(x, &d, "expandable_segments");
    rs_pickler_bool(w, c->expandable_segments);
    key(x, &d, "pinned_num_register_threads");
    rs_pickler_int(w, c->pinned_num_register_threads ? (int64_t)c->pinned_num_register_threads : 1);
    key(x, &d, "release_lock_on_cudamalloc");
    rs_pickler_bool(w, c->release_lock_on_cudamalloc);
    key(x, &d, "pinned_use_cuda_host_register");
    rs_pickler_bool(w, c->pinned_use_cuda_host_register);
    key(x, &d, "graph_capture_record_stream_reuse");
    rs_pickler_bool(w, c->graph_capture_record_stream_reuse);
    key(x, &d, "roundup_power2_divisions");
    rs_pickler_dict_open(w, &r);
    for (unsigned k = 0; k < RS_CONF_INTERVALS; k++) {
        char name[8];
        snprintf(name, sizeof name, "%u", 1u << k);
        key(x, &r, name);
        rs_pickler_int(w, c->roundup_divisions[k]);
    }
    rs_pickler_close(w, &r);
    rs_pickler_close(w, &d);
}

ranksnap_status rs_export_torch(const rs_snap *s, const char *name_for_errors,
                                 const rs_export_torch_options *opt, unsigned char **buf, size_t *len,
                                 rs_export_torch_info *info)
{
    static const rs_export_torch_options defaults = {0};
    const char *name = name_for_errors ? name_for_errors : "snapshot";
    rs_export_torch_info local;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    if (!s || !buf || !len)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_export_torch: NULL argument");
    *buf = NULL;
    *len = 0;
    int device = s->device.index < 0 ? 0 : s->device.index;
    if (device > MAX_DEVICE_INDEX)
        return rs_error(RANKSNAP_ERR_FORMAT,
                        "%s: device index %d: expected at most %d (device_traces has one list "
                        "per device up to ours)",
                        name, s->device.index, MAX_DEVICE_INDEX);

    exporter x;
    memset(&x, 0, sizeof x);
    x.s = s;
    x.opt = opt ? opt : &defaults;
    x.device = device;
    const rs_snap_history *h = &s->history;
    uint8_t *keep = malloc(h->count ? h->count : 1);
    x.stack_memo = malloc((s->n_stacks + 1) * sizeof *x.stack_memo);
    x.frame_memo = malloc((s->n_frames ? s->n_frames : 1) * sizeof *x.frame_memo);
    int64_t left_out = keep ? consistent_events(s, keep) : -1;
    if (!keep || !x.stack_memo || !x.frame_memo || left_out < 0) {
        free(keep);
        free(x.stack_memo);
        free(x.frame_memo);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory to export %llu events", name,
                        (unsigned long long)h->count);
    }
    for (size_t i = 0; i <= s->n_stacks; i++) x.stack_memo[i] = -1;
    for (size_t i = 0; i < s->n_frames; i++) x.frame_memo[i] = -1;
    info->left_out = (uint64_t)left_out;
    /* a PyTorch rank recorded at the driver: its allocator's memory is the driver's events */
    int driver = s->time.recorded_by != NULL;
    uint8_t *emit = driver ? malloc(h->count ? h->count : 1) : NULL;
    live_ent *live = NULL;
    size_t n_live = 0;
    if (driver && (!emit || driver_events(s, emit, &live, &n_live) != 0)) {
        free(emit);
        free(keep);
        free(x.stack_memo);
        free(x.frame_memo);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory to export %llu events", name,
                        (unsigned long long)h->count);
    }

    rs_pickler *w = &x.w;
    rs_pickler_seq top, segs, traces, trace;
    rs_pickler_init(w);
    rs_pickler_proto(w);
    rs_pickler_dict_open(w, &top);

    key(&x, &top, "segments");
    rs_pickler_list_open(w, &segs);
    for (size_t i = 0; i < s->n_segments; i++) {
        rs_pickler_item(w, &segs);
        write_segment(&x, &s->segments[i]);
    }
    for (size_t i = 0; i < n_live; i++) {
        rs_pickler_item(w, &segs);
        write_driver_segment(&x, live[i].event);
    }
    info->segments = s->n_segments + n_live;
    rs_pickler_close(w, &segs);

    key(&x, &top, "device_traces");
    rs_pickler_list_open(w, &traces);
    for (int d = 0; d < device; d++) {
        rs_pickler_seq empty;
        rs_pickler_item(w, &traces);
        rs_pickler_list_open(w, &empty);
        rs_pickler_close(w, &empty);
    }
    rs_pickler_item(w, &traces);
    rs_pickler_list_open(w, &trace);
    for (uint64_t i = 0; i < h->count; i++) {
        uint8_t a = h->action[i];
        if (driver && emit[i]) {
            static const uint8_t alloc[] = {RS_ACT_SEGMENT_ALLOC, RS_ACT_ALLOC};
            static const uint8_t release[] = {RS_ACT_FREE_REQUESTED, RS_ACT_FREE_COMPLETED,
                                              RS_ACT_SEGMENT_FREE};
            int is_alloc = rs_action_outside_alloc(a);
            const uint8_t *as = is_alloc ? alloc : release;
            for (int k = 0; k < (is_alloc ? 2 : 3); k++) {
                rs_pickler_item(w, &trace);
                write_entry_as(&x, i, as[k]);
                info->trace_entries++;
            }
            info->allocs += (uint64_t)is_alloc;
            continue;
        }
        if (!is_trace_action(a)) {
            if (a >= RS_ACT_COUNT_) info->unknown_actions++;
            continue;
        }
        if (!keep[i]) continue;
        rs_pickler_item(w, &trace);
        write_entry(&x, i);
        info->trace_entries++;
        if (a == RS_ACT_ALLOC) info->allocs++;
    }
    rs_pickler_close(w, &trace);
    rs_pickler_close(w, &traces);

    key(&x, &top, "allocator_settings");
    write_settings(&x);
    key(&x, &top, "external_annotations");
    info->annotations = write_annotations(&x);

    rs_pickler_close(w, &top);
    rs_pickler_stop(w);
    free(emit);
    free(live);
    free(keep);
    free(x.stack_memo);
    free(x.frame_memo);
    ranksnap_status st = rs_pickler_finish(w, buf, len);
    rs_pickler_free(w);
    if (st != RANKSNAP_OK)
        return rs_error(st, "%s: %s", name, ranksnap_last_error());
    return RANKSNAP_OK;
}
