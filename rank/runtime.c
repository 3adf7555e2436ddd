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
#include "backend.h"
#include "clock.h"
#include "errors.h"
#include "log.h"
#include "options.h"
#include "recorder.h"
#include "runtime.h"
#include "snapshot.h"
#include "stacks.h"

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
} rs_runtime;

static pthread_mutex_t rs_init_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(rs_runtime *) rs_instance;

/* The stack of the allocation in flight on this thread, unwound before the allocator lock. */
typedef struct rs_pending_stack {
    int n;
    uint32_t id; /* interned id once the observer has interned it, 0 before */
    uintptr_t pcs[RS_MAX_STACK_DEPTH];
} rs_pending_stack;
static _Thread_local rs_pending_stack rs_pending;

static rs_runtime *rs_get(void)
{
    return atomic_load_explicit(&rs_instance, memory_order_acquire);
}

/* ---- identity ------------------------------------------------------------------------------ */

static int rs_env_int(const char *const *names, int fallback)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (!v || !*v) continue;
        char *end;
        errno = 0;
        long x = strtol(v, &end, 10);
        if (errno == 0 && *end == '\0' && x >= 0 && x <= INT_MAX) return (int)x;
    }
    return fallback;
}

/* Rank and size as the common launchers export them, for processes not handed a communicator. */
static void rs_identity_from_env(rs_runtime *rt)
{
    static const char *const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                            "SLURM_PROCID", "RANK", NULL};
    static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS",
                                            "WORLD_SIZE", NULL};
    rt->rank = rs_env_int(rank_vars, 0);
    rt->world_size = rs_env_int(size_vars, 1);
    if (rt->world_size <= rt->rank) rt->world_size = rt->rank + 1;
}

static void rs_job_from_env(rs_runtime *rt)
{
    static const char *const job_vars[] = {"RANKSNAP_JOB",      "SLURM_JOB_ID", "PBS_JOBID",
                                           "LSB_JOBID",         "PMIX_NAMESPACE",
                                           "OMPI_MCA_ess_base_jobid", NULL};
    for (const char *const *v = job_vars; *v; v++) {
        const char *s = getenv(*v);
        if (s && *s) {
            snprintf(rt->job, sizeof rt->job, "%s", s);
            return;
        }
    }
    snprintf(rt->job, sizeof rt->job, "local-%s-%ld", rt->host, (long)getppid());
}

/* ---- observer ------------------------------------------------------------------------------- */

/* Called by the allocator with its lock held. */
static uint32_t rs_observe(void *ctx, rs_action act, uint64_t addr, uint64_t size, void *stream)
{
    rs_runtime *rt = ctx;
    if (!rs_recorder_enabled(rt->recorder)) return 0;
    uint32_t id = 0;
    if (rs_pending.n > 0 &&
        (act == RS_ACT_ALLOC || act == RS_ACT_SEGMENT_ALLOC || act == RS_ACT_OOM)) {
        if (rs_pending.id == 0) rs_pending.id = rs_stacks_intern(rt->stacks, rs_pending.pcs, rs_pending.n);
        id = rs_pending.id;
    }
    rs_recorder_append_id(rt->recorder, act, addr, size, stream, id);
    return id;
}

/* ---- init / finalize ------------------------------------------------------------------------ */

static ranksnap_status rs_backend_open(rs_runtime *rt)
{
    rs_backend_kind kind = rt->opts.backend;
    if (kind == RS_BACKEND_AUTO) kind = rs_backend_cuda_available() ? RS_BACKEND_CUDA : RS_BACKEND_SIM;
    if (kind == RS_BACKEND_CUDA) return rs_backend_cuda_create(&rt->backend);
    return rs_backend_sim_create(rt->opts.sim_capacity, &rt->backend);
}

static void rs_runtime_destroy(rs_runtime *rt)
{
    if (!rt) return;
    if (rt->alloc) rs_alloc_destroy(rt->alloc);
    if (rt->recorder) rs_recorder_destroy(rt->recorder);
    if (rt->stacks) rs_stacks_destroy(rt->stacks);
    if (rt->backend) rt->backend->ops->destroy(rt->backend);
    free(rt);
}

