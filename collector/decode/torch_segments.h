/*
 * torch_segments.h — a PyTorch snapshot's segments and blocks (torch_segments.c).
 */
#ifndef RANKSNAP_TORCH_SEGMENTS_H
#define RANKSNAP_TORCH_SEGMENTS_H

#include <stddef.h>

#include "torch_mapper.h"

/* The device most segments are on (the lowest of a tie), -1 when there are none. */
ranksnap_status rs_tm_majority_device(mapper *m, const rs_pickle_value *segments, int64_t *out);

ranksnap_status rs_tm_map_segments(mapper *m, const rs_pickle_value *segments, int64_t device);

#endif
