/*
 * step_events.h — step events put into a decoded history that has none: PyTorch records no
 * steps, so the reader adds them, where the iterations were found (steps_infer.c) or where
 * ranksnap's glue says each recorded step began (torch_meta.c).
 */
#ifndef RANKSNAP_STEP_EVENTS_H
#define RANKSNAP_STEP_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "snapshot.h"

typedef struct rs_step_event {
    uint64_t before;  /* the history index it goes before; the history's count: after the last */
    int64_t step;     /* the step number (the event's size, as in every history) */
    uint64_t time_us;
    uint32_t stream;  /* a valid stream index */
} rs_step_event;

/* Rewrites s->history with the n events inserted, in order (`before` non-decreasing; several
 * before one index go in the order given). Fails only for memory, naming the rank. */
ranksnap_status rs_step_events_insert(rs_snap *s, const rs_step_event *ev, size_t n);

#endif
