/*
 * torch_frames.h — streams, frames and stacks of a PyTorch snapshot (torch_frames.c).
 */
#ifndef RANKSNAP_TORCH_FRAMES_H
#define RANKSNAP_TORCH_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "torch_mapper.h"

/* The index of a stream handle, the one asked last answered at once (a trace is mostly one). */
ranksnap_status rs_tm_stream_index(mapper *m, uint64_t handle, uint32_t *out);

/* The stream field of a segment or trace entry (0 when absent, as PyTorch's default stream).
 * PyTorch writes the cudaStream_t as an int64_t: a negative one is a handle all the same. */
ranksnap_status rs_tm_f_stream_handle(const mapper *m, const fields *f, const loc *l,
                                       uint64_t *handle);

ranksnap_status rs_tm_f_stream(mapper *m, const fields *f, const loc *l, uint32_t *out);

/* The stack id of a `frames` list (innermost first, as PyTorch writes them); 0 for none. By the
 * list's item array, else frame by frame. The tree is complete when this runs (map_trace follows
 * the decode), so an array or dict met again is as it was. */
ranksnap_status rs_tm_stack_id(mapper *m, const rs_pickle_value *frames, const loc *l, uint32_t *out);

ranksnap_status rs_tm_f_stack(mapper *m, const fields *f, const loc *l, uint32_t *out);

#endif
