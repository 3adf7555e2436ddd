/*
 * dump.c — this rank's files on disk: RANKSNAP_DIR made and checked safely, which names are this
 * job's (never another job's file removed or replaced), the snapshot encoded at one instant under
 * the allocator lock and written atomically, ranksnap_dump, and the dumps of the out-of-memory
 * and fatal-signal paths.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
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
#include "comms.h"
#include "dump.h"
#include "errors.h"
#include "external.h"
#include "file_read.h"
#include "format.h"
#include "log.h"
#include "outside.h"
#include "recorder.h"
#include "ring_file.h"
#include "reader_lib.h"
#include "rsnap_decode.h"
#include "snapshot_encode.h"
#include "stacks.h"
#include "state.h"
#include "step_how.h"
#include "symbols.h"
#include "text.h"
#include "world.h"

/* The checks ssh makes of a user's files, made once per process (ensure_dir runs at every
 * dump): a parent of RANKSNAP_DIR that is a symbolic link, or that every user may write without
 * the sticky bit, lets someone else decide where the snapshots go; said, not refused, since
 * /scratch -> /lustre/scratch is common. */
static atomic_int rs_dir_warned;

static void rs_dump_warn_parents(const char *dir)
{
    char p[RS_PATH_MAX];
    snprintf(p, sizeof p, "%s", dir);
    for (char *c = p + 1; *c; c++) {
        if (*c != '/') continue;
        *c = '\0';
        struct stat sb;
        if (lstat(p, &sb) == 0) {
            if (S_ISLNK(sb.st_mode)) {
                char to[RS_PATH_MAX];
                ssize_t n = readlink(p, to, sizeof to - 1);
                to[n > 0 ? n : 0] = '\0';
                RS_WARN(RS_SUB_DUMP, "RANKSNAP_DIR=%s: its parent %s is a symbolic link (to %s): "
                        "whoever can change that link decides where snapshots go", dir, p, to);
            } else if (S_ISDIR(sb.st_mode) && (sb.st_mode & S_IWOTH) && !(sb.st_mode & S_ISVTX)) {
                RS_WARN(RS_SUB_DUMP, "RANKSNAP_DIR=%s: its parent %s is writable by every user "
                        "(mode %04o, no sticky bit): anyone can move the directory away", dir, p,
                        (unsigned)(sb.st_mode & 07777));
            }
        }
        *c = '/';
    }
}

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
    /* anyone could remove or replace the snapshots in it (ssh refuses such a ~/.ssh) */
    if ((sb.st_mode & S_IWOTH) && !(sb.st_mode & S_ISVTX))
        return rs_error(RANKSNAP_ERR_IO, "RANKSNAP_DIR=%s: writable by every user (mode %04o) "
                        "without the sticky bit, so anyone could remove or replace the snapshots; "
                        "refusing to write there (chmod o-w, or another directory)", dir,
                        (unsigned)(sb.st_mode & 07777));
    if (atomic_exchange(&rs_dir_warned, 1) == 0) {
        if (sb.st_mode & S_IWOTH)
            RS_WARN(RS_SUB_DUMP, "RANKSNAP_DIR=%s: writable by every user (mode %04o; the sticky "
                    "bit keeps them from removing this user's files, not from planting their own); "
                    "a directory of this user's only is safer", dir, (unsigned)(sb.st_mode & 07777));
        rs_dump_warn_parents(dir);
    }
    return RANKSNAP_OK;
}

/* ---- whose files: this job's names in RANKSNAP_DIR --------------------------------------------
 *
 * A job is its job id (rt->job: RANKSNAP_JOB, else the batch system's, else local-HOST-PPID),
 * which every .rsnap and .ring carries, and a PyTorch job's pickle in its "ranksnap" key. A job
 * never removes or replaces a file another job wrote: at init each rank looks at its plain
 * names, rank-RRRRR.rsnap, rank-RRRRR.ring and in a PyTorch job rank-RRRRR[.aK].pickle; when
 * one holds another job's file (or one that cannot be read, whose owner is unknown), this
 * rank's files take the job-qualified names rank-RRRRR.job-TAG.rsnap (.ring,
 * rank-RRRRR[.aK].job-TAG.pickle), and so do rank 0's report.txt, .json and .html
 * (report.job-TAG.txt ...). The tag is the job's, so rank 0 of a PyTorch job finds its peers'
 * files under either name (external_gather.c). A plain name first written while
 * the job runs is created without replacing (rs_atomic_file_create): if another job got there
 * first, this one turns to its qualified name then. A name this process wrote, or a plain name
 * whose file is this job's (a requeued job, RANKSNAP_JOB set by hand), is replaced as before. */

