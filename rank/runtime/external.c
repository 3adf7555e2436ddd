/*
 * external.c — the framework's own recorder (external.h): ranksnap_set_recorder, starting and
 * stopping it on the schedule's steps, the rank's metadata and snapshot, and the name of its
 * file.
 *
 * The ops are the framework's (the Python glue's ctypes callbacks), so they are called without
 * any ranksnap lock but this file's own mutex, which keeps a post-mortem dump from running into
 * a range-end dump: the callbacks take Python's GIL, and a thread that waits for a C lock while
 * holding the GIL would stop every other one. The post-mortem thread waits for the mutex at most
 * half of RANKSNAP_DUMP_TIMEOUT_MS.
 *
 * The metadata (the "ranksnap" key of the pickle, docs/PYTORCH.md) carries what PyTorch's
 * snapshot lacks: the rank and job, the recorded ranges and when each recorded step began (so
 * that the reader need not infer steps), and the device memory used outside PyTorch's
 * allocator: the process's own use of its device (NVML's figure; the device's used bytes when
 * that is not known, said so) minus the framework's reserved bytes, sampled at recorded steps
 * (outside.h says how often), with the part whose holder is known (NCCL, measured by nccl.c), and
 * the other processes NVML lists on the device.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "coord.h"
#include "errors.h"
#include "external.h"
#include "format.h"
#include "json_write.h"
#include "launcher.h"
#include "log.h"
#include "outside.h"
#include "postmortem.h"
#include "step_how.h"

/* Step starts kept for the metadata: the last ones of the range when it is longer. */
#define RS_EXT_STEPS 8192

typedef struct rs_ext_step {
    int64_t step;
    uint64_t time_us;
} rs_ext_step;

static pthread_mutex_t rs_ext_mu = PTHREAD_MUTEX_INITIALIZER;
static ranksnap_recorder_ops rs_ext_ops;          /* guarded by rs_ext_mu */
static int rs_ext_have_ops;                       /* guarded by rs_ext_mu */
static int (*_Atomic rs_ext_holds_lock)(void);    /* read by the signal gate */
static int rs_ext_recording;                      /* start() succeeded, no stop() since */
static int rs_ext_start_failed;                   /* said once */
static rs_ext_step rs_ext_steps[RS_EXT_STEPS];
static size_t rs_ext_n_steps;                     /* steps logged in this range */
/* the highest sample of each kind (rs_outside_of): the process's own, or the device's */
static uint64_t rs_ext_outside_peak[3];

ranksnap_status rs_external_check_options(const rs_options *o)
{
    int torch = o->recorder == RS_RECORDER_TORCH;
    if (!torch && (o->stacks == RS_STACKS_PYTHON || o->stacks == RS_STACKS_ALL))
        return rs_error(RANKSNAP_ERR_OPTION, "RANKSNAP_STACKS=%s: python and all are PyTorch's "
                        "stacks (RANKSNAP_RECORDER=torch, which ranksnap-run sets for Python "
                        "programs); C programs take native, fp or none",
                        o->stacks == RS_STACKS_PYTHON ? "python" : "all");
    if (torch && o->stacks == RS_STACKS_FP)
        return rs_error(RANKSNAP_ERR_OPTION, "RANKSNAP_STACKS=fp: PyTorch records python (the "
                        "default), all (Python and C++ frames) or none");
    return RANKSNAP_OK;
}

/* ---- registration -------------------------------------------------------------------------- */

/* The post-mortem handler's question (postmortem.h): may it wait for a dump from this thread?
 * Not when the thread holds the lock the dump needs (the GIL): the dump could never run. */
static int rs_ext_signal_gate(void)
{
    int (*held)(void) = atomic_load(&rs_ext_holds_lock);
    return !(held && held());
}

