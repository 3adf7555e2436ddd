/*
 * live_report.c — the end of a recorded range on every rank: this rank's file, the two-phase
 * gather to rank 0, and there the comparison printed and written as report.txt, report.json and
 * report.html.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "clock.h"
#include "coord.h"
#include "dump.h"
#include "errors.h"
#include "external.h"
#include "external_gather.h"
#include "gather.h"
#include "live_report.h"
#include "log.h"
#include "report_html.h"
#include "report_json.h"
#include "report_text.h"
#include "ring_file.h"
#include "roles.h"
#include "roles_found.h"
#include "rsnap_decode.h"
#include "state.h"
#include "summary.h"

/* Writes `text` of `n` bytes to RANKSNAP_DIR/name atomically, as this job's file (dump.h). */
static void rs_write_report_file(rs_runtime *rt, const char *name, const char *text, size_t n)
{
    if (rs_dump_write_file(rt, name, text, n, 1) != RANKSNAP_OK)
        RS_WARN(RS_SUB_DUMP, "report: %s", ranksnap_last_error());
}

/* report.html, with the timelines of the ranks whose snapshot the gather brought; a page that
 * cannot be made is a warning: the text and JSON reports stand. */
static void rs_write_report_html(rs_runtime *rt, const rs_compare_result *res, const rs_gather_result *g)
{
    char *html = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&html, &n);
    ranksnap_status st = f ? rs_report_html_of_snapshots(f, res, (const rs_snap *const *)g->full, g->n)
                           : RANKSNAP_ERR_HOST_MEMORY;
    if (f && fclose(f) != 0 && st == RANKSNAP_OK) st = RANKSNAP_ERR_HOST_MEMORY;
    if (st == RANKSNAP_OK)
        rs_write_report_file(rt, "report.html", html, n);
    else
        RS_WARN(RS_SUB_DUMP, "report.html: %s", ranksnap_last_error());
    free(html);
}

/* Rank 0: compares what the gather brought and prints/writes the report. */
static void rs_report(rs_runtime *rt, const rs_gather_result *g)
{
    rs_compare_config cfg;
    rs_compare_config_default(&cfg);
    cfg.divergence_pct = rt->opts.divergence;
    rs_roles roles;
    memset(&roles, 0, sizeof roles);
    if (rt->opts.groups[0]) {
        char source[320];
        snprintf(source, sizeof source, "RANKSNAP_GROUPS %s", rt->opts.groups);
        if (rs_roles_parse(rt->opts.groups, source, &roles) != RANKSNAP_OK)
            RS_WARN(RS_SUB_DUMP, "RANKSNAP_GROUPS: %s; ranks compared with all ranks",
                    ranksnap_last_error());
        else if (roles.world_size != g->world_size)
            RS_WARN(RS_SUB_DUMP, "RANKSNAP_GROUPS=%s describes %d ranks, but the job has %d; "
                    "ranks compared with all ranks", rt->opts.groups, roles.world_size,
                    g->world_size);
        else
            cfg.roles = &roles;
    } else {
        rs_roles_found_apply(&cfg, g->comms, g->n, g->world_size, &roles); /* none declared */
    }
    rs_compare_result *res = NULL;
    ranksnap_status cst = rs_compare(g->summaries, (const rs_snap *const *)g->full, g->n,
                                     g->world_size, &cfg, &res);
    rs_roles_free(&roles);
    if (cst != RANKSNAP_OK) {
        RS_WARN(RS_SUB_DUMP, "report: %s", ranksnap_last_error());
        return;
    }
    char *text = NULL, *json = NULL;
    size_t text_n = 0, json_n = 0;
    FILE *ft = open_memstream(&text, &text_n);
    FILE *fj = open_memstream(&json, &json_n);
    int ok = ft && fj && rs_report_text(ft, res) == RANKSNAP_OK && rs_report_json(fj, res) == RANKSNAP_OK;
    /* the streams' buffers are complete only once closed */
    if (ft && fclose(ft) != 0) ok = 0;
    if (fj && fclose(fj) != 0) ok = 0;
    if (ok) {
        fwrite(text, 1, text_n, stdout);
        fflush(stdout);
        rs_write_report_file(rt, "report.txt", text, text_n);
        rs_write_report_file(rt, "report.json", json, json_n);
        rs_write_report_html(rt, res, g);
    } else {
        RS_WARN(RS_SUB_DUMP, "report: could not be formatted: %s", ranksnap_last_error());
    }
    free(text);
    free(json);
    rs_compare_result_free(res);
    RS_INFO(RS_SUB_MPI, "gather: %zu of %d ranks in %.3f s, %llu bytes of summaries, %llu bytes of snapshots",
            g->n, g->world_size, g->seconds, (unsigned long long)g->bytes_summaries,
            (unsigned long long)g->bytes_full);
}

/* At the end of a recorded range (and at finalize for an open one), on every rank at the same
 * step: write this rank's file, gather to rank 0, and report there. */
ranksnap_status rs_live_report_end_of_range(rs_runtime *rt)
{
    /* Nothing to write and nothing to report: every rank reads the same environment, so all of
     * them skip the gather together. */
    if (rt->opts.write == RS_WRITE_NONE && !rt->opts.report) {
        rt->reported = 1;
        return RANKSNAP_OK;
    }
    /* ranksnap torch mode: the framework's snapshot and its gather (external_gather.c) */
    if (rs_external_mode()) {
        rs_gather_result xg;
        int gathered = 0;
        ranksnap_status xst = rs_external_end_of_range(rt, &xg, &gathered);
        if (gathered && rt->rank == 0 && xg.n > 0) rs_report(rt, &xg);
        if (gathered) rs_gather_result_free(&xg);
        rt->reported = 1;
        return xst;
    }
    char *buf = NULL;
    size_t len = 0;
    RS_CHECK(rs_dump_encode(rt, 1, &buf, &len));
    ranksnap_status st = rs_dump_write_range_snapshot(rt, buf, len);
    if (!rt->opts.report) { /* RANKSNAP_REPORT=0: files only, `ranksnap report DIR` later */
        free(buf);
        rt->reported = 1;
        return st;
    }
    /* The summary is computed by the same code that reads files afterwards, from this very
     * encoding, so the live report and `ranksnap report` cannot disagree. The decoded snapshot
     * goes on to the gather, which keeps it as rank 0's own: decoded once. */
    rs_snap *self = NULL;
    rs_summary mine;
    memset(&mine, 0, sizeof mine);
    ranksnap_status dst = rs_rsnap_decode(buf, len, "this rank's snapshot", &self);
    if (dst == RANKSNAP_OK) {
        rs_summary_of(self, &mine);
    } else {
        RS_WARN(RS_SUB_DUMP, "%s", ranksnap_last_error());
        mine.rank = rt->rank;
        mine.world_size = rt->world_size;
    }
    rs_gather_result g;
    ranksnap_status gst = rs_gather_run(rt->coord, buf, len, &mine, self, rt->opts.gather,
                                        rt->opts.gather_timeout, rt->opts.divergence, &g);
    free(buf);
    if (gst != RANKSNAP_OK) {
        RS_WARN(RS_SUB_MPI, "gather: %s", ranksnap_last_error());
        return gst;
    }
    if (rt->rank == 0 && g.n > 0) rs_report(rt, &g);
    rs_gather_result_free(&g);
    rt->reported = 1;
    return st;
}

