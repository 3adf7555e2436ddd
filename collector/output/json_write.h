/*
 * json_write.h — JSON strings from a snapshot's bytes, for every JSON the command writes
 * (report.json, the replay's --json, the data blob of report.html).
 */
#ifndef RANKSNAP_JSON_WRITE_H
#define RANKSNAP_JSON_WRITE_H

#include <stddef.h>
#include <stdio.h>

/* rs_json_string's flags. RS_JSON_SCRIPT: also escape < > & and / so that the text is safe
 * inside an HTML <script> element (no "</script>" or "<!--" can appear). */
enum { RS_JSON_PLAIN = 0, RS_JSON_SCRIPT = 1 };

/* Writes `s` (NULL: "") as a JSON string: quotes, backslashes and control characters escaped;
 * bytes that are not valid UTF-8 become U+FFFD, so any JSON parser reads any symbol name. */
void rs_json_string(FILE *f, const char *s, int flags);

/* Copies `n` bytes of JSON text made elsewhere, escaped for a <script> element. */
void rs_json_script_bytes(FILE *f, const char *buf, size_t n);

#endif