ranksnap_status ranksnap_set_recorder(const ranksnap_recorder_ops *ops)
{
    /* A forked child (a worker leaving by os._exit through the glue): the ops are the parent's
     * and nothing here calls them, and the mutex may be held by a thread that is not here. */
    if (rs_state_forked()) return RANKSNAP_OK;
    rs_options o;
    if (rs_options_load_one(&o, "RANKSNAP_RECORDER", NULL) != RANKSNAP_OK) return RANKSNAP_ERR_OPTION;
    if (ops && o.recorder != RS_RECORDER_TORCH)
        return rs_error(RANKSNAP_ERR_UNSUPPORTED, "ranksnap_set_recorder: RANKSNAP_RECORDER=ranksnap: "
                        "ranksnap's own allocator and recorder are in use (PyTorch's pluggable "
                        "allocator); RANKSNAP_RECORDER=torch drives the framework's");
    if (ops && (!ops->start || !ops->stop || !ops->dump || !ops->reserved))
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                        "ranksnap_set_recorder: start, stop, dump and reserved are required");
    pthread_mutex_lock(&rs_ext_mu);
    if (ops) rs_ext_ops = *ops;
    else memset(&rs_ext_ops, 0, sizeof rs_ext_ops);
    rs_ext_have_ops = ops != NULL;
    /* unregistered (the interpreter is going away): nothing of it may be called any more */
    if (!ops) rs_ext_recording = 0;
    atomic_store(&rs_ext_holds_lock, ops ? ops->holds_lock : NULL);
    pthread_mutex_unlock(&rs_ext_mu);
    /* recorded natively, a dump needs no lock of the framework's: nothing to wait for */
    rs_postmortem_set_gate(ops && ops->holds_lock && !rs_external_native() ? rs_ext_signal_gate : NULL);
    return RANKSNAP_OK;
}

/* ---- steps --------------------------------------------------------------------------------- */

/* The device the framework allocates on: the one ranksnap opened first, else the calling thread's
 * current device (PyTorch's, set by the script before its first tensor). */
static rs_rt_device *rs_ext_device(rs_runtime *rt)
{
    rs_rt_device *d = NULL;
    if (rs_devices_count(rt) > 0) return rs_devices_at(rt, 0);
    return rs_devices_get_current(rt, &d) == RANKSNAP_OK ? d : NULL;
}

/* Device memory outside the framework's allocator now, when measured (rs_outside_use_now: at a
 * step, not sooner than its pace allows; always with `force`); rs_ext_mu held. */
static uint64_t rs_ext_outside_locked(rs_runtime *rt, int force, rs_outside_use *use,
                                      uint64_t *reserved_out)
{
    rs_rt_device *d = rs_ext_device(rt);
    rs_outside_use u;
    if (!rs_outside_use_now(rt, d, d, force, &u)) return 0;
    uint64_t reserved = rs_ext_have_ops ? rs_ext_ops.reserved(rs_ext_ops.ctx) : 0;
    if (use) *use = u;
    if (reserved_out) *reserved_out = reserved;
    uint64_t outside = rs_outside_use_beyond(&u, reserved);
    if (outside > rs_ext_outside_peak[u.of]) rs_ext_outside_peak[u.of] = outside;
    return outside;
}

void rs_external_step(rs_runtime *rt, int64_t step)
{
    /* recorded natively: the recorder and the outside samples of C programs (steps.c) */
    if (!rs_external_pickles() || !atomic_load_explicit(&rt->recording, memory_order_relaxed)) return;
    pthread_mutex_lock(&rs_ext_mu);
    if (rs_ext_have_ops && !rs_ext_recording) {
        int stacks = rt->opts.stacks == RS_STACKS_ALL ? 1 : rt->opts.stacks == RS_STACKS_NONE ? -1 : 0;
        rs_ext_n_steps = 0;
        memset(rs_ext_outside_peak, 0, sizeof rs_ext_outside_peak);
        rs_ext_recording = rs_ext_ops.start(rs_ext_ops.ctx, rt->opts.max_entries, stacks) == 0;
        if (!rs_ext_recording && !rs_ext_start_failed) {
            rs_ext_start_failed = 1;
            RS_WARN(RS_SUB_RECORD, "step %lld: the framework's recorder did not start (see above); "
                    "the snapshots will have no history", (long long)step);
        } else if (rs_ext_recording) {
            RS_INFO(RS_SUB_RECORD, "step %lld: the framework's recorder started", (long long)step);
        }
    }
    rs_ext_step *e = &rs_ext_steps[rs_ext_n_steps % RS_EXT_STEPS];
    e->step = step;
    e->time_us = rs_now_us();
    rs_ext_n_steps++;
    rs_ext_outside_locked(rt, 0, NULL, NULL);
    pthread_mutex_unlock(&rs_ext_mu);
}

