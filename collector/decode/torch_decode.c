/*
 * torch_decode.c — maps PyTorch's memory snapshot (the dict torch.cuda.memory._dump_snapshot
 * pickles) onto rs_snap, the model the comparison and the reports read.
 *
 * The pickle is decoded by pickle.c into a value tree; this file walks the fixed shape PyTorch
 * writes (docs/PYTORCH.md has the field by field mapping) and checks the type of every field it
 * reads, naming the field and the byte offset of the value when one is wrong. Fields it does not
 * use (is_expandable, compile_context, user_metadata, external_annotations,
 * most of allocator_settings) are not looked at, so newer PyTorch versions that add fields still
 * read. Trace actions it does not know are skipped rather than refused, for the same reason.
 *
 * What PyTorch does not record is derived: frames are interned into the frame and stack tables
 * (the trace repeats the same stacks thousands of times); the totals come from the final state
 * (current values) and a replay of the trace (peaks, the levels at the OOM); the rank comes from
 * the caller; and training steps are inferred from the repeating allocation pattern
 * (steps_infer.c). The snapshot is marked so that sites skip torch's and Python's own frames.
 *
 * The parts: torch_fields.c (typed field access, the dicts read in one pass, the caches),
 * torch_frames.c (streams, frames, stacks), torch_segments.c (segments and blocks),
 * torch_history.c (the trace); the state they share is in torch_mapper.h. This file reads the
 * document's root, the allocator settings and the identity, and is the entry point.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "addr_hash.h"
#include "errors.h"
#include "file_read.h"
#include "pickle.h"
#include "rsnap_decode.h"
#include "sat.h"
#include "snap_check.h"
#include "steps_infer.h"
#include "torch_decode.h"
#include "torch_meta.h"
#include "torch_trace.h"
#include "walk.h"
#include "torch_fields.h"
#include "torch_frames.h"
#include "torch_history.h"
#include "torch_segments.h"

void rs_torch_opts_default(rs_torch_opts *o)
{
    o->rank = 0;
    o->device = -1;
    o->infer_steps = 1;
    o->stream = 1;
    o->read_entries = 1;
    o->read_count = NULL;
}

int rs_torch_is_pickle(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    return len >= 2 && p[0] == 0x80 && p[1] >= 2 && p[1] <= 5;
}

static ranksnap_status set_identity(mapper *m, const rs_torch_opts *o, int64_t device)
{
    rs_snap *s = m->s;
    s->version = RSNAP_FORMAT_VERSION;
    s->rank = o->rank;
    /* PyTorch records no world size; the rank proves at least this many. */
    s->world_size = o->rank + 1;
    s->complete = 1;
    s->pid = 0;
    s->device.index = device < 0 ? 0 : (int)device;
    s->host = rs_tm_copy_str(NULL, "");
    s->job = rs_tm_copy_str(NULL, "");
    s->backend = rs_tm_copy_str(NULL, "torch");
    s->device.name = rs_tm_copy_str(NULL, "unknown (PyTorch snapshot)");
    s->device.uuid = rs_tm_copy_str(NULL, "");
    s->recorder.stacks = rs_tm_copy_str(NULL, "torch");
    if (!s->host || !s->job || !s->backend || !s->device.name || !s->device.uuid ||
        !s->recorder.stacks)
        return rs_tm_no_memory(m, "the snapshot's names");
    s->allocator.min_block_size = TORCH_MIN_BLOCK;
    s->allocator.small_size = TORCH_SMALL_SIZE;
    s->allocator.small_buffer = TORCH_SMALL_BUFFER;
    s->allocator.large_buffer = TORCH_LARGE_BUFFER;
    s->allocator.min_large_alloc = TORCH_MIN_LARGE_ALLOC;
    s->allocator.round_large = TORCH_ROUND_LARGE;
    s->allocator.max_split_size = UINT64_MAX;
    s->time.current_step = -1;
    return RANKSNAP_OK;
}

/* allocator_settings: PyTorch's settings at dump time. The string (PYTORCH_CUDA_ALLOC_CONF, the
 * last one parsed) is read first, for the keys that have no field of their own
 * (large_segment_size_mb, max_non_split_rounding_mb, per_process_memory_fraction); the fields then
 * say what was in force. max_split_size is SIZE_MAX (or -1) for "unlimited"; roundup_power2_divisions
 * a dict from each interval's start in MiB ('1' .. '32768') to its divisions. A string this parser
 * refuses is kept as text only: the fields still count. */
