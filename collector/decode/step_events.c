/*
 * step_events.c — inserting step events into a decoded history (step_events.h): the history's
 * columns are copied once into new ones, each step event at its place.
 */
#include <stdlib.h>

#include "errors.h"
#include "step_events.h"

ranksnap_status rs_step_events_insert(rs_snap *s, const rs_step_event *ev, size_t n)
{
    rs_snap_history *h = &s->history;
    uint64_t total = h->count + n;
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
    if (h->capacity < total) h->capacity = total;
    return RANKSNAP_OK;
}
