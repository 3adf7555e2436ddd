/*
 * instance.c — the process-wide instance (instance.h): init and finalize, the start from inside an
 * intercepted call, and what the interposers ask of it.
 *
 * Owns the recorder and stack table of this rank and its devices' allocators (devices.c), whose
 * observer (alloc_api.c) feeds the recorder. The other ranksnap_* calls of
 * include/ranksnap.h are in alloc_api.c, steps.c and dump.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc_api.h"
#include "clock.h"
#include "comms.h"
#include "coord.h"
#include "devices.h"
#include "dump.h"
#include "ending.h"
#include "errors.h"
#include "external.h"
#include "held.h"
#include "instance.h"
#include "launcher.h"
#include "live_report.h"
#include "log.h"
#include "mpi_host.h"
#include "outside.h"
#include "passthrough.h"
#include "postmortem.h"
#include "state.h"
#include "step_how.h"
#include "steps.h"
#include "world.h"

static pthread_mutex_t rs_init_lock = PTHREAD_MUTEX_INITIALIZER;

/* For the interposers (instance.h): whether a finalize happened (after which they no longer start
 * ranksnap). And the one start that failed (or met RANKSNAP_DISABLE): its status, which every
 * later start returns at once, ranksnap passing calls through meanwhile. */
static atomic_int rs_finalized_once;
static int rs_atexit_registered;     /* guarded by rs_init_lock */

/* The identity the framework's process group gave (ranksnap_set_identity), which replaces the
 * launcher's; guarded by rs_init_lock. */
static struct {
    int set;
    int rank, world_size;
    char job[320]; /* "" = this process's own */
} rs_ident;

/* ---- init / finalize ------------------------------------------------------------------------ */

static void rs_runtime_destroy(rs_runtime *rt)
{
    if (!rt) return;
    rs_steps_timer_stop(rt);
    if (rt->postmortem) rs_postmortem_stop();
    rs_devices_destroy(rt);
    if (rt->recorder) rs_recorder_destroy(rt->recorder);
    if (rt->ring_file) rs_ring_file_close(rt->ring_file, 1);
    if (rt->stacks) rs_stacks_destroy(rt->stacks);
    if (rt->coord) rs_coord_destroy(rt->coord);
    free(rt);
}

/* The collectives RANKSNAP_STEP_ON can count (pmpi.c and nccl.c wrap each of them). */
static const char *const rs_step_on_names[] = {
    "MPI_Allreduce", "MPI_Barrier",   "MPI_Bcast",     "MPI_Reduce",    "MPI_Allgather",
    "MPI_Alltoall",  "MPI_Reduce_scatter", "ncclAllReduce", "ncclReduceScatter", "ncclAllGather",
    "ncclBroadcast", "ncclReduce",    NULL};

static ranksnap_status rs_parse_step_on(rs_runtime *rt)
{
    const char *v = rt->opts.step_on;
    /* PyTorch's glue numbers the steps itself, from the end of the first iteration: a period
     * found inside that iteration would number it first */
    if (rt->opts.recorder == RS_RECORDER_TORCH) rt->step_detect_off = 1;
    if (!v[0]) return RANKSNAP_OK;
    if (!strcmp(v, "none")) {
        rt->step_detect_off = 1;
        return RANKSNAP_OK;
    }
    const char *colon = strchr(v, ':');
    size_t n = colon ? (size_t)(colon - v) : strlen(v);
    long every = 1;
    if (colon) {
        char *end;
        errno = 0;
        every = strtol(colon + 1, &end, 10);
        if (errno || *end || end == colon + 1 || every < 1) n = 0;
    }
    for (const char *const *name = rs_step_on_names; n && *name; name++)
        if (strlen(*name) == n && !strncmp(*name, v, n)) {
            snprintf(rt->step_on_name, sizeof rt->step_on_name, "%s", *name);
            rt->step_on_every = every;
            return RANKSNAP_OK;
        }
    char names[256];
    size_t len = 0;
    names[0] = '\0';
    for (const char *const *name = rs_step_on_names; *name && len < sizeof names; name++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "", *name);
    return rs_error(RANKSNAP_ERR_OPTION,
                    "RANKSNAP_STEP_ON=%.100s: expected a collective and a call count such as "
                    "MPI_Allreduce:1, or none; collectives: %s", v, names);
}

/* This process's own job id: RANKSNAP_JOB, else what its launcher says (launcher.h). */
static void rs_own_job(const rs_options *o, const char *host, char *buf, size_t n)
{
    if (o->job[0])
        snprintf(buf, n, "%s", o->job);
    else
        rs_launcher_job(host, buf, n);
}

