/*
 * gather.c — the two-phase gather over MPI (gather.h; the protocol in coord.h).
 *
 * Every wait is a poll with a deadline (PMPI_Test* and a short sleep), never a blocking receive,
 * so a rank that hangs or died costs the others at most RANKSNAP_GATHER_TIMEOUT. Requests that
 * never matched are cancelled before they are freed, so nothing stays posted into the next
 * gather; each gather uses its own tags (a sequence number) so that a late message of an earlier
 * one cannot be taken for a current one.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(RANKSNAP_HAVE_MPI)
#include <mpi.h>
#endif

#include "clock.h"
#include "compare.h"
#include "errors.h"
#include "gather.h"
#include "log.h"
#include "mpi_call.h"
#include "rsnap_decode.h"

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

/* This rank's communicators, from its own snapshot (none when it could not be decoded). */
static void rs_gather_self_comms(const rs_snap *self, rs_rank_comms *out)
{
    memset(out, 0, sizeof *out);
    if (self && rs_rank_comms_of(self, out) != RANKSNAP_OK)
        RS_WARN(RS_SUB_MPI, "gather: %s: this rank's role is not known", ranksnap_last_error());
}

/* Rank 0: which ranks send their full snapshot (over MPI, or through the files of a job without
 * it: rank/runtime/external_gather.c). */
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

#if defined(RANKSNAP_HAVE_MPI)

/* This rank's communicators (roles_found.h), after rank 0 answered its summary: a count and
 * then the list, of any length. *gone: rank 0 stopped receiving. */
static ranksnap_status rs_gather_send_comms(MPI_Comm comm, int base, const rs_rank_comms *mine,
                                            double deadline, int *gone)
{
    const size_t per = RS_CHUNK / sizeof *mine->v;
    uint64_t head[2] = {mine->n, mine->left_out};
    MPI_Request req = MPI_REQUEST_NULL;
    *gone = 0;
    RS_MPI(PMPI_Isend(head, 2, MPI_UINT64_T, 0, base + 4, comm, &req), "gather MPI_Isend");
    for (size_t off = 0;; off += per) {
        if (!rs_mpi_call_wait(&req, deadline)) {
            rs_mpi_call_cancel(&req);
            *gone = 1;
            return RANKSNAP_OK;
        }
        if (off >= mine->n) return RANKSNAP_OK;
        size_t part = mine->n - off < per ? mine->n - off : per;
        RS_MPI(PMPI_Isend(mine->v + off, (int)(part * sizeof *mine->v), MPI_BYTE, 0, base + 5, comm, &req),
               "gather MPI_Isend");
    }
}

/* Non-root side, with this rank's communicators. */
static ranksnap_status rs_gather_send_with(rs_coord *c, int base, const char *snap, size_t len,
                                           const rs_summary *mine, const rs_rank_comms *comms,
                                           int timeout_s)
{
    MPI_Comm comm = *(const MPI_Comm *)rs_coord_comm(c);
    double deadline = rs_now_mono_s() + 2.0 * timeout_s + 5.0;
    MPI_Request req = MPI_REQUEST_NULL;
    RS_MPI(PMPI_Isend((void *)mine, (int)sizeof *mine, MPI_BYTE, 0, base + 0, comm, &req), "gather MPI_Isend");
    int want = 0, gone = 0;
    MPI_Request dreq = MPI_REQUEST_NULL;
    RS_MPI(PMPI_Irecv(&want, 1, MPI_INT, 0, base + 1, comm, &dreq), "gather MPI_Irecv");
    if (!rs_mpi_call_wait(&dreq, deadline)) {
        rs_mpi_call_cancel(&dreq);
        rs_mpi_call_cancel(&req);
        RS_WARN(RS_SUB_MPI, "gather: rank 0 did not answer within %d s; going on without it", timeout_s);
        return RANKSNAP_OK;
    }
    if (!rs_mpi_call_wait(&req, deadline)) rs_mpi_call_cancel(&req);
    RS_CHECK(rs_gather_send_comms(comm, base, comms, deadline, &gone));
    if (!want || gone) return RANKSNAP_OK;
    uint64_t n = len;
    RS_MPI(PMPI_Isend(&n, 1, MPI_UINT64_T, 0, base + 2, comm, &req), "gather MPI_Isend");
    if (!rs_mpi_call_wait(&req, deadline)) {
        rs_mpi_call_cancel(&req);
        return RANKSNAP_OK;
    }
    for (size_t off = 0; off < len; off += RS_CHUNK) {
        size_t part = len - off < RS_CHUNK ? len - off : RS_CHUNK;
        RS_MPI(PMPI_Isend((void *)(snap + off), (int)part, MPI_BYTE, 0, base + 3, comm, &req), "gather MPI_Isend");
        if (!rs_mpi_call_wait(&req, deadline)) {
            rs_mpi_call_cancel(&req);
            RS_WARN(RS_SUB_MPI, "gather: rank 0 stopped receiving this rank's snapshot");
            return RANKSNAP_OK;
        }
    }
    return RANKSNAP_OK;
}

