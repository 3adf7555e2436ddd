/*
 * step_events.c — inserting step events into a decoded history (step_events.h): in place where
 * the decoder left room in the columns (history.room), else the columns copied once into new
 * ones, each step event at its place.
 */
#include <stdlib.h>

#include "errors.h"
#include "step_events.h"

/* The events put in where the columns have room: from the end, each entry moved up by the
 * number of events before it, the events written in the gaps (the same order as below). */
static void insert_in_place(rs_snap_history *h, const rs_step_event *ev, size_t n)
{
    uint64_t o = h->count + n;
    size_t k = n;
    for (uint64_t i = h->count + 1; i-- > 0;) {
        if (i < h->count) {
            o--;
            h->time_us[o] = h->time_us[i];
            h->action[o] = h->action[i];
            h->addr[o] = h->addr[i];
            h->size[o] = h->size[i];
            h->stream[o] = h->stream[i];
            h->stack[o] = h->stack[i];
        }
        /* those before entry i (and, at the end, those after the last) */
        for (; k > 0 && ev[k - 1].before >= i; k--) {
            o--;
            h->time_us[o] = ev[k - 1].time_us;
            h->action[o] = RS_ACT_STEP;
            h->addr[o] = 0;
            h->size[o] = (uint64_t)ev[k - 1].step;
            h->stream[o] = ev[k - 1].stream;
            h->stack[o] = 0;
        }
    }
    h->count += n;
    if (h->capacity < h->count) h->capacity = h->count;
}

ranksnap_status rs_step_events_insert(rs_snap *s, const rs_step_event *ev, size_t n)
{
    rs_snap_history *h = &s->history;
    uint64_t total = h->count + n;
    if (n && h->room >= total) {
        insert_in_place(h, ev, n);
        return RANKSNAP_OK;
    }
    uint64_t *time_us = malloc(total * sizeof *time_us), *addr = malloc(total * sizeof *addr);
    uint64_t *size = malloc(total * sizeof *size);
    uint8_t *action = malloc(total ? total : 1);
    uint32_t *stream = malloc(total * sizeof *stream), *stack = malloc(total * sizeof *stack);
    if (!time_us || !addr || !size || !action || !stream || !stack) {
        free(time_us);
        free(addr);
        free(size);
        free(action);
        free(stream);
        free(stack);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rank %d: no memory to add %zu step events",
                        s->rank, n);
    }
    uint64_t o = 0;
    size_t k = 0;
    for (uint64_t i = 0; i <= h->count; i++) {
        for (; k < n && ev[k].before <= i; k++, o++) {
            time_us[o] = ev[k].time_us;
            action[o] = RS_ACT_STEP;
            addr[o] = 0;
            size[o] = (uint64_t)ev[k].step;
            stream[o] = ev[k].stream;
            stack[o] = 0;
        }
        if (i == h->count) break;
        time_us[o] = h->time_us[i];
        action[o] = h->action[i];
        addr[o] = h->addr[i];
        size[o] = h->size[i];
        stream[o] = h->stream[i];
        stack[o] = h->stack[i];
        o++;
    }
    free(h->time_us);
    free(h->action);
    free(h->addr);
    free(h->size);
    free(h->stream);
    free(h->stack);
    h->time_us = time_us;
    h->action = action;
    h->addr = addr;
    h->size = size;
    h->stream = stream;
    h->stack = stack;
    h->count = total;
    h->room = total;
    if (h->capacity < total) h->capacity = total;
    return RANKSNAP_OK;
}