/* An MPI world of one (a process that initialised MPI as a singleton: mpi4py imported, as
 * Lightning does when it looks for an MPI launcher) numbers nothing: the rank is the framework's
 * (ranksnap_set_identity), and the gather goes its way. Its coordinator becomes a world of one
 * without MPI. */
static ranksnap_status rs_leave_singleton_world(rs_runtime *rt)
{
    if (!rs_coord_comm(rt->coord)) return RANKSNAP_OK;
    rs_coord *alone = NULL;
    ranksnap_status st = rs_coord_create(NULL, &alone);
    if (st == RANKSNAP_OK) {
        rs_coord *singleton = rt->coord;
        rt->coord = alone;
        rs_coord_destroy(singleton);
    }
    return st;
}

/* rs_init_lock held. */
static ranksnap_status rs_runtime_create(const void *mpi_comm, rs_runtime **out)
{
    rs_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "ranksnap_init: out of host memory");
    ranksnap_status st = rs_options_load_env(&rt->opts);
    if (st != RANKSNAP_OK) goto fail;
    if (rt->opts.disable) {
        st = rs_error(RANKSNAP_ERR_DISABLED, "RANKSNAP_DISABLE is set: ranksnap passes calls through");
        goto fail;
    }
    if ((st = rs_schedule_parse(rt->opts.steps, &rt->sched)) != RANKSNAP_OK) goto fail;
    if ((st = rs_external_check_options(&rt->opts)) != RANKSNAP_OK) goto fail; /* torch mode */
    if ((st = rs_parse_step_on(rt)) != RANKSNAP_OK) goto fail;
    if (gethostname(rt->host, sizeof rt->host) != 0) snprintf(rt->host, sizeof rt->host, "unknown");
    rt->host[sizeof rt->host - 1] = '\0';
    rt->rank = rs_launcher_rank(0);
    rt->world_size = rs_launcher_size(1);
    if (rt->world_size <= rt->rank) rt->world_size = rt->rank + 1;
    if ((st = rs_coord_create(mpi_comm, &rt->coord)) != RANKSNAP_OK) goto fail;
    if (rs_ident.set && rs_coord_size(rt->coord) == 1 && (st = rs_leave_singleton_world(rt)) != RANKSNAP_OK)
        goto fail;
    /* a communicator given with no MPI plugin for it: a world of one, ranks as the launcher says */
    if (rs_coord_comm(rt->coord)) {
        rt->rank = rs_coord_rank(rt->coord);
        rt->world_size = rs_coord_size(rt->coord);
    } else if (rs_ident.set) {
        rt->rank = rs_ident.rank;
        rt->world_size = rs_ident.world_size;
    }
    rt->epoch_us = (int64_t)rs_now_us() + rs_coord_clock_offset_us(rt->coord);
    if (rs_ident.set && rs_ident.job[0])
        snprintf(rt->job, sizeof rt->job, "%s", rs_ident.job);
    else
        rs_own_job(&rt->opts, rt->host, rt->job, sizeof rt->job);
    rs_log_configure(rt->opts.debug_level, rt->opts.debug_subsys, rt->rank);
    rt->step = -1;
    /* which names in RANKSNAP_DIR are this job's, before any file is made (dump.h) */
    if ((st = rs_dump_claim(rt)) != RANKSNAP_OK) goto fail;

    /* the backend is checked now; each device is opened at its first allocation (devices.h) */
    if ((st = rs_devices_init(rt, rs_alloc_api_observe)) != RANKSNAP_OK) goto fail;

    /* ranksnap torch mode: the framework records, with its own stacks and no ring file; unless
     * it cannot, and ranksnap records the rank itself (external.h, rs_external_native), with the
     * Python frames of the allocating thread */
    int external = rt->opts.recorder == RS_RECORDER_TORCH && !rs_external_native();
    if (!external && rt->opts.stacks != RS_STACKS_NONE) {
        st = rs_stacks_create(rs_external_stacks_mode(rt->opts.stacks), rt->opts.stack_depth,
                              &rt->stacks);
        if (st != RANKSNAP_OK) goto fail;
    }
    rt->memory_limit = rs_options_memory_limit_for_rank(&rt->opts.memory_limit, rt->rank);
    if (!external && rt->opts.ring == RS_RING_MMAP) {
        rs_ring_identity id = {rt->rank, rt->world_size, (int64_t)getpid(), rt->job, rt->host,
                               "", 0, rt->memory_limit,
                               rs_coord_clock_offset_us(rt->coord), &rt->opts.alloc_conf};
        rs_ring_pub pub;
        if ((st = rs_dump_open_ring(rt, &id, &rt->ring_file)) == RANKSNAP_OK) {
            rs_ring_file_pub(rt->ring_file, &pub);
            st = rs_recorder_create_on(rt->opts.max_entries, rt->stacks, &pub, &rt->recorder);
        }
        if (st != RANKSNAP_OK) {
            /* the job goes on; only a SIGKILL would lose more than it would have anyway */
            RS_WARN(RS_SUB_INIT, "%s; keeping the event ring in memory (RANKSNAP_RING=memory)",
                    ranksnap_last_error());
            if (rt->ring_file) rs_ring_file_close(rt->ring_file, 1);
            rt->ring_file = NULL;
        }
    }
    if (!rt->recorder) {
        st = rs_recorder_create(rt->opts.max_entries, rt->stacks, &rt->recorder);
        if (st != RANKSNAP_OK) goto fail;
    }
    /* The whole run (RANKSNAP_STEPS empty) is one range that starts now; step ranges start at
     * their first step, time ranges when the timer says so. */
    if (rt->opts.record && rt->sched.whole_run) {
        rs_recorder_set_enabled(rt->recorder, 1);
        atomic_store(&rt->recording, 1);
        rt->in_range = 1;
        rs_comms_range_begin();
        rt->ranges[0].begin = 0;
        rt->ranges[0].end = -1;
        rt->n_ranges = 1;
    }
    if (rt->opts.signals) {
        if (rs_postmortem_start(rs_dump_on_signal, rt->opts.dump_timeout_ms) == RANKSNAP_OK)
            rt->postmortem = 1;
        else
            RS_WARN(RS_SUB_INIT, "%s", ranksnap_last_error());
    }
    RS_INFO(RS_SUB_INIT, "init: rank %d of %d, backend %s, limit %llu, stacks %s, steps \"%s\"",
            rt->rank, rt->world_size, rt->is_cuda ? "cuda" : "sim", (unsigned long long)rt->memory_limit,
            rt->opts.stacks == RS_STACKS_NONE ? "none" : rt->opts.stacks == RS_STACKS_FP ? "fp" : "native",
            rt->opts.steps);
    *out = rt;
    return RANKSNAP_OK;
