/*
 * external_mode.h — which recorder a rank has (external_mode.c): PyTorch's own, driven by
 * ranksnap (RANKSNAP_RECORDER=torch, external.h), or, where that one cannot run, ranksnap's own
 * at the CUDA driver for a PyTorch rank (ranksnap_record_natively). The interposers, the
 * instance, the dumps and the outside accounting ask it; it asks none of them.
 */
#ifndef RANKSNAP_EXTERNAL_MODE_H
#define RANKSNAP_EXTERNAL_MODE_H

#include "options.h"

/* 1 when RANKSNAP_RECORDER=torch (read once per process; a value that does not parse is 0, and
 * ranksnap_init reports it). Cheap: the CUDA interposers ask it on every call. */
int rs_external_mode(void);

/* 1 when the rank is a PyTorch job's (rs_external_mode) that ranksnap records itself, at the
 * CUDA driver, since the framework's recorder cannot run (ranksnap_record_natively): the CUDA
 * runtime's interposers still pass every call through to the framework's allocator, the driver's
 * record, and the snapshot is ranksnap's own .rsnap. */
int rs_external_native(void);

/* What the snapshot says of how it was recorded (time.recorded_by), "" unless native. */
const char *rs_external_native_why(void);

/* 1 when the framework's own snapshot, a pickle, is this rank's file: torch mode, not native. */
int rs_external_pickles(void);

/* The stacks to capture with for the RANKSNAP_STACKS value `opt`: in a rank recorded natively,
 * Python frames (stacks.h, RS_STACKS_PYTHON) unless none; `opt` itself otherwise. */
rs_stacks_mode rs_external_stacks_mode(rs_stacks_mode opt);

#endif
