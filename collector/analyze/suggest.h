/*
 * suggest.h — which allocator setting would have avoided the OOM (or saved the most memory):
 * the trace replayed (replay.h) under the settings that matter, one change at a time, then in
 * pairs with expandable_segments when no single change is enough.
 *
 * The changes tried, each on top of the trace's own settings: expandable_segments:True,
 * max_split_size_mb:128 and :512 (when the trace asks for blocks that large), roundup_power2_divisions:4,
 * garbage_collection_threshold:0.6 (only under a cap, the only place it acts). The answer is the
 * smallest change (fewest keys) whose replay serves every request the trace's own settings could
 * not, the lowest peak reserved among those; without an OOM, the change that lowers peak reserved
 * the most, if any does. When the trace's settings run out of memory, their replay without the cap
 * says how much they would have needed, which is what a change is measured against.
 */
#ifndef RANKSNAP_SUGGEST_H
#define RANKSNAP_SUGGEST_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "replay.h"
#include "snapshot.h"

#define RS_SUGGEST_MAX_TRIES 12

typedef struct rs_suggest_try {
    char change[128];     /* the keys changed, PYTORCH_CUDA_ALLOC_CONF syntax */
    unsigned n_keys;
    rs_replay_result r;
} rs_suggest_try;

typedef struct rs_suggest_result {
    rs_replay_result base;   /* the trace's own settings                                     */
    int base_oom;            /* they ran out of memory in the replay                          */
    uint64_t base_needed;    /* their peak reserved without the cap (when base_oom), else the
                                peak reserved                                                 */
    size_t n_tries;
    rs_suggest_try tries[RS_SUGGEST_MAX_TRIES];
    int best;                /* index into tries, -1: no change helps                        */
} rs_suggest_result;

/* Replays `s` under its settings and the changes above; `o` gives the device (its conf is
 * ignored: the trace's settings are the base), NULL for the snapshot's. */
ranksnap_status rs_suggest(const rs_snap *s, const char *name_for_errors, const rs_replay_opts *o,
                           rs_suggest_result *out);

/* The answer in one sentence ("expandable_segments:True would not have run out of memory and
 * would have needed 1.20 GiB less (peak reserved 10.20 GiB instead of 11.40 GiB); replayed"), or ""
 * when no change helps. */
void rs_suggest_sentence(const rs_suggest_result *r, char *buf, size_t n);

/* For the report's OOM verdict: the rank's trace (named `name`) replayed as rs_suggest does, and
 * "rank R: <the sentence> (ranksnap replay --suggest)" in buf, or "" when no change helps or the
 * replay does not reproduce the rank's OOM (then the trace cannot say what would have helped). */
ranksnap_status rs_suggest_note(const rs_snap *s, const char *name, char *buf, size_t n);

#endif
