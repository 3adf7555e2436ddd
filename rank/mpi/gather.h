/*
 * gather.h — the two-phase gather to rank 0 (the protocol: coord.h).
 */
#ifndef RANKSNAP_GATHER_H
#define RANKSNAP_GATHER_H

#include <stddef.h>
#include <stdint.h>

#include "coord.h"
#include "options.h"
#include "ranksnap.h"
#include "roles_found.h"
#include "snapshot.h"
#include "summary.h"

typedef struct rs_gather_result {
    int world_size;
    size_t n;                   /* ranks present */
    rs_summary *summaries;     /* n, in rank order */
    rs_rank_comms *comms;       /* n: each one's communicators, for the roles (empty when its
                                   snapshot could not be decoded or did not arrive) */
    rs_snap **full;        /* n, NULL where no full snapshot came */
    double seconds;             /* wall time of the gather on rank 0 */
    uint64_t bytes_summaries;   /* bytes received in phase 1 */
    uint64_t bytes_full;        /* bytes received in phase 2 */
} rs_gather_result;

/* How rank 0 reads a rank's bytes: the .rsnap decoder for ranksnap's own snapshots, the pickle
 * decoder of the reader library in a PyTorch job (the recorders' table, live_report.c). */
typedef ranksnap_status (*rs_gather_decode_fn)(const char *buf, size_t len, const char *name,
                                               rs_snap **out);

/* Collective over the coordinator's ranks. `snap`/`len` is this rank's encoded snapshot, `mine`
 * its summary, `comms` its communicators and `self` the same snapshot decoded (NULL when it
 * could not be), which the caller made the summary and the communicators from. The gather takes
 * `self` and `comms` over (*comms is left empty) — on rank 0 they are rank 0's full snapshot and
 * communicators in *out, so that no rank decodes its own encoding twice; on the others `self`
 * is freed at once and `comms` once sent, which every rank does after rank 0 answered its
 * summary. Rank 0 reads the bytes of the ranks it asks for with `decode`. On rank 0 fills *out
 * (free with rs_gather_result_free); on the others *out is zeroed. Never waits longer than
 * `timeout_s` for any one phase. */
ranksnap_status rs_gather_run(rs_coord *c, rs_gather_decode_fn decode, const char *snap,
                              size_t len, const rs_summary *mine, rs_rank_comms *comms,
                              rs_snap *self, rs_gather_mode mode, int timeout_s,
                              double divergence_pct, rs_gather_result *out);
void rs_gather_result_free(rs_gather_result *r);

/* Rank 0, between the phases: want[r] = 1 for the ranks whose whole snapshot is asked for, of
 * the `present` ones (all of them with RANKSNAP_GATHER=all or auto up to 16 ranks, else the
 * OOM and divergent ranks and the reference, as the summaries say). */
void rs_gather_choose(const rs_summary *sums, const int *present, int size, rs_gather_mode mode,
                      double divergence_pct, int *want);

#endif