static pthread_mutex_t rs_names_mu = PTHREAD_MUTEX_INITIALIZER;

int rs_dump_path_of(const rs_runtime *rt, const char *name, int qualified, char *buf, size_t n)
{
    const char *ext = strrchr(name, '.');
    int w = !qualified || !ext
                ? snprintf(buf, n, "%s/%s", rt->opts.dir, name)
                : snprintf(buf, n, "%s/%.*s.job-%s%s", rt->opts.dir, (int)(ext - name), name,
                           rt->job_tag, ext);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

static void rs_dump_rank_name(const rs_runtime *rt, const char *ext, char *buf, size_t n)
{
    snprintf(buf, n, "rank-%05d.%s", rt->rank, ext);
}

/* This rank's snapshot: rank-RRRRR.rsnap, or in a PyTorch job the framework's pickle
 * (rank-RRRRR[.aK].pickle, external.c). */
static void rs_dump_snapshot_name(const rs_runtime *rt, char *buf, size_t n)
{
    if (!rs_external_mode() || rs_external_file_name(rt->rank, buf, n) != 0)
        rs_dump_rank_name(rt, "rsnap", buf, n);
}

/* The job of the snapshot at `path` (a .rsnap, or with `pickle` a PyTorch job's pickle, read by
 * the reader library: its "ranksnap" key); 1 and *job (malloc'ed) when it could be read. A file
 * that does not decode is no error here (its owner is unknown), so the thread's detail is kept. */
static int rs_dump_snapshot_job(const char *path, int pickle, char **job)
{
    rs_snap *s = NULL;
    char kept[1024];
    snprintf(kept, sizeof kept, "%s", ranksnap_last_error());
    int ok;
    if (pickle) {
        char *buf = NULL;
        size_t len = 0;
        ok = rs_file_read(path, 0, &buf, &len) == RANKSNAP_OK &&
             rs_reader_lib_decode(buf, len, path, &s) == RANKSNAP_OK;
        free(buf);
    } else {
        ok = rs_rsnap_decode_file(path, &s) == RANKSNAP_OK;
    }
    rs_error(RANKSNAP_OK, "%s", kept);
    *job = ok && s->job ? strdup(s->job) : NULL;
    rs_snap_free(s);
    return *job != NULL;
}

ranksnap_status rs_dump_claim(rs_runtime *rt)
{
    rs_text_file_tag(rt->job_tag, sizeof rt->job_tag, rt->job);
    rs_atomic_file_set_owner(rt->job, rt->host);
    rt->names_qualified = 0;
    rt->plain_snap_ours = rt->plain_ring_ours = 0;
    rt->n_written = 0;
    struct stat sb;
    if (lstat(rt->opts.dir, &sb) != 0) return RANKSNAP_OK; /* made at the first write: empty */
    char name[64], snap[64], path[RS_PATH_MAX + 128], other[RS_PATH_MAX + 1024] = "";
    rs_dump_snapshot_name(rt, snap, sizeof snap);

    rs_dump_rank_name(rt, "ring", name, sizeof name);
    if (rs_dump_path_of(rt, name, 0, path, sizeof path) == 0 && lstat(path, &sb) == 0) {
        rs_ring_owner o;
        if (rs_ring_file_peek(path, &o) != 0) {
            snprintf(other, sizeof other, "%s (not a ring this job can read)", path);
        } else if (strcmp(o.job, rt->job) == 0) {
            rt->plain_ring_ours = 1;
        } else {
            int here = strcmp(o.host, rt->host) == 0;
            int alive = here && o.pid > 0 && (kill((pid_t)o.pid, 0) == 0 || errno == EPERM);
            snprintf(other, sizeof other, "%s (job %s, pid %lld on %s%s)", path, o.job,
                     (long long)o.pid, o.host,
                     o.closed ? ", finished" : alive ? ", running" : here ? ", dead: its history" : "");
        }
    }
    /* the .rsnap of a C program; in a PyTorch job its pickle too (it writes no .rsnap) */
    rs_dump_rank_name(rt, "rsnap", name, sizeof name);
    for (int k = 0; k < (strcmp(snap, name) != 0 ? 2 : 1); k++) {
        const char *n = k ? snap : name;
        if (rs_dump_path_of(rt, n, 0, path, sizeof path) != 0 || lstat(path, &sb) != 0) continue;
        char *job = NULL;
        if (rs_dump_snapshot_job(path, k && rs_external_pickles(), &job) && strcmp(job, rt->job) == 0)
            rt->plain_snap_ours |= strcmp(n, snap) == 0;
        else if (!other[0])
            snprintf(other, sizeof other, "%s (%s%s)", path,
                     job ? "job " : "not a snapshot this job can read", job ? job : "");
        free(job);
    }
    if (other[0]) {
        rt->names_qualified = 1;
        if (rs_dump_path_of(rt, snap, 1, path, sizeof path) != 0) snprintf(path, sizeof path, "%s", snap);
        RS_WARN(RS_SUB_DUMP, "RANKSNAP_DIR=%s holds another job's file, %s; this job (%s) leaves "
                "it alone and writes %s%s instead", rt->opts.dir, other, rt->job,
                rs_text_basename(path), rs_external_pickles() ? "" : " (and .ring)");
    }
    /* what a SIGKILL of this job left mid-write on this host (only those: atomic_file.h) */
    static const char *const exts[] = {"rsnap", "ring", NULL};
    for (size_t e = 0; e < 3; e++) {
        if (exts[e]) rs_dump_rank_name(rt, exts[e], name, sizeof name);
        else if (rs_external_mode()) snprintf(name, sizeof name, "%s", snap);
        else break;
        for (int q = 0; q < 2; q++)
            if (rs_dump_path_of(rt, name, q, path, sizeof path) == 0) rs_atomic_file_clean_stale(path);
    }
    if (rt->rank == 0) {
        static const char *const reports[] = {"report.txt", "report.json", "report.html"};
        for (size_t i = 0; i < sizeof reports / sizeof reports[0]; i++)
            for (int q = 0; q < 2; q++)
                if (rs_dump_path_of(rt, reports[i], q, path, sizeof path) == 0)
                    rs_atomic_file_clean_stale(path);
    }
    return RANKSNAP_OK;
}

ranksnap_status rs_dump_reidentify(rs_runtime *rt, int rank, int world_size, const char *job)
{
    pthread_mutex_lock(&rs_names_mu);
    int wrote = rt->ring_file != NULL || atomic_load(&rt->range_dumped);
    for (size_t i = 0; i < rt->n_written && !wrote; i++) wrote = rt->written[i].ours;
    ranksnap_status st = RANKSNAP_OK;
    if (wrote) {
        st = rs_error(RANKSNAP_ERR_UNSUPPORTED, "rank %d of %d (job %s) wrote its files already; "
                      "they are not renamed to rank %d of %d (job %s)", rt->rank, rt->world_size,
                      rt->job, rank, world_size, job);
    } else {
        RS_INFO(RS_SUB_INIT, "rank %d of %d (job %s) from the framework's process group, instead "
                "of rank %d of %d (job %s)", rank, world_size, job, rt->rank, rt->world_size, rt->job);
        rt->rank = rank;
        rt->world_size = world_size;
        snprintf(rt->job, sizeof rt->job, "%s", job);
        st = rs_dump_claim(rt);
    }
    pthread_mutex_unlock(&rs_names_mu);
    return st;
}

ranksnap_status rs_dump_open_ring(rs_runtime *rt, const rs_ring_identity *id, rs_ring_file **out)
{
    *out = NULL;
    RS_CHECK(rs_dump_ensure_dir(rt->opts.dir));
    char name[64], path[RS_PATH_MAX + 128];
    rs_dump_rank_name(rt, "ring", name, sizeof name);
    for (int q = rt->names_qualified; q < 2; q++) {
        if (rs_dump_path_of(rt, name, q, path, sizeof path) != 0)
            return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "RANKSNAP_DIR=%s: path too long", rt->opts.dir);
        int existed = 0;
        /* the qualified name is this job's by its name; the plain one only if init saw so */
        int replace = q ? 1 : rt->plain_ring_ours;
        ranksnap_status st = rs_ring_file_open(path, replace, rt->opts.max_entries, id, out, &existed);
        if (st == RANKSNAP_OK || !existed || q) return st;
        /* another job created the plain name since init: from now on this job's are qualified */
        pthread_mutex_lock(&rs_names_mu);
        rt->names_qualified = 1;
        pthread_mutex_unlock(&rs_names_mu);
        RS_WARN(RS_SUB_DUMP, "RANKSNAP_DIR=%s: %s was just created by another job; this job (%s) "
                "writes rank-%05d.job-%s.ring (and .rsnap) instead", rt->opts.dir, path, rt->job,
                rt->rank, rt->job_tag);
    }
    return RANKSNAP_ERR_IO;
}

