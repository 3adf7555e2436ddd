/*
 * replay_report.h — a replay (replay.h) side by side with the original, in words and in JSON.
 */
#ifndef RANKSNAP_REPLAY_REPORT_H
#define RANKSNAP_REPLAY_REPORT_H

#include <stdio.h>

#include "replay.h"

/* The side-by-side table, or the JSON object
 * {"original": {"peak_allocated", "peak_reserved"}, "ranksnap": {..., "peak_allocated_blocks"},
 *  "events", "incomplete", ...}. */
void rs_replay_report_text(FILE *out, const char *name, const rs_replay_result *r);
void rs_replay_report_json(FILE *out, const char *name, const rs_replay_result *r);

#endif
