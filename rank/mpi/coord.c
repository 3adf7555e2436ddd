/*
 * coord.c — the ranks' own communicator, their clocks and the triggers (coord.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "coord.h"
#include "errors.h"
#include "launcher.h"
#include "log.h"
#include "mpi_call.h"
#include "mpi_plugin.h"
#include "trigger_file.h"

#define RS_TAG_CLOCK 1
#define RS_TAG_TRIGGER 2
#define RS_CLOCK_PINGS 8

struct rs_coord {
    int rank;
    int size;
    int64_t offset_us;
    int64_t uncertainty_us;
    unsigned gather_seq;
    int64_t trig_seen; /* without MPI: the last start read from trigger_file.c */
    uint64_t trig_looked_us; /* when a trigger file was last looked for, 0 = never */
    const rs_mpi_ops *mpi;   /* the MPI plugin; NULL in a world of one */
    void *comm;              /* the plugin's duplicate of the job's communicator */
    rs_mpi_req trig_req;
    int64_t trig_buf;
};

static volatile sig_atomic_t rs_sigusr1_seen;

static void rs_on_sigusr1(int sig)
{
    (void)sig;
    rs_sigusr1_seen = 1;
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

/* MPI can be used: a communicator, and MPI not finalised yet (a program whose MPI_Finalize was
 * not wrapped, the plugin not preloaded, may have finalised it before ranksnap's finalize). */
static int rs_coord_mpi_up(const rs_coord *c)
{
    return c->mpi && !(c->mpi->state() & RS_MPI_FINALIZED);
}

/* Each rank's offset to rank 0, one rank at a time; the ping-pong with the least round trip
 * wins because its midpoint is the best estimate of when rank 0 read its clock. */
static ranksnap_status rs_clock_sync(rs_coord *c)
{
    const rs_mpi_ops *m = c->mpi;
    int64_t t = 0;
    if (c->rank == 0) {
        for (int r = 1; r < c->size; r++)
            for (int k = 0; k < RS_CLOCK_PINGS; k++) {
                RS_MPI(m, m->recv(c->comm, &t, sizeof t, r, RS_TAG_CLOCK), "clock MPI_Recv");
                t = (int64_t)rs_now_ns();
                RS_MPI(m, m->send(c->comm, &t, sizeof t, r, RS_TAG_CLOCK), "clock MPI_Send");
            }
        return RANKSNAP_OK;
    }
    int64_t best_rtt = INT64_MAX, best_off = 0;
    for (int k = 0; k < RS_CLOCK_PINGS; k++) {
        int64_t t0 = (int64_t)rs_now_ns();
        RS_MPI(m, m->send(c->comm, &t0, sizeof t0, 0, RS_TAG_CLOCK), "clock MPI_Send");
        RS_MPI(m, m->recv(c->comm, &t, sizeof t, 0, RS_TAG_CLOCK), "clock MPI_Recv");
        int64_t t1 = (int64_t)rs_now_ns();
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
    RS_MPI(c->mpi, c->mpi->irecv(c->comm, &c->trig_buf, sizeof c->trig_buf, parent, RS_TAG_TRIGGER,
                                 &c->trig_req),
           "trigger MPI_Irecv");
    return RANKSNAP_OK;
}

ranksnap_status rs_coord_create(const void *mpi_comm, rs_coord **out)
{
    *out = NULL;
    rs_coord *c = calloc(1, sizeof *c);
    if (!c) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "ranksnap_init: out of host memory (coordinator)");
    c->size = 1;
    c->trig_seen = -1;
    /* without a plugin for the process's MPI (said once, mpi_plugin.c) a world of one: the job
     * goes on, each rank on its own */
    const rs_mpi_ops *m = mpi_comm ? rs_mpi_plugin() : NULL;
    if (m) {
        int rc;
        if (!(m->state() & RS_MPI_INITIALIZED)) {
            free(c);
            return rs_error(RANKSNAP_ERR_MPI, "ranksnap_init: a communicator was given but MPI is not initialized");
        }
        if ((rc = m->comm_dup(mpi_comm, &c->comm, &c->rank, &c->size)) != 0) {
            free(c);
            return rs_mpi_call_fail(m, "MPI_Comm_dup", rc);
        }
        c->mpi = m;
        ranksnap_status st = rs_clock_sync(c);
        if (st == RANKSNAP_OK) st = rs_post_trigger_recv(c);
        if (st != RANKSNAP_OK) {
            rs_coord_destroy(c);
            return st;
        }
    }
    if (c->rank == 0) rs_install_sigusr1();
    *out = c;
    return RANKSNAP_OK;
}

void rs_coord_destroy(rs_coord *c)
{
    if (!c) return;
    if (rs_coord_mpi_up(c)) {
        c->mpi->cancel(&c->trig_req);
        c->mpi->comm_free(c->comm);
    }
    free(c);
}

/* ---- triggers ------------------------------------------------------------------------------- */

/* Ranks a launcher started without MPI (torchrun): several processes, each a world of one. */
static int rs_coord_ranks_without_mpi(const rs_coord *c)
{
    return !rs_coord_comm(c) && rs_launcher_size(1) > 1;
}

int rs_coord_poll_trigger(rs_coord *c, int64_t step, const char *dir, int lag, int64_t *start)
{
    /* without MPI only the launcher's rank 0 watches; the others read what it publishes */
    int no_mpi = rs_coord_ranks_without_mpi(c);
    /* A file is looked for at most once a millisecond: steps found from the collectives can come
     * every few microseconds (nccl-tests: one all-reduce a step), where a stat each was most of
     * what a step cost (tests/bench/step_detect_bench). The first step always looks. */
    uint64_t now = rs_now_us();
    int look = c->trig_looked_us == 0 || now - c->trig_looked_us >= 1000;
    if (look) c->trig_looked_us = now ? now : 1;
    if (no_mpi && rs_launcher_rank(0) != 0) return look && rs_trigger_file_poll(dir, &c->trig_seen, start);
    if (c->rank == 0) {
        int fired = 0;
        if (rs_sigusr1_seen) {
            rs_sigusr1_seen = 0;
            fired = 1;
        }
        char path[RS_PATH_MAX + 16];
        struct stat sb;
        if (look) snprintf(path, sizeof path, "%s/trigger", dir);
        if (look && stat(path, &sb) == 0) {
            fired = 1;
            if (unlink(path) != 0)
                RS_WARN(RS_SUB_MPI, "trigger: cannot remove %s: %s", path, strerror(errno));
        }
        if (!fired) return 0;
        *start = step + lag;
        if (no_mpi) rs_trigger_file_publish(dir, *start);
        if (rs_coord_mpi_up(c))
            for (int ch = 1; ch <= 2 && ch < c->size; ch++)
                c->mpi->send(c->comm, start, sizeof *start, ch, RS_TAG_TRIGGER);
        RS_INFO(RS_SUB_MPI, "trigger at step %lld: recording from step %lld", (long long)step, (long long)*start);
        return 1;
    }
    if (!c->trig_req || !rs_coord_mpi_up(c)) return 0;
    int done = 0;
    if (c->mpi->test(&c->trig_req, &done) != 0 || !done) return 0;
    *start = c->trig_buf;
    for (int ch = 2 * c->rank + 1; ch <= 2 * c->rank + 2 && ch < c->size; ch++)
        c->mpi->send(c->comm, start, sizeof *start, ch, RS_TAG_TRIGGER);
    rs_post_trigger_recv(c);
    return 1;
}

/* ---- for the gather (gather.c) -------------------------------------------------------------- */

void *rs_coord_comm(const rs_coord *c)
{
    return rs_coord_mpi_up(c) ? c->comm : NULL;
}

const rs_mpi_ops *rs_coord_mpi(const rs_coord *c)
{
    return c->mpi;
}

unsigned rs_coord_next_gather(rs_coord *c)
{
    return c->gather_seq++;
}
