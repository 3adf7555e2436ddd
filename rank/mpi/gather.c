/*
 * gather.c — the two-phase gather over MPI (gather.h; the protocol in coord.h).
 *
 * Every wait is a poll with a deadline (MPI_Test* and a short sleep), never a blocking receive,
 * so a rank that hangs or died costs the others at most RANKSNAP_GATHER_TIMEOUT. Requests that
 * never matched are cancelled before they are freed, so nothing stays posted into the next
 * gather; each gather uses its own tags (a sequence number) so that a late message of an earlier
 * one cannot be taken for a current one.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "compare.h"
#include "errors.h"
#include "gather.h"
#include "log.h"
#include "mpi_call.h"

#define RS_TAG_GATHER0 16
/* summary, answer, snapshot length and bytes, communicators' count and list: the highest tag
 * stays under 32767, the least MPI_TAG_UB an MPI may have */
#define RS_TAGS_PER_GATHER 6
#define RS_CHUNK ((size_t)1 << 30) /* keeps every message's count within an int */

void rs_gather_result_free(rs_gather_result *r)
{
    if (!r) return;
    if (r->full)
        for (size_t i = 0; i < r->n; i++) rs_snap_free(r->full[i]);
    if (r->comms)
        for (size_t i = 0; i < r->n; i++) rs_rank_comms_free(&r->comms[i]);
    free(r->full);
    free(r->comms);
    free(r->summaries);
    memset(r, 0, sizeof *r);
}

static ranksnap_status rs_result_alloc(rs_gather_result *out, size_t cap)
{
    out->summaries = calloc(cap ? cap : 1, sizeof *out->summaries);
    out->comms = calloc(cap ? cap : 1, sizeof *out->comms);
    out->full = calloc(cap ? cap : 1, sizeof *out->full);
    if (!out->summaries || !out->comms || !out->full) {
        rs_gather_result_free(out);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "gather: out of host memory for %zu ranks", cap);
    }
    return RANKSNAP_OK;
}

/* Moves this rank's communicators into *out; *comms is left empty. */
static void rs_gather_take_comms(rs_rank_comms *comms, rs_rank_comms *out)
{
    *out = *comms;
    memset(comms, 0, sizeof *comms);
}

/* This rank's communicators (roles_found.h), after rank 0 answered its summary: a count and
 * then the list, of any length. *gone: rank 0 stopped receiving. */
static ranksnap_status rs_gather_send_comms(const rs_mpi_ops *m, void *comm, int base,
                                            const rs_rank_comms *mine, double deadline, int *gone)
{
    const size_t per = RS_CHUNK / sizeof *mine->v;
    uint64_t head[2] = {mine->n, mine->left_out};
    rs_mpi_req req = 0;
    *gone = 0;
    RS_MPI(m, m->isend(comm, head, sizeof head, 0, base + 4, &req), "gather MPI_Isend");
    for (size_t off = 0;; off += per) {
        if (!rs_mpi_call_wait(m, &req, deadline)) {
            m->cancel(&req);
            *gone = 1;
            return RANKSNAP_OK;
        }
        if (off >= mine->n) return RANKSNAP_OK;
        size_t part = mine->n - off < per ? mine->n - off : per;
        RS_MPI(m, m->isend(comm, mine->v + off, part * sizeof *mine->v, 0, base + 5, &req),
               "gather MPI_Isend");
    }
}

