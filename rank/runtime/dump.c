/*
 * dump.c — this rank's snapshot on disk: RANKSNAP_DIR made safely, the snapshot encoded at one
 * instant under the allocator lock and written atomically, ranksnap_dump, and the dumps of the
 * out-of-memory and fatal-signal paths.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "clock.h"
#include "coord.h"
#include "dump.h"
#include "errors.h"
#include "external.h"
#include "log.h"
#include "outside.h"
#include "recorder.h"
#include "ring_file.h"
#include "snapshot_encode.h"
#include "stacks.h"
#include "state.h"
#include "symbols.h"
#include "world.h"

/* Creates RANKSNAP_DIR (0700) if it is missing; an existing one is used as it is. */
ranksnap_status rs_dump_ensure_dir(const char *dir)
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

/* ---- dump ----------------------------------------------------------------------------------- */

ranksnap_status rs_dump_default_path(char *buf, size_t n)
{
    RS_NEED(rt);
    RS_CHECK(rs_dump_ensure_dir(rt->opts.dir));
    int w = snprintf(buf, n, "%s/rank-%05d.rsnap", rt->opts.dir, rt->rank);
    if (w < 0 || (size_t)w >= n)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "RANKSNAP_DIR=%s: path too long", rt->opts.dir);
    return RANKSNAP_OK;
}

/* Encodes this rank's snapshot into a malloc'ed buffer: state, history and stacks taken at one
 * instant under the allocator lock. */
ranksnap_status rs_dump_encode(rs_runtime *rt, int complete, char **out, size_t *out_len)
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
        uint64_t outside = rs_outside_sample(rt, stats.reserved_bytes);
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

ranksnap_status rs_dump_write(const char *path, int complete)
{
    RS_NEED(rt);
    /* ranksnap torch mode: the framework's snapshot, rank-RRRRR.pickle (external.c) */
    if (rs_external_mode()) {
        RS_CHECK(rs_dump_ensure_dir(rt->opts.dir));
        return rs_external_dump_file(rt, path, complete);
    }
    char defpath[RS_PATH_MAX + 32];
    if (!path) {
        RS_CHECK(rs_dump_default_path(defpath, sizeof defpath));
        path = defpath;
    }
    char *buf = NULL;
    size_t len = 0;
    RS_CHECK(rs_dump_encode(rt, complete, &buf, &len));
    /* the crash path (complete = 0) skips the fsyncs: see rs_atomic_file_write_ex */
    ranksnap_status st = rs_atomic_file_write_ex(path, buf, len, complete);
    free(buf);
    if (st == RANKSNAP_OK) {
        RS_INFO(RS_SUB_DUMP, "dump: %s, %zu bytes", path, len);
        if (rt->ring_file) rs_ring_file_snapshot_written(rt->ring_file, rs_now_us());
    }
    return st;
}

ranksnap_status ranksnap_dump(const char *path)
{
    return rs_dump_write(path, 1);
}
/* Before the OOM error goes back to the program: the snapshot on disk (RANKSNAP_ON_OOM=dump),
 * and with dump-and-abort the whole job aborted so that every other rank dumps on the SIGTERM
 * mpirun sends it, instead of hanging in a collective with the rank that gave up. */
void rs_dump_after_oom(rs_runtime *rt)
{
    if (rt->opts.on_oom == RS_ON_OOM_NONE) return;
    /* the program reads the OOM message through ranksnap_last_error: keep it */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ranksnap_last_error());
    ranksnap_status st = rs_dump_write(NULL, 1);
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
void rs_dump_on_signal(int sig)
{
    rs_runtime *rt = rs_state_get();
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
    if (rs_dump_write(NULL, 0) == RANKSNAP_OK)
        RS_INFO(RS_SUB_DUMP, "signal %d: snapshot written", sig);
    else
        RS_WARN(RS_SUB_DUMP, "signal %d: dump failed: %s", sig, ranksnap_last_error());
}

