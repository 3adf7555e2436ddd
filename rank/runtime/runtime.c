/*
 * runtime.c — the process-wide ranksnap instance behind the public API.
 *
 * Owns the one backend, allocator, recorder and stack table of this rank, wires the allocator's
 * observer to the recorder, and implements every ranksnap_* call of include/ranksnap.h.
 *
 * Locking: the allocator's mutex is the only lock on the hot path. The observer runs with it held,
 * so the recorder and the stack table need none of their own; steps, annotations and dumps take
 * the same mutex (rs_alloc_lock) for their recorder writes. Native stacks are unwound *before*
 * the lock is taken (the unwinding is the expensive part and needs no shared state) into a
 * thread-local buffer, and interned under the lock by the observer.
 *
 * Init and finalize are serialised by their own mutex; the API reads the instance through an
 * atomic pointer so that a call racing with finalize sees either the instance or NULL.
 */
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(RANKSNAP_HAVE_MPI)
#include <mpi.h>
#endif

#include "alloc.h"
#include "atomic_file.h"
#include "backend.h"
#include "clock.h"
#include "report.h"
#include "coord.h"
#include "errors.h"
#include "launcher.h"
#include "log.h"
#include "options.h"
#include "passthrough.h"
#include "postmortem.h"
#include "recorder.h"
#include "report_html.h"
#include "ring_file.h"
#include "rsnap_decode.h"
#include "runtime.h"
#include "schedule.h"
#include "snapshot_encode.h"
#include "stacks.h"
#include "text.h"
#include "world.h"

#define RS_MAX_RANGES 64

typedef struct rs_runtime {
    rs_options opts;
    rs_backend *backend;
    rs_alloc *alloc;
    rs_stacks *stacks;     /* NULL with RANKSNAP_STACKS=none */
    rs_recorder *recorder;
    atomic_int recording;  /* mirrors the recorder's switch for the lock-free check */
    int rank;
    int world_size;
    char host[256];
    char job[320];
    rs_device_info device;
    uint64_t memory_limit;
    int64_t step;          /* guarded by the allocator lock */
    size_t n_ranges;       /* recorded step ranges, guarded by the allocator lock */
    rs_step_range ranges[RS_MAX_RANGES];
    uint64_t outside_peak; /* device memory used outside the allocator, highest sample */
    rs_coord *coord;       /* the ranks, over MPI (a world of one without) */
    rs_schedule sched;     /* RANKSNAP_STEPS plus triggered ranges */
    int in_range;          /* a scheduled range is being recorded (guarded by the allocator lock) */
    int reported;          /* a range ended and was gathered; finalize need not repeat it */
    pthread_t timer;       /* drives time:A:B ranges */
    int timer_running;
    pthread_mutex_t timer_mu;
    pthread_cond_t timer_cv;
    int timer_stop;
    int64_t epoch_us;      /* init, on rank 0's time base (time:A:B counts from here) */
    char step_on_name[64]; /* RANKSNAP_STEP_ON's collective, "" = none */
    long step_on_every;
    long step_on_calls;
    int64_t step_on_next;
    rs_ring_file *ring_file; /* RANKSNAP_RING=mmap */
    int postmortem;          /* signal handlers installed */
    int is_cuda;                     /* the backend is the CUDA one (the interposers serve only it) */
    uint64_t outside_at_init;        /* device memory in use when ranksnap started */
    struct rs_runtime *retired_next; /* list of retired instances (rs_runtime_free_retired) */
} rs_runtime;

static pthread_mutex_t rs_init_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(rs_runtime *) rs_instance;

/* For the interposers (runtime.h): calls they counted, whether a finalize happened (after which
 * they no longer start ranksnap), and the one failed attempt of rs_runtime_ensure, whose status
 * every later call passes through with. */
static atomic_uint_fast64_t rs_intercepted_calls;
static atomic_int rs_finalized_once;
static atomic_int rs_started_once;
static atomic_int rs_ensure_gave_up; /* a ranksnap_status, 0 = not given up */
static int rs_atexit_registered;     /* guarded by rs_init_lock */

/* The stack of the allocation in flight on this thread, unwound before the allocator lock. */
typedef struct rs_pending_stack {
    int n;
    uint32_t id; /* interned id once the observer has interned it, 0 before */
    uintptr_t pcs[RS_MAX_STACK_DEPTH];
} rs_pending_stack;
static _Thread_local rs_pending_stack rs_pending;

static ranksnap_status rs_ensure_dir(const char *dir);
static void rs_crash_dump(int sig);

static rs_runtime *rs_get(void)
{
    return atomic_load_explicit(&rs_instance, memory_order_acquire);
}

/* ---- observer ------------------------------------------------------------------------------- */

/* The observer while recording. Out of line so that rs_observe, with recording off, is a load,
 * a test and a return: the register saves this part needs are not made for every event. */
__attribute__((noinline)) static uint32_t rs_observe_on(rs_runtime *rt, rs_action act,
                                                        uint64_t addr, uint64_t size, void *stream)
{
    uint32_t id = 0;
    /* The thread-local buffer only with stacks on: each access to it is a call to
     * __tls_get_addr from a shared library. */
    if (rt->stacks && (act == RS_ACT_ALLOC || act == RS_ACT_SEGMENT_ALLOC || act == RS_ACT_OOM)) {
        rs_pending_stack *ps = &rs_pending;
        if (ps->n > 0) {
            if (ps->id == 0) ps->id = rs_stacks_intern(rt->stacks, ps->pcs, ps->n);
            id = ps->id;
        }
    }
    rs_recorder_append_id(rt->recorder, act, addr, size, stream, id);
    return id;
}

/* Called by the allocator with its lock held. rs_recorder_on is inline, not a call into
 * recorder.c: with recording off this is all an event costs. */
static uint32_t rs_observe(void *ctx, rs_action act, uint64_t addr, uint64_t size, void *stream)
{
    rs_runtime *rt = ctx;
    /* the file's segment table follows the allocator whether or not events are recorded */
    if (rt->ring_file && (act == RS_ACT_SEGMENT_ALLOC || act == RS_ACT_SEGMENT_FREE))
        rs_ring_file_segment(rt->ring_file, act == RS_ACT_SEGMENT_ALLOC, addr, size, 0,
                             size == RS_SMALL_BUFFER);
    if (!rs_recorder_on(rt->recorder)) return 0;
    return rs_observe_on(rt, act, addr, size, stream);
}

/* ---- init / finalize ------------------------------------------------------------------------ */

static ranksnap_status rs_backend_open(rs_runtime *rt)
{
    rs_backend_kind kind = rt->opts.backend;
    if (kind == RS_BACKEND_AUTO) kind = rs_backend_cuda_available() ? RS_BACKEND_CUDA : RS_BACKEND_SIM;
    if (kind == RS_BACKEND_CUDA) return rs_backend_cuda_create(&rt->backend);
    return rs_backend_sim_create(rt->opts.sim_capacity, &rt->backend);
}