/* Non-root side, with this rank's communicators. */
static ranksnap_status rs_gather_send_with(rs_coord *c, int base, const char *snap, size_t len,
                                           const rs_summary *mine, const rs_rank_comms *comms,
                                           int timeout_s)
{
    const rs_mpi_ops *m = rs_coord_mpi(c);
    void *comm = rs_coord_comm(c);
    double deadline = rs_now_mono_s() + 2.0 * timeout_s + 5.0;
    rs_mpi_req req = 0;
    RS_MPI(m, m->isend(comm, mine, sizeof *mine, 0, base + 0, &req), "gather MPI_Isend");
    int want = 0, gone = 0;
    rs_mpi_req dreq = 0;
    RS_MPI(m, m->irecv(comm, &want, sizeof want, 0, base + 1, &dreq), "gather MPI_Irecv");
    if (!rs_mpi_call_wait(m, &dreq, deadline)) {
        m->cancel(&dreq);
        m->cancel(&req);
        RS_WARN(RS_SUB_MPI, "gather: rank 0 did not answer within %d s; going on without it", timeout_s);
        return RANKSNAP_OK;
    }
    if (!rs_mpi_call_wait(m, &req, deadline)) m->cancel(&req);
    RS_CHECK(rs_gather_send_comms(m, comm, base, comms, deadline, &gone));
    if (!want || gone) return RANKSNAP_OK;
    uint64_t n = len;
    RS_MPI(m, m->isend(comm, &n, sizeof n, 0, base + 2, &req), "gather MPI_Isend");
    if (!rs_mpi_call_wait(m, &req, deadline)) {
        m->cancel(&req);
        return RANKSNAP_OK;
    }
    for (size_t off = 0; off < len; off += RS_CHUNK) {
        size_t part = len - off < RS_CHUNK ? len - off : RS_CHUNK;
        RS_MPI(m, m->isend(comm, snap + off, part, 0, base + 3, &req), "gather MPI_Isend");
        if (!rs_mpi_call_wait(m, &req, deadline)) {
            m->cancel(&req);
            RS_WARN(RS_SUB_MPI, "gather: rank 0 stopped receiving this rank's snapshot");
            return RANKSNAP_OK;
        }
    }
    return RANKSNAP_OK;
}

/* Non-root side. */
static ranksnap_status rs_gather_send(rs_coord *c, int base, const char *snap, size_t len,
                                      const rs_summary *mine, rs_rank_comms *comms, rs_snap *self,
                                      int timeout_s)
{
    /* the summary and the communicators were made from it; they and the encoding travel */
    rs_snap_free(self);
    ranksnap_status st = rs_gather_send_with(c, base, snap, len, mine, comms, timeout_s);
    rs_rank_comms_free(comms);
    return st;
}

/* Rank 0: rank r's communicators into *out (left empty when they did not come in time). */
static void rs_gather_recv_comms(const rs_mpi_ops *m, void *comm, int base, int r, double deadline,
                                 rs_rank_comms *out, uint64_t *bytes)
{
    uint64_t head[2] = {0, 0};
    rs_mpi_req req = 0;
    memset(out, 0, sizeof *out);
    out->rank = r;
    if (m->irecv(comm, head, sizeof head, r, base + 4, &req) != 0) return;
    if (!rs_mpi_call_wait(m, &req, deadline)) {
        m->cancel(&req);
        RS_WARN(RS_SUB_MPI, "gather: rank %d's communicators did not arrive in time: its role is not known", r);
        return;
    }
    /* a list longer than the rank's address space could hold is not one this library sent */
    if (head[0] > SIZE_MAX / 2 / sizeof *out->v ||
        !(out->v = malloc((head[0] ? head[0] : 1) * sizeof *out->v))) {
        RS_WARN(RS_SUB_MPI, "gather: no host memory for rank %d's %llu communicators: its role is not known",
                r, (unsigned long long)head[0]);
        return;
    }
    const size_t per = RS_CHUNK / sizeof *out->v;
    for (size_t off = 0; off < head[0]; off += per) {
        size_t part = head[0] - off < per ? head[0] - off : per;
        if (m->irecv(comm, out->v + off, part * sizeof *out->v, r, base + 5, &req) != 0 ||
            !rs_mpi_call_wait(m, &req, deadline)) {
            m->cancel(&req);
            rs_rank_comms_free(out);
            out->rank = r;
            RS_WARN(RS_SUB_MPI, "gather: rank %d's communicators did not arrive in time: its role is not known", r);
            return;
        }
    }
    out->n = (size_t)head[0];
    out->left_out = head[1];
    *bytes += sizeof head + out->n * sizeof *out->v;
}

