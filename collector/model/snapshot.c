/*
 * snapshot.c — the decoded snapshot's one destructor (snapshot.h): every decoder builds a rs_snap
 * with calloc and malloc'ed members, and hands it, whole or half-built, to rs_snap_free.
 */
#include <stdlib.h>
#include <string.h>

#include "addr_hash.h"
#include "snapshot.h"
#include "walk.h"

uint64_t rs_snap_frame_text_hash(const char *function, size_t function_len, const char *file,
                                 size_t file_len)
{
    uint64_t h = rs_bytes_hash(0xcbf29ce484222325ull, function, function_len);
    return rs_bytes_hash(h ^ 0xff, file, file_len) | 1;
}

uint64_t rs_snap_frame_text_hash_of(const rs_snap_frame *f)
{
    return f->text_hash ? f->text_hash
                        : rs_snap_frame_text_hash(f->function, strlen(f->function), f->file,
                                                  strlen(f->file));
}

void rs_snap_free(rs_snap *s)
{
    if (!s) return;
    free(s->host);
    free(s->job);
    free(s->backend);
    free(s->device.name);
    free(s->device.uuid);
    for (size_t i = 0; s->devices && i < s->n_devices; i++) {
        free(s->devices[i].name);
        free(s->devices[i].uuid);
    }
    free(s->devices);
    free(s->recorder.stacks);
    free(s->time.ranges);
    free(s->time.steps_from);
    free(s->time.recorded_by);
    free(s->totals.outside_why_detail);
    for (size_t i = 0; i < s->totals.n_outside_labels; i++) free(s->totals.outside_labels[i].label);
    free(s->totals.outside_labels);
    free(s->streams);
    for (size_t i = 0; i < s->n_segments; i++) free(s->segments[i].blocks);
    free(s->segments);
    free(s->history.time_us);
    free(s->history.action);
    free(s->history.addr);
    free(s->history.size);
    free(s->history.stream);
    free(s->history.stack);
    for (size_t i = 0; i < s->n_strings; i++) free(s->strings[i]);
    free(s->strings);
    for (size_t i = 0; i < s->n_stacks; i++) free(s->stacks[i].frames);
    free(s->stacks);
    for (size_t i = 0; i < s->n_frames; i++) {
        free(s->frames[i].function);
        free(s->frames[i].file);
    }
    free(s->frames);
    for (size_t i = 0; i < s->n_modules; i++) {
        free(s->modules[i].path);
        free(s->modules[i].build_id);
    }
    free(s->modules);
    free(s->comms);
    if (s->walk) {
        rs_walk_free(s->walk);
        free(s->walk);
    }
    free(s);
}
