/*
 * torch_meta.h — the "ranksnap" key that ranksnap's PyTorch glue adds to the snapshots it dumps
 * (RANKSNAP_RECORDER=torch; rank/runtime/external.c writes it, docs/PYTORCH.md lists it): who
 * wrote the file, which steps were recorded and when they began, and the device memory outside
 * PyTorch's allocator, applied to a decoded PyTorch snapshot.
 */
#ifndef RANKSNAP_TORCH_META_H
#define RANKSNAP_TORCH_META_H

#include "pickle.h"
#include "ranksnap.h"
#include "snapshot.h"

/* Applies `meta` (the value of the key; NULL: a pickle without it, left as it is) to `s`, whose
 * history is already decoded: identity (rank, world size, host, job, pid), the clock offset,
 * the recorded ranges and the current step, the device, the outside bytes and their holders,
 * the communicators the rank was in (s->comms);
 * and a step event at the time each recorded step began, so that step inference is not needed.
 * A field of the wrong type is RANKSNAP_ERR_FORMAT naming `name`, the offset and the field
 * ("ranksnap.rank: expected an int, found a str"); fields it does not know are ignored. */
ranksnap_status rs_torch_meta_apply(const rs_pickle_value *meta, const char *name, rs_snap *s);

#endif