static void allocator_settings(rs_snap *s, const rs_pickle_value *settings)
{
    rs_alloc_conf *c = &s->allocator.conf;
    int64_t v;
    uint64_t u;
    rs_alloc_conf_reset(c);
    const rs_pickle_value *x = rs_pickle_dict_get(settings, "PYTORCH_CUDA_ALLOC_CONF");
    char text[RS_CONF_TEXT_MAX] = "", why[256];
    if (x && x->kind == RS_PICKLE_STR && x->v.str.n < sizeof text) {
        memcpy(text, x->v.str.p, x->v.str.n);
        text[x->v.str.n] = '\0';
        rs_alloc_conf tmp = *c;
        if (rs_alloc_conf_parse(&tmp, text, RS_CONF_LENIENT, why, sizeof why) == 0) *c = tmp;
        snprintf(c->text, sizeof c->text, "%s", text);
    }
    x = rs_pickle_dict_get(settings, "max_split_size");
    if (rs_pickle_get_u64(x, &u) == 0 && u > 0)
        c->max_split_size = u == UINT64_MAX ? 0 : u;
    else if (rs_pickle_get_i64(x, &v) == 0 && v < 0)
        c->max_split_size = 0;
    x = rs_pickle_dict_get(settings, "garbage_collection_threshold");
    if (x && x->kind == RS_PICKLE_FLOAT && x->v.f > 0.0 && x->v.f < 1.0)
        c->garbage_collection_threshold = x->v.f;
    else if (x && x->kind == RS_PICKLE_FLOAT && x->v.f == 0.0)
        c->garbage_collection_threshold = 0.0;
    x = rs_pickle_dict_get(settings, "expandable_segments");
    if (x && x->kind == RS_PICKLE_BOOL) c->expandable_segments = x->v.b != 0;
    x = rs_pickle_dict_get(settings, "roundup_power2_divisions");
    for (unsigned k = 0; x && k < RS_CONF_INTERVALS; k++) {
        char key[8];
        snprintf(key, sizeof key, "%u", 1u << k);
        if (rs_pickle_get_u64(rs_pickle_dict_get(x, key), &u) == 0 && u <= UINT32_MAX &&
            (u & (u - 1)) == 0)
            c->roundup_divisions[k] = (uint32_t)u;
    }
    s->allocator.max_split_size = rs_alloc_conf_max_split(c);
    s->allocator.large_buffer = rs_alloc_conf_large_segment(c);
}

static ranksnap_status map_root(mapper *m, const rs_pickle_value *root, const rs_torch_opts *o)
{
    rs_snap *s = m->s;
    if (root->kind != RS_PICKLE_DICT)
        return rs_tm_bad(m, root, NULL, NULL,
                   "expected a dict at the top (torch.cuda.memory._snapshot()), found %s",
                   rs_pickle_kind_name(root->kind));
    const rs_pickle_value *segments, *traces;
    RS_CHECK(rs_tm_val_list(m, rs_pickle_dict_get(root, "segments"), "segments", NULL, &segments));
    RS_CHECK(rs_tm_val_list(m, rs_pickle_dict_get(root, "device_traces"), "device_traces", NULL, &traces));
    if (!segments && !traces)
        return rs_tm_bad(m, root, NULL, NULL, "neither segments nor device_traces: not a PyTorch "
                                        "memory snapshot");
    for (size_t i = 0; i < rs_pickle_len(traces); i++) {
        loc l = rs_tm_loc_down(NULL, "device_traces", i);
        const rs_pickle_value *t = rs_pickle_item(traces, i);
        if (t->kind != RS_PICKLE_LIST && t->kind != RS_PICKLE_TUPLE)
            return rs_tm_bad(m, t, &l, NULL, "expected a list, found %s", rs_pickle_kind_name(t->kind));
    }
    int64_t device = o->device;
    if (device < 0) RS_CHECK(rs_tm_majority_device(m, segments, &device));
    if (device < 0 || (o->device < 0 && (size_t)device >= rs_pickle_len(traces) && rs_pickle_len(traces))) {
        /* No segments (or none on a device with a trace): the busiest trace. */
        size_t best = 0;
        for (size_t i = 0; i < rs_pickle_len(traces); i++)
            if (rs_tm_trace_len(m, traces, i) > rs_tm_trace_len(m, traces, best)) best = i;
        if (rs_pickle_len(traces)) device = (int64_t)best;
        if (device < 0) device = 0;
    }
    if (o->device >= 0 && traces && (size_t)o->device >= rs_pickle_len(traces))
        return rs_tm_bad(m, traces, NULL, "device_traces",
                   "device %d has no trace (the snapshot has %zu)", o->device, rs_pickle_len(traces));
    RS_CHECK(set_identity(m, o, device));
    RS_CHECK(rs_tm_map_segments(m, segments, device));
    if ((size_t)device < rs_pickle_len(traces))
        RS_CHECK(rs_tm_map_trace(m, rs_pickle_item(traces, (size_t)device), (size_t)device));
    allocator_settings(s, rs_pickle_dict_get(root, "allocator_settings"));
    /* Every index must be valid even with no event or segment: one stream at least. */
    if (s->n_streams == 0) {
        uint32_t unused;
        RS_CHECK(rs_tm_stream_index(m, 0, &unused));
    }
    /* ranksnap's PyTorch glue: identity, steps and outside memory (torch_meta.c) */
    RS_CHECK(rs_torch_meta_apply(rs_pickle_dict_get(root, "ranksnap"), m->name, s));
    if (o->infer_steps) {
        rs_steps_infer_result found;
        RS_CHECK(rs_steps_infer(s, &found));
    }
    return rs_tm_totals(m);
}