static void rs_timer_stop(rs_runtime *rt);

static void rs_runtime_destroy(rs_runtime *rt)
{
    if (!rt) return;
    rs_timer_stop(rt);
    if (rt->postmortem) rs_postmortem_stop();
    if (rt->alloc) rs_alloc_destroy(rt->alloc);
    if (rt->recorder) rs_recorder_destroy(rt->recorder);
    if (rt->ring_file) rs_ring_file_close(rt->ring_file, 1);
    if (rt->stacks) rs_stacks_destroy(rt->stacks);
    if (rt->backend) rt->backend->ops->destroy(rt->backend);
    if (rt->coord) rs_coord_destroy(rt->coord);
    free(rt);
}

/* The collectives RANKSNAP_STEP_ON can count (pmpi.c wraps each of them). */
static const char *const rs_step_on_names[] = {"MPI_Allreduce", "MPI_Barrier",   "MPI_Bcast",
                                               "MPI_Reduce",    "MPI_Allgather", "MPI_Alltoall",
                                               "MPI_Reduce_scatter", "ncclAllReduce", NULL};

static ranksnap_status rs_parse_step_on(rs_runtime *rt)
{
    const char *v = rt->opts.step_on;
    if (!v[0]) return RANKSNAP_OK;
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
    return rs_error(RANKSNAP_ERR_OPTION,
                    "RANKSNAP_STEP_ON=%.100s: expected a collective and a call count such as "
                    "MPI_Allreduce:1; collectives: MPI_Allreduce, MPI_Barrier, MPI_Bcast, MPI_Reduce, "
                    "MPI_Allgather, MPI_Alltoall, MPI_Reduce_scatter, ncclAllReduce", v);
}

static ranksnap_status rs_runtime_create(const void *mpi_comm, rs_runtime **out)
{
    rs_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "ranksnap_init: out of host memory");
    ranksnap_status st = rs_options_load_env(&rt->opts);
    if (st != RANKSNAP_OK) goto fail;
    if (rt->opts.disable) {
        st = rs_passthrough_init(rt->opts.backend, rt->opts.sim_capacity);
        if (st == RANKSNAP_OK)
            st = rs_error(RANKSNAP_ERR_DISABLED, "RANKSNAP_DISABLE is set: ranksnap passes calls through");
        goto fail;
    }
    if ((st = rs_schedule_parse(rt->opts.steps, &rt->sched)) != RANKSNAP_OK) goto fail;
    if ((st = rs_parse_step_on(rt)) != RANKSNAP_OK) goto fail;
    if (gethostname(rt->host, sizeof rt->host) != 0) snprintf(rt->host, sizeof rt->host, "unknown");
    rt->host[sizeof rt->host - 1] = '\0';
    rt->rank = rs_launcher_rank(0);
    rt->world_size = rs_launcher_size(1);
    if (rt->world_size <= rt->rank) rt->world_size = rt->rank + 1;
    if ((st = rs_coord_create(mpi_comm, &rt->coord)) != RANKSNAP_OK) goto fail;
    if (mpi_comm) {
        rt->rank = rs_coord_rank(rt->coord);
        rt->world_size = rs_coord_size(rt->coord);
    }
    rt->epoch_us = (int64_t)rs_now_us() + rs_coord_clock_offset_us(rt->coord);
    if (rt->opts.job[0])
        snprintf(rt->job, sizeof rt->job, "%s", rt->opts.job);
    else
        rs_launcher_job(rt->host, rt->job, sizeof rt->job);
    rs_log_configure(rt->opts.debug_level, rt->opts.debug_subsys, rt->rank);
    rt->step = -1;

    st = rs_backend_open(rt);
    if (st != RANKSNAP_OK) goto fail;
    st = rt->backend->ops->device_info(rt->backend, &rt->device);
    if (st != RANKSNAP_OK) goto fail;
    rt->is_cuda = strcmp(rt->backend->ops->name, "cuda") == 0;
    {
        /* the baseline of finalize's "nothing was intercepted" check */
        uint64_t free_b = 0, total_b = 0;
        if (rt->backend->ops->mem_info(rt->backend, &free_b, &total_b) == RANKSNAP_OK)
            rt->outside_at_init = total_b > free_b ? total_b - free_b : 0;
    }

    if (rt->opts.stacks != RS_STACKS_NONE) {
        st = rs_stacks_create(rt->opts.stacks, rt->opts.stack_depth, &rt->stacks);
        if (st != RANKSNAP_OK) goto fail;
    }
    rt->memory_limit = rs_options_memory_limit_for_rank(&rt->opts.memory_limit, rt->rank);
    if (rt->opts.ring == RS_RING_MMAP) {
        rs_ring_identity id = {rt->rank, rt->world_size, (int64_t)getpid(), rt->job, rt->host,
                               rt->device.name, rt->device.total_bytes, rt->memory_limit,
                               rs_coord_clock_offset_us(rt->coord)};
        rs_ring_pub pub;
        if ((st = rs_ensure_dir(rt->opts.dir)) == RANKSNAP_OK &&
            (st = rs_ring_file_open(rt->opts.dir, rt->opts.max_entries, &id, &rt->ring_file)) == RANKSNAP_OK) {
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
    rs_alloc_config cfg = {
        .memory_limit = rt->memory_limit,
        .max_split_size = rt->opts.max_split_size,
        .device_index = rt->device.index,
        .observer = rs_observe,
        .observer_ctx = rt,
    };
    st = rs_alloc_create(rt->backend, &cfg, &rt->alloc);
    if (st != RANKSNAP_OK) goto fail;

    /* The whole run (RANKSNAP_STEPS empty) is one range that starts now; step ranges start at
     * their first step, time ranges when the timer says so. */
    if (rt->opts.record && rt->sched.whole_run) {
        rs_recorder_set_enabled(rt->recorder, 1);
        atomic_store(&rt->recording, 1);
        rt->in_range = 1;
        rt->ranges[0].begin = 0;
        rt->ranges[0].end = -1;
        rt->n_ranges = 1;
    }
    if (rt->opts.signals) {
        if (rs_postmortem_start(rs_crash_dump, rt->opts.dump_timeout_ms) == RANKSNAP_OK)
            rt->postmortem = 1;
        else
            RS_WARN(RS_SUB_INIT, "%s", ranksnap_last_error());
    }
    RS_INFO(RS_SUB_INIT, "init: rank %d of %d, backend %s (%s, %llu bytes), limit %llu, stacks %s, steps \"%s\"",
            rt->rank, rt->world_size, rt->backend->ops->name, rt->device.name,
            (unsigned long long)rt->device.total_bytes, (unsigned long long)rt->memory_limit,
            rt->opts.stacks == RS_STACKS_NONE ? "none" : rt->opts.stacks == RS_STACKS_FP ? "fp" : "native",
            rt->opts.steps);
    *out = rt;
    return RANKSNAP_OK;
fail:
    rs_runtime_destroy(rt);
    return st;
}

static ranksnap_status rs_end_of_range(rs_runtime *rt);
static ranksnap_status rs_timer_start(rs_runtime *rt);
static void rs_warn_if_nothing_intercepted(rs_runtime *rt);
static int rs_runtime_should_retire(rs_runtime *rt);
static void rs_runtime_retire(rs_runtime *rt);

/* For processes whose MPI ranksnap started: gather and finalise MPI even if the program never
 * calls ranksnap_finalize. */
static void rs_atexit_finalize(void)
{
    ranksnap_finalize();
}

/* rs_init_lock held. */
static void rs_atexit_finalize_once(void)
{
    if (rs_atexit_registered) return;
    if (atexit(rs_atexit_finalize) == 0) rs_atexit_registered = 1;
}

/* ranksnap_init's body; rs_init_lock held. */
static ranksnap_status rs_init_locked(const void *mpi_comm)
{
    if (rs_get()) return RANKSNAP_OK;
    rs_runtime *rt = NULL;
    if (!mpi_comm) {
        /* the options decide whether to join; a value that does not parse is reported by
         * rs_runtime_create below, with MPI left alone meanwhile */
        rs_options o;
        int allowed = rs_options_load_env(&o) == RANKSNAP_OK && o.mpi;
        rs_error_clear();
        int joined = allowed ? rs_world_join(&mpi_comm) : 0;
        if (joined < 0)
            return rs_error(RANKSNAP_ERR_MPI, "ranksnap_init: launched as one of several ranks, "
                            "but MPI_Init_thread failed (RANKSNAP_MPI=0 keeps ranksnap off MPI)");
        if (joined > 0) rs_atexit_finalize_once();
    }
    ranksnap_status st = rs_runtime_create(mpi_comm, &rt);
    if (st == RANKSNAP_OK) {
        atomic_store(&rs_started_once, 1);
        atomic_store_explicit(&rs_instance, rt, memory_order_release);
        if (rt->sched.time_based && rt->opts.record) st = rs_timer_start(rt);
    }
    return st;
}

ranksnap_status ranksnap_init(const void *mpi_comm)
{
    pthread_mutex_lock(&rs_init_lock);
    ranksnap_status st = rs_init_locked(mpi_comm);
    pthread_mutex_unlock(&rs_init_lock);
    return st;
}

ranksnap_status ranksnap_finalize(void)
{
    pthread_mutex_lock(&rs_init_lock);
    rs_runtime *rt = rs_get();
    ranksnap_status st = RANKSNAP_OK;
    if (rt) {
        rs_timer_stop(rt);
        /* A range still open (the whole run, "10:", a time range) or a time range that ended
         * since the last step is gathered and reported now, while MPI still works. */
        if (rt->in_range || (rt->sched.time_based && !rt->reported && rt->n_ranges > 0)) {
            rs_alloc_lock(rt->alloc);
            if (rt->n_ranges > 0 && rt->ranges[rt->n_ranges - 1].end < 0)
                rt->ranges[rt->n_ranges - 1].end = rt->step < 0 ? 0 : rt->step + 1;
            rt->in_range = 0;
            rs_alloc_unlock(rt->alloc);
            st = rs_end_of_range(rt);
        }
    }
    int retire = 0;
    if (rt) {
        rs_warn_if_nothing_intercepted(rt);
        retire = rs_runtime_should_retire(rt);
        atomic_store(&rs_finalized_once, 1);
    }
    atomic_store(&rs_instance, NULL);
    pthread_mutex_unlock(&rs_init_lock);
    if (retire)
        rs_runtime_retire(rt);
    else
        rs_runtime_destroy(rt);
    rs_passthrough_shutdown();
    rs_world_release();
    return st;
}

#define RS_NEED(rt)                                                                                \
    rs_runtime *rt = rs_get();                                                                     \
    if (!rt) return rs_error(RANKSNAP_ERR_NOT_INITIALIZED, "%s: call ranksnap_init() first", __func__)

/* Before the OOM error goes back to the program: the snapshot on disk (RANKSNAP_ON_OOM=dump),
 * and with dump-and-abort the whole job aborted so that every other rank dumps on the SIGTERM
 * mpirun sends it, instead of hanging in a collective with the rank that gave up. */
static void rs_after_oom(rs_runtime *rt)
{
    if (rt->opts.on_oom == RS_ON_OOM_NONE) return;
    /* the program reads the OOM message through ranksnap_last_error: keep it */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ranksnap_last_error());
    ranksnap_status st = rs_runtime_dump(NULL, 1);
    if (st != RANKSNAP_OK)
        RS_WARN(RS_SUB_DUMP, "OOM dump failed: %s", ranksnap_last_error());
    else
        RS_INFO(RS_SUB_DUMP, "OOM: snapshot written before returning the error");
    if (rt->opts.on_oom == RS_ON_OOM_DUMP_AND_ABORT) {
        fprintf(stderr, "ranksnap: rank %d: %s\nranksnap: RANKSNAP_ON_OOM=dump-and-abort: aborting the job\n",
                rt->rank, msg);
        rs_world_abort(3);
    }
    rs_error(RANKSNAP_ERR_OUT_OF_MEMORY, "%s", msg);
}