fail:
    rs_runtime_destroy(rt);
    return st;
}

static int rs_runtime_should_retire(rs_runtime *rt);
static void rs_runtime_retire(rs_runtime *rt);

/* The exit path, registered at every start (glibc's on_exit gives the status; elsewhere atexit,
 * which cannot see it, and every exit is taken as ending well). A process whose MPI ranksnap
 * started, or that ranksnap started in from an intercepted call, does not call
 * ranksnap_finalize: ending well (status 0), it is finalized here, its open range gathered and
 * reported. Every other exit that finds ranksnap running goes to ending.c, which notes how the
 * rank ended and writes its open range without a collective: a failing status (its peers may wait
 * for it in a collective of the program's, and would leave the gather waiting until
 * RANKSNAP_GATHER_TIMEOUT), the program's own MPI left unfinalized (the launcher ends the job),
 * or a program that started ranksnap itself and never finalized it. A forked child's exit is
 * not the rank's (finalize and ending.c do nothing there). */
static atomic_int rs_finalize_at_exit;

static void rs_exit_path(int status)
{
    if (rs_state_forked()) return;
    int mpi_open = rs_world_left_open(), finalize = atomic_load(&rs_finalize_at_exit);
    if (!rs_state_get()) {
        /* not running (a start that failed passes calls through): the MPI it started is still
         * finalized on a good exit, left to die with the process on a failing one */
        if (!finalize) return;
        if (status != 0) ranksnap_abandon();
        ranksnap_finalize();
        return;
    }
    if (status == 0 && !mpi_open && finalize && !rs_state_abandoned())
        ranksnap_finalize();
    else
        rs_ending_exit(status, mpi_open);
}

#if defined(__GLIBC__)
static void rs_on_exit(int status, void *arg)
{
    (void)arg;
    rs_exit_path(status);
}
#else
static void rs_atexit(void)
{
    rs_exit_path(0);
}
#endif

/* rs_init_lock held. `finalize`: the program will not finalize ranksnap (see above). */
static void rs_exit_path_once(int finalize)
{
    if (finalize) atomic_store(&rs_finalize_at_exit, 1);
    if (rs_atexit_registered) return;
#if defined(__GLIBC__)
    if (on_exit(rs_on_exit, NULL) == 0) rs_atexit_registered = 1;
#else
    if (atexit(rs_atexit) == 0) rs_atexit_registered = 1;
#endif
}