static void mapper_free(mapper *m)
{
    free(m->frame_slot);
    free(m->frame_hash);
    free(m->stack_slot);
    free(m->stack_hash);
    free(m->scratch);
    rs_tm_idcache_free(&m->frame_ids);
    free(m->frame_dicts);
    free(m->stack_items);
    for (size_t i = 0; i < m->n_streamed; i++) rs_tm_streamed_free(&m->streamed[i]);
    free(m->streamed);
    rs_torch_trace_free(m->trace);
    rs_tm_idcache_free(&m->seen);
    free(m->stream_key);
    free(m->stream_slot);
}

ranksnap_status rs_torch_decode(const void *buf, size_t len, const char *name,
                                  const rs_torch_opts *opts, rs_snap **out)
{
    if (!out || (!buf && len))
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_torch_decode: NULL argument");
    *out = NULL;
    rs_torch_opts o;
    if (opts)
        o = *opts;
    else
        rs_torch_opts_default(&o);
    if (!name) name = "pickle";
    if (o.rank < 0 || o.rank == INT32_MAX)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "%s: rank %d is not a rank", name, o.rank);
    rs_pickle_doc *doc = NULL;
    mapper m;
    memset(&m, 0, sizeof m);
    m.name = name;
    m.len = len;
    m.seed = rs_addr_hash_seed();
    m.s = calloc(1, sizeof *m.s);
    m.frame_dicts = rs_tm_ptr_cache_new();
    m.stack_items = rs_tm_ptr_cache_new();
    /* the trace's entries are read as the pickle is: they never all sit in memory as values */
    rs_pickle_stream stream = {.key = "device_traces", .take = rs_tm_take_entries, .ctx = &m};
    /* and each read from its bytes where it can be (torch_trace.h) */
    if (o.read_entries && (m.trace = rs_torch_trace_new()) != NULL) stream.read = rs_tm_read_entry;
    ranksnap_status st = m.s && m.frame_dicts && m.stack_items ? RANKSNAP_OK
                                                               : rs_tm_no_memory(&m, "a snapshot");
    if (st == RANKSNAP_OK) st = rs_pickle_decode_stream(buf, len, name, o.stream ? &stream : NULL, &doc);
    if (st == RANKSNAP_OK) st = map_root(&m, rs_pickle_root(doc), &o);
    if (st == RANKSNAP_OK) st = rs_snap_check(m.s, name); /* the model's one check (snap_check.h) */
    if (o.read_count) *o.read_count = m.n_read;
    mapper_free(&m);
    rs_pickle_free(doc);
    if (st != RANKSNAP_OK) {
        rs_snap_free(m.s);
        return st;
    }
    *out = m.s;
    return RANKSNAP_OK;
}

ranksnap_status rs_torch_decode_file(const char *path, int rank, rs_snap **out)
{
    if (!path || !out)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_torch_decode_file: NULL argument");
    *out = NULL;
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    o.rank = rank;
    char *buf;
    size_t len;
    RS_CHECK(rs_file_read(path, 0, &buf, &len));
    ranksnap_status st = rs_torch_decode(buf, len, path, &o, out);
    free(buf);
    return st;
}