/* The dumper thread, on a fatal signal. The allocator lock may be held by the very thread the
 * signal stopped (it would never be released): probe it for half the timeout and give up if it
 * stays taken — the ring file (RANKSNAP_RING=mmap) still holds the history then. */
static void rs_crash_dump(int sig)
{
    rs_runtime *rt = rs_get();
    if (!rt) return;
    int budget_ms = rt->opts.dump_timeout_ms / 2, got = 0;
    for (int waited = 0; waited <= budget_ms; waited++) {
        if (rs_alloc_trylock(rt->alloc)) {
            got = 1;
            break;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (!got) {
        RS_WARN(RS_SUB_DUMP, "signal %d: the allocator is locked by the stopped thread; %s", sig,
                rt->ring_file ? "the ring file keeps the history" : "no snapshot written");
        return;
    }
    rs_alloc_unlock(rt->alloc);
    if (rs_runtime_dump(NULL, 0) == RANKSNAP_OK)
        RS_INFO(RS_SUB_DUMP, "signal %d: snapshot written", sig);
    else
        RS_WARN(RS_SUB_DUMP, "signal %d: dump failed: %s", sig, ranksnap_last_error());
}

/* ---- allocation ----------------------------------------------------------------------------- */

ranksnap_status ranksnap_malloc(void **ptr, size_t size, void *stream)
{
    if (!ptr) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "ranksnap_malloc: ptr is NULL");
    *ptr = NULL;
    rs_runtime *rt = rs_get();
    if (!rt) {
        if (rs_passthrough_on()) return rs_passthrough_malloc(ptr, size);
        return rs_error(RANKSNAP_ERR_NOT_INITIALIZED, "ranksnap_malloc: call ranksnap_init() first");
    }
    /* Without stacks to capture the thread-local buffer is not touched (its address is a call
     * to __tls_get_addr in a shared library): it holds n == 0 between calls, so the observer
     * finds no stack. */
    ranksnap_status st;
    if (!rt->stacks || !atomic_load_explicit(&rt->recording, memory_order_relaxed)) {
        st = rs_alloc_malloc(rt->alloc, size, stream, ptr);
    } else {
        rs_pending_stack *ps = &rs_pending;
        ps->id = 0;
        ps->n = rs_stacks_capture_pcs(rt->stacks, 1, ps->pcs);
        st = rs_alloc_malloc(rt->alloc, size, stream, ptr);
        ps->n = 0;
    }
    if (__builtin_expect(st == RANKSNAP_ERR_OUT_OF_MEMORY, 0)) rs_after_oom(rt);
    return st;
}

ranksnap_status ranksnap_free(void *ptr)
{
    if (!ptr) return RANKSNAP_OK;
    rs_runtime *rt = rs_get();
    if (!rt) {
        if (rs_passthrough_on()) return rs_passthrough_free(ptr);
        return rs_error(RANKSNAP_ERR_NOT_INITIALIZED, "ranksnap_free: call ranksnap_init() first");
    }
    return rs_alloc_free(rt->alloc, ptr);
}

ranksnap_status ranksnap_record_stream(void *ptr, void *stream)
{
    if (!ptr) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "ranksnap_record_stream: ptr is NULL");
    RS_NEED(rt);
    return rs_alloc_record_stream(rt->alloc, ptr, stream);
}

