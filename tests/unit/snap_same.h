/*
 * snap_same.h — whether two decodes of one file gave the same model: the history, the frame and
 * stack tables, the streams, the segments with their blocks, the totals and the OOM record. The
 * tests and the pickle fuzzer use it to hold the decoder's fast paths (the streamed trace, a trace
 * entry run as one step) to what the opcodes one by one give.
 */
#ifndef RANKSNAP_TEST_SNAP_SAME_H
#define RANKSNAP_TEST_SNAP_SAME_H

#include <stdio.h>
#include <string.h>

#include "snapshot.h"

/* NULL when a and b are the same model; else what differs first, for the failure's message. */
static inline const char *snap_same(const rs_snap *a, const rs_snap *b)
{
    const rs_snap_history *x = &a->history, *y = &b->history;
    if (x->count != y->count) return "the number of events";
    for (uint64_t i = 0; i < x->count; i++)
        if (x->action[i] != y->action[i] || x->addr[i] != y->addr[i] || x->size[i] != y->size[i] ||
            x->time_us[i] != y->time_us[i] || x->stack[i] != y->stack[i] ||
            x->stream[i] != y->stream[i])
            return "an event";
    if (a->n_frames != b->n_frames) return "the number of frames";
    for (size_t i = 0; i < a->n_frames; i++)
        if (strcmp(a->frames[i].function, b->frames[i].function) != 0 ||
            strcmp(a->frames[i].file, b->frames[i].file) != 0 ||
            a->frames[i].line != b->frames[i].line)
            return "a frame";
    if (a->n_stacks != b->n_stacks) return "the number of stacks";
    for (size_t i = 0; i < a->n_stacks; i++)
        if (a->stacks[i].n_frames != b->stacks[i].n_frames ||
            (a->stacks[i].n_frames &&
             memcmp(a->stacks[i].frames, b->stacks[i].frames,
                    a->stacks[i].n_frames * sizeof *a->stacks[i].frames) != 0))
            return "a stack";
    if (a->n_streams != b->n_streams ||
        (a->n_streams && memcmp(a->streams, b->streams, a->n_streams * sizeof *a->streams) != 0))
        return "the streams";
    if (a->n_segments != b->n_segments) return "the number of segments";
    for (size_t i = 0; i < a->n_segments; i++) {
        const rs_snap_segment *g = &a->segments[i], *h = &b->segments[i];
        if (g->addr != h->addr || g->total_size != h->total_size ||
            g->allocated_size != h->allocated_size || g->active_size != h->active_size ||
            g->requested_size != h->requested_size || g->stream != h->stream ||
            g->is_small != h->is_small || g->stack != h->stack || g->n_blocks != h->n_blocks)
            return "a segment";
        for (size_t k = 0; k < g->n_blocks; k++)
            if (g->blocks[k].addr != h->blocks[k].addr || g->blocks[k].size != h->blocks[k].size ||
                g->blocks[k].requested_size != h->blocks[k].requested_size ||
                g->blocks[k].stack != h->blocks[k].stack || g->blocks[k].state != h->blocks[k].state)
                return "a block";
    }
    const rs_snap_totals *s = &a->totals, *t = &b->totals;
    if (s->allocated_bytes_current != t->allocated_bytes_current ||
        s->allocated_bytes_peak != t->allocated_bytes_peak ||
        s->reserved_bytes_current != t->reserved_bytes_current ||
        s->reserved_bytes_peak != t->reserved_bytes_peak || s->peak_step != t->peak_step ||
        s->peak_time_us != t->peak_time_us || s->num_allocs != t->num_allocs ||
        s->num_frees != t->num_frees || s->num_ooms != t->num_ooms ||
        s->events_recorded != t->events_recorded)
        return "the totals";
    if (a->has_oom != b->has_oom ||
        (a->has_oom && (a->oom.requested != b->oom.requested || a->oom.stack != b->oom.stack ||
                        a->oom.step != b->oom.step || a->oom.allocated != b->oom.allocated)))
        return "the OOM record";
    return NULL;
}

#endif
