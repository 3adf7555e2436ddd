/*
 * external_gather.c — the gather of a PyTorch job without MPI (external_gather.h): the two
 * phases of the gather (coord.h) over whichever transport the job has. Everything else at the
 * end of the range is the pipeline both recorders share (live_report.c); under mpirun that
 * pipeline runs gather.c's MPI gather, with the reader library's pickle decoder.
 *
 * - torchrun with a torch.distributed process group: the glue's gather and bcast ops, on a
 *   gloo group of their own (CPU tensors: gathering through an NCCL group would allocate on the
 *   very GPU being measured). Phase 1 gathers the summaries, each with its rank's communicators
 *   (for the roles), rank 0 chooses, the choice is broadcast, phase 2 gathers the chosen ranks'
 *   pickles.
 * - torchrun without a group (or one whose collective failed): the files. Every rank has just
 *   written its pickle into RANKSNAP_DIR; rank 0 waits, at most RANKSNAP_GATHER_TIMEOUT, for
 *   each other rank's file of this attempt (by name: the plain one or this job's qualified
 *   one, dump.c) whose metadata says this job and this range, and names the ranks that never
 *   came. The directory must be one all ranks see.
 * Rank 0 summarises the other ranks' files with the same code `ranksnap report` uses, as every
 * rank does its own pickle (live_report.c), so the live report and the one from the files agree.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "clock.h"
#include "coord.h"
#include "dump.h"
#include "errors.h"
#include "external.h"
#include "external_gather.h"
#include "file_read.h"
#include "log.h"
#include "reader_lib.h"
#include "roles_found.h"
#include "summary.h"

/* What rank 0 collects, per rank. */
typedef struct rs_xg {
    int size;
    rs_summary *sums;
    rs_rank_comms *comms;
    int *present;
    rs_snap **full;
    uint64_t bytes_summaries, bytes_full;
    rs_gather_decode_fn decode; /* the recorder's (live_report.c): pickles, or .rsnap files */
} rs_xg;

static void rs_xg_free(rs_xg *x)
{
    for (int r = 0; x->full && r < x->size; r++) rs_snap_free(x->full[r]);
    for (int r = 0; x->comms && r < x->size; r++) rs_rank_comms_free(&x->comms[r]);
    free(x->sums);
    free(x->comms);
    free(x->present);
    free(x->full);
}

static ranksnap_status rs_xg_init(rs_xg *x, int size)
{
    memset(x, 0, sizeof *x);
    x->size = size;
    x->sums = calloc((size_t)size, sizeof *x->sums);
    x->comms = calloc((size_t)size, sizeof *x->comms);
    x->present = calloc((size_t)size, sizeof *x->present);
    x->full = calloc((size_t)size, sizeof *x->full);
    if (x->sums && x->comms && x->present && x->full) return RANKSNAP_OK;
    rs_xg_free(x);
    return rs_error(RANKSNAP_ERR_HOST_MEMORY, "gather: out of host memory for %d ranks", size);
}

/* Rank r's summary and communicators, from its decoded snapshot. */
static void rs_xg_take_snap(rs_xg *x, int r, const rs_snap *s)
{
    rs_summary_of(s, &x->sums[r]);
    if (rs_rank_comms_of(s, &x->comms[r]) != RANKSNAP_OK)
        RS_WARN(RS_SUB_MPI, "gather: %s: rank %d's role is not known", ranksnap_last_error(), r);
    x->comms[r].rank = r;
    x->present[r] = 1;
}

/* Hands what was collected to *g (the ranks present, in rank order); x keeps nothing. */
static ranksnap_status rs_xg_result(rs_xg *x, double t0, rs_gather_result *g)
{
    memset(g, 0, sizeof *g);
    g->summaries = calloc((size_t)x->size, sizeof *g->summaries);
    g->comms = calloc((size_t)x->size, sizeof *g->comms);
    g->full = calloc((size_t)x->size, sizeof *g->full);
    if (!g->summaries || !g->comms || !g->full) {
        free(g->summaries);
        free(g->comms);
        free(g->full);
        memset(g, 0, sizeof *g);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "gather: out of host memory for %d ranks", x->size);
    }
    g->world_size = x->size;
    for (int r = 0; r < x->size; r++) {
        if (!x->present[r]) {
            RS_WARN(RS_SUB_MPI, "gather: rank %d sent nothing: reported missing", r);
            continue;
        }
        if (x->sums[r].rank != r) x->sums[r].rank = r;
        g->summaries[g->n] = x->sums[r];
        g->comms[g->n] = x->comms[r];
        g->comms[g->n].rank = r;
        memset(&x->comms[r], 0, sizeof x->comms[r]);
        g->full[g->n++] = x->full[r];
        x->full[r] = NULL;
    }
    g->bytes_summaries = x->bytes_summaries;
    g->bytes_full = x->bytes_full;
    g->seconds = rs_now_mono_s() - t0;
    return RANKSNAP_OK;
}

