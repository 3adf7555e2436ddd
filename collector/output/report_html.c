/*
 * report_html.c — report.html: one file a person opens in a browser, with nothing to fetch.
 *
 * The page is a fixed shell (style sheet and script: report_page.css and report_page.js, embedded
 * at build time) around one inline data blob, <script type="application/json"
 * id="ranksnap-data">, which the script parses and draws from (canvas, no library). The blob
 * holds:
 *   report     report.json exactly as rs_report_json writes it (docs/FORMAT.md), so the page and
 *              the JSON cannot disagree about a verdict;
 *   text       the text report, shown as is in a collapsed section;
 *   timelines  one object per rank whose history was at hand (timeline.h; keys in
 *              docs/FORMAT.md, "report.html").
 * Inside a <script> element the HTML parser only looks for "</script" (and "<!--"), so every '<'
 * in the blob is written as \u003c; '/' is written as \/ so that no URL-looking text (a path or
 * job name holding "http://...") ever appears in the page, which keeps "the page references
 * nothing outside itself" checkable with a grep. Both are plain JSON escapes; '<', '>', '&' and
 * '/' occur in the JSON text only inside strings, so the escaping can be applied to report.json's
 * bytes as they are.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "json_write.h"
#include "report_html.h"
#include "report_json.h"
#include "report_text.h"
#include "text.h"


/* t - t0 exactly, whatever the two are (a crafted file's times may be far apart). */
static void rel(FILE *f, int64_t t, int64_t t0)
{
    if (t >= t0)
        fprintf(f, "%" PRIu64, (uint64_t)t - (uint64_t)t0);
    else
        fprintf(f, "-%" PRIu64, (uint64_t)t0 - (uint64_t)t);
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static uint64_t gcd_of(uint64_t g, const uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n && g != 1; i++) g = gcd(g, v[i]);
    return g;
}

/* Values divided by their quantum q (the page multiplies back): exact, and a third shorter for
 * the allocator's levels, which are multiples of 512 bytes (reserved ones of 2 MiB). */
static void u64_array(FILE *f, const char *key, const uint64_t *v, size_t n, uint64_t q)
{
    fprintf(f, "\"%s\":[", key);
    for (size_t i = 0; i < n; i++) fprintf(f, i ? ",%" PRIu64 : "%" PRIu64, v[i] / q);
    fputc(']', f);
}

/* Bucket times as differences from the previous bucket's (the first from t0): a few digits
 * each. Levels in units of "q". */
static void series(FILE *f, const char *key, const rs_timeline_series *s, int64_t t0)
{
    uint64_t q = gcd_of(gcd_of(gcd_of(0, s->lo, s->n), s->hi, s->n), s->last, s->n);
    if (q == 0) q = 1;
    fprintf(f, "\"%s\":{\"q\":%" PRIu64 ",\"t\":[", key, q);
    int64_t prev = t0;
    for (size_t i = 0; i < s->n; i++) {
        if (i) fputc(',', f);
        rel(f, s->t[i], prev);
        prev = s->t[i];
    }
    fputs("],", f);
    u64_array(f, "lo", s->lo, s->n, q);
    fputc(',', f);
    u64_array(f, "hi", s->hi, s->n, q);
    fputc(',', f);
    u64_array(f, "la", s->last, s->n, q);
    fputc('}', f);
}

/* Times relative to the rank's first event; t0 itself is absolute (µs, rank 0's clock), below
 * 2^53 for any date before the year 2255, so a JavaScript number holds it exactly. */
