/*
 * replay_report.h — a replay (replay.h) side by side with the original, a what-if next to both,
 * and the suggestion (suggest.h), in words and in JSON.
 */
#ifndef RANKSNAP_REPLAY_REPORT_H
#define RANKSNAP_REPLAY_REPORT_H

#include <stdio.h>

#include "replay.h"
#include "suggest.h"

/* The side-by-side table, or the JSON object
 * {"original": {"peak_allocated", "peak_reserved", "fragmentation", "device_allocs",
 *  "device_frees", "ooms", "first_oom_event", "first_oom_request"}, "ranksnap": {...,
 *  "peak_allocated_blocks"}, "settings", "device", "same_oom", "events", "incomplete", ...}. */
void rs_replay_report_text(FILE *out, const char *name, const rs_replay_result *r);
void rs_replay_report_json(FILE *out, const char *name, const rs_replay_result *r);

/* The original, the replay under the trace's settings (`base`) and under others (`whatif`). JSON:
 * the object above with "what_if": {"settings", side...} added. */
void rs_replay_report_whatif_text(FILE *out, const char *name, const rs_replay_result *base,
                                  const rs_replay_result *whatif);
void rs_replay_report_whatif_json(FILE *out, const char *name, const rs_replay_result *base,
                                  const rs_replay_result *whatif);

/* Every change tried, its numbers, and the answer. JSON: {"file", "base": {...}, "needed",
 * "tries": [{"change", "keys", side...}], "suggestion": change or null, "sentence"}. */
void rs_replay_report_suggest_text(FILE *out, const char *name, const rs_suggest_result *s);
void rs_replay_report_suggest_json(FILE *out, const char *name, const rs_suggest_result *s);

#endif