ranksnap_status ranksnap_empty_cache(void)
{
    RS_NEED(rt);
    return rs_alloc_empty_cache(rt->alloc);
}

/* ---- steps, annotations, recording ---------------------------------------------------------- */

/* Device memory the allocator does not account for: CUDA context, NCCL buffers, other
 * libraries. Sampled at steps and dumps, since cudaMemGetInfo is too slow for every event. */
static uint64_t rs_sample_outside(rs_runtime *rt, uint64_t reserved)
{
    uint64_t free_b = 0, total_b = 0;
    if (rt->backend->ops->mem_info(rt->backend, &free_b, &total_b) != RANKSNAP_OK) return 0;
    uint64_t used = total_b > free_b ? total_b - free_b : 0;
    uint64_t outside = used > reserved ? used - reserved : 0;
    if (outside > rt->outside_peak) rt->outside_peak = outside;
    return outside;
}

/* Starts a recorded range at the current step: fresh history and peaks, so that the range's
 * snapshot and report are about the range. Allocator lock held. */
static void rs_range_begin_locked(rs_runtime *rt, int64_t at)
{
    rs_recorder_clear(rt->recorder);
    rs_recorder_set_enabled(rt->recorder, 1);
    atomic_store(&rt->recording, 1);
    rt->in_range = 1;
    rt->reported = 0;
    if (rt->n_ranges < RS_MAX_RANGES) {
        rt->ranges[rt->n_ranges].begin = at;
        rt->ranges[rt->n_ranges].end = -1;
        rt->n_ranges++;
    } else {
        /* past RS_MAX_RANGES the last slot stands for every later range */
        rt->ranges[RS_MAX_RANGES - 1].end = -1;
    }
}

static void rs_range_end_locked(rs_runtime *rt, int64_t at)
{
    rs_recorder_set_enabled(rt->recorder, 0);
    atomic_store(&rt->recording, 0);
    rt->in_range = 0;
    if (rt->n_ranges > 0) rt->ranges[rt->n_ranges - 1].end = at;
}

ranksnap_status ranksnap_step(int64_t step)
{
    RS_NEED(rt);
    ranksnap_status st = RANKSNAP_OK;
    int64_t start;
    if (rs_coord_poll_trigger(rt->coord, step, rt->opts.dir, rt->opts.trigger_lag, &start)) {
        /* A start already passed (this rank ran ahead) begins at once: the snapshot's ranges
         * say which steps it really holds. */
        if (start < step) start = step;
        if (rs_schedule_add(&rt->sched, start, start + rt->opts.trigger_steps) != RANKSNAP_OK)
            RS_WARN(RS_SUB_RECORD, "trigger: %s", ranksnap_last_error());
    }
    int want = !rt->sched.time_based && !rt->sched.whole_run && rt->opts.record &&
               rs_schedule_contains(&rt->sched, step);
    int ended = 0;
    rs_alloc_set_step(rt->alloc, step);
    if (want && !rt->in_range) rs_alloc_reset_peak_stats(rt->alloc);
    ranksnap_stats s;
    memset(&s, 0, sizeof s);
    rs_alloc_get_stats(rt->alloc, &s);
    rs_alloc_lock(rt->alloc);
    rt->step = step;
    if (!rt->sched.time_based && !rt->sched.whole_run) {
        if (want && !rt->in_range) {
            rs_range_begin_locked(rt, step);
            RS_INFO(RS_SUB_RECORD, "recording from step %lld", (long long)step);
        } else if (!want && rt->in_range) {
            rs_range_end_locked(rt, step);
            ended = 1;
        }
    }
    rs_sample_outside(rt, s.reserved_bytes);
    rs_ring_file_step(rt->ring_file, step, s.allocated_bytes, s.allocated_bytes_peak, s.reserved_bytes_peak);
    rs_recorder_append_id(rt->recorder, RS_ACT_STEP, 0, (uint64_t)step, NULL, 0);
    rs_alloc_unlock(rt->alloc);
    if (ended) {
        RS_INFO(RS_SUB_RECORD, "recorded range ends before step %lld: gathering", (long long)step);
        st = rs_end_of_range(rt);
    }
    return st;
}

/* RANKSNAP_STEP_ON: pmpi.c reports each completed call of a wrapped collective. Every N-th call
 * of the configured one is a step boundary, numbered from 0. */
void rs_runtime_collective_done(const char *name)
{
    rs_runtime *rt = rs_get();
    if (!rt || !rt->step_on_every || strcmp(name, rt->step_on_name) != 0) return;
    if (++rt->step_on_calls % rt->step_on_every != 0) return;
    ranksnap_step(rt->step_on_next++);
}

/* ---- time ranges -------------------------------------------------------------------------- */

/* Sleeps until `at_us` on rank 0's time base, or until stopped; 0 when stopped. */
static int rs_timer_sleep_until(rs_runtime *rt, int64_t at_us)
{
    int64_t local = at_us - rs_coord_clock_offset_us(rt->coord);
    struct timespec ts = {(time_t)(local / 1000000), (long)(local % 1000000) * 1000};
    pthread_mutex_lock(&rt->timer_mu);
    while (!rt->timer_stop)
        if (pthread_cond_timedwait(&rt->timer_cv, &rt->timer_mu, &ts) == ETIMEDOUT) break;
    int go = !rt->timer_stop;
    pthread_mutex_unlock(&rt->timer_mu);
    return go;
}

