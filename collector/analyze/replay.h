/*
 * replay.h — a rank's allocation history replayed through ranksnap's allocator (rank/alloc/)
 * on the sim backend, against the original's own numbers.
 *
 * How the allocator under test would have done on the very same requests: the same sizes, in
 * the same order, on the same streams, each free_requested freeing the replayed block that
 * stands for the original's address. Blocks alive before the history began are allocated first
 * (in address order), so both sides start from the same allocated level.
 *
 * "Allocated" here is what the trace shows on both sides: each live block's size as the one
 * history walk counts it (collector/model/walk.h). It does not depend on the policy, so the
 * replay reproduces the original's peak exactly unless a replayed request failed. The allocator's
 * own count (block sizes, which include the tail of a segment too small to split) is reported
 * apart, as peak_allocated_blocks. Reserved is the policy's result: for the original, the level
 * its segment_alloc/segment_free events give, started from the segments at the end minus those
 * events' changes; for ranksnap, the sim device's segments.
 */
#ifndef RANKSNAP_REPLAY_H
#define RANKSNAP_REPLAY_H

#include <stdint.h>

#include "ranksnap.h"
#include "snapshot.h"

typedef struct rs_replay_side {
    uint64_t peak_allocated;
    uint64_t peak_reserved;
} rs_replay_side;

typedef struct rs_replay_result {
    rs_replay_side original;
    rs_replay_side ranksnap;
    uint64_t ranksnap_peak_allocated_blocks; /* the allocator's allocated_bytes_peak       */
    uint64_t events;        /* events in the history                                     */
    uint64_t allocs, frees; /* replayed alloc and free_requested events                   */
    uint64_t preexisting;   /* blocks alive before the history, allocated first           */
    uint64_t inconsistent;  /* frees of blocks not alive, allocations over live ones      */
    uint64_t dropped;       /* events the ring lost before the history's first            */
    int incomplete;         /* dropped > 0: the history is a suffix of what happened      */
    uint64_t original_ooms; /* oom events in the history                                  */
    uint64_t ranksnap_ooms; /* replayed requests ranksnap could not serve                 */
} rs_replay_result;

/* Replays `s`. Errors (HOST_MEMORY, or the allocator failing other than by running out of
 * device memory) start with `name_for_errors`. */
ranksnap_status rs_replay(const rs_snap *s, const char *name_for_errors, rs_replay_result *out);

#endif