/* Rank 0: the full snapshot of rank r, or NULL when it did not come in time. */
static rs_snap *rs_gather_recv_full(rs_coord *c, rs_gather_decode_fn decode, int base, int r,
                                    double deadline, uint64_t *bytes)
{
    const rs_mpi_ops *m = rs_coord_mpi(c);
    void *comm = rs_coord_comm(c);
    uint64_t n = 0;
    rs_mpi_req req = 0;
    if (m->irecv(comm, &n, sizeof n, r, base + 2, &req) != 0) return NULL;
    if (!rs_mpi_call_wait(m, &req, deadline)) {
        m->cancel(&req);
        return NULL;
    }
    char *buf = malloc(n ? n : 1);
    if (!buf) {
        RS_WARN(RS_SUB_MPI, "gather: no host memory for rank %d's %llu-byte snapshot", r, (unsigned long long)n);
        return NULL;
    }
    for (size_t off = 0; off < n; off += RS_CHUNK) {
        size_t part = n - off < RS_CHUNK ? n - off : RS_CHUNK;
        if (m->irecv(comm, buf + off, part, r, base + 3, &req) != 0 ||
            !rs_mpi_call_wait(m, &req, deadline)) {
            m->cancel(&req);
            free(buf);
            RS_WARN(RS_SUB_MPI, "gather: rank %d's snapshot did not arrive in time", r);
            return NULL;
        }
    }
    *bytes += n;
    char name[64];
    snprintf(name, sizeof name, "rank %d's gathered snapshot", r);
    rs_snap *s = NULL;
    if (decode(buf, n, name, &s) != RANKSNAP_OK) {
        RS_WARN(RS_SUB_MPI, "gather: %s", ranksnap_last_error());
        s = NULL;
    }
    free(buf);
    return s;
}

/* Rank 0: which ranks send their full snapshot. */
void rs_gather_choose(const rs_summary *sums, const int *present, int size, rs_gather_mode mode,
                             double divergence_pct, int *want)
{
    int all = mode == RS_GATHER_ALL || (mode == RS_GATHER_AUTO && size <= 16);
    for (int r = 0; r < size; r++) want[r] = present[r] && all;
    if (all) return;
    size_t n = 0;
    rs_summary *v = malloc((size_t)size * sizeof *v);
    if (!v) return;
    for (int r = 0; r < size; r++)
        if (present[r]) v[n++] = sums[r];
    rs_compare_config cfg;
    rs_compare_config_default(&cfg);
    cfg.divergence_pct = divergence_pct;
    rs_compare_result *res = NULL;
    if (rs_compare(v, NULL, n, size, &cfg, &res) == RANKSNAP_OK) {
        if (res->reference_rank >= 0 && res->reference_rank < size) want[res->reference_rank] = 1;
        for (size_t i = 0; i < res->n_oom; i++)
            if (res->oom[i].rank >= 0 && res->oom[i].rank < size) want[res->oom[i].rank] = 1;
        for (size_t i = 0; i < res->n_divergent; i++)
            if (res->divergent[i].rank >= 0 && res->divergent[i].rank < size) want[res->divergent[i].rank] = 1;
        rs_compare_result_free(res);
    }
    free(v);
}