/* time:A:B ranges start and stop recording on every rank at the same instant of rank 0's clock;
 * the gather that needs every rank at once waits for finalize, a point all ranks reach. */
static void *rs_timer_main(void *arg)
{
    rs_runtime *rt = arg;
    for (size_t i = 0; i < rt->sched.n; i++) {
        const rs_range *r = &rt->sched.r[i];
        if (!rs_timer_sleep_until(rt, rt->epoch_us + r->begin * 1000000)) return NULL;
        rs_alloc_reset_peak_stats(rt->alloc);
        rs_alloc_lock(rt->alloc);
        rs_range_begin_locked(rt, rt->step < 0 ? 0 : rt->step);
        rs_alloc_unlock(rt->alloc);
        RS_INFO(RS_SUB_RECORD, "time range %lld:%lld s: recording", (long long)r->begin, (long long)r->end);
        if (r->end < 0) return NULL;
        if (!rs_timer_sleep_until(rt, rt->epoch_us + r->end * 1000000)) return NULL;
        rs_alloc_lock(rt->alloc);
        rs_range_end_locked(rt, rt->step < 0 ? 0 : rt->step + 1);
        rs_alloc_unlock(rt->alloc);
        RS_INFO(RS_SUB_RECORD, "time range %lld:%lld s: stopped", (long long)r->begin, (long long)r->end);
    }
    return NULL;
}

static ranksnap_status rs_timer_start(rs_runtime *rt)
{
    pthread_condattr_t ca;
    if (pthread_mutex_init(&rt->timer_mu, NULL) != 0 || pthread_condattr_init(&ca) != 0)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "RANKSNAP_STEPS=time:...: cannot create the timer");
    /* the deadlines are wall-clock times (rank 0's epoch), so the condition waits on CLOCK_REALTIME */
    pthread_condattr_setclock(&ca, CLOCK_REALTIME);
    int rc = pthread_cond_init(&rt->timer_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "RANKSNAP_STEPS=time:...: cannot create the timer");
    if (pthread_create(&rt->timer, NULL, rs_timer_main, rt) != 0)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "RANKSNAP_STEPS=time:...: cannot start the timer thread");
    rt->timer_running = 1;
    return RANKSNAP_OK;
}

static void rs_timer_stop(rs_runtime *rt)
{
    if (!rt->timer_running) return;
    pthread_mutex_lock(&rt->timer_mu);
    rt->timer_stop = 1;
    pthread_cond_broadcast(&rt->timer_cv);
    pthread_mutex_unlock(&rt->timer_mu);
    pthread_join(rt->timer, NULL);
    rt->timer_running = 0;
    pthread_cond_destroy(&rt->timer_cv);
    pthread_mutex_destroy(&rt->timer_mu);
}

static ranksnap_status rs_annotate(rs_action act, const char *name, const char *fn)
{
    if (!name) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "%s: name is NULL", fn);
    rs_runtime *rt = rs_get();
    if (!rt) return rs_error(RANKSNAP_ERR_NOT_INITIALIZED, "%s: call ranksnap_init() first", fn);
    ranksnap_status st = RANKSNAP_OK;
    rs_alloc_lock(rt->alloc);
    if (rs_recorder_enabled(rt->recorder)) {
        uint32_t idx = rs_recorder_intern_string(rt->recorder, name);
        if (idx == UINT32_MAX)
            st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: could not store annotation \"%s\"", fn, name);
        else
            rs_recorder_append_id(rt->recorder, act, idx, 0, NULL, 0);
    }
    rs_alloc_unlock(rt->alloc);
    return st;
}

ranksnap_status ranksnap_annotate_begin(const char *name)
{
    return rs_annotate(RS_ACT_ANNOTATION_BEGIN, name, "ranksnap_annotate_begin");
}

ranksnap_status ranksnap_annotate_end(const char *name)
{
    return rs_annotate(RS_ACT_ANNOTATION_END, name, "ranksnap_annotate_end");
}

ranksnap_status ranksnap_record(int on)
{
    RS_NEED(rt);
    rs_alloc_lock(rt->alloc);
    int was = rs_recorder_enabled(rt->recorder);
    if (on && !was && rt->n_ranges < RS_MAX_RANGES) {
        rt->ranges[rt->n_ranges].begin = rt->step < 0 ? 0 : rt->step;
        rt->ranges[rt->n_ranges].end = -1;
        rt->n_ranges++;
    } else if (!on && was && rt->n_ranges > 0 && rt->ranges[rt->n_ranges - 1].end < 0) {
        rt->ranges[rt->n_ranges - 1].end = rt->step < 0 ? 0 : rt->step;
    }
    rs_recorder_set_enabled(rt->recorder, on ? 1 : 0);
    atomic_store(&rt->recording, on ? 1 : 0);
    rs_alloc_unlock(rt->alloc);
    return RANKSNAP_OK;
}

int ranksnap_is_recording(void)
{
    rs_runtime *rt = rs_get();
    return rt ? atomic_load(&rt->recording) : 0;
}

/* ---- stats ---------------------------------------------------------------------------------- */

ranksnap_status ranksnap_get_stats(ranksnap_stats *out)
{
    if (!out) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "ranksnap_get_stats: out is NULL");
    memset(out, 0, sizeof *out);
    RS_NEED(rt);
    rs_alloc_get_stats(rt->alloc, out);
    rs_alloc_lock(rt->alloc);
    out->events_recorded = rs_recorder_total(rt->recorder);
    out->events_dropped = rs_recorder_dropped(rt->recorder);
    rs_alloc_unlock(rt->alloc);
    out->device_total_bytes = rt->device.total_bytes;
    out->memory_limit_bytes = rt->memory_limit;
    return RANKSNAP_OK;
}

ranksnap_status ranksnap_reset_peak_stats(void)
{
    RS_NEED(rt);
    rs_alloc_reset_peak_stats(rt->alloc);
    return RANKSNAP_OK;
}


/* ---- interposer support (runtime.h; intercept_*.c) ---------------------------------------- */

/* Device memory held outside the allocator by known holders. Process-wide rather than per
 * instance: a communicator created before a re-init, or destroyed after finalize, still adds up. */
static pthread_mutex_t rs_outside_mu = PTHREAD_MUTEX_INITIALIZER;
static rs_outside_label rs_outside[RS_MAX_OUTSIDE_LABELS];
static size_t rs_n_outside;

/* rs_outside_mu held; NULL only if the table is full and `label` is new. */
static rs_outside_label *rs_outside_find(const char *label, int create)
{
    for (size_t i = 0; i < rs_n_outside; i++)
        if (!strcmp(rs_outside[i].label, label)) return &rs_outside[i];
    if (!create || rs_n_outside == RS_MAX_OUTSIDE_LABELS) return NULL;
    rs_outside_label *l = &rs_outside[rs_n_outside++];
    snprintf(l->label, sizeof l->label, "%s", label);
    l->bytes = 0;
    return l;
}