static void timeline_json(FILE *f, const rs_timeline *t)
{
    int64_t t0 = t->t_first;
    fprintf(f,
            "{\"rank\":%" PRId32 ",\"complete\":%s,\"events\":%" PRIu64 ",\"dropped\":%" PRIu64
            ",\"t0\":%" PRId64 ",\"d\":",
            t->rank, t->complete ? "true" : "false", t->events, t->dropped, t0);
    rel(f, t->t_last, t0);
    fprintf(f, ",\"nb\":%" PRIu32 ",\"a0\":%" PRIu64 ",\"r0\":%" PRIu64 ",", t->n_buckets,
            t->alloc_start, t->reserved_start);
    series(f, "a", &t->alloc, t0);
    fputc(',', f);
    series(f, "r", &t->reserved, t0);
    fputc(',', f);
    uint64_t bq = gcd_of(0, t->big_size, t->alloc.n);
    fprintf(f, "\"bq\":%" PRIu64 ",", bq ? bq : 1);
    u64_array(f, "bs", t->big_size, t->alloc.n, bq ? bq : 1);
    fputs(",\"bw\":[", f);
    for (size_t i = 0; i < t->alloc.n; i++) {
        if (i) fputc(',', f);
        if (t->big_site[i] == RS_TIMELINE_NO_SITE)
            fputs("-1", f);
        else
            fprintf(f, "%" PRIu32, t->big_site[i]);
    }
    fputs("],\"sn\":[", f);
    for (size_t i = 0; i < t->n_site_names; i++) {
        if (i) fputc(',', f);
        rs_json_string(f, t->site_names[i], RS_JSON_SCRIPT);
    }
    fputs("],\"stt\":[", f);
    for (size_t i = 0; i < t->n_steps; i++) {
        if (i) fputc(',', f);
        rel(f, t->step_t[i], t0);
    }
    fputs("],\"stn\":[", f);
    for (size_t i = 0; i < t->n_steps; i++) fprintf(f, i ? ",%" PRId64 : "%" PRId64, t->step_no[i]);
    fputs("],\"rg\":[", f);
    for (size_t i = 0; i < t->n_ranges; i++) {
        fputs(i ? ",[" : "[", f);
        rel(f, t->range_t0[i], t0);
        fputc(',', f);
        rel(f, t->range_t1[i], t0);
        fprintf(f, ",%" PRId64 ",%" PRId64 "]", t->range_begin[i], t->range_end[i]);
    }
    fputs("],\"peak\":{\"t\":", f);
    rel(f, t->peak_t, t0);
    fprintf(f, ",\"b\":%" PRIu64 ",\"s\":%" PRId64 "},\"oom\":", t->peak_bytes, t->peak_step);
    if (!t->oom) {
        fputs("null", f);
    } else {
        fputs("{\"t\":", f);
        if (t->oom_t)
            rel(f, t->oom_t, t0);
        else
            fputs("null", f);
        fprintf(f, ",\"b\":%" PRIu64 ",\"s\":%" PRId64 "}", t->oom_requested, t->oom_step);
    }
    fprintf(f, ",\"mom\":{\"oom\":%s,\"t\":", t->moment_is_oom ? "true" : "false");
    rel(f, t->moment_t, t0);
    fputs("},\"live\":[", f);
    /* addresses as hex strings: a 64-bit address need not fit a double */
    for (size_t i = 0; i < t->n_live; i++) {
        const rs_timeline_block *b = &t->live[i];
        fprintf(f, "%s[\"%" PRIx64 "\",%" PRIu64 ",", i ? "," : "", b->addr, b->size);
        if (b->stack == RS_TIMELINE_NO_SITE)
            fputs("-1,", f);
        else
            fprintf(f, "%" PRIu32 ",", b->stack);
        if (b->site == RS_TIMELINE_NO_SITE)
            fputs("-1]", f);
        else
            fprintf(f, "%" PRIu32 "]", b->site);
    }
    fputs("],\"stacks\":[", f);
    for (size_t i = 0; i < t->n_stacks; i++) {
        fputs(i ? ",[" : "[", f);
        for (size_t k = 0; k < t->stacks[i].n_frames; k++)
            fprintf(f, k ? ",%" PRIu32 : "%" PRIu32, t->stacks[i].frames[k]);
        fputc(']', f);
    }
    fputs("],\"frames\":[", f);
    for (size_t i = 0; i < t->n_frames; i++) {
        fputs(i ? ",[" : "[", f);
        rs_json_string(f, t->frames[i].function, RS_JSON_SCRIPT);
        fputc(',', f);
        rs_json_string(f, t->frames[i].file, RS_JSON_SCRIPT);
        fprintf(f, ",%" PRId32 "]", t->frames[i].line);
    }
    fputs("],\"sites\":[", f);
    for (size_t i = 0; i < t->n_sites; i++) {
        const rs_site *s = &t->sites[i];
        fputs(i ? ",[" : "[", f);
        rs_json_string(f, s->function, RS_JSON_SCRIPT);
        fputc(',', f);
        rs_json_string(f, s->file, RS_JSON_SCRIPT);
        fprintf(f, ",%" PRId32 ",%" PRId64 ",%" PRId32 ",", s->line, s->bytes, s->blocks);
        /* its path as the reports write it, and the stack (index into "stacks") to open it onto */
        char path[RS_SITE_PATH_MAX * (RS_SITE_FUNC_LEN + RS_SITE_FILE_LEN + 16)];
        rs_site_path_format(&t->site_paths[i], path, sizeof path);
        rs_json_string(f, path, RS_JSON_SCRIPT);
        if (t->site_stack[i] == RS_TIMELINE_NO_SITE)
            fputs(",-1]", f);
        else
            fprintf(f, ",%" PRIu32 "]", t->site_stack[i]);
    }
    fputs("]}", f);
}

/* Renders one of the other reports into a malloc'ed buffer. */
static ranksnap_status render(const rs_compare_result *r, int json, char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    FILE *m = open_memstream(buf, len);
    if (!m) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "report.html: no memory for the report");
    ranksnap_status st = json ? rs_report_json(m, r) : rs_report_text(m, r);
    if (fclose(m) != 0 && st == RANKSNAP_OK)
        st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "report.html: no memory for the report");
    if (st != RANKSNAP_OK) {
        free(*buf);
        *buf = NULL;
    }
    return st;
}

