/*
 * step_events.c — inserting step events into a decoded history (step_events.h): in place where
 * the decoder left room in the columns (history.room), else the columns copied once into new
 * ones, each step event at its place.
 */
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "step_events.h"

/* The events put in where the columns have room: from the end, the entries between two events
 * moved up at once by the number of events before them (a memmove a column, not an entry at a
 * time: a trace's few dozen steps move every entry), each event written in the gap below. */
static void insert_in_place(rs_snap_history *h, const rs_step_event *ev, size_t n)
{
    uint64_t end = h->count;
    for (size_t k = n; k > 0; k--) {
        const rs_step_event *e = &ev[k - 1];
        uint64_t from = e->before < end ? e->before : end;
        size_t m = (size_t)(end - from);
        if (m) {
            memmove(h->time_us + from + k, h->time_us + from, m * sizeof *h->time_us);
            memmove(h->action + from + k, h->action + from, m * sizeof *h->action);
            memmove(h->addr + from + k, h->addr + from, m * sizeof *h->addr);
            memmove(h->size + from + k, h->size + from, m * sizeof *h->size);
            memmove(h->stream + from + k, h->stream + from, m * sizeof *h->stream);
            memmove(h->stack + from + k, h->stack + from, m * sizeof *h->stack);
        }
        uint64_t o = from + k - 1;
        h->time_us[o] = e->time_us;
        h->action[o] = RS_ACT_STEP;
        h->addr[o] = 0;
        h->size[o] = (uint64_t)e->step;
        h->stream[o] = e->stream;
        h->stack[o] = 0;
        end = from;
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