/* A start that failed, or RANKSNAP_DISABLE: ranksnap passes calls through from now on —
 * ranksnap_malloc to the device (alloc/passthrough.c), the interposed calls to the real
 * runtime, the recording calls as no-ops — so that the program runs as it would without ranksnap.
 * The reason is printed once (rank 0 only: every rank reads the same environment), naming the
 * variable when a value did not parse; RANKSNAP_DISABLE asked for it and says nothing. The device
 * is the one RANKSNAP_BACKEND names, each of the two options read on its own, so that a typo in
 * one of them still gives the device the program would have had. rs_init_lock held. */
static ranksnap_status rs_pass_through(ranksnap_status why)
{
    char reason[1024];
    snprintf(reason, sizeof reason, "%s", ranksnap_last_error());
    rs_options backend, capacity;
    (void)rs_options_load_one(&backend, "RANKSNAP_BACKEND", NULL);
    (void)rs_options_load_one(&capacity, "RANKSNAP_SIM_CAPACITY", NULL);
    ranksnap_status pst = rs_passthrough_init(backend.backend, capacity.sim_capacity);
    int say = rs_launcher_rank(0) == 0;
    if (why != RANKSNAP_ERR_DISABLED && say)
        fprintf(stderr, "ranksnap: not recording this run (allocations pass through to the device): "
                        "%s: %s\n", ranksnap_strerror(why), reason);
    if (pst != RANKSNAP_OK && say)
        fprintf(stderr, "ranksnap: and the device could not be opened to pass them through: %s\n",
                ranksnap_last_error());
    rs_state_note_gave_up(why);
    return rs_error(why, "%s", reason);
}

/* ranksnap_init's body; rs_init_lock held. */
static ranksnap_status rs_init_locked(const void *mpi_comm)
{
    if (rs_state_get()) return RANKSNAP_OK;
    /* the rank is the parent: a second ranksnap here would take its name, files and gather */
    if (rs_state_forked())
        return rs_error(RANKSNAP_ERR_UNSUPPORTED, "ranksnap_init: this process is a fork of one that "
                        "runs ranksnap, which records that one only");
    ranksnap_status gave_up = rs_state_gave_up();
    if (gave_up != RANKSNAP_OK) return gave_up;
    rs_runtime *rt = NULL;
    /* the MPI plugin's wrappers record into this runtime once it is taken */
    rs_mpi_host_install();
    /* A PyTorch job's process that its launcher started without a rank (Lightning's) learns it
     * from torch.distributed (ranksnap_set_identity): until then it writes nothing, rather than
     * files under a guessed rank 0 that another rank's would meet. Not a failure: a later call
     * starts it. */
    if (!mpi_comm && !rs_ident.set && rs_external_mode() && rs_launcher_rank_unknown()) {
        char ranks[32] = "several";
        if (rs_launcher_size(1) > 1) snprintf(ranks, sizeof ranks, "%d", rs_launcher_size(1));
        return rs_error(RANKSNAP_ERR_NOT_INITIALIZED,
                        "not recording yet: this process was started as one of %s ranks without "
                        "its rank (no RANK in its environment); ranksnap starts once "
                        "torch.distributed gives it", ranks);
    }
    if (!mpi_comm) {
        /* the options decide whether to join; a value that does not parse is reported by
         * rs_runtime_create below, with MPI left alone meanwhile */
        rs_options o;
        int allowed = rs_options_load_env(&o) == RANKSNAP_OK && o.mpi;
        rs_error_clear();
        int joined = allowed ? rs_world_join(&mpi_comm) : 0;
        if (joined < 0)
            return rs_pass_through(rs_error(RANKSNAP_ERR_MPI, "ranksnap_init: launched as one of "
                                            "several ranks, but MPI_Init_thread failed "
                                            "(RANKSNAP_MPI=0 keeps ranksnap off MPI)"));
        if (joined > 0) rs_exit_path_once(1);
    }
    ranksnap_status st = rs_runtime_create(mpi_comm, &rt);
    if (st != RANKSNAP_OK) return rs_pass_through(st);
    rs_held_publish(rt);
    rs_outside_adopt(rt);
    rs_exit_path_once(0);
    if (rt->sched.time_based && rt->opts.record) st = rs_steps_timer_start(rt);
    return st;
}

