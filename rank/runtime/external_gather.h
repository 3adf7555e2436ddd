/*
 * external_gather.h — the two-phase gather to rank 0 of a PyTorch job (RANKSNAP_RECORDER=torch)
 * without MPI: over the framework's process group, else through the files.
 */
#ifndef RANKSNAP_EXTERNAL_GATHER_H
#define RANKSNAP_EXTERNAL_GATHER_H

#include "gather.h"
#include "ranksnap.h"
#include "state.h"

/* On every rank at the same step, in a job with more than one rank that ranksnap joined no MPI
 * world of (live_report.c's pipeline calls it, after this rank's pickle was written,
 * summarised and its communicators taken, with `decode` the recorder's decoder of the
 * files: the pickles', or the .rsnap's of a rank recorded natively): gathers over the framework's process group
 * (torch.distributed) when it has one; else rank 0 waits, at most RANKSNAP_GATHER_TIMEOUT, for
 * the other ranks' files of this job, attempt and range in RANKSNAP_DIR. Takes `self` and
 * `comms` over, as rs_gather_run does; on rank 0 fills *g (free with rs_gather_result_free). */
ranksnap_status rs_external_gather(rs_runtime *rt, rs_gather_decode_fn decode, const char *buf,
                                   size_t len, const rs_summary *mine, rs_rank_comms *comms,
                                   rs_snap *self, rs_gather_result *g);

#endif