void rs_runtime_outside_add(const char *label, int64_t bytes)
{
    if (!label || !*label || bytes == 0) return;
    /* compared as stored: a longer label is its first 23 bytes */
    char name[sizeof rs_outside[0].label];
    snprintf(name, sizeof name, "%s", label);
    label = name;
    pthread_mutex_lock(&rs_outside_mu);
    rs_outside_label *l = rs_outside_find(label, 0);
    /* the last slot is kept for "other", so that a table full of labels still adds up */
    if (!l) l = rs_n_outside + 1 < RS_MAX_OUTSIDE_LABELS ? rs_outside_find(label, 1)
                                                          : rs_outside_find("other", 1);
    if (l) {
        uint64_t mag = bytes < 0 ? (uint64_t)0 - (uint64_t)bytes : (uint64_t)bytes;
        if (bytes > 0)
            l->bytes += mag;
        else
            l->bytes = mag > l->bytes ? 0 : l->bytes - mag;
    }
    pthread_mutex_unlock(&rs_outside_mu);
}

/* Copies the table (for the snapshot); returns the number of labels. */
static size_t rs_outside_labels_copy(rs_outside_label *out)
{
    pthread_mutex_lock(&rs_outside_mu);
    size_t n = rs_n_outside;
    memcpy(out, rs_outside, n * sizeof *out);
    pthread_mutex_unlock(&rs_outside_mu);
    return n;
}

static uint64_t rs_outside_labelled_bytes(void)
{
    rs_outside_label l[RS_MAX_OUTSIDE_LABELS];
    size_t n = rs_outside_labels_copy(l);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) sum += l[i].bytes;
    return sum;
}

void rs_runtime_note_intercepted(void)
{
    atomic_fetch_add_explicit(&rs_intercepted_calls, 1, memory_order_relaxed);
}

uint64_t rs_runtime_intercepted(void)
{
    return (uint64_t)atomic_load_explicit(&rs_intercepted_calls, memory_order_relaxed);
}

int rs_runtime_ever_started(void)
{
    return atomic_load(&rs_started_once);
}

static ranksnap_status rs_ensure(int wait)
{
    if (rs_get()) return RANKSNAP_OK;
    int gave_up = atomic_load_explicit(&rs_ensure_gave_up, memory_order_acquire);
    if (gave_up) return (ranksnap_status)gave_up;
    if (atomic_load(&rs_finalized_once)) return RANKSNAP_ERR_NOT_INITIALIZED;
    if (!wait && rs_world_program_will_init()) return RANKSNAP_ERR_NOT_INITIALIZED;
    /* Never wait inside the program's CUDA call: the thread holding the lock may be this one
     * (a CUDA call made from inside ranksnap's init, by MPI_Init_thread for instance) or may be
     * waiting for this one. */
    if (wait)
        pthread_mutex_lock(&rs_init_lock);
    else if (pthread_mutex_trylock(&rs_init_lock) != 0)
        return RANKSNAP_ERR_NOT_INITIALIZED;
    ranksnap_status st = RANKSNAP_OK;
    if (!rs_get()) {
        if (atomic_load(&rs_finalized_once)) {
            st = RANKSNAP_ERR_NOT_INITIALIZED;
        } else if ((st = rs_init_locked(NULL)) == RANKSNAP_OK) {
            /* the program will not call ranksnap_finalize: the range is written at exit */
            rs_atexit_finalize_once();
        } else {
            atomic_store_explicit(&rs_ensure_gave_up, (int)st, memory_order_release);
            /* every rank fails alike: rank 0 says it (pmpi.c does the same) */
            if (st != RANKSNAP_ERR_DISABLED && rs_launcher_rank(0) == 0)
                fprintf(stderr, "ranksnap: not tracking this process's allocations (passing them "
                        "through): %s: %s\n", ranksnap_strerror(st), ranksnap_last_error());
        }
    }
    pthread_mutex_unlock(&rs_init_lock);
    return st;
}

ranksnap_status rs_runtime_ensure(void)
{
    return rs_ensure(0);
}

ranksnap_status rs_runtime_ensure_wait(void)
{
    return rs_ensure(1);
}

int rs_runtime_active(int *device, int *cuda)
{
    rs_runtime *rt = rs_get();
    if (!rt) return 0;
    if (device) *device = rt->device.index;
    if (cuda) *cuda = rt->is_cuda;
    return 1;
}

ranksnap_status rs_runtime_cache_bytes(uint64_t *reserved, uint64_t *allocated, uint64_t *limit)
{
    RS_NEED(rt);
    ranksnap_stats s;
    memset(&s, 0, sizeof s);
    rs_alloc_get_stats(rt->alloc, &s);
    *reserved = s.reserved_bytes;
    *allocated = s.allocated_bytes;
    *limit = rs_alloc_memory_limit(rt->alloc);
    return RANKSNAP_OK;
}

ranksnap_status rs_runtime_device_usage(uint64_t *device_free, uint64_t *reserved)
{
    RS_NEED(rt);
    uint64_t total = 0;
    RS_CHECK(rt->backend->ops->mem_info(rt->backend, device_free, &total));
    ranksnap_stats s;
    memset(&s, 0, sizeof s);
    rs_alloc_get_stats(rt->alloc, &s);
    *reserved = s.reserved_bytes;
    return RANKSNAP_OK;
}

void rs_runtime_record_outside(int is_alloc, const void *ptr, uint64_t size)
{
    rs_runtime *rt = rs_get();
    if (!rt || !atomic_load_explicit(&rt->recording, memory_order_relaxed)) return;
    /* unwound before the lock, as for allocations; frees carry no stack, as in the observer */
    uintptr_t pcs[RS_MAX_STACK_DEPTH];
    int n = is_alloc && rt->stacks ? rs_stacks_capture_pcs(rt->stacks, 1, pcs) : 0;
    rs_alloc_lock(rt->alloc);
    uint32_t id = n > 0 && rs_recorder_enabled(rt->recorder) ? rs_stacks_intern(rt->stacks, pcs, n) : 0;
    rs_recorder_append_id(rt->recorder, is_alloc ? RS_ACT_OUTSIDE_ALLOC : RS_ACT_OUTSIDE_FREE,
                          (uint64_t)(uintptr_t)ptr, size, NULL, id);
    rs_alloc_unlock(rt->alloc);
}

/* Growth of device memory outside the allocator that finalize calls unexplained when a
 * preloaded run intercepted nothing: more than CUDA libraries' handles and workspaces take. */
#define RS_UNSEEN_GROWTH ((uint64_t)64 << 20)

/* A preloaded ranksnap that saw no allocation call while the device filled up: the program's
 * calls never reached the interposer, almost always because it is linked with the static CUDA
 * runtime (nvcc's default), whose cudaMalloc is inside the executable. Said once, on rank 0. */