ranksnap_status ranksnap_init(const void *mpi_comm)
{
    pthread_mutex_lock(&rs_init_lock);
    ranksnap_status st = rs_init_locked(mpi_comm);
    pthread_mutex_unlock(&rs_init_lock);
    /* passing calls through is a working ranksnap for the program (the reason is in
     * ranksnap_last_error, and was printed unless RANKSNAP_DISABLE asked for it) */
    return st != RANKSNAP_OK && rs_passthrough_on() ? RANKSNAP_OK : st;
}

/* ---- identity from the framework's process group ------------------------------------------- */

ranksnap_status ranksnap_set_identity(int rank, int world_size, const char *job)
{
    if (rank < 0 || world_size < 1 || rank >= world_size)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "ranksnap_set_identity: rank %d of %d", rank,
                        world_size);
    if (job && (!*job || strlen(job) >= sizeof rs_ident.job))
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "ranksnap_set_identity: a job id of 1 to %zu bytes",
                        sizeof rs_ident.job - 1);
    pthread_mutex_lock(&rs_init_lock);
    ranksnap_status st = RANKSNAP_OK;
    rs_runtime *rt = rs_state_get();
    char want[sizeof rs_ident.job];
    if (job)
        snprintf(want, sizeof want, "%s", job);
    else if (rt)
        snprintf(want, sizeof want, "%s", rt->job);
    else
        want[0] = '\0';
    if (rt && (rt->rank != rank || rt->world_size != world_size || strcmp(rt->job, want) != 0)) {
        /* an MPI world ranksnap joined numbers its ranks itself, and gathers by those numbers;
         * a world of one numbers nothing (a process that imported mpi4py, which initialises MPI
         * as a singleton, as Lightning does when it looks for an MPI launcher): it is left */
        if (rs_coord_comm(rt->coord) && rs_coord_size(rt->coord) > 1) {
            st = rs_error(RANKSNAP_ERR_UNSUPPORTED, "ranksnap_set_identity: rank %d of %d in the MPI "
                          "world, not %d of %d", rt->rank, rt->world_size, rank, world_size);
        } else {
            st = rs_leave_singleton_world(rt);
            if (st == RANKSNAP_OK) st = rs_dump_reidentify(rt, rank, world_size, want);
        }
        if (st == RANKSNAP_OK) {
            /* RANKSNAP_MEMORY_LIMIT=2:8GiB means the rank it is now */
            rs_devices_set_memory_limit(rt, rs_options_memory_limit_for_rank(&rt->opts.memory_limit, rank));
            rs_log_configure(rt->opts.debug_level, rt->opts.debug_subsys, rank);
        }
    }
    if (st == RANKSNAP_OK) {
        rs_ident.set = 1;
        rs_ident.rank = rank;
        rs_ident.world_size = world_size;
        snprintf(rs_ident.job, sizeof rs_ident.job, "%s", want);
    }
    pthread_mutex_unlock(&rs_init_lock);
    return st;
}

ranksnap_status ranksnap_job(char *buf, size_t n)
{
    if (!buf || !n) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "ranksnap_job: no buffer");
    char job[sizeof rs_ident.job];
    pthread_mutex_lock(&rs_init_lock);
    rs_runtime *rt = rs_state_get();
    if (rt) {
        snprintf(job, sizeof job, "%s", rt->job);
    } else if (rs_ident.set && rs_ident.job[0]) {
        snprintf(job, sizeof job, "%s", rs_ident.job);
    } else {
        rs_options o;
        char host[256];
        (void)rs_options_load_one(&o, "RANKSNAP_JOB", NULL);
        rs_error_clear();
        if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
        host[sizeof host - 1] = '\0';
        rs_own_job(&o, host, job, sizeof job);
    }
    pthread_mutex_unlock(&rs_init_lock);
    if (strlen(job) >= n)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "ranksnap_job: %zu bytes do not hold the job id",
                        n);
    snprintf(buf, n, "%s", job);
    return RANKSNAP_OK;
}

/* What a program with no step can do, in its own language: a PyTorch script calls the glue
 * (ranksnap.step), a C program ranksnap_step or names the collective that ends a step. Either
 * can record a time range instead. */
static const char *rs_steps_hint(void)
{
    return rs_external_mode()
               ? "in Python, call ranksnap.step(n) at the start of iteration n (import ranksnap), "
                 "or record a time range (--steps time:30:60, seconds from the start)"
               : "ranksnap_step(n), or RANKSNAP_STEP_ON=NAME:COUNT";
}

