/*
 * live_report.c — the end of a recorded range on every rank, one pipeline for every recorder
 * (ranksnap's own, PyTorch's, and ranksnap's own in a PyTorch rank recorded at the driver: a
 * row each of rs_range_recorder): this rank's file, its summary, the two-phase gather to rank
 * 0, and there the comparison printed and written as report.txt, report.json and report.html.
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
#include "reader_lib.h"
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

/* ---- what differs between the two recorders ------------------------------------------------ */

/* A recorder's part in the end of a range; everything else is the one pipeline below. */
typedef struct rs_range_recorder {
    /* This rank's snapshot as the bytes of its file (malloc'ed). */
    ranksnap_status (*take)(rs_runtime *rt, char **buf, size_t *len);
    /* The decoder of those bytes, this rank's own and, on rank 0, the other ranks'. */
    rs_gather_decode_fn decode;
    /* What the files are called in the warning when the decoder cannot be loaded (its
     * RANKSNAP_ERR_UNSUPPORTED: only the reader library's is loaded late). */
    const char *files;
    /* The gather of a job without MPI (ranksnap joined none, more than one rank); NULL: each
     * rank goes through gather.c, which then keeps its own snapshot alone. */
    ranksnap_status (*gather_without_mpi)(rs_runtime *rt, rs_gather_decode_fn decode,
                                          const char *buf, size_t len, const rs_summary *mine,
                                          rs_rank_comms *comms, rs_snap *self, rs_gather_result *g);
    /* 1: the range counts as reported even when a step failed, since the recorder's history is
     * gone once its snapshot was asked for (PyTorch clears it on stop); 0: ranksnap's ring still
     * holds it, and finalize tries a time range again. */
    int spent_on_failure;
} rs_range_recorder;

/* ranksnap's own recorder: the allocator's state, the ring and the stacks, as a .rsnap. */
static ranksnap_status rs_own_take(rs_runtime *rt, char **buf, size_t *len)
{
    return rs_dump_encode(rt, 1, buf, len);
}

/* PyTorch's recorder (RANKSNAP_RECORDER=torch): its snapshot, as the pickle; the recorder is
 * stopped whether the snapshot came or not. */
static ranksnap_status rs_external_take(rs_runtime *rt, char **buf, size_t *len)
{
    ranksnap_status st = rs_external_snapshot(rt, "range_end", buf, len);
    rs_external_stop(rt);
    if (st != RANKSNAP_OK) RS_WARN(RS_SUB_DUMP, "%s", ranksnap_last_error());
    return st;
}

/* The .rsnap decoder, as a rs_gather_decode_fn (it takes the bytes as `const void *`). */
static ranksnap_status rs_own_decode(const char *buf, size_t len, const char *name, rs_snap **out)
{
    return rs_rsnap_decode(buf, len, name, out);
}

static const rs_range_recorder rs_own_recorder = {
    rs_own_take, rs_own_decode, "snapshots", NULL, 0,
};
static const rs_range_recorder rs_external_recorder = {
    rs_external_take, rs_reader_lib_decode, "pickles", rs_external_gather, 1,
};
/* A PyTorch rank that ranksnap records itself at the CUDA driver (external_mode.h): its own
 * recorder's snapshot and decoder, gathered as a PyTorch job's (its ring still holds the range). */
static const rs_range_recorder rs_native_torch_recorder = {
    rs_own_take, rs_own_decode, "snapshots", rs_external_gather, 0,
};

/* ---- the end of a range -------------------------------------------------------------------- */

/* Takes this rank's snapshot, writes its file and, with RANKSNAP_REPORT, summarises it, gathers
 * and reports on rank 0. rt->reported is set once the file's status is what is returned. */
static ranksnap_status rs_range_end(rs_runtime *rt, const rs_range_recorder *rec)
{
    char *buf = NULL;
    size_t len = 0;
    RS_CHECK(rec->take(rt, &buf, &len));
    /* under this job's name for it: never over another job's file (dump.c) */
    ranksnap_status st = rs_dump_write_range_snapshot(rt, buf, len);
    if (!rt->opts.report) { /* RANKSNAP_REPORT=0: files only, `ranksnap report DIR` later */
        free(buf);
        rt->reported = 1;
        return st;
    }
    /* The summary and the communicators (for the roles) are made by the same code that reads
     * files afterwards, from this very encoding, so the live report and `ranksnap report`
     * cannot disagree. The decoded snapshot goes on to the gather, which keeps it as rank 0's
     * own: decoded once. */
    rs_snap *self = NULL;
    rs_summary mine;
    rs_rank_comms comms;
    memset(&mine, 0, sizeof mine);
    memset(&comms, 0, sizeof comms);
    ranksnap_status dst = rec->decode(buf, len, "this rank's snapshot", &self);
    if (dst == RANKSNAP_ERR_UNSUPPORTED) {
        /* no reader library: every rank of the job runs the same install, so every rank skips
         * the gather alike, and no rank waits for another */
        if (rt->rank == 0)
            RS_WARN(RS_SUB_DUMP, "no live report for this range (%s); the %s are in %s, and "
                                 "`ranksnap report %s` compares them", ranksnap_last_error(),
                    rec->files, rt->opts.dir, rt->opts.dir);
        free(buf);
        rt->reported = 1;
        return st;
    }
    if (dst == RANKSNAP_OK) {
        rs_summary_of(self, &mine);
        if (rs_rank_comms_of(self, &comms) != RANKSNAP_OK)
            RS_WARN(RS_SUB_MPI, "gather: %s: this rank's role is not known", ranksnap_last_error());
    } else {
        RS_WARN(RS_SUB_DUMP, "%s", ranksnap_last_error());
        mine.rank = rt->rank;
        mine.world_size = rt->world_size;
    }
    /* the gather takes `self` and `comms` over */
    rs_gather_result g;
    ranksnap_status gst;
    if (rec->gather_without_mpi && !rs_coord_comm(rt->coord) && rt->world_size > 1)
        gst = rec->gather_without_mpi(rt, rec->decode, buf, len, &mine, &comms, self, &g);
    else
        gst = rs_gather_run(rt->coord, rec->decode, buf, len, &mine, &comms, self, rt->opts.gather,
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

ranksnap_status rs_live_report_end_of_range(rs_runtime *rt)
{
    /* Nothing to write and nothing to report: every rank reads the same environment, so all of
     * them skip the gather together. */
    if (rt->opts.write == RS_WRITE_NONE && !rt->opts.report) {
        rt->reported = 1;
        return RANKSNAP_OK;
    }
    const rs_range_recorder *rec = !rs_external_mode()  ? &rs_own_recorder
                                   : rs_external_native() ? &rs_native_torch_recorder
                                                          : &rs_external_recorder;
    ranksnap_status st = rs_range_end(rt, rec);
    if (rec->spent_on_failure) rt->reported = 1;
    return st;
}