static ranksnap_status rs_runtime_create(const void *mpi_comm, rs_runtime **out)
{
    rs_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "ranksnap_init: out of host memory");
    ranksnap_status st = rs_options_load_env(&rt->opts);
    if (st != RANKSNAP_OK) goto fail;
    if (rt->opts.disable) {
        st = rs_error(RANKSNAP_ERR_DISABLED, "RANKSNAP_DISABLE is set: ranksnap stays out of the way");
        goto fail;
    }
    if (gethostname(rt->host, sizeof rt->host) != 0) snprintf(rt->host, sizeof rt->host, "unknown");
    rt->host[sizeof rt->host - 1] = '\0';
    rs_identity_from_env(rt);
    if (mpi_comm) {
#if defined(RANKSNAP_HAVE_MPI)
        int inited = 0;
        MPI_Comm comm = *(const MPI_Comm *)mpi_comm;
        if (MPI_Initialized(&inited) != MPI_SUCCESS || !inited) {
            st = rs_error(RANKSNAP_ERR_MPI, "ranksnap_init: a communicator was given but MPI is not initialized");
            goto fail;
        }
        if (MPI_Comm_rank(comm, &rt->rank) != MPI_SUCCESS ||
            MPI_Comm_size(comm, &rt->world_size) != MPI_SUCCESS) {
            st = rs_error(RANKSNAP_ERR_MPI, "ranksnap_init: MPI_Comm_rank/MPI_Comm_size failed on the given communicator");
            goto fail;
        }
#else
        st = rs_error(RANKSNAP_ERR_UNSUPPORTED, "ranksnap_init: this ranksnap was built without MPI; pass NULL");
        goto fail;
#endif
    }
    rs_job_from_env(rt);
    rs_log_configure(rt->opts.debug_level, rt->opts.debug_subsys, rt->rank);
    rt->step = -1;

    st = rs_backend_open(rt);
    if (st != RANKSNAP_OK) goto fail;
    st = rt->backend->ops->device_info(rt->backend, &rt->device);
    if (st != RANKSNAP_OK) goto fail;

    if (rt->opts.stacks != RS_STACKS_NONE) {
        st = rs_stacks_create(rt->opts.stacks, rt->opts.stack_depth, &rt->stacks);
        if (st != RANKSNAP_OK) goto fail;
    }
    st = rs_recorder_create(rt->opts.max_entries, rt->stacks, &rt->recorder);
    if (st != RANKSNAP_OK) goto fail;

    rt->memory_limit = rs_memory_limit_for_rank(&rt->opts.memory_limit, rt->rank);
    rs_alloc_config cfg = {
        .memory_limit = rt->memory_limit,
        .max_split_size = rt->opts.max_split_size,
        .device_index = rt->device.index,
        .observer = rs_observe,
        .observer_ctx = rt,
    };
    st = rs_alloc_create(rt->backend, &cfg, &rt->alloc);
    if (st != RANKSNAP_OK) goto fail;

    if (rt->opts.record) {
        rs_recorder_set_enabled(rt->recorder, 1);
        atomic_store(&rt->recording, 1);
        rt->ranges[0].begin = 0;
        rt->ranges[0].end = -1;
        rt->n_ranges = 1;
    }
    RS_INFO(RS_SUB_INIT, "init: rank %d of %d, backend %s (%s, %llu bytes), limit %llu, stacks %s",
            rt->rank, rt->world_size, rt->backend->ops->name, rt->device.name,
            (unsigned long long)rt->device.total_bytes, (unsigned long long)rt->memory_limit,
            rt->opts.stacks == RS_STACKS_NONE ? "none" : rt->opts.stacks == RS_STACKS_FP ? "fp" : "native");
    *out = rt;
    return RANKSNAP_OK;
fail:
    rs_runtime_destroy(rt);
    return st;
}

ranksnap_status ranksnap_init(const void *mpi_comm)
{
    pthread_mutex_lock(&rs_init_lock);
    ranksnap_status st = RANKSNAP_OK;
    if (!rs_get()) {
        rs_runtime *rt = NULL;
        st = rs_runtime_create(mpi_comm, &rt);
        if (st == RANKSNAP_OK) atomic_store_explicit(&rs_instance, rt, memory_order_release);
    }
    pthread_mutex_unlock(&rs_init_lock);
    return st;
}

