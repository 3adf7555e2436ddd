/*
 * coord.c — clocks, triggers and the two-phase gather over MPI (see coord.h for the protocol).
 *
 * Every wait is a poll with a deadline (PMPI_Test* and a short sleep), never a blocking receive,
 * so a rank that hangs or died costs the others at most RANKSNAP_GATHER_TIMEOUT. Requests that
 * never matched are cancelled before they are freed, so nothing stays posted into the next
 * gather; each gather uses its own tags (a sequence number) so that a late message of an earlier
 * one cannot be taken for a current one.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(RANKSNAP_HAVE_MPI)
#include <mpi.h>
#endif

#include "coord.h"
#include "errors.h"
#include "log.h"
#include "rsnap_decode.h"

#define RS_TAG_CLOCK 1
#define RS_TAG_TRIGGER 2
#define RS_TAG_GATHER0 16
#define RS_CLOCK_PINGS 8
#define RS_CHUNK ((size_t)1 << 30) /* keeps every message's count within an int */

struct rs_coord {
    int rank;
    int size;
    int64_t offset_us;
    int64_t uncertainty_us;
    unsigned gather_seq;
#if defined(RANKSNAP_HAVE_MPI)
    int has_mpi;
    MPI_Comm comm;
    MPI_Request trig_req;
    int64_t trig_buf;
#endif
};

static volatile sig_atomic_t rs_sigusr1_seen;

static void rs_on_sigusr1(int sig)
{
    (void)sig;
    rs_sigusr1_seen = 1;
}

static int64_t rs_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double rs_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int rs_coord_rank(const rs_coord *c)
{
    return c->rank;
}

int rs_coord_size(const rs_coord *c)
{
    return c->size;
}

int64_t rs_coord_clock_offset_us(const rs_coord *c)
{
    return c->offset_us;
}

int64_t rs_coord_clock_uncertainty_us(const rs_coord *c)
{
    return c->uncertainty_us;
}

/* Rank 0 listens for `ranksnap trigger` signals only where nobody else does. */
static void rs_install_sigusr1(void)
{
    struct sigaction old;
    if (sigaction(SIGUSR1, NULL, &old) != 0) return;
    if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) {
        RS_INFO(RS_SUB_INIT, "SIGUSR1 already has a handler: triggers come from the trigger file only");
        return;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = rs_on_sigusr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
}

#if defined(RANKSNAP_HAVE_MPI)

static ranksnap_status rs_mpi_fail(const char *what, int err)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int n = 0;
    PMPI_Error_string(err, msg, &n);
    return rs_error(RANKSNAP_ERR_MPI, "ranksnap: %s failed: %s", what, msg);
}

#define RS_MPI(call, what)                                                                         \
    do {                                                                                           \
        int rs_mpi_rc_ = (call);                                                                   \
        if (rs_mpi_rc_ != MPI_SUCCESS) return rs_mpi_fail(what, rs_mpi_rc_);                      \
    } while (0)

/* Each rank's offset to rank 0, one rank at a time; the ping-pong with the least round trip
 * wins because its midpoint is the best estimate of when rank 0 read its clock. */
static ranksnap_status rs_clock_sync(rs_coord *c)
{
    int64_t t = 0;
    if (c->rank == 0) {
        for (int r = 1; r < c->size; r++)
            for (int k = 0; k < RS_CLOCK_PINGS; k++) {
                RS_MPI(PMPI_Recv(&t, 1, MPI_INT64_T, r, RS_TAG_CLOCK, c->comm, MPI_STATUS_IGNORE), "clock MPI_Recv");
                t = rs_now_ns();
                RS_MPI(PMPI_Send(&t, 1, MPI_INT64_T, r, RS_TAG_CLOCK, c->comm), "clock MPI_Send");
            }
        return RANKSNAP_OK;
    }
    int64_t best_rtt = INT64_MAX, best_off = 0;
    for (int k = 0; k < RS_CLOCK_PINGS; k++) {
        int64_t t0 = rs_now_ns();
        RS_MPI(PMPI_Send(&t0, 1, MPI_INT64_T, 0, RS_TAG_CLOCK, c->comm), "clock MPI_Send");
        RS_MPI(PMPI_Recv(&t, 1, MPI_INT64_T, 0, RS_TAG_CLOCK, c->comm, MPI_STATUS_IGNORE), "clock MPI_Recv");
        int64_t t1 = rs_now_ns();
        if (t1 - t0 < best_rtt) {
            best_rtt = t1 - t0;
            best_off = t - (t0 + (t1 - t0) / 2);
        }
    }
    c->offset_us = best_off / 1000;
    c->uncertainty_us = (best_rtt / 2 + 999) / 1000;
    return RANKSNAP_OK;
}