void rs_external_stop(rs_runtime *rt)
{
    (void)rt;
    pthread_mutex_lock(&rs_ext_mu);
    if (rs_ext_have_ops && rs_ext_recording && rs_ext_ops.stop(rs_ext_ops.ctx) != 0)
        RS_WARN(RS_SUB_RECORD, "the framework's recorder did not stop (see above)");
    rs_ext_recording = 0;
    pthread_mutex_unlock(&rs_ext_mu);
}

/* ---- the metadata -------------------------------------------------------------------------- */

static const char *rs_ext_stacks_name(rs_stacks_mode m)
{
    return m == RS_STACKS_ALL ? "all" : m == RS_STACKS_NONE ? "none" : "python";
}

/* The "ranksnap" key, as JSON; rs_ext_mu held. */
static ranksnap_status rs_ext_meta_locked(rs_runtime *rt, const char *reason, char **out)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "ranksnap: no memory for the snapshot's metadata");
    uint64_t reserved = 0;
    rs_outside_use use;
    memset(&use, 0, sizeof use);
    uint64_t outside = rs_ext_outside_locked(rt, 1, &use, &reserved);
    uint64_t peak = rs_ext_outside_peak[use.of] > outside ? rs_ext_outside_peak[use.of] : outside;
    fprintf(f, "{\"format\": \"ranksnap-torch\", \"version\": 1, \"reason\": ");
    rs_json_string(f, reason, RS_JSON_PLAIN);
    fprintf(f, ", \"rank\": %d, \"world_size\": %d, \"local_rank\": %d, \"attempt\": %d, \"host\": ",
            rt->rank, rt->world_size, rs_launcher_local_rank(0), rs_launcher_attempt());
    rs_json_string(f, rt->host, RS_JSON_PLAIN);
    fprintf(f, ", \"pid\": %ld, \"job\": ", (long)getpid());
    rs_json_string(f, rt->job, RS_JSON_PLAIN);
    /* how the process is ending, when it is (the .rsnap's `end`, with its keys) */
    rs_end end;
    rs_end_key k[5];
    rs_state_end(&end);
    for (int i = 0, nk = rs_end_keys(&end, k); i < nk; i++) {
        fprintf(f, "%s\"%s\": ", i ? ", " : ", \"end\": {", k[i].name);
        if (k[i].is_bool)
            fputs(k[i].value ? "true" : "false", f);
        else
            fprintf(f, "%lld", (long long)k[i].value);
        if (i == nk - 1) fputc('}', f);
    }
    fprintf(f, ", \"complete\": true, \"time_us\": %llu, \"clock_offset_us\": %lld, "
               "\"clock_uncertainty_us\": %lld, \"ranges\": [",
            (unsigned long long)rs_now_us(), (long long)rs_coord_clock_offset_us(rt->coord),
            (long long)rs_coord_clock_uncertainty_us(rt->coord));
    /* the ranges and the step are the allocator lock's (steps.c); the snapshot is taken
     * between two steps, so they hold still */
    rs_rt_lock(rt);
    for (size_t i = 0; i < rt->n_ranges; i++) {
        if (rt->ranges[i].end < 0)
            fprintf(f, "%s[%lld, null]", i ? ", " : "", (long long)rt->ranges[i].begin);
        else
            fprintf(f, "%s[%lld, %lld]", i ? ", " : "", (long long)rt->ranges[i].begin,
                    (long long)rt->ranges[i].end);
    }
    int64_t current = rt->step;
    fprintf(f, "], \"steps_from\": ");
    rs_json_string(f, rs_steps_how(rt), RS_JSON_PLAIN);
    rs_rt_unlock(rt);
    fprintf(f, ", \"current_step\": %lld, \"steps\": [", (long long)current);
    size_t first = rs_ext_n_steps > RS_EXT_STEPS ? rs_ext_n_steps - RS_EXT_STEPS : 0;
    for (size_t i = first; i < rs_ext_n_steps; i++) {
        const rs_ext_step *e = &rs_ext_steps[i % RS_EXT_STEPS];
        fprintf(f, "%s[%lld, %llu]", i > first ? ", " : "", (long long)e->step,
                (unsigned long long)e->time_us);
    }
    rs_rt_device *dev = rs_ext_device(rt);
    rs_device_info none = {.index = -1};
    const rs_device_info *info = dev ? &dev->info : &none;
    fprintf(f, "], \"device\": {\"index\": %d, \"name\": ", info->index);
    rs_json_string(f, info->name, RS_JSON_PLAIN);
    fprintf(f, ", \"uuid\": ");
    rs_json_string(f, info->uuid, RS_JSON_PLAIN);
    fprintf(f, ", \"total_bytes\": %llu", (unsigned long long)info->total_bytes);
    const rs_device_share *sh = &use.share;
    if (sh->listed) {
        fprintf(f, ", \"processes\": %u, \"others_bytes\": %llu", sh->processes,
                (unsigned long long)sh->others_bytes);
        if (sh->others_unknown) fprintf(f, ", \"others_unknown\": %u", sh->others_unknown);
        if (sh->own_known) fprintf(f, ", \"own_bytes\": %llu", (unsigned long long)sh->own_bytes);
    }
    fprintf(f, "}, \"device_used_bytes\": %llu, \"framework_reserved_bytes\": %llu, "
               "\"outside_bytes_peak\": %llu, \"outside_bytes_end\": %llu, \"outside_of\": \"%s\"",
            (unsigned long long)use.device_used, (unsigned long long)reserved,
            (unsigned long long)peak, (unsigned long long)outside, rs_outside_of_name(use.of));
    if (use.of == RS_OUTSIDE_DEVICE) {
        fprintf(f, ", \"outside_why\": \"%s\", \"outside_why_detail\": ",
                rs_outside_why_name((unsigned)use.why));
        rs_json_string(f, use.detail, RS_JSON_PLAIN);
    }
    fprintf(f, ", \"outside_labels\": {");
    rs_outside_label labels[RS_MAX_OUTSIDE_LABELS];
    size_t nl = rs_outside_labels_copy(labels);
    for (size_t i = 0; i < nl; i++) {
        fprintf(f, "%s", i ? ", " : "");
        rs_json_string(f, labels[i].label, RS_JSON_PLAIN);
        fprintf(f, ": %llu", (unsigned long long)labels[i].bytes);
    }
    fprintf(f, "}, \"memory_limit_bytes\": 0, \"recorder\": {\"max_entries\": %llu, \"stacks\": \"%s\"}}",
            (unsigned long long)rt->opts.max_entries, rs_ext_stacks_name(rt->opts.stacks));
    if (fclose(f) != 0) {
        free(text);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "ranksnap: no memory for the snapshot's metadata");
    }
    *out = text;
    return RANKSNAP_OK;
}