ranksnap_status ranksnap_finalize(void)
{
    pthread_mutex_lock(&rs_init_lock);
    rs_runtime *rt = atomic_exchange(&rs_instance, NULL);
    pthread_mutex_unlock(&rs_init_lock);
    rs_runtime_destroy(rt);
    return RANKSNAP_OK;
}

#define RS_NEED(rt)                                                                                \
    rs_runtime *rt = rs_get();                                                                     \
    if (!rt) return rs_error(RANKSNAP_ERR_NOT_INITIALIZED, "%s: call ranksnap_init() first", __func__)

/* ---- allocation ----------------------------------------------------------------------------- */

ranksnap_status ranksnap_malloc(void **ptr, size_t size, void *stream)
{
    if (!ptr) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "ranksnap_malloc: ptr is NULL");
    *ptr = NULL;
    RS_NEED(rt);
    rs_pending.n = 0;
    rs_pending.id = 0;
    if (rt->stacks && atomic_load_explicit(&rt->recording, memory_order_relaxed))
        rs_pending.n = rs_stacks_capture_pcs(rt->stacks, 1, rs_pending.pcs);
    ranksnap_status st = rs_alloc_malloc(rt->alloc, size, stream, ptr);
    rs_pending.n = 0;
    return st;
}

ranksnap_status ranksnap_free(void *ptr)
{
    if (!ptr) return RANKSNAP_OK;
    RS_NEED(rt);
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

ranksnap_status ranksnap_step(int64_t step)
{
    RS_NEED(rt);
    rs_alloc_set_step(rt->alloc, step);
    ranksnap_stats s;
    memset(&s, 0, sizeof s);
    rs_alloc_get_stats(rt->alloc, &s);
    rs_alloc_lock(rt->alloc);
    rt->step = step;
    rs_sample_outside(rt, s.reserved_bytes);
    rs_recorder_append_id(rt->recorder, RS_ACT_STEP, 0, (uint64_t)step, NULL, 0);
    rs_alloc_unlock(rt->alloc);
    return RANKSNAP_OK;
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

/* ---- dump ----------------------------------------------------------------------------------- */

/* Creates RANKSNAP_DIR (0700) if it is missing; an existing one is used as it is. */
static ranksnap_status rs_ensure_dir(const char *dir)
{
    if (mkdir(dir, 0700) == 0 || errno == EEXIST) {
        struct stat sb;
        if (stat(dir, &sb) != 0)
            return rs_error(RANKSNAP_ERR_IO, "RANKSNAP_DIR=%s: %s", dir, strerror(errno));
        if (!S_ISDIR(sb.st_mode))
            return rs_error(RANKSNAP_ERR_IO, "RANKSNAP_DIR=%s: exists and is not a directory", dir);
        return RANKSNAP_OK;
    }
    return rs_error(RANKSNAP_ERR_IO, "RANKSNAP_DIR=%s: cannot create: %s", dir, strerror(errno));
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

ranksnap_status rs_runtime_dump(const char *path, int complete)
{
    RS_NEED(rt);
    char defpath[RS_PATH_MAX + 32];
    if (!path) {
        RS_CHECK(rs_runtime_default_path(defpath, sizeof defpath));
        path = defpath;
    }
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
        st = rs_snapshot_encode(&src, &buf, &len);
    }
    rs_alloc_unlock(rt->alloc);
    rs_symbols_free(&sym);
    rs_alloc_state_free(&state);
    if (st != RANKSNAP_OK) return st;
    st = rs_write_file_atomic(path, buf, len);
    free(buf);
    if (st == RANKSNAP_OK)
        RS_INFO(RS_SUB_DUMP, "dump: %s, %zu bytes in %.1f ms", path, len, (double)(rs_now_us() - t0) / 1000.0);
    return st;
}

ranksnap_status ranksnap_dump(const char *path)
{
    return rs_runtime_dump(path, 1);
}
