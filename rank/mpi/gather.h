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
#include "snapshot.h"
#include "summary.h"

typedef struct rs_gather_result {
    int world_size;
    size_t n;                   /* ranks present */
    rs_summary *summaries;     /* n, in rank order */
    rs_snap **full;        /* n, NULL where no full snapshot came */
    double seconds;             /* wall time of the gather on rank 0 */
    uint64_t bytes_summaries;   /* bytes received in phase 1 */
    uint64_t bytes_full;        /* bytes received in phase 2 */
} rs_gather_result;

/* Collective over the coordinator's ranks. `snap`/`len` is this rank's encoded snapshot, `mine`
 * its summary and `self` the same snapshot decoded (NULL when it could not be), which the caller
 * made the summary from: the gather takes it over — on rank 0 it is rank 0's full snapshot in
 * *out, so that no rank decodes its own encoding twice; on the others it is freed. On rank 0
 * fills *out (free with rs_gather_result_free); on the others *out is zeroed. Never waits
 * longer than `timeout_s` for any one phase. */
ranksnap_status rs_gather_run(rs_coord *c, const char *snap, size_t len, const rs_summary *mine,
                              rs_snap *self, rs_gather_mode mode, int timeout_s,
                              double divergence_pct, rs_gather_result *out);
void rs_gather_result_free(rs_gather_result *r);

#endif