/* Non-root side. */
static ranksnap_status rs_gather_send(rs_coord *c, int base, const char *snap, size_t len,
                                      const rs_summary *mine, rs_snap *self, int timeout_s)
{
    /* the summary was made from it; its communicators and the encoding travel */
    rs_rank_comms comms;
    rs_gather_self_comms(self, &comms);
    rs_snap_free(self);
    ranksnap_status st = rs_gather_send_with(c, base, snap, len, mine, &comms, timeout_s);
    rs_rank_comms_free(&comms);
    return st;
}

/* Rank 0: rank r's communicators into *out (left empty when they did not come in time). */
static void rs_gather_recv_comms(MPI_Comm comm, int base, int r, double deadline, rs_rank_comms *out,
                                 uint64_t *bytes)
{
    uint64_t head[2] = {0, 0};
    MPI_Request req = MPI_REQUEST_NULL;
    memset(out, 0, sizeof *out);
    out->rank = r;
    if (PMPI_Irecv(head, 2, MPI_UINT64_T, r, base + 4, comm, &req) != MPI_SUCCESS) return;
    if (!rs_mpi_call_wait(&req, deadline)) {
        rs_mpi_call_cancel(&req);
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
        if (PMPI_Irecv(out->v + off, (int)(part * sizeof *out->v), MPI_BYTE, r, base + 5, comm, &req) !=
                MPI_SUCCESS ||
            !rs_mpi_call_wait(&req, deadline)) {
            rs_mpi_call_cancel(&req);
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
    MPI_Comm comm = *(const MPI_Comm *)rs_coord_comm(c);
    uint64_t n = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    if (PMPI_Irecv(&n, 1, MPI_UINT64_T, r, base + 2, comm, &req) != MPI_SUCCESS) return NULL;
    if (!rs_mpi_call_wait(&req, deadline)) {
        rs_mpi_call_cancel(&req);
        return NULL;
    }
    char *buf = malloc(n ? n : 1);
    if (!buf) {
        RS_WARN(RS_SUB_MPI, "gather: no host memory for rank %d's %llu-byte snapshot", r, (unsigned long long)n);
        return NULL;
    }
    for (size_t off = 0; off < n; off += RS_CHUNK) {
        size_t part = n - off < RS_CHUNK ? n - off : RS_CHUNK;
        if (PMPI_Irecv(buf + off, (int)part, MPI_BYTE, r, base + 3, comm, &req) != MPI_SUCCESS ||
            !rs_mpi_call_wait(&req, deadline)) {
            rs_mpi_call_cancel(&req);
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

static ranksnap_status rs_gather_root(rs_coord *c, rs_gather_decode_fn decode, int base,
                                      const rs_summary *mine, rs_snap *self, rs_gather_mode mode,
                                      int timeout_s, double divergence_pct, rs_gather_result *out)
{
    MPI_Comm comm = *(const MPI_Comm *)rs_coord_comm(c);
    int size = rs_coord_size(c);
    double t0 = rs_now_mono_s();
    rs_summary *sums = calloc((size_t)size, sizeof *sums);
    MPI_Request *reqs = calloc((size_t)size, sizeof *reqs);
    int *present = calloc((size_t)size, sizeof *present);
    int *want = calloc((size_t)size, sizeof *want);
    int *idx = calloc((size_t)size, sizeof *idx);
    ranksnap_status st = RANKSNAP_OK;
    if (!sums || !reqs || !present || !want || !idx) {
        rs_snap_free(self);
        st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "gather: out of host memory for %d ranks", size);
        goto done;
    }
    sums[0] = *mine;
    present[0] = 1;
    reqs[0] = MPI_REQUEST_NULL;
    int pending = 0;
    for (int r = 1; r < size; r++) {
        int rc = PMPI_Irecv(&sums[r], (int)sizeof sums[r], MPI_BYTE, r, base + 0, comm, &reqs[r]);
        if (rc != MPI_SUCCESS) {
            reqs[r] = MPI_REQUEST_NULL;
            RS_WARN(RS_SUB_MPI, "gather: MPI_Irecv for rank %d failed", r);
            continue;
        }
        pending++;
    }
    /* phase 1: summaries, until all came or the timeout */
    double deadline = t0 + timeout_s;
    while (pending > 0) {
        int outcount = 0;
        if (PMPI_Testsome(size, reqs, &outcount, idx, MPI_STATUSES_IGNORE) != MPI_SUCCESS) break;
        if (outcount == MPI_UNDEFINED) break;
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
            rs_mpi_call_cancel(&reqs[r]);
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
        if (present[r]) PMPI_Send(&want[r], 1, MPI_INT, r, base + 1, comm);
    if ((st = rs_result_alloc(out, (size_t)size)) != RANKSNAP_OK) {
        rs_snap_free(self);
        goto done;
    }
    out->world_size = size;
    deadline = rs_now_mono_s() + timeout_s;
    for (int r = 0; r < size; r++) {
        if (!present[r]) continue;
        out->summaries[out->n] = sums[r];
        if (r == 0) {
            out->full[out->n] = self; /* decoded once, by the caller, for its summary */
            rs_gather_self_comms(self, &out->comms[out->n]);
        } else {
            rs_gather_recv_comms(comm, base, r, deadline, &out->comms[out->n], &out->bytes_summaries);
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

#endif /* RANKSNAP_HAVE_MPI */

/* ranksnap's own snapshots: the .rsnap decoder. */
static ranksnap_status rs_gather_decode_rsnap(const char *buf, size_t len, const char *name, rs_snap **out)
{
    return rs_rsnap_decode(buf, len, name, out);
}

ranksnap_status rs_gather_run(rs_coord *c, const char *snap, size_t len, const rs_summary *mine,
                              rs_snap *self, rs_gather_mode mode, int timeout_s,
                              double divergence_pct, rs_gather_result *out)
{
    return rs_gather_run_with(c, rs_gather_decode_rsnap, snap, len, mine, self, mode, timeout_s,
                              divergence_pct, out);
}

ranksnap_status rs_gather_run_with(rs_coord *c, rs_gather_decode_fn decode, const char *snap,
                                   size_t len, const rs_summary *mine, rs_snap *self,
                                   rs_gather_mode mode, int timeout_s, double divergence_pct,
                                   rs_gather_result *out)
{
    memset(out, 0, sizeof *out);
    unsigned seq = rs_coord_next_gather(c);
#if defined(RANKSNAP_HAVE_MPI)
    if (rs_coord_comm(c) && rs_coord_size(c) > 1) {
        int base = RS_TAG_GATHER0 + (int)(seq % 4000u) * RS_TAGS_PER_GATHER;
        if (rs_coord_rank(c) != 0) return rs_gather_send(c, base, snap, len, mine, self, timeout_s);
        return rs_gather_root(c, decode, base, mine, self, mode, timeout_s, divergence_pct, out);
    }
#else
    (void)decode;
    (void)mode;
    (void)timeout_s;
    (void)divergence_pct;
#endif
    (void)seq;
    (void)snap;
    (void)len;
    double t0 = rs_now_mono_s();
    ranksnap_status st = rs_result_alloc(out, 1);
    if (st != RANKSNAP_OK) {
        rs_snap_free(self);
        return st;
    }
    out->world_size = 1;
    out->summaries[0] = *mine;
    out->n = 1;
    out->full[0] = self;
    rs_gather_self_comms(self, &out->comms[0]);
    out->seconds = rs_now_mono_s() - t0;
    return RANKSNAP_OK;
}