/* ---- the snapshot -------------------------------------------------------------------------- */

typedef struct rs_ext_bytes {
    char *buf;
    size_t len;
    int calls;
} rs_ext_bytes;

/* dump's put(): the file's bytes, copied (they belong to the framework's object). */
static void rs_ext_put(void *arg, const void *buf, size_t len)
{
    rs_ext_bytes *b = arg;
    if (b->calls++ || !buf) return;
    b->buf = malloc(len ? len : 1);
    if (b->buf) {
        memcpy(b->buf, buf, len);
        b->len = len;
    }
}

/* rs_ext_mu, waiting at most `budget_ms` (< 0: for ever). 0 when not taken. */
static int rs_ext_lock(int budget_ms)
{
    if (budget_ms < 0) return pthread_mutex_lock(&rs_ext_mu) == 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += budget_ms / 1000;
    ts.tv_nsec += (long)(budget_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return pthread_mutex_timedlock(&rs_ext_mu, &ts) == 0;
}

static ranksnap_status rs_ext_snapshot(rs_runtime *rt, const char *reason, int budget_ms,
                                       char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    if (!rs_ext_lock(budget_ms))
        return rs_error(RANKSNAP_ERR_UNSUPPORTED, "%s: another dump of this rank is still running", reason);
    ranksnap_status st = RANKSNAP_OK;
    char *meta = NULL;
    rs_ext_bytes b = {NULL, 0, 0};
    if (!rs_ext_have_ops) {
        st = rs_error(RANKSNAP_ERR_UNSUPPORTED, "RANKSNAP_RECORDER=torch: no framework recorder is "
                      "registered (ranksnap's Python glue registers PyTorch's when torch is imported)");
    } else if ((st = rs_ext_meta_locked(rt, reason, &meta)) == RANKSNAP_OK) {
        uint64_t t0 = rs_now_us();
        if (rs_ext_ops.dump(rs_ext_ops.ctx, meta, &b, rs_ext_put) != 0 || b.calls != 1)
            st = rs_error(RANKSNAP_ERR_IO, "rank %d: the framework's snapshot failed (see above)", rt->rank);
        else if (!b.buf)
            st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "rank %d: no memory for the snapshot's %zu bytes",
                          rt->rank, b.len);
        else
            RS_INFO(RS_SUB_DUMP, "%s: the framework's snapshot, %zu bytes in %.1f ms", reason, b.len,
                    (double)(rs_now_us() - t0) / 1000.0);
    }
    pthread_mutex_unlock(&rs_ext_mu);
    free(meta);
    if (st != RANKSNAP_OK) {
        free(b.buf);
        return st;
    }
    *buf = b.buf;
    *len = b.len;
    return RANKSNAP_OK;
}