static ranksnap_status rs_post_trigger_recv(rs_coord *c)
{
    if (c->rank == 0) return RANKSNAP_OK;
    int parent = (c->rank - 1) / 2;
    RS_MPI(PMPI_Irecv(&c->trig_buf, 1, MPI_INT64_T, parent, RS_TAG_TRIGGER, c->comm, &c->trig_req),
           "trigger MPI_Irecv");
    return RANKSNAP_OK;
}

/* Cancels a request that may never match, then releases it. */
static void rs_cancel(MPI_Request *req)
{
    if (*req == MPI_REQUEST_NULL) return;
    int done = 0;
    PMPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    PMPI_Cancel(req);
    PMPI_Wait(req, MPI_STATUS_IGNORE);
}

#endif /* RANKSNAP_HAVE_MPI */

ranksnap_status rs_coord_create(const void *mpi_comm, rs_coord **out)
{
    *out = NULL;
    rs_coord *c = calloc(1, sizeof *c);
    if (!c) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "ranksnap: out of host memory (coordinator)");
    c->size = 1;
#if defined(RANKSNAP_HAVE_MPI)
    c->trig_req = MPI_REQUEST_NULL;
    c->comm = MPI_COMM_NULL;
    if (mpi_comm) {
        int inited = 0, rc;
        if (PMPI_Initialized(&inited) != MPI_SUCCESS || !inited) {
            free(c);
            return rs_error(RANKSNAP_ERR_MPI, "ranksnap_init: a communicator was given but MPI is not initialized");
        }
        if ((rc = PMPI_Comm_dup(*(const MPI_Comm *)mpi_comm, &c->comm)) != MPI_SUCCESS) {
            free(c);
            return rs_mpi_fail("MPI_Comm_dup", rc);
        }
        c->has_mpi = 1;
        PMPI_Comm_rank(c->comm, &c->rank);
        PMPI_Comm_size(c->comm, &c->size);
        ranksnap_status st = rs_clock_sync(c);
        if (st == RANKSNAP_OK) st = rs_post_trigger_recv(c);
        if (st != RANKSNAP_OK) {
            rs_coord_destroy(c);
            return st;
        }
    }
#else
    if (mpi_comm) {
        free(c);
        return rs_error(RANKSNAP_ERR_UNSUPPORTED, "ranksnap_init: this ranksnap was built without MPI; pass NULL");
    }
#endif
    if (c->rank == 0) rs_install_sigusr1();
    *out = c;
    return RANKSNAP_OK;
}

void rs_coord_destroy(rs_coord *c)
{
    if (!c) return;
#if defined(RANKSNAP_HAVE_MPI)
    if (c->has_mpi) {
        int finalized = 0;
        PMPI_Finalized(&finalized);
        if (!finalized) {
            rs_cancel(&c->trig_req);
            PMPI_Comm_free(&c->comm);
        }
    }
#endif
    free(c);
}

/* ---- triggers ------------------------------------------------------------------------------- */

int rs_coord_poll_trigger(rs_coord *c, int64_t step, const char *dir, int lag, int64_t *start)
{
    if (c->rank == 0) {
        int fired = 0;
        if (rs_sigusr1_seen) {
            rs_sigusr1_seen = 0;
            fired = 1;
        }
        char path[RS_PATH_MAX + 16];
        snprintf(path, sizeof path, "%s/trigger", dir);
        struct stat sb;
        if (stat(path, &sb) == 0) {
            fired = 1;
            if (unlink(path) != 0)
                RS_WARN(RS_SUB_MPI, "trigger: cannot remove %s: %s", path, strerror(errno));
        }
        if (!fired) return 0;
        *start = step + lag;
#if defined(RANKSNAP_HAVE_MPI)
        if (c->has_mpi)
            for (int ch = 1; ch <= 2 && ch < c->size; ch++)
                PMPI_Send(start, 1, MPI_INT64_T, ch, RS_TAG_TRIGGER, c->comm);
#endif
        RS_INFO(RS_SUB_MPI, "trigger at step %lld: recording from step %lld", (long long)step, (long long)*start);
        return 1;
    }
#if defined(RANKSNAP_HAVE_MPI)
    if (!c->has_mpi || c->trig_req == MPI_REQUEST_NULL) return 0;
    int done = 0;
    if (PMPI_Test(&c->trig_req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) return 0;
    *start = c->trig_buf;
    for (int ch = 2 * c->rank + 1; ch <= 2 * c->rank + 2 && ch < c->size; ch++)
        PMPI_Send(start, 1, MPI_INT64_T, ch, RS_TAG_TRIGGER, c->comm);
    rs_post_trigger_recv(c);
    return 1;
#else
    (void)step;
    (void)lag;
    return 0;
#endif
}

/* ---- gather --------------------------------------------------------------------------------- */

void rs_gather_result_free(rs_gather_result *r)
{
    if (!r) return;
    if (r->full)
        for (size_t i = 0; i < r->n; i++) rs_snap_free(r->full[i]);
    free(r->full);
    free(r->summaries);
    memset(r, 0, sizeof *r);
}

static ranksnap_status rs_result_alloc(rs_gather_result *out, size_t cap)
{
    out->summaries = calloc(cap ? cap : 1, sizeof *out->summaries);
    out->full = calloc(cap ? cap : 1, sizeof *out->full);
    if (!out->summaries || !out->full) {
        rs_gather_result_free(out);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "gather: out of host memory for %zu ranks", cap);
    }
    return RANKSNAP_OK;
}