/* ---- over the framework's process group ---------------------------------------------------- */

/* What each rank sends in the group's first gather: its summary, then its communicators (a
 * count, the count left out, the list), any number of them. */
static ranksnap_status rs_xg_pack(const rs_summary *mine, const rs_rank_comms *comms, char **out,
                                  size_t *len)
{
    uint64_t head[2] = {comms->n, comms->left_out};
    size_t n = sizeof *mine + sizeof head + comms->n * sizeof *comms->v;
    char *b = malloc(n);
    if (!b) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "gather: no memory for %zu bytes of summary", n);
    memcpy(b, mine, sizeof *mine);
    memcpy(b + sizeof *mine, head, sizeof head);
    if (comms->n) memcpy(b + sizeof *mine + sizeof head, comms->v, comms->n * sizeof *comms->v);
    *out = b;
    *len = n;
    return RANKSNAP_OK;
}

static void rs_xg_take_summary(void *arg, int rank, const void *buf, size_t len)
{
    rs_xg *x = arg;
    uint64_t head[2];
    const char *b = buf;
    if (rank < 0 || rank >= x->size || len < sizeof(rs_summary) + sizeof head || !buf) return;
    memcpy(&x->sums[rank], b, sizeof(rs_summary));
    memcpy(head, b + sizeof(rs_summary), sizeof head);
    size_t room = (len - sizeof(rs_summary) - sizeof head) / sizeof(rs_snap_comm);
    rs_rank_comms *c = &x->comms[rank];
    rs_rank_comms_free(c);
    c->rank = rank;
    /* a list that does not fit what came is not this library's: the rank's role stays unknown */
    if (head[0] == room && room) c->v = malloc(room * sizeof *c->v);
    if (c->v) {
        memcpy(c->v, b + sizeof(rs_summary) + sizeof head, room * sizeof *c->v);
        c->n = room;
    }
    c->left_out = head[1];
    x->present[rank] = 1;
    x->bytes_summaries += len;
}

static void rs_xg_take_full(void *arg, int rank, const void *buf, size_t len)
{
    rs_xg *x = arg;
    if (rank < 0 || rank >= x->size || !len || !buf || x->full[rank]) return;
    char name[64];
    snprintf(name, sizeof name, "rank %d's gathered snapshot", rank);
    if (x->decode(buf, len, name, &x->full[rank]) != RANKSNAP_OK)
        RS_WARN(RS_SUB_MPI, "gather: %s", ranksnap_last_error());
    else
        x->bytes_full += len;
}

/* 0: gathered (rank 0's *x filled); -1: no group; -2: a collective failed on the way. */
static int rs_xg_group(rs_runtime *rt, const char *buf, size_t len, const rs_summary *mine,
                       const rs_rank_comms *comms, rs_xg *x)
{
    int t = rt->opts.gather_timeout, size = rt->world_size;
    char *packed = NULL;
    size_t packed_len = 0;
    if (rs_xg_pack(mine, comms, &packed, &packed_len) != RANKSNAP_OK) {
        /* the same summary without the communicators, which then stay unknown */
        RS_WARN(RS_SUB_MPI, "%s", ranksnap_last_error());
        rs_rank_comms none;
        memset(&none, 0, sizeof none);
        if (rs_xg_pack(mine, &none, &packed, &packed_len) != RANKSNAP_OK) return -1;
    }
    int got = rs_external_group_gather(packed, packed_len, t, x, rs_xg_take_summary);
    free(packed);
    if (got != 0) return -1;
    unsigned char *want = calloc((size_t)size, 1);
    int *w = calloc((size_t)size, sizeof *w);
    int rc = -2;
    if (want && w) {
        if (rt->rank == 0) {
            rs_gather_choose(x->sums, x->present, size, rt->opts.gather, rt->opts.divergence, w);
            for (int r = 0; r < size; r++) want[r] = (unsigned char)w[r];
        }
        /* rank 0 decoded its own pickle already: it sends nothing to itself */
        if (rs_external_group_bcast(want, (size_t)size, t) == 0 &&
            rs_external_group_gather(buf, rt->rank != 0 && want[rt->rank] ? len : 0, t, x,
                                     rs_xg_take_full) == 0)
            rc = 0;
    }
    free(want);
    free(w);
    return rc;
}

/* ---- through the files --------------------------------------------------------------------- */

/* RANKSNAP_DIR/`name` (job-qualified or not), decoded, when it is rank r's of this job and of
 * the range that began at `begin`. */
