/*
 * external_gather.h — the end of a recorded range in a PyTorch job (RANKSNAP_RECORDER=torch):
 * the framework's snapshot written as this rank's file, and the two-phase gather to rank 0.
 */
#ifndef RANKSNAP_EXTERNAL_GATHER_H
#define RANKSNAP_EXTERNAL_GATHER_H

#include "gather.h"
#include "ranksnap.h"
#include "state.h"

/* On every rank at the same step (live_report.c calls it instead of encoding a .rsnap): takes
 * the framework's snapshot, writes RANKSNAP_DIR/rank-RRRRR.pickle (RANKSNAP_WRITE), stops the
 * framework's recorder and, with RANKSNAP_REPORT, gathers: over MPI under mpirun; else over the
 * framework's process group (torch.distributed) when it has one; else rank 0 waits, at most
 * RANKSNAP_GATHER_TIMEOUT, for the other ranks' files of this job, attempt and range in
 * RANKSNAP_DIR. *gathered is 1 when *g was filled (rank 0 reports when g->n > 0; free it with
 * rs_gather_result_free). */
ranksnap_status rs_external_end_of_range(rs_runtime *rt, rs_gather_result *g, int *gathered);

#endif