void rs_report_html_head(FILE *f, const char *title)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
          f);
    fputs(title, f);
    fputs("</title>\n<style>\n", f);
    fputs(rs_report_html_css, f);
    /* Script errors are recorded in the DOM (data-errors), where a headless browser's
     * --dump-dom shows them to the tests; this must run before the page's own script. */
    fputs("</style>\n<script>\n"
          "(function () {\n"
          "  var errs = [];\n"
          "  function rec(m) {\n"
          "    errs.push(m);\n"
          "    document.documentElement.setAttribute('data-errors', errs.join(' | '));\n"
          "  }\n"
          "  window.onerror = function (msg, src, line, col) { rec(String(msg) + ' at ' + line + ':' + col); };\n"
          "  window.addEventListener('unhandledrejection', function (e) { rec('unhandled rejection: ' + e.reason); });\n"
          "})();\n"
          "</script>\n</head>\n<body>\n",
          f);
}

void rs_report_html_data(FILE *f, const char *key, const char *json, size_t json_len,
                         const char *text)
{
    fprintf(f, "<script type=\"application/json\" id=\"ranksnap-data\">{\"%s\":", key);
    rs_json_script_bytes(f, json, json_len);
    fputs(",\"text\":", f);
    rs_json_string(f, text, RS_JSON_SCRIPT);
}

static void page_head(FILE *f)
{
    rs_report_html_head(f, "ranksnap report");
    fputs("<header id=\"head\"></header>\n"
          "<section><h2>Memory over time</h2><div id=\"timelines\"></div>\n"
          "<h2>Per rank</h2><div id=\"multiples\" class=\"multiples\"></div></section>\n"
          "<section><h2>Ranks</h2><table id=\"ranks\"></table></section>\n"
          "<section id=\"detail\"></section>\n"
          "<section><h2>Text report</h2><details><summary>as printed by rank 0 and "
          "<code>ranksnap report</code></summary><pre class=\"text\" id=\"text\"></pre></details></section>\n",
          f);
}

static void page_tail(FILE *f)
{
    fprintf(f,
            "<footer>ranksnap %s &middot; one self-contained file: nothing is fetched &middot; "
            "long histories are drawn from per-bucket minimum and maximum levels "
            "(docs/FORMAT.md, report.html)</footer>\n<div id=\"tip\"></div>\n",
            ranksnap_version());
}

/* The page around the timelines: `tl` or, when NULL, timelines built one at a time from `full`. */
static ranksnap_status page(FILE *f, const rs_compare_result *r, const rs_timeline *const *tl,
                            const rs_snap *const *full, size_t n)
{
    if (!f || !r) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_report_html: NULL argument");
    char *json = NULL, *text = NULL;
    size_t json_len = 0, text_len = 0;
    RS_CHECK(render(r, 1, &json, &json_len));
    ranksnap_status st = render(r, 0, &text, &text_len);
    if (st != RANKSNAP_OK) {
        free(json);
        return st;
    }
    page_head(f);
    rs_report_html_data(f, "report", json, json_len, text);
    free(json);
    free(text);
    fputs(",\"timelines\":[", f);
    uint32_t points = rs_timeline_points_for(n);
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        if (tl) {
            if (!tl[i]) continue;
            fputs(first ? "\n" : ",\n", f);
            timeline_json(f, tl[i]);
            first = 0;
            continue;
        }
        if (!full[i]) continue;
        rs_timeline *t = NULL;
        st = rs_timeline_build(full[i], points, &t);
        if (st != RANKSNAP_OK) return st;
        fputs(first ? "\n" : ",\n", f);
        timeline_json(f, t);
        rs_timeline_free(t);
        first = 0;
    }
    fputs("]}</script>\n", f);
    page_tail(f);
    fputs("<script>\n", f);
    fputs(rs_report_html_common_js, f);
    fputs(rs_report_html_js, f);
    fputs("</script>\n</body>\n</html>\n", f);
    if (ferror(f) || fflush(f) != 0)
        return rs_error(RANKSNAP_ERR_IO, "writing the HTML report failed: %s", strerror(errno));
    return RANKSNAP_OK;
}

ranksnap_status rs_report_html(FILE *out, const rs_compare_result *r, const rs_timeline *const *tl,
                                size_t n_tl)
{
    if (n_tl && !tl) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_report_html: NULL timelines");
    static const rs_timeline *const none[1] = {NULL};
    return page(out, r, n_tl ? tl : none, NULL, n_tl);
}

ranksnap_status rs_report_html_of_snapshots(FILE *out, const rs_compare_result *r,
                                             const rs_snap *const *full, size_t n)
{
    if (n && !full)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_report_html_of_snapshots: NULL snapshots");
    static const rs_timeline *const none[1] = {NULL};
    if (n == 0) return page(out, r, none, NULL, 0);
    return page(out, r, NULL, full, n);
}
