/*
 * model_check.h — the promises rs_snap makes to its readers (model/snapshot.h), checked on
 * whatever a decoder accepted: every index in range, every state known. Shared by the bad-input
 * test and the fuzz target, so that "decoded without error" also means "safe to walk".
 */
#ifndef RANKSNAP_TEST_MODEL_CHECK_H
#define RANKSNAP_TEST_MODEL_CHECK_H

#include "snapshot.h"

/* A decoded snapshot whose indexes are all in range, as the model promises its readers. */
static int model_is_consistent(const rs_snap *s)
{
    const rs_snap_history *h = &s->history;
    for (uint64_t i = 0; i < h->count; i++) {
        if (h->stream[i] >= s->n_streams || h->stack[i] > s->n_stacks) return 0;
        if ((h->action[i] == RS_ACT_ANNOTATION_BEGIN || h->action[i] == RS_ACT_ANNOTATION_END) &&
            h->addr[i] >= s->n_strings)
            return 0;
    }
    for (size_t i = 0; i < s->n_segments; i++) {
        const rs_snap_segment *g = &s->segments[i];
        if (g->stream >= s->n_streams || g->stack > s->n_stacks) return 0;
        for (size_t k = 0; k < g->n_blocks; k++)
            if (g->blocks[k].stack > s->n_stacks || g->blocks[k].state >= RS_BLOCK_STATE_COUNT_)
                return 0;
    }
    for (size_t i = 0; i < s->n_stacks; i++)
        for (size_t k = 0; k < s->stacks[i].n_frames; k++)
            if (s->stacks[i].frames[k] >= s->n_frames) return 0;
    for (size_t i = 0; i < s->n_frames; i++)
        if (s->frames[i].module < -1 || s->frames[i].module >= (int64_t)s->n_modules) return 0;
    if (s->has_oom && (s->oom.stream >= s->n_streams || s->oom.stack > s->n_stacks)) return 0;
    return s->rank >= 0 && s->rank < s->world_size;
}

#endif