/* Finalize on rank 0: the recorded ranges RANKSNAP_STEPS named that the run never reached, which
 * would otherwise end with nothing written and nothing said; and a PyTorch job recorded whole
 * whose recorder never started, since it starts at the first step. */
static void rs_warn_unreached(rs_runtime *rt)
{
    const rs_schedule *sc = &rt->sched;
    if (rt->rank != 0 || !rt->opts.record || rt->n_ranges >= RS_MAX_RANGES) return;
    if (sc->whole_run) {
        if (rs_external_pickles() && rt->step < 0) {
            const char *how = rs_steps_how(rt);
            RS_WARN(RS_SUB_RECORD, "no step was ever marked or found%s%s%s, so PyTorch's recorder never "
                    "started: the snapshots hold the memory at the end, not its history: %s",
                    how[0] ? " (" : "", how, how[0] ? ")" : "", rs_steps_hint());
        }
        return;
    }
    char list[512] = "";
    size_t len = 0, missed = 0;
    for (size_t i = 0; i < sc->n; i++) {
        const rs_range *r = &sc->r[i];
        int reached = 0;
        if (sc->time_based) {
            reached = i < rt->n_ranges; /* the timer begins them in order */
        } else {
            for (size_t k = 0; k < rt->n_ranges && !reached; k++)
                reached = rt->ranges[k].begin >= r->begin && (r->end < 0 || rt->ranges[k].begin < r->end);
        }
        if (reached) continue;
        missed++;
        int w = r->end < 0 ? snprintf(list + len, sizeof list - len, "%s%s%lld:", len ? "," : "",
                                      sc->time_based ? "time:" : "", (long long)r->begin)
                           : snprintf(list + len, sizeof list - len, "%s%s%lld:%lld", len ? "," : "",
                                      sc->time_based ? "time:" : "", (long long)r->begin, (long long)r->end);
        if (w > 0 && (size_t)w < sizeof list - len) len += (size_t)w;
    }
    if (!missed) return;
    char when[512];
    const char *how = rs_steps_how(rt);
    if (sc->time_based)
        snprintf(when, sizeof when, "the run lasted %.0f s",
                 (double)((int64_t)rs_now_us() + rs_coord_clock_offset_us(rt->coord) - rt->epoch_us) / 1e6);
    else if (rt->step < 0)
        snprintf(when, sizeof when,
                 "no step was ever marked or found%s%s%s: %s", how[0] ? " (" : "", how,
                 how[0] ? ")" : "", rs_steps_hint());
    else {
        int found = rt->step_source == RS_STEPS_DETECTED || rt->step_source == RS_STEPS_TENTATIVE;
        snprintf(when, sizeof when, "the last step was %lld%s%s%s", (long long)rt->step,
                 found ? "; steps " : "", found ? how : "",
                 found ? ": a range before the first step found cannot be recorded" : "");
    }
    RS_WARN(RS_SUB_RECORD, "RANKSNAP_STEPS=%s: never reached: %s (%s); nothing was recorded for %s%s",
            rt->opts.steps, list, when, missed == 1 ? "it" : "them",
            rt->n_ranges == 0 ? ", and no snapshot was written" : "");
}