/* The entry of `name` in the table of names this process wrote, added when missing; NULL when the
 * table is full (every write is then a first one: created, never replacing). rs_names_mu held. */
static rs_dump_name *rs_dump_entry(rs_runtime *rt, const char *name)
{
    for (size_t i = 0; i < rt->n_written; i++)
        if (strcmp(rt->written[i].name, name) == 0) return &rt->written[i];
    if (rt->n_written == RS_DUMP_MAX_NAMES || strlen(name) >= sizeof rt->written[0].name) return NULL;
    rs_dump_name *e = &rt->written[rt->n_written++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->qualified = rt->names_qualified;
    /* a plain snapshot of this job found at init (rank-RRRRR.rsnap, .pickle) is this job's to
     * replace */
    char mine[64];
    rs_dump_snapshot_name(rt, mine, sizeof mine);
    e->ours = !e->qualified && rt->plain_snap_ours && strcmp(name, mine) == 0;
    return e;
}

ranksnap_status rs_dump_write_file(rs_runtime *rt, const char *name, const void *buf, size_t len,
                                   int durable)
{
    RS_CHECK(rs_dump_ensure_dir(rt->opts.dir));
    char path[RS_PATH_MAX + 128];
    /* The crash path (not durable) may run while the thread the signal stopped holds the lock in
     * the middle of a dump of its own: it waits a bounded time, then goes on with what the table
     * says, read without the lock (entries are only ever added, and their flags only set). */
    int locked = 1;
    if (durable) {
        pthread_mutex_lock(&rs_names_mu);
    } else {
        int tries = 0;
        while ((locked = pthread_mutex_trylock(&rs_names_mu) == 0) == 0 && tries++ < 100) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    rs_dump_name scratch = {"", rt->names_qualified, 0};
    rs_dump_name *e = NULL;
    if (locked) {
        e = rs_dump_entry(rt, name);
    } else {
        for (size_t i = 0; i < rt->n_written && !e; i++)
            if (strcmp(rt->written[i].name, name) == 0) e = &rt->written[i];
        if (e) scratch = *e;
        e = NULL;
    }
    if (!e) e = &scratch;
    ranksnap_status st;
    if (rs_dump_path_of(rt, name, e->qualified, path, sizeof path) != 0) {
        st = rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "RANKSNAP_DIR=%s: path too long", rt->opts.dir);
    } else if (e->qualified || e->ours) {
        st = rs_atomic_file_write_ex(path, buf, len, durable);
    } else {
        int existed = 0;
        st = rs_atomic_file_create(path, buf, len, durable, &existed);
        if (st != RANKSNAP_OK && existed) {
            char theirs[RS_PATH_MAX + 128];
            snprintf(theirs, sizeof theirs, "%s", path);
            e->qualified = 1;
            if (rs_dump_path_of(rt, name, 1, path, sizeof path) != 0) {
                st = rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "RANKSNAP_DIR=%s: path too long", rt->opts.dir);
            } else {
                RS_WARN(RS_SUB_DUMP, "%s is another job's (or an earlier run's) file; this job (%s) "
                        "leaves it alone and writes %s instead", theirs, rt->job, path);
                st = rs_atomic_file_write_ex(path, buf, len, durable);
            }
        }
    }
    if (st == RANKSNAP_OK) e->ours = 1;
    if (locked) pthread_mutex_unlock(&rs_names_mu);
    return st;
}