static void rs_warn_if_nothing_intercepted(rs_runtime *rt)
{
    if (!rt->is_cuda || rs_runtime_intercepted() != 0 || rt->rank != 0) return;
    if (!rs_launcher_preloaded()) return;
    ranksnap_stats s;
    memset(&s, 0, sizeof s);
    rs_alloc_get_stats(rt->alloc, &s);
    /* a program that allocates through ranksnap's API (the demo) reached it all the same; the
     * device memory it saw grow is NCCL's or another library's, already accounted outside */
    if (s.num_allocs > 0) return;
    rs_alloc_lock(rt->alloc);
    rs_sample_outside(rt, s.reserved_bytes);
    uint64_t peak = rt->outside_peak;
    rs_alloc_unlock(rt->alloc);
    uint64_t known = rt->outside_at_init + rs_outside_labelled_bytes();
    if (peak <= known || peak - known < RS_UNSEEN_GROWTH) return;
    char grown[32];
    rs_text_format_bytes(peak - known, grown, sizeof grown);
    fprintf(stderr,
            "ranksnap: rank %d: no cudaMalloc/cudaFree call reached ranksnap, yet %s of device "
            "memory were taken outside it while it ran. The program is probably linked with the "
            "static CUDA runtime (nvcc's default), whose calls LD_PRELOAD cannot reach. Link it "
            "with ranksnap's link-time route instead: CMake target_link_libraries(app PRIVATE "
            "ranksnap::wrap), or $(pkg-config --libs ranksnap-wrap) on the link line; or build "
            "it with nvcc -cudart shared (docs/GPU.md, \"Interception\").\n",
            rt->rank, grown);
}

/* Finalize keeps the allocator of a process whose interposed cudaMalloc handed out blocks
 * that are still live: the program may use and free them after MPI_Finalize, and releasing
 * their segments under it would turn that into use-after-free on the device. */
static _Atomic(rs_runtime *) rs_retired;
static pthread_mutex_t rs_retired_mu = PTHREAD_MUTEX_INITIALIZER;

static int rs_runtime_should_retire(rs_runtime *rt)
{
    if (rs_runtime_intercepted() == 0) return 0;
    ranksnap_stats s;
    memset(&s, 0, sizeof s);
    rs_alloc_get_stats(rt->alloc, &s);
    return s.allocated_bytes > 0;
}

/* Ends what must end with finalize (the timer and signal threads, the ring file, the MPI
 * communicator, recording) and keeps the allocator, its backend and the recorder (which the
 * observer still reaches, switched off) for rs_runtime_free_retired. Their memory goes back at
 * exit, with the process. */
static void rs_runtime_retire(rs_runtime *rt)
{
    rs_timer_stop(rt);
    if (rt->postmortem) {
        rs_postmortem_stop();
        rt->postmortem = 0;
    }
    rs_alloc_lock(rt->alloc);
    rs_recorder_set_enabled(rt->recorder, 0);
    atomic_store(&rt->recording, 0);
    rs_ring_file *rf = rt->ring_file;
    rt->ring_file = NULL;
    rs_alloc_unlock(rt->alloc);
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

int rs_runtime_free_retired(void *ptr)
{
    if (!ptr || !atomic_load_explicit(&rs_retired, memory_order_acquire)) return 0;
    int done = 0;
    pthread_mutex_lock(&rs_retired_mu);
    for (rs_runtime *rt = atomic_load(&rs_retired); rt && !done; rt = rt->retired_next)
        done = rs_alloc_owns(rt->alloc, ptr) && rs_alloc_free(rt->alloc, ptr) == RANKSNAP_OK;
    pthread_mutex_unlock(&rs_retired_mu);
    return done;
}

/* ---- dump ----------------------------------------------------------------------------------- */

/* Creates RANKSNAP_DIR (0700) if it is missing; an existing one is used as it is. */
static ranksnap_status rs_ensure_dir(const char *dir)
{
    /* Several ranks of a node create it at once: EEXIST is the common case. The checks below
     * refuse a directory that another user could swap or read under us. */
    if (mkdir(dir, 0700) != 0) {
        if (errno == ENOENT) {
            /* missing parents are made too, as mkdir -p would (RANKSNAP_DIR=/scratch/$JOB/rs) */
            char tmp[RS_PATH_MAX];
            snprintf(tmp, sizeof tmp, "%s", dir);
            for (char *p = tmp + 1; *p; p++) {
                if (*p != '/') continue;
                *p = '\0';
                if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
                    return rs_error(RANKSNAP_ERR_IO, "RANKSNAP_DIR=%s: cannot create %s: %s", dir, tmp,
                                    strerror(errno));
                *p = '/';
            }
            if (mkdir(dir, 0700) != 0 && errno != EEXIST)
                return rs_error(RANKSNAP_ERR_IO, "RANKSNAP_DIR=%s: cannot create: %s", dir, strerror(errno));
        } else if (errno != EEXIST) {
            return rs_error(RANKSNAP_ERR_IO, "RANKSNAP_DIR=%s: cannot create: %s", dir, strerror(errno));
        }
    }
    struct stat sb;
    if (lstat(dir, &sb) != 0)
        return rs_error(RANKSNAP_ERR_IO, "RANKSNAP_DIR=%s: %s", dir, strerror(errno));
    if (S_ISLNK(sb.st_mode))
        return rs_error(RANKSNAP_ERR_IO, "RANKSNAP_DIR=%s: is a symbolic link; refusing to write "
                        "snapshots through it (give the real path)", dir);
    if (!S_ISDIR(sb.st_mode))
        return rs_error(RANKSNAP_ERR_IO, "RANKSNAP_DIR=%s: exists and is not a directory", dir);
    if (sb.st_uid != geteuid())
        return rs_error(RANKSNAP_ERR_IO, "RANKSNAP_DIR=%s: owned by uid %u, not by this user (uid %u); "
                        "refusing to write snapshots there", dir, (unsigned)sb.st_uid, (unsigned)geteuid());
    return RANKSNAP_OK;
}

ranksnap_status rs_runtime_default_path(char *buf, size_t n)
{
    RS_NEED(rt);
    RS_CHECK(rs_ensure_dir(rt->opts.dir));
    int w = snprintf(buf, n, "%s/rank-%05d.rsnap", rt->opts.dir, rt->rank);
    if (w < 0 || (size_t)w >= n)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "RANKSNAP_DIR=%s: path too long", rt->opts.dir);
    return RANKSNAP_OK;
}

/* Encodes this rank's snapshot into a malloc'ed buffer: state, history and stacks taken at one
 * instant under the allocator lock. */