ranksnap_status ranksnap_finalize(void)
{
    /* A forked child ending (sys.exit in a helper, the C atexit path) finalizes nothing: the
     * range, its files, the gather and MPI are the parent's. */
    if (rs_state_forked()) return RANKSNAP_OK;
    pthread_mutex_lock(&rs_init_lock);
    rs_runtime *rt = rs_state_get();
    ranksnap_status st = RANKSNAP_OK;
    if (rt) {
        rs_steps_timer_stop(rt);
        /* A range still open (the whole run, "10:", a time range) or a time range that ended
         * since the last step is gathered and reported now, while MPI still works. */
        /* ranksnap_abandon: the process dies; no collective with ranks that wait elsewhere */
        if (!rs_state_abandoned() &&
            (rt->in_range || rt->range_pending ||
             (rt->sched.time_based && !rt->reported && rt->n_ranges > 0))) {
            rs_rt_lock(rt);
            if (rt->n_ranges > 0 && rt->ranges[rt->n_ranges - 1].end < 0)
                rt->ranges[rt->n_ranges - 1].end = rs_steps_range_end(rt, rt->step < 0 ? 0 : rt->step + 1);
            rt->in_range = 0;
            rt->range_pending = 0; /* tentative steps that nothing broke until the end: kept */
            rs_rt_unlock(rt);
            st = rs_live_report_end_of_range(rt);
        }
        /* Abandoned inside a range (an uncaught exception ends the rank: a peer's OOM closed the
         * connection of the collective it waited in, say): no gather, but this rank's data stays
         * on disk for `ranksnap report DIR`, unless its own OOM dump already put it there. The
         * same, in or out of a range, for the driver's OOM whose snapshot waited for this moment
         * (refused inside the shared CUDA runtime, driver.c): the rank dies of it. */
        if (rs_state_abandoned()) {
            rs_rt_lock(rt);
            int open_range = rt->in_range, oom = rt->drv_oom.has && !rt->drv_oom.dumped;
            rs_rt_unlock(rt);
            if (oom || (open_range && !atomic_load(&rt->range_dumped))) {
                if (rs_dump_write(NULL, 1) != RANKSNAP_OK)
                    RS_WARN(RS_SUB_DUMP, "the rank ends in a recorded range, and its snapshot could "
                                         "not be written: %s", ranksnap_last_error());
                else
                    RS_INFO(RS_SUB_DUMP, "the rank ends %s: its snapshot is written",
                            oom ? "after the driver's out-of-memory answer" : "in a recorded range");
            }
        }
    }
    int retire = 0;
    if (rt) {
        rs_warn_unreached(rt);
        rs_outside_warn_if_nothing_intercepted(rt);
        retire = rs_runtime_should_retire(rt);
        atomic_store(&rs_finalized_once, 1);
    } else {
        /* a process ranksnap never started in (a launcher): asked now, while the driver answers */
        rs_outside_warn_if_cuda_unseen(0);
    }
    rs_state_publish(NULL);
    pthread_mutex_unlock(&rs_init_lock);
    if (retire)
        rs_runtime_retire(rt);
    else
        rs_runtime_destroy(rt);
    rs_passthrough_shutdown();
    if (!rs_state_abandoned()) rs_world_release(); /* ranksnap_abandon: see above */
    return st;
}

/* ---- for the interposers (instance.h) ------------------------------------------------------- */

static ranksnap_status rs_ensure(int wait)
{
    if (rs_state_get()) return RANKSNAP_OK;
    ranksnap_status gave_up = rs_state_gave_up();
    if (gave_up != RANKSNAP_OK) return gave_up;
    if (atomic_load(&rs_finalized_once) || rs_state_forked()) return RANKSNAP_ERR_NOT_INITIALIZED;
    if (!wait && rs_world_program_will_init()) return RANKSNAP_ERR_NOT_INITIALIZED;
    /* Never wait inside the program's CUDA call: the thread holding the lock may be this one
     * (a CUDA call made from inside ranksnap's init, by MPI_Init_thread for instance) or may be
     * waiting for this one. */
    if (wait)
        pthread_mutex_lock(&rs_init_lock);
    else if (pthread_mutex_trylock(&rs_init_lock) != 0)
        return RANKSNAP_ERR_NOT_INITIALIZED;
    ranksnap_status st = RANKSNAP_OK;
    if (!rs_state_get()) {
        if (atomic_load(&rs_finalized_once))
            st = RANKSNAP_ERR_NOT_INITIALIZED;
        else if ((st = rs_init_locked(NULL)) == RANKSNAP_OK)
            /* the program will not call ranksnap_finalize: the range is written at exit */
            rs_exit_path_once(1);
        /* else passing through, the reason said once (rs_pass_through) */
    }
    pthread_mutex_unlock(&rs_init_lock);
    return st;
}

ranksnap_status rs_instance_ensure(void)
{
    return rs_ensure(0);
}

ranksnap_status rs_instance_ensure_wait(void)
{
    return rs_ensure(1);
}

int rs_instance_starting(void)
{
    if (rs_state_get()) return 1;
    if (atomic_load(&rs_finalized_once) || rs_state_forked() || rs_state_gave_up() != RANKSNAP_OK)
        return 0;
    /* RANKSNAP_DISABLE: the start on its way gives up at once, and must not find books kept */
    static atomic_int disabled = -1;
    int off = atomic_load_explicit(&disabled, memory_order_relaxed);
    if (off < 0) {
        rs_options o;
        off = rs_options_load_one(&o, "RANKSNAP_DISABLE", NULL) == RANKSNAP_OK && o.disable;
        rs_error_clear();
        atomic_store_explicit(&disabled, off, memory_order_relaxed);
    }
    return !off;
}

int rs_instance_active(int *cuda)
{
    rs_runtime *rt = rs_state_get();
    if (!rt) return 0;
    if (cuda) *cuda = rt->is_cuda;
    return 1;
}

