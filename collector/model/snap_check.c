/*
 * snap_check.c — rs_snap_check (snap_check.h): a decoded snapshot's invariants, checked in one place.
 */
#include <inttypes.h>

#include "snap_check.h"
#include "errors.h"
#include "format.h"

#define BAD(...) rs_error(RANKSNAP_ERR_FORMAT, __VA_ARGS__)

static ranksnap_status check_strings(const rs_snap *s, const char *n)
{
    if (!s->host || !s->job || !s->backend || !s->device.name || !s->device.uuid || !s->recorder.stacks)
        return BAD("%s: an identity string (host, job, backend, device, stacks) is missing", n);
    if (s->n_strings && !s->strings) return BAD("%s: %zu strings but no table", n, s->n_strings);
    for (size_t i = 0; i < s->n_strings; i++)
        if (!s->strings[i]) return BAD("%s: string %zu is missing", n, i);
    if (s->totals.n_outside_labels && !s->totals.outside_labels)
        return BAD("%s: %zu outside labels but no table", n, s->totals.n_outside_labels);
    for (size_t i = 0; i < s->totals.n_outside_labels; i++)
        if (!s->totals.outside_labels[i].label) return BAD("%s: outside label %zu is missing", n, i);
    return RANKSNAP_OK;
}

static ranksnap_status check_history(const rs_snap *s, const char *n)
{
    const rs_snap_history *h = &s->history;
    if (h->count && (!h->time_us || !h->action || !h->addr || !h->size || !h->stream || !h->stack))
        return BAD("%s: %" PRIu64 " events but a column is missing", n, h->count);
    if (h->held > h->count)
        return BAD("%s: %" PRIu64 " held events, but the history has %" PRIu64, n, h->held, h->count);
    for (uint64_t i = 0; i < h->count; i++) {
        if (h->stream[i] >= s->n_streams)
            return BAD("%s: history event %" PRIu64 " is on stream %" PRIu32 ", but there are %zu streams",
                       n, i, h->stream[i], s->n_streams);
        if (h->stack[i] > s->n_stacks)
            return BAD("%s: history event %" PRIu64 " has stack %" PRIu32 ", but there are %zu stacks",
                       n, i, h->stack[i], s->n_stacks);
        if ((h->action[i] == RS_ACT_ANNOTATION_BEGIN || h->action[i] == RS_ACT_ANNOTATION_END) &&
            h->addr[i] >= s->n_strings)
            return BAD("%s: history event %" PRIu64 " is an annotation of string %" PRIu64
                       ", but there are %zu strings", n, i, h->addr[i], s->n_strings);
    }
    return RANKSNAP_OK;
}

static ranksnap_status check_segments(const rs_snap *s, const char *n)
{
    if (s->n_segments && !s->segments) return BAD("%s: %zu segments but no table", n, s->n_segments);
    for (size_t i = 0; i < s->n_segments; i++) {
        const rs_snap_segment *g = &s->segments[i];
        if (g->stream >= s->n_streams)
            return BAD("%s: segment %zu is on stream %" PRIu32 ", but there are %zu streams", n, i,
                       g->stream, s->n_streams);
        if (g->stack > s->n_stacks)
            return BAD("%s: segment %zu has stack %" PRIu32 ", but there are %zu stacks", n, i,
                       g->stack, s->n_stacks);
        if (i > 0 && g->addr < s->segments[i - 1].addr)
            return BAD("%s: segment %zu (0x%" PRIx64 ") is below the one before it: not in address "
                       "order", n, i, g->addr);
        if (g->n_blocks && !g->blocks) return BAD("%s: segment %zu has %zu blocks but no table", n, i, g->n_blocks);
        for (size_t k = 0; k < g->n_blocks; k++) {
            const rs_snap_block *b = &g->blocks[k];
            if (b->stack > s->n_stacks)
                return BAD("%s: segment %zu block %zu has stack %" PRIu32 ", but there are %zu stacks",
                           n, i, k, b->stack, s->n_stacks);
            if (b->state >= RS_BLOCK_STATE_COUNT_)
                return BAD("%s: segment %zu block %zu has state %u, which is none", n, i, k,
                           (unsigned)b->state);
            if (k > 0 && b->addr < g->blocks[k - 1].addr)
                return BAD("%s: segment %zu block %zu is below the one before it: not in address "
                           "order", n, i, k);
        }
    }
    return RANKSNAP_OK;
}

static ranksnap_status check_stacks(const rs_snap *s, const char *n)
{
    if (s->n_stacks && !s->stacks) return BAD("%s: %zu stacks but no table", n, s->n_stacks);
    for (size_t i = 0; i < s->n_stacks; i++) {
        if (s->stacks[i].n_frames && !s->stacks[i].frames)
            return BAD("%s: stack %zu has frames but no table", n, i + 1);
        for (size_t k = 0; k < s->stacks[i].n_frames; k++)
            if (s->stacks[i].frames[k] >= s->n_frames)
                return BAD("%s: stack %zu frame %zu is frame %" PRIu32 ", but there are %zu frames", n,
                           i + 1, k, s->stacks[i].frames[k], s->n_frames);
    }
    if (s->n_frames && !s->frames) return BAD("%s: %zu frames but no table", n, s->n_frames);
    for (size_t i = 0; i < s->n_frames; i++) {
        const rs_snap_frame *f = &s->frames[i];
        if (!f->function || !f->file) return BAD("%s: frame %zu has no function or file name", n, i);
        if (f->module < -1 || f->module >= (int64_t)s->n_modules)
            return BAD("%s: frame %zu is in module %" PRId32 ", but there are %zu modules", n, i,
                       f->module, s->n_modules);
    }
    if (s->n_modules && !s->modules) return BAD("%s: %zu modules but no table", n, s->n_modules);
    for (size_t i = 0; i < s->n_modules; i++)
        if (!s->modules[i].path || !s->modules[i].build_id)
            return BAD("%s: module %zu has no path or build id", n, i);
    return RANKSNAP_OK;
}

ranksnap_status rs_snap_check(const rs_snap *s, const char *name)
{
    const char *n = name ? name : "snapshot";
    if (!s) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "%s: no snapshot", n);
    if (s->rank < 0 || s->rank >= s->world_size)
        return BAD("%s: rank %d of %d is not a rank", n, s->rank, s->world_size);
    if (s->n_streams && !s->streams) return BAD("%s: %zu streams but no table", n, s->n_streams);
    if (s->time.n_ranges && !s->time.ranges) return BAD("%s: %zu ranges but no table", n, s->time.n_ranges);
    if (s->has_oom && s->oom.stream >= s->n_streams)
        return BAD("%s: the OOM is on stream %" PRIu32 ", but there are %zu streams", n, s->oom.stream,
                   s->n_streams);
    if (s->has_oom && s->oom.stack > s->n_stacks)
        return BAD("%s: the OOM has stack %" PRIu32 ", but there are %zu stacks", n, s->oom.stack,
                   s->n_stacks);
    RS_CHECK(check_strings(s, n));
    RS_CHECK(check_history(s, n));
    RS_CHECK(check_segments(s, n));
    return check_stacks(s, n);
}