static rs_snap *rs_xg_read_path(rs_runtime *rt, rs_gather_decode_fn decode, const char *name,
                                int qualified, int r, int64_t begin, uint64_t *bytes)
{
    char path[RS_PATH_MAX + 128];
    struct stat sb;
    if (rs_dump_path_of(rt, name, qualified, path, sizeof path) != 0 || stat(path, &sb) != 0 ||
        !S_ISREG(sb.st_mode))
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    rs_snap *s = NULL;
    if (rs_file_read(path, 0, &buf, &len) == RANKSNAP_OK &&
        decode(buf, len, path, &s) == RANKSNAP_OK) {
        int same = s->rank == r && strcmp(s->job, rt->job) == 0 && s->time.n_ranges > 0 &&
                   s->time.ranges[s->time.n_ranges - 1].begin == begin;
        if (!same) {
            rs_snap_free(s);
            s = NULL;
        } else {
            *bytes += len;
        }
    }
    free(buf);
    return s;
}

/* Rank r's file, decoded, when it is of this job and of the range that began at `begin`. It
 * has the plain name, or the job-qualified one when rank r found another job's file there
 * (dump.c): the qualified name is looked at first, as it can only be this job's. */
static rs_snap *rs_xg_read_file(rs_runtime *rt, rs_gather_decode_fn decode, int r, int64_t begin,
                                uint64_t *bytes)
{
    char name[64];
    if (rs_external_file_name(r, name, sizeof name) != 0) return NULL;
    for (int q = 1; q >= 0; q--) {
        rs_snap *s = rs_xg_read_path(rt, decode, name, q, r, begin, bytes);
        if (s) return s;
    }
    return NULL;
}

static void rs_xg_files(rs_runtime *rt, int64_t begin, rs_xg *x)
{
    int size = x->size;
    int keep_all = rt->opts.gather == RS_GATHER_ALL || (rt->opts.gather == RS_GATHER_AUTO && size <= 16);
    double deadline = rs_now_mono_s() + rt->opts.gather_timeout;
    int missing = 0;
    for (int r = 0; r < size; r++) missing += !x->present[r];
    while (missing > 0) {
        for (int r = 0; r < size; r++) {
            if (x->present[r]) continue;
            uint64_t bytes = 0;
            rs_snap *s = rs_xg_read_file(rt, x->decode, r, begin, &bytes);
            if (!s) continue;
            rs_xg_take_snap(x, r, s);
            x->bytes_summaries += bytes;
            missing--;
            if (keep_all) x->full[r] = s;
            else rs_snap_free(s);
        }
        if (missing == 0 || rs_now_mono_s() > deadline) break;
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (keep_all) return;
    int *want = calloc((size_t)size, sizeof *want);
    if (!want) return;
    rs_gather_choose(x->sums, x->present, size, rt->opts.gather, rt->opts.divergence, want);
    for (int r = 0; r < size; r++)
        if (want[r] && x->present[r] && !x->full[r]) x->full[r] = rs_xg_read_file(rt, x->decode, r, begin, &x->bytes_full);
    free(want);
}

/* ---- the gather without MPI --------------------------------------------------------------- */

ranksnap_status rs_external_gather(rs_runtime *rt, rs_gather_decode_fn decode, const char *buf,
                                   size_t len, const rs_summary *mine, rs_rank_comms *comms,
                                   rs_snap *self, rs_gather_result *g)
{
    memset(g, 0, sizeof *g);
    double t0 = rs_now_mono_s();
    rs_xg x;
    ranksnap_status gst = rs_xg_init(&x, rt->world_size);
    if (gst == RANKSNAP_OK) {
        x.decode = decode;
        if (rt->rank == 0) {
            x.sums[0] = *mine;
            x.present[0] = 1;
            x.full[0] = self;
            self = NULL;
        }
        int rc = rs_xg_group(rt, buf, len, mine, comms, &x);
        if (rt->rank == 0) { /* its own, whether the group's gather brought them or not */
            rs_rank_comms_free(&x.comms[0]);
            x.comms[0] = *comms;
            memset(comms, 0, sizeof *comms);
        }
        if (rc != 0 && rt->rank == 0) {
            int64_t begin = 0;
            rs_rt_lock(rt);
            if (rt->n_ranges > 0) begin = rt->ranges[rt->n_ranges - 1].begin;
            rs_rt_unlock(rt);
            RS_INFO(RS_SUB_MPI, "gather: %s; waiting for the other ranks' files in %s",
                    rc == -1 ? "no torch.distributed group" : "the process group's collective failed",
                    rt->opts.dir);
            rs_xg_files(rt, begin, &x);
        }
        if (rt->rank == 0) gst = rs_xg_result(&x, t0, g);
        rs_xg_free(&x);
    }
    rs_rank_comms_free(comms);
    rs_snap_free(self);
    return gst;
}