static ranksnap_status rs_gather_root(rs_coord *c, rs_gather_decode_fn decode, int base,
                                      const rs_summary *mine, rs_rank_comms *comms, rs_snap *self,
                                      rs_gather_mode mode, int timeout_s, double divergence_pct,
                                      rs_gather_result *out)
{
    const rs_mpi_ops *m = rs_coord_mpi(c);
    void *comm = rs_coord_comm(c);
    int size = rs_coord_size(c);
    double t0 = rs_now_mono_s();
    rs_summary *sums = calloc((size_t)size, sizeof *sums);
    rs_mpi_req *reqs = calloc((size_t)size, sizeof *reqs);
    int *present = calloc((size_t)size, sizeof *present);
    int *want = calloc((size_t)size, sizeof *want);
    int *idx = calloc((size_t)size, sizeof *idx);
    ranksnap_status st = RANKSNAP_OK;
    if (!sums || !reqs || !present || !want || !idx) {
        rs_snap_free(self);
        rs_rank_comms_free(comms);
        st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "gather: out of host memory for %d ranks", size);
        goto done;
    }
    sums[0] = *mine;
    present[0] = 1;
    reqs[0] = 0;
    int pending = 0;
    for (int r = 1; r < size; r++) {
        int rc = m->irecv(comm, &sums[r], sizeof sums[r], r, base + 0, &reqs[r]);
        if (rc != 0) {
            reqs[r] = 0;
            RS_WARN(RS_SUB_MPI, "gather: MPI_Irecv for rank %d failed", r);
            continue;
        }
        pending++;
    }
    /* phase 1: summaries, until all came or the timeout */
    double deadline = t0 + timeout_s;
    while (pending > 0) {
        int outcount = 0;
        if (m->testsome(size, reqs, idx, &outcount) != 0) break;
        if (outcount < 0) break; /* none pending */
        for (int i = 0; i < outcount; i++) {
            present[idx[i]] = 1;
            out->bytes_summaries += sizeof(rs_summary);
            pending--;
        }
        if (pending == 0 || rs_now_mono_s() > deadline) break;
        if (outcount == 0) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
    for (int r = 1; r < size; r++)
        if (!present[r]) {
            m->cancel(&reqs[r]);
            RS_WARN(RS_SUB_MPI, "gather: rank %d sent nothing within %d s: reported missing", r, timeout_s);
        }
    for (int r = 0; r < size; r++)
        if (present[r] && sums[r].rank != r) {
            RS_WARN(RS_SUB_MPI, "gather: rank %d's summary says rank %d; taken as rank %d", r, sums[r].rank, r);
            sums[r].rank = r;
        }

    /* phase 2: full snapshots from the ranks chosen */
    rs_gather_choose(sums, present, size, mode, divergence_pct, want);
    for (int r = 1; r < size; r++)
        if (present[r]) m->send(comm, &want[r], sizeof want[r], r, base + 1);
    if ((st = rs_result_alloc(out, (size_t)size)) != RANKSNAP_OK) {
        rs_snap_free(self);
        rs_rank_comms_free(comms);
        goto done;
    }
    out->world_size = size;
    deadline = rs_now_mono_s() + timeout_s;
    for (int r = 0; r < size; r++) {
        if (!present[r]) continue;
        out->summaries[out->n] = sums[r];
        if (r == 0) {
            out->full[out->n] = self; /* decoded once, by the caller, for its summary */
            rs_gather_take_comms(comms, &out->comms[out->n]);
        } else {
            rs_gather_recv_comms(m, comm, base, r, deadline, &out->comms[out->n], &out->bytes_summaries);
            if (want[r])
                out->full[out->n] = rs_gather_recv_full(c, decode, base, r, deadline, &out->bytes_full);
        }
        out->n++;
    }
    out->seconds = rs_now_mono_s() - t0;
done:
    free(sums);
    free(reqs);
    free(present);
    free(want);
    free(idx);
    return st;
}

ranksnap_status rs_gather_run(rs_coord *c, rs_gather_decode_fn decode, const char *snap,
                              size_t len, const rs_summary *mine, rs_rank_comms *comms,
                              rs_snap *self, rs_gather_mode mode, int timeout_s,
                              double divergence_pct, rs_gather_result *out)
{
    memset(out, 0, sizeof *out);
    unsigned seq = rs_coord_next_gather(c);
    if (rs_coord_comm(c) && rs_coord_size(c) > 1) {
        int base = RS_TAG_GATHER0 + (int)(seq % 4000u) * RS_TAGS_PER_GATHER;
        if (rs_coord_rank(c) != 0) return rs_gather_send(c, base, snap, len, mine, comms, self, timeout_s);
        return rs_gather_root(c, decode, base, mine, comms, self, mode, timeout_s, divergence_pct, out);
    }
    double t0 = rs_now_mono_s();
    ranksnap_status st = rs_result_alloc(out, 1);
    if (st != RANKSNAP_OK) {
        rs_snap_free(self);
        rs_rank_comms_free(comms);
        return st;
    }
    out->world_size = 1;
    out->summaries[0] = *mine;
    out->n = 1;
    out->full[0] = self;
    rs_gather_take_comms(comms, &out->comms[0]);
    out->seconds = rs_now_mono_s() - t0;
    return RANKSNAP_OK;
}