static ranksnap_status rs_runtime_encode(rs_runtime *rt, int complete, char **out, size_t *out_len)
{
    uint64_t t0 = rs_now_us();
    rs_snapshot_src src;
    memset(&src, 0, sizeof src);
    ranksnap_stats stats;
    memset(&stats, 0, sizeof stats);
    rs_alloc_get_stats(rt->alloc, &stats);
    stats.device_total_bytes = rt->device.total_bytes;
    stats.memory_limit_bytes = rt->memory_limit;
    rs_oom_info oom;
    int has_oom = rs_alloc_last_oom(rt->alloc, &oom);

    rs_alloc_state state;
    memset(&state, 0, sizeof state);
    rs_outside_label labels[RS_MAX_OUTSIDE_LABELS];
    rs_symbols sym;
    memset(&sym, 0, sizeof sym);
    char *buf = NULL;
    size_t len = 0;

    /* One instant: state, history and stacks under the allocator lock. Encoding is done under it
     * too, so that the recorder is not overwritten while it is read. */
    rs_alloc_lock(rt->alloc);
    ranksnap_status st = rs_alloc_state_take_locked(rt->alloc, &state);
    if (st == RANKSNAP_OK && rt->stacks) st = rs_symbols_resolve(rt->stacks, &sym);
    if (st == RANKSNAP_OK) {
        uint64_t outside = rs_sample_outside(rt, stats.reserved_bytes);
        uint64_t free_b = 0, total_b = 0;
        stats.events_recorded = rs_recorder_total(rt->recorder);
        stats.events_dropped = rs_recorder_dropped(rt->recorder);
        src.rank = rt->rank;
        src.world_size = rt->world_size;
        src.host = rt->host;
        src.pid = (int64_t)getpid();
        src.job = rt->job;
        src.device = rt->device;
        src.backend = rt->backend->ops->name;
        src.options = &rt->opts;
        src.memory_limit = rt->memory_limit;
        src.complete = complete;
        src.n_ranges = rt->n_ranges;
        src.ranges = rt->ranges;
        src.current_step = rt->step;
        src.stats = stats;
        if (rt->backend->ops->mem_info(rt->backend, &free_b, &total_b) == RANKSNAP_OK)
            src.device_used_bytes = total_b > free_b ? total_b - free_b : 0;
        src.outside_bytes_peak = rt->outside_peak;
        src.outside_bytes_end = outside;
        src.n_outside_labels = rs_outside_labels_copy(labels);
        src.outside_labels = labels;
        src.has_oom = has_oom;
        if (has_oom) {
            src.oom = oom;
            src.oom_step = rt->step;
            /* The OOM event in the ring carries the stack of the failing request. */
            for (uint64_t i = rs_recorder_count(rt->recorder); i-- > 0;) {
                const rs_event *e = rs_recorder_at(rt->recorder, i);
                if (e->action == RS_ACT_OOM) {
                    src.oom_stack_id = e->stack_id;
                    break;
                }
            }
        }
        src.state = &state;
        src.recorder = rt->recorder;
        src.symbols = rt->stacks ? &sym : NULL;
        src.time_us = t0;
        src.clock_offset_us = rs_coord_clock_offset_us(rt->coord);
        src.clock_uncertainty_us = rs_coord_clock_uncertainty_us(rt->coord);
        st = rs_snapshot_encode(&src, &buf, &len);
    }
    rs_alloc_unlock(rt->alloc);
    rs_symbols_free(&sym);
    rs_alloc_state_free(&state);
    if (st != RANKSNAP_OK) return st;
    RS_INFO(RS_SUB_DUMP, "encoded %zu bytes in %.1f ms", len, (double)(rs_now_us() - t0) / 1000.0);
    *out = buf;
    *out_len = len;
    return RANKSNAP_OK;
}

ranksnap_status rs_runtime_dump(const char *path, int complete)
{
    RS_NEED(rt);
    char defpath[RS_PATH_MAX + 32];
    if (!path) {
        RS_CHECK(rs_runtime_default_path(defpath, sizeof defpath));
        path = defpath;
    }
    char *buf = NULL;
    size_t len = 0;
    RS_CHECK(rs_runtime_encode(rt, complete, &buf, &len));
    /* the crash path (complete = 0) skips the fsyncs: see rs_atomic_file_write_ex */
    ranksnap_status st = rs_atomic_file_write_ex(path, buf, len, complete);
    free(buf);
    if (st == RANKSNAP_OK) {
        RS_INFO(RS_SUB_DUMP, "dump: %s, %zu bytes", path, len);
        if (rt->ring_file) rs_ring_file_snapshot_written(rt->ring_file, rs_now_us());
    }
    return st;
}

/* Writes `text` of `n` bytes to RANKSNAP_DIR/name atomically. */
static void rs_write_report_file(rs_runtime *rt, const char *name, const char *text, size_t n)
{
    char path[RS_PATH_MAX + 32];
    if (rs_ensure_dir(rt->opts.dir) != RANKSNAP_OK ||
        snprintf(path, sizeof path, "%s/%s", rt->opts.dir, name) >= (int)sizeof path ||
        rs_atomic_file_write(path, text, n) != RANKSNAP_OK)
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
    rs_compare_result *res = NULL;
    if (rs_compare(g->summaries, (const rs_snap *const *)g->full, g->n, g->world_size, &cfg,
                    &res) != RANKSNAP_OK) {
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
static ranksnap_status rs_end_of_range(rs_runtime *rt)
{
    /* Nothing to write and nothing to report: every rank reads the same environment, so all of
     * them skip the gather together. */
    if (rt->opts.write == RS_WRITE_NONE && !rt->opts.report) {
        rt->reported = 1;
        return RANKSNAP_OK;
    }
    char *buf = NULL;
    size_t len = 0;
    RS_CHECK(rs_runtime_encode(rt, 1, &buf, &len));
    ranksnap_status st = RANKSNAP_OK;
    if (rt->opts.write == RS_WRITE_ALL || (rt->opts.write == RS_WRITE_RANK0 && rt->rank == 0)) {
        char path[RS_PATH_MAX + 32];
        st = rs_runtime_default_path(path, sizeof path);
        if (st == RANKSNAP_OK) st = rs_atomic_file_write(path, buf, len);
        if (st != RANKSNAP_OK) RS_WARN(RS_SUB_DUMP, "%s", ranksnap_last_error());
        else if (rt->ring_file) rs_ring_file_snapshot_written(rt->ring_file, rs_now_us());
    }
    if (!rt->opts.report) { /* RANKSNAP_REPORT=0: files only, `ranksnap report DIR` later */
        free(buf);
        rt->reported = 1;
        return st;
    }
    /* The summary is computed by the same code that reads files afterwards, from this very
     * encoding, so the live report and `ranksnap report` cannot disagree. */
    rs_snap *self = NULL;
    rs_summary mine;
    memset(&mine, 0, sizeof mine);
    ranksnap_status dst = rs_rsnap_decode(buf, len, "this rank's snapshot", &self);
    if (dst == RANKSNAP_OK) {
        rs_summary_of(self, &mine);
        rs_snap_free(self);
    } else {
        RS_WARN(RS_SUB_DUMP, "%s", ranksnap_last_error());
        mine.rank = rt->rank;
        mine.world_size = rt->world_size;
    }
    rs_gather_result g;
    ranksnap_status gst = rs_coord_gather(rt->coord, buf, len, &mine, rt->opts.gather,
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


ranksnap_status ranksnap_dump(const char *path)
{
    return rs_runtime_dump(path, 1);
}