ranksnap_status rs_external_snapshot(rs_runtime *rt, const char *reason, char **buf, size_t *len)
{
    return rs_ext_snapshot(rt, reason, -1, buf, len);
}

/* ---- files --------------------------------------------------------------------------------- */

int rs_external_file_name(int rank, char *buf, size_t n)
{
    int attempt = rs_launcher_attempt();
    const char *ext = rs_external_native() ? "rsnap" : "pickle";
    int w = attempt > 0 ? snprintf(buf, n, "rank-%05d.a%d.%s", rank, attempt, ext)
                        : snprintf(buf, n, "rank-%05d.%s", rank, ext);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

ranksnap_status rs_external_dump_snapshot(rs_runtime *rt, int complete, char **buf, size_t *len)
{
    /* the crash path shares the post-mortem budget with the dump itself */
    return rs_ext_snapshot(rt, complete ? "dump" : "signal", complete ? -1 : rt->opts.dump_timeout_ms / 2,
                           buf, len);
}

/* ---- the framework's process group --------------------------------------------------------- */

int rs_external_group_gather(const void *buf, size_t len, int timeout_s, void *arg,
                             void (*take)(void *arg, int rank, const void *buf, size_t len))
{
    pthread_mutex_lock(&rs_ext_mu);
    ranksnap_recorder_ops ops = rs_ext_ops;
    int have = rs_ext_have_ops && ops.gather;
    pthread_mutex_unlock(&rs_ext_mu);
    /* outside the mutex: a collective may wait for the slowest rank, up to the timeout */
    return have ? ops.gather(ops.ctx, buf, len, timeout_s, arg, take) : -1;
}

int rs_external_group_bcast(void *buf, size_t len, int timeout_s)
{
    pthread_mutex_lock(&rs_ext_mu);
    ranksnap_recorder_ops ops = rs_ext_ops;
    int have = rs_ext_have_ops && ops.bcast;
    pthread_mutex_unlock(&rs_ext_mu);
    return have ? ops.bcast(ops.ctx, buf, len, timeout_s) : -1;
}