/* A world of one, or rank 0's own part. */
static ranksnap_status rs_gather_self(const char *snap, size_t len, const rs_summary *mine,
                                      rs_snap **full)
{
    (void)mine;
    return rs_rsnap_decode(snap, len, "this rank's snapshot", full);
}

#if defined(RANKSNAP_HAVE_MPI)

/* Polls `req` until it completes or `deadline` (monotonic seconds) passes; 1 if completed. */
static int rs_wait_until(MPI_Request *req, double deadline)
{
    for (;;) {
        int done = 0;
        if (PMPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return 0;
        if (done) return 1;
        if (rs_mono_s() > deadline) return 0;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}

/* Non-root side. */
static ranksnap_status rs_gather_send(rs_coord *c, int base, const char *snap, size_t len,
                                      const rs_summary *mine, int timeout_s)
{
    double deadline = rs_mono_s() + 2.0 * timeout_s + 5.0;
    MPI_Request req = MPI_REQUEST_NULL;
    RS_MPI(PMPI_Isend((void *)mine, (int)sizeof *mine, MPI_BYTE, 0, base + 0, c->comm, &req), "gather MPI_Isend");
    int want = 0;
    MPI_Request dreq = MPI_REQUEST_NULL;
    RS_MPI(PMPI_Irecv(&want, 1, MPI_INT, 0, base + 1, c->comm, &dreq), "gather MPI_Irecv");
    if (!rs_wait_until(&dreq, deadline)) {
        rs_cancel(&dreq);
        rs_cancel(&req);
        RS_WARN(RS_SUB_MPI, "gather: rank 0 did not answer within %d s; going on without it", timeout_s);
        return RANKSNAP_OK;
    }
    if (!rs_wait_until(&req, deadline)) rs_cancel(&req);
    if (!want) return RANKSNAP_OK;
    uint64_t n = len;
    RS_MPI(PMPI_Isend(&n, 1, MPI_UINT64_T, 0, base + 2, c->comm, &req), "gather MPI_Isend");
    if (!rs_wait_until(&req, deadline)) {
        rs_cancel(&req);
        return RANKSNAP_OK;
    }
    for (size_t off = 0; off < len; off += RS_CHUNK) {
        size_t part = len - off < RS_CHUNK ? len - off : RS_CHUNK;
        RS_MPI(PMPI_Isend((void *)(snap + off), (int)part, MPI_BYTE, 0, base + 3, c->comm, &req), "gather MPI_Isend");
        if (!rs_wait_until(&req, deadline)) {
            rs_cancel(&req);
            RS_WARN(RS_SUB_MPI, "gather: rank 0 stopped receiving this rank's snapshot");
            return RANKSNAP_OK;
        }
    }
    return RANKSNAP_OK;
}

/* Rank 0: the full snapshot of rank r, or NULL when it did not come in time. */
static rs_snap *rs_gather_recv_full(rs_coord *c, int base, int r, double deadline,
                                         uint64_t *bytes)
{
    uint64_t n = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    if (PMPI_Irecv(&n, 1, MPI_UINT64_T, r, base + 2, c->comm, &req) != MPI_SUCCESS) return NULL;
    if (!rs_wait_until(&req, deadline)) {
        rs_cancel(&req);
        return NULL;
    }
    char *buf = malloc(n ? n : 1);
    if (!buf) {
        RS_WARN(RS_SUB_MPI, "gather: no host memory for rank %d's %llu-byte snapshot", r, (unsigned long long)n);
        return NULL;
    }
    for (size_t off = 0; off < n; off += RS_CHUNK) {
        size_t part = n - off < RS_CHUNK ? n - off : RS_CHUNK;
        if (PMPI_Irecv(buf + off, (int)part, MPI_BYTE, r, base + 3, c->comm, &req) != MPI_SUCCESS ||
            !rs_wait_until(&req, deadline)) {
            rs_cancel(&req);
            free(buf);
            RS_WARN(RS_SUB_MPI, "gather: rank %d's snapshot did not arrive in time", r);
            return NULL;
        }
    }
    *bytes += n;
    char name[64];
    snprintf(name, sizeof name, "rank %d's gathered snapshot", r);
    rs_snap *s = NULL;
    if (rs_rsnap_decode(buf, n, name, &s) != RANKSNAP_OK) {
        RS_WARN(RS_SUB_MPI, "gather: %s", ranksnap_last_error());
        s = NULL;
    }
    free(buf);
    return s;
}

/* Rank 0: which ranks send their full snapshot. */
static void rs_gather_choose(const rs_summary *sums, const int *present, int size, rs_gather_mode mode,
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

static ranksnap_status rs_gather_root(rs_coord *c, int base, const char *snap, size_t len,
                                      const rs_summary *mine, rs_gather_mode mode, int timeout_s,
                                      double divergence_pct, rs_gather_result *out)
{
    int size = c->size;
    double t0 = rs_mono_s();
    rs_summary *sums = calloc((size_t)size, sizeof *sums);
    MPI_Request *reqs = calloc((size_t)size, sizeof *reqs);
    int *present = calloc((size_t)size, sizeof *present);
    int *want = calloc((size_t)size, sizeof *want);
    int *idx = calloc((size_t)size, sizeof *idx);
    ranksnap_status st = RANKSNAP_OK;
    if (!sums || !reqs || !present || !want || !idx) {
        st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "gather: out of host memory for %d ranks", size);
        goto done;
    }
    sums[0] = *mine;
    present[0] = 1;
    reqs[0] = MPI_REQUEST_NULL;
    int pending = 0;
    for (int r = 1; r < size; r++) {
        int rc = PMPI_Irecv(&sums[r], (int)sizeof sums[r], MPI_BYTE, r, base + 0, c->comm, &reqs[r]);
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
        if (pending == 0 || rs_mono_s() > deadline) break;
        if (outcount == 0) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
    for (int r = 1; r < size; r++)
        if (!present[r]) {
            rs_cancel(&reqs[r]);
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
        if (present[r]) PMPI_Send(&want[r], 1, MPI_INT, r, base + 1, c->comm);
    if ((st = rs_result_alloc(out, (size_t)size)) != RANKSNAP_OK) goto done;
    out->world_size = size;
    deadline = rs_mono_s() + timeout_s;
    for (int r = 0; r < size; r++) {
        if (!present[r]) continue;
        out->summaries[out->n] = sums[r];
        if (r == 0) {
            if (rs_gather_self(snap, len, mine, &out->full[out->n]) != RANKSNAP_OK) {
                RS_WARN(RS_SUB_MPI, "gather: %s", ranksnap_last_error());
                out->full[out->n] = NULL;
            }
        } else if (want[r]) {
            out->full[out->n] = rs_gather_recv_full(c, base, r, deadline, &out->bytes_full);
        }
        out->n++;
    }
    out->seconds = rs_mono_s() - t0;
done:
    free(sums);
    free(reqs);
    free(present);
    free(want);
    free(idx);
    return st;
}

#endif /* RANKSNAP_HAVE_MPI */

ranksnap_status rs_coord_gather(rs_coord *c, const char *snap, size_t len, const rs_summary *mine,
                                rs_gather_mode mode, int timeout_s, double divergence_pct,
                                rs_gather_result *out)
{
    memset(out, 0, sizeof *out);
    unsigned seq = c->gather_seq++;
#if defined(RANKSNAP_HAVE_MPI)
    if (c->has_mpi && c->size > 1) {
        int base = RS_TAG_GATHER0 + (int)(seq % 4000u) * 4;
        if (c->rank != 0) return rs_gather_send(c, base, snap, len, mine, timeout_s);
        return rs_gather_root(c, base, snap, len, mine, mode, timeout_s, divergence_pct, out);
    }
#else
    (void)mode;
    (void)timeout_s;
    (void)divergence_pct;
#endif
    (void)seq;
    double t0 = rs_mono_s();
    RS_CHECK(rs_result_alloc(out, 1));
    out->world_size = 1;
    out->summaries[0] = *mine;
    out->n = 1;
    if (rs_gather_self(snap, len, mine, &out->full[0]) != RANKSNAP_OK) out->full[0] = NULL;
    out->seconds = rs_mono_s() - t0;
    return RANKSNAP_OK;
}
