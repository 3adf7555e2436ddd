/*
 * diff_html.h — two runs compared (diff.h) for people: one self-contained page in report.html's
 * style, with both runs side by side (styles, script and data inline; nothing fetched).
 */
#ifndef RANKSNAP_DIFF_HTML_H
#define RANKSNAP_DIFF_HTML_H

#include <stdio.h>

#include "diff.h"
#include "diff_gate.h"
#include "ranksnap.h"

/* Writes the page: the diff as --json writes it and its text, drawn by diff_page.js. */
ranksnap_status rs_diff_html(FILE *out, const rs_diff_result *r, const rs_diff_gate *gate);

/* One of the diff's outputs (rs_diff_text, rs_diff_json, rs_diff_html) into a malloc'ed buffer
 * (*buf NULL on failure). */
typedef ranksnap_status (*rs_diff_render_fn)(FILE *, const rs_diff_result *, const rs_diff_gate *);
ranksnap_status rs_diff_render(rs_diff_render_fn fn, const rs_diff_result *r,
                               const rs_diff_gate *g, char **buf, size_t *len);

/* The page's own script (diff_page.js), embedded at build time without its leading comment. */
extern const char rs_diff_html_js[];

#endif
