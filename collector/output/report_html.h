/*
 * report_html.h — report.html: the comparison for people, one self-contained page (styles,
 * script and data inline; nothing fetched), with per-rank timelines (timeline.h).
 */
#ifndef RANKSNAP_REPORT_HTML_H
#define RANKSNAP_REPORT_HTML_H

#include <stddef.h>
#include <stdio.h>

#include "compare.h"
#include "ranksnap.h"
#include "timeline.h"

/* Writes the page: the report `r` (as report.json has it, plus the text report) and the
 * timelines of the ranks whose history was at hand (`tl[i]` may be NULL: that rank is drawn as
 * "summary only"). */
ranksnap_status rs_report_html(FILE *out, const rs_compare_result *r, const rs_timeline *const *tl,
                                size_t n_tl);

/* The same from decoded snapshots (NULL entries allowed), building each timeline with
 * rs_timeline_points_for(n) buckets and freeing it before the next: what rank 0's live report
 * calls with the snapshots the gather brought. */
ranksnap_status rs_report_html_of_snapshots(FILE *out, const rs_compare_result *r,
                                             const rs_snap *const *full, size_t n);

/* The start of a page in report.html's style, up to and with <body>: the style sheet, and the
 * script that records script errors in the DOM for the browser tests. `title` is HTML text. */
void rs_report_html_head(FILE *f, const char *title);

/* Opens the page's data blob, <script type="application/json" id="ranksnap-data">, with
 * {"KEY": the JSON document `json` (escaped for a <script>), "text": `text`; the caller writes
 * any more members and then "}</script>". */
void rs_report_html_data(FILE *f, const char *key, const char *json, size_t json_len,
                         const char *text);

/* The page's style sheet and script: report_page.css and report_page.js, embedded at build
 * time (cmake/embed_text.cmake, without their leading comments), and page_common.js, the
 * helpers every page's script uses, written before it. */
extern const char rs_report_html_css[];
extern const char rs_report_html_js[];
extern const char rs_report_html_common_js[];

#endif
