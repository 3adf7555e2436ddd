/*
 * export_torch.h — one rank's snapshot as a PyTorch memory snapshot pickle.
 *
 * The result is what torch.cuda.memory._dump_snapshot() writes, so that PyTorch's viewer
 * (pytorch.org/memory_viz, torch/cuda/_memory_viz.py) draws a ranksnap rank as it draws a PyTorch
 * process. The mapping, field by field, is in docs/PYTORCH.md.
 */
#ifndef RANKSNAP_EXPORT_TORCH_H
#define RANKSNAP_EXPORT_TORCH_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "snapshot.h"

typedef struct rs_export_torch_options {
    /* Keep ranksnap's own innermost frames (ranksnap_malloc, rs_alloc_*, the interposed
     * cudaMalloc) on every stack; by default they are cut, as PyTorch's viewer cuts its own. */
    int keep_own_frames;
} rs_export_torch_options;

/* What the export did with the history. */
typedef struct rs_export_torch_info {
    uint64_t segments;           /* written to segments (a driver-recorded rank's included) */
    uint64_t trace_entries;      /* written to device_traces                               */
    uint64_t allocs;             /* of which `alloc`                                        */
    uint64_t annotations;        /* external_annotations (step markers and annotations)     */
    uint64_t left_out;           /* events left out so the viewer's replay stays consistent
                                    (a history with gaps: dropped or paused recording)      */
    uint64_t unknown_actions;    /* events of an action PyTorch has no name for            */
} rs_export_torch_info;

/* Encodes `s` into a malloc'ed buffer (the caller frees it). `opt` and `info` may be NULL.
 * Errors (RANKSNAP_ERR_FORMAT for a snapshot that cannot be expressed, HOST_MEMORY) start with
 * `name_for_errors`. */
ranksnap_status rs_export_torch(const rs_snap *s, const char *name_for_errors,
                                 const rs_export_torch_options *opt, unsigned char **buf, size_t *len,
                                 rs_export_torch_info *info);

#endif
