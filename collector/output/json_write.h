/*
 * json_write.h — JSON strings from a snapshot's bytes, and the pieces every JSON the command
 * writes shares (report.json, diff.json, the replay's --json, the data blob of report.html):
 * keys, shares, rates and sites.
 */
#ifndef RANKSNAP_JSON_WRITE_H
#define RANKSNAP_JSON_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "site_delta.h"
#include "sites.h"

/* rs_json_string's flags. RS_JSON_SCRIPT: also escape < > & and / so that the text is safe
 * inside an HTML <script> element (no "</script>" or "<!--" can appear). */
enum { RS_JSON_PLAIN = 0, RS_JSON_SCRIPT = 1 };

/* Writes `s` (NULL: "") as a JSON string: quotes, backslashes and control characters escaped;
 * bytes that are not valid UTF-8 become U+FFFD, so any JSON parser reads any symbol name. */
void rs_json_string(FILE *f, const char *s, int flags);

/* Copies `n` bytes of JSON text made elsewhere, escaped for a <script> element. */
void rs_json_script_bytes(FILE *f, const char *buf, size_t n);

/* `"key": ` */
void rs_json_key(FILE *f, const char *key);

/* A share rounded to two decimals: "42", "42.5", "-3.14"; null when not finite. */
void rs_json_pct(FILE *f, double x);

/* Bytes per step: whole bytes, as the other byte counts; null when not finite. */
void rs_json_rate(FILE *f, double x);

/* `"function": ..., "file": ..., "line": N` */
void rs_json_frame_fields(FILE *f, const char *function, const char *file, int32_t line);

/* `, "held_since_before_step": N` for bytes the rank held when its range began (sites.h). */
void rs_json_held(FILE *f, const rs_site *s);

/* The site's own frame, then "path": its frames outermost first (docs/FORMAT.md). */
void rs_json_site_fields(FILE *f, const rs_compare_site *s);

#endif