/* ranksnap_dump(PATH) may name this rank's own file (rank-RRRRR.rsnap, or .pickle, in
 * RANKSNAP_DIR, however the path is spelt): the file is then this process's, and the write at
 * finalize replaces it instead of taking it for another job's. */
static void rs_dump_note_own_path(rs_runtime *rt, const char *path)
{
    char name[64], plain[RS_PATH_MAX + 128];
    rs_dump_snapshot_name(rt, name, sizeof name);
    if (rs_dump_path_of(rt, name, 0, plain, sizeof plain) != 0) return;
    struct stat a, b;
    if (stat(path, &a) != 0 || stat(plain, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        return;
    pthread_mutex_lock(&rs_names_mu);
    rs_dump_name *e = rs_dump_entry(rt, name);
    if (e && !e->qualified) e->ours = 1;
    pthread_mutex_unlock(&rs_names_mu);
}

ranksnap_status rs_dump_write_snapshot(rs_runtime *rt, const void *buf, size_t len, int durable)
{
    char name[64];
    rs_dump_snapshot_name(rt, name, sizeof name);
    ranksnap_status st = rs_dump_write_file(rt, name, buf, len, durable);
    if (st == RANKSNAP_OK && rt->ring_file) rs_ring_file_snapshot_written(rt->ring_file, rs_now_us());
    return st;
}

ranksnap_status rs_dump_write_range_snapshot(rs_runtime *rt, const void *buf, size_t len)
{
    if (rt->opts.write != RS_WRITE_ALL && !(rt->opts.write == RS_WRITE_RANK0 && rt->rank == 0))
        return RANKSNAP_OK;
    ranksnap_status st = rs_dump_write_snapshot(rt, buf, len, 1);
    if (st != RANKSNAP_OK) RS_WARN(RS_SUB_DUMP, "%s", ranksnap_last_error());
    return st;
}

/* ---- dump ----------------------------------------------------------------------------------- */

static int rs_segment_addr_cmp(const void *x, const void *y)
{
    uint64_t a = ((const rs_segment_info *)x)->addr, b = ((const rs_segment_info *)y)->addr;
    return a < b ? -1 : a > b;
}

/* Every device's allocator state as one, segments in address order (each names its device); the
 * lock held. */
static ranksnap_status rs_dump_take_state(rs_runtime *rt, rs_alloc_state *out)
{
    size_t n_dev = rs_devices_count(rt);
    rs_alloc_state parts[RS_MAX_DEVICES];
    memset(parts, 0, sizeof parts);
    ranksnap_status st = RANKSNAP_OK;
    size_t total = 0;
    for (size_t i = 0; i < n_dev && st == RANKSNAP_OK; i++) {
        st = rs_alloc_state_take_locked(rs_devices_at(rt, i)->alloc, &parts[i]);
        total += parts[i].n_segments;
    }
    if (st == RANKSNAP_OK && n_dev == 1) {
        *out = parts[0];
        return RANKSNAP_OK;
    }
    rs_segment_info *segs = st == RANKSNAP_OK ? calloc(total ? total : 1, sizeof *segs) : NULL;
    if (st == RANKSNAP_OK && !segs)
        st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "snapshot: out of host memory for %zu segments", total);
    if (st != RANKSNAP_OK) {
        for (size_t i = 0; i < n_dev; i++) rs_alloc_state_free(&parts[i]);
        return st;
    }
    size_t k = 0;
    for (size_t i = 0; i < n_dev; i++) {
        /* the blocks move to the combined state; only the parts' arrays go */
        if (parts[i].n_segments) memcpy(segs + k, parts[i].segments, parts[i].n_segments * sizeof *segs);
        k += parts[i].n_segments;
        free(parts[i].segments);
    }
    qsort(segs, total, sizeof *segs, rs_segment_addr_cmp);
    out->segments = segs;
    out->n_segments = total;
    return RANKSNAP_OK;
}

/* Encodes this rank's snapshot into a malloc'ed buffer: state, history and stacks taken at one
 * instant under the runtime's lock. */
ranksnap_status rs_dump_encode(rs_runtime *rt, int complete, char **out, size_t *out_len)
{
    uint64_t t0 = rs_now_us();
    rs_snapshot_src src;
    memset(&src, 0, sizeof src);
    rs_snapshot_comm *comms = NULL;
    ranksnap_stats stats;
    rs_devices_stats(rt, &stats);

    /* the devices used, each with its own totals; the last OOM of any of them */
    size_t n_dev = rs_devices_count(rt);
    rs_snapshot_device devs[RS_MAX_DEVICES];
    rs_oom_info oom;
    memset(&oom, 0, sizeof oom);
    int has_oom = 0, oom_device = -1;
    for (size_t i = 0; i < n_dev; i++) {
        rs_rt_device *d = rs_devices_at(rt, i);
        memset(&devs[i], 0, sizeof devs[i]);
        devs[i].info = d->info;
        devs[i].memory_limit = rs_alloc_memory_limit(d->alloc);
        rs_alloc_get_stats(d->alloc, &devs[i].stats);
        rs_oom_info o;
        if (rs_alloc_last_oom(d->alloc, &o) && (!has_oom || o.time_us >= oom.time_us)) {
            oom = o;
            has_oom = 1;
            oom_device = d->index;
        }
    }
    rs_rt_device *primary = rs_devices_primary(rt);

    rs_alloc_state state;
    memset(&state, 0, sizeof state);
    rs_outside_label labels[RS_MAX_OUTSIDE_LABELS];
    rs_symbols sym;
    memset(&sym, 0, sizeof sym);
    char *buf = NULL;
    size_t len = 0;

    /* One instant: state, history and stacks under the lock. Encoding is done under it too, so
     * that the recorder is not overwritten while it is read. */
    rs_rt_lock(rt);
    ranksnap_status st = rs_dump_take_state(rt, &state);
    if (st == RANKSNAP_OK && rt->stacks) st = rs_symbols_resolve(rt->stacks, &sym);
    if (st == RANKSNAP_OK) {
        rs_outside_use use;
        memset(&use, 0, sizeof use);
        uint64_t outside = rs_outside_sample(rt, stats.reserved_bytes, primary, 1, &use);
        stats.events_recorded = rs_recorder_total(rt->recorder);
        stats.events_dropped = rs_recorder_dropped(rt->recorder);
        src.rank = rt->rank;
        src.world_size = rt->world_size;
        src.host = rt->host;
        src.pid = (int64_t)getpid();
        src.job = rt->job;
        src.steps_from = rs_steps_how(rt);
        src.recorded_by = rs_external_native_why();
        if (primary) {
            src.device = primary->info;
        } else {
            memset(&src.device, 0, sizeof src.device);
            src.device.index = -1; /* no allocation reached ranksnap: no device to name */
        }
        src.n_devices = n_dev;
        src.devices = devs;
        src.backend = rt->is_cuda ? "cuda" : "sim";
        src.options = &rt->opts;
        src.memory_limit = rt->memory_limit;
        src.complete = complete;
        src.n_ranges = rt->n_ranges;
        src.ranges = rt->ranges;
        src.current_step = rt->step;
        src.stats = stats;
        src.device_used_bytes = use.device_used;
        /* the highest sample of the kind the end is: the process's own, or the device's */
        src.outside_bytes_peak = rt->outside_peak[use.of] > outside ? rt->outside_peak[use.of] : outside;
        src.outside_bytes_end = outside;
        src.outside_of = use.of;
        src.outside_why = use.why;
        src.outside_why_detail = use.detail;
        src.share = use.share;
        src.n_outside_labels = rs_outside_labels_copy(labels);
        src.outside_labels = labels;
        if (rs_external_native()) rs_outside_async(&src.async_bytes_peak, &src.async_reserved_at_peak);
        /* the driver's OOM (a request no allocator of ranksnap's served) when it is the last */
        int drv = rt->drv_oom.has && (!has_oom || rt->drv_oom.info.time_us >= oom.time_us);
        if (drv) {
            oom = rt->drv_oom.info;
            oom_device = rt->drv_oom.device;
            has_oom = 1;
        }
        stats.num_ooms += rt->drv_oom.count;
        src.stats = stats;
        src.has_oom = has_oom;
        if (drv) {
            src.oom = oom;
            src.oom_device = oom_device;
            src.oom_step = rt->drv_oom.step;
            src.oom_stack_id = rt->drv_oom.stack_id;
        } else if (has_oom) {
            src.oom = oom;
            src.oom_device = oom_device;
            /* the step of the failure, not of this dump: a range's end writes the snapshot again */
            src.oom_step = oom.step;
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
        rs_comms_moment(); /* the communicators alive now are in a range dumped mid-way */
        st = rs_comms_copy(&comms, &src.n_comms, &src.comms_left_out);
        src.comms = comms;
        src.clock_offset_us = rs_coord_clock_offset_us(rt->coord);
        src.clock_uncertainty_us = rs_coord_clock_uncertainty_us(rt->coord);
        rs_state_end(&src.end);
        if (st == RANKSNAP_OK) st = rs_snapshot_encode(&src, &buf, &len);
    }
    rs_rt_unlock(rt);
    free(comms);
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
    if (rs_state_forked()) return rs_state_not_running(__func__, 0); /* a pid of its own, no handler */
    char *buf = NULL;
    size_t len = 0;
    /* PyTorch jobs: the framework's snapshot, a pickle (external.c), under the same names' rule */
    if (rs_external_pickles()) RS_CHECK(rs_external_dump_snapshot(rt, complete, &buf, &len));
    else RS_CHECK(rs_dump_encode(rt, complete, &buf, &len));
    /* the crash path (complete = 0) skips the fsyncs: see rs_atomic_file_write_ex */
    ranksnap_status st = path ? rs_atomic_file_write_ex(path, buf, len, complete)
                              : rs_dump_write_snapshot(rt, buf, len, complete);
    free(buf);
    if (st == RANKSNAP_OK) {
        if (!path) atomic_store(&rt->range_dumped, 1);
        RS_INFO(RS_SUB_DUMP, "dump: %s, %zu bytes", path ? path : "this rank's snapshot", len);
        if (path && rt->ring_file) rs_ring_file_snapshot_written(rt->ring_file, rs_now_us());
        if (path) rs_dump_note_own_path(rt, path);
    }
    return st;
}

ranksnap_status ranksnap_dump(const char *path)
{
    /* passing calls through, there is nothing to write: a no-op, as every recording call then */
    if (!rs_state_get() && rs_passthrough_on()) return RANKSNAP_OK;
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
        ranksnap_abandon();
        if (rs_world_up()) rs_state_note_end(RS_END_MPI_ABORT, 3); /* else abort(): a signal */
        rs_world_abort(3);
    }
    rs_error(RANKSNAP_ERR_OUT_OF_MEMORY, "%s", msg);
}

/* On the process's way out (a fatal signal, exit, MPI_Abort): this rank's snapshot, noted in the
 * end record as begun, then written or given up. The allocator lock may be held by the very
 * thread the signal stopped, or that exit() runs on top of (it would never be released): probe
 * it for half the timeout and give up if it stays taken — the ring file (RANKSNAP_RING=mmap)
 * still holds the history then. */
int rs_dump_on_the_way_out(rs_runtime *rt, int complete, int only_open_range, const char *why)
{
    int budget_ms = rt->opts.dump_timeout_ms / 2, got = 0;
    for (int waited = 0; waited <= budget_ms; waited++) {
        if (rs_rt_trylock(rt)) {
            got = 1;
            break;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (!got) {
        rs_state_note_end(RS_END_DUMP_BEGAN | RS_END_DUMP_GAVE_UP, 0);
        RS_WARN(RS_SUB_DUMP, "%s: the allocator is locked by a stopped thread; %s", why,
                rt->ring_file ? "the ring file keeps the history" : "no snapshot written");
        return 0;
    }
    /* a range whose snapshot is on disk already (an OOM's, a signal's) is not written again */
    int wanted = !only_open_range || (rt->in_range && !atomic_load(&rt->range_dumped));
    if (rt->ring_file) rs_ring_file_steps_from(rt->ring_file, rs_steps_how(rt)); /* steps.c */
    rs_rt_unlock(rt);
    if (!wanted) return 0;
    rs_state_note_end(RS_END_DUMP_BEGAN, 0);
    if (rs_dump_write(NULL, complete) != RANKSNAP_OK) {
        RS_WARN(RS_SUB_DUMP, "%s: dump failed: %s", why, ranksnap_last_error());
        return 0;
    }
    rs_state_note_end(RS_END_DUMP_DONE, 0);
    RS_INFO(RS_SUB_DUMP, "%s: snapshot written", why);
    return 1;
}

/* The dumper thread, on a fatal signal (which its handler noted as how the process ends). */
void rs_dump_on_signal(int sig)
{
    rs_runtime *rt = rs_state_get();
    if (!rt) return;
    char why[32];
    snprintf(why, sizeof why, "signal %d", sig);
    (void)rs_dump_on_the_way_out(rt, 0, 0, why);
}