void rs_instance_oom_dump(const char *by, uint64_t size, int device)
{
    rs_runtime *rt = rs_state_get();
    if (!rt) return;
    rs_error(RANKSNAP_ERR_OUT_OF_MEMORY, "%s: out of memory for %llu bytes on device %d", by,
             (unsigned long long)size, device);
    rs_dump_after_oom(rt);
    rs_rt_lock(rt);
    rt->drv_oom.dumped = 1;
    rs_rt_unlock(rt);
}

int rs_instance_current_device(void)
{
    rs_runtime *rt = rs_state_get();
    return rt ? rs_devices_current(rt) : -1;
}

int rs_instance_current_device_known(int *device)
{
    rs_runtime *rt = rs_state_get();
    return rt && rs_devices_current_known(rt, device);
}

/* Device `device` of the running instance, made now if the program had not allocated there. */
static ranksnap_status rs_instance_device(int device, rs_rt_device **out)
{
    RS_NEED(rt);
    return rs_devices_get(rt, device, out);
}

ranksnap_status rs_instance_cache_bytes(int device, uint64_t *reserved, uint64_t *allocated,
                                        uint64_t *limit)
{
    rs_rt_device *d;
    RS_CHECK(rs_instance_device(device, &d));
    ranksnap_stats s;
    memset(&s, 0, sizeof s);
    rs_alloc_get_stats(d->alloc, &s);
    *reserved = s.reserved_bytes;
    *allocated = s.allocated_bytes;
    *limit = rs_alloc_memory_limit(d->alloc);
    return RANKSNAP_OK;
}

ranksnap_status rs_instance_device_usage(int device, uint64_t *device_free, uint64_t *reserved)
{
    rs_rt_device *d;
    RS_CHECK(rs_instance_device(device, &d));
    uint64_t total = 0;
    RS_CHECK(d->backend->ops->mem_info(d->backend, device_free, &total));
    ranksnap_stats s;
    memset(&s, 0, sizeof s);
    rs_alloc_get_stats(d->alloc, &s);
    *reserved = s.reserved_bytes;
    return RANKSNAP_OK;
}

/* Finalize keeps the allocator of a process whose interposed cudaMalloc handed out blocks
 * that are still live: the program may use and free them after MPI_Finalize, and releasing
 * their segments under it would turn that into use-after-free on the device. */
static _Atomic(rs_runtime *) rs_retired;
static pthread_mutex_t rs_retired_mu = PTHREAD_MUTEX_INITIALIZER;

static int rs_runtime_should_retire(rs_runtime *rt)
{
    if (rs_state_intercepted() == 0) return 0;
    ranksnap_stats s;
    rs_devices_stats(rt, &s);
    return s.allocated_bytes > 0;
}

/* Ends what must end with finalize (the timer and signal threads, the ring file, the MPI
 * communicator, recording) and keeps the allocator, its backend and the recorder (which the
 * observer still reaches, switched off) for rs_instance_free_retired. Their memory goes back at
 * exit, with the process. */
static void rs_runtime_retire(rs_runtime *rt)
{
    rs_steps_timer_stop(rt);
    if (rt->postmortem) {
        rs_postmortem_stop();
        rt->postmortem = 0;
    }
    rs_rt_lock(rt);
    rs_recorder_set_enabled(rt->recorder, 0);
    atomic_store(&rt->recording, 0);
    rs_ring_file *rf = rt->ring_file;
    rt->ring_file = NULL;
    rs_rt_unlock(rt);
    if (rf) rs_ring_file_close(rf, 1);
    if (rt->coord) rs_coord_destroy(rt->coord);
    rt->coord = NULL;
    pthread_mutex_lock(&rs_retired_mu);
    rt->retired_next = atomic_load(&rs_retired);
    atomic_store(&rs_retired, rt);
    pthread_mutex_unlock(&rs_retired_mu);
    RS_INFO(RS_SUB_INIT, "finalize: blocks handed out through cudaMalloc are still allocated; the "
            "allocator stays, retired, so that they remain valid until freed or until exit");
}

int rs_instance_free_retired(void *ptr)
{
    if (!ptr || !atomic_load_explicit(&rs_retired, memory_order_acquire)) return 0;
    int done = 0;
    pthread_mutex_lock(&rs_retired_mu);
    for (rs_runtime *rt = atomic_load(&rs_retired); rt && !done; rt = rt->retired_next) {
        rs_rt_device *d = rs_devices_owner(rt, ptr);
        done = d && rs_alloc_free(d->alloc, ptr) == RANKSNAP_OK;
    }
    pthread_mutex_unlock(&rs_retired_mu);
    return done;
}

