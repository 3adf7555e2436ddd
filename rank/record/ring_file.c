/*
 * ring_file.c — the event ring and the segment table in a file mapping that outlives the process.
 *
 * With RANKSNAP_RING=mmap the recorder writes its events straight into a MAP_SHARED mapping of
 * RANKSNAP_DIR/rank-RRRRR.ring. Pages of a shared file mapping belong to the page cache: what
 * was stored is in the file as soon as the store is done, even if the process is then killed
 * with SIGKILL, which no handler can catch. Nothing is msync'ed on the hot path — surviving the
 * process is the point, not surviving the machine. A clean finalize marks the file closed and
 * removes it; a file left behind is a rank that died, which `ranksnap report` recovers.
 *
 * Every block of the file is reserved (posix_fallocate) before it is mapped. A file only sized
 * with ftruncate is sparse: the first store to a page whose block the file system cannot find
 * (a full disk, a quota) is a SIGBUS in the middle of the program's cudaMalloc. Reserved up
 * front, a full disk is an error at init instead, and the runtime keeps the ring in memory.
 *
 * The file belongs to the job that created it (its job id is in the header): it is made whole
 * under a temporary name and then given its name without replacing anything (unless the caller
 * says the file there is this job's), and at close it is removed only if the name still points
 * at it. Which name to use, and whether an old file of this job may go, is the caller's decision
 * (rank/runtime/dump.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "clock.h"
#include "errors.h"
#include "ring_file.h"

_Static_assert(sizeof(rs_ring_header) <= RS_RING_HEADER_SIZE, "the ring header fits its page");
_Static_assert(sizeof(rs_ring_event) == sizeof(rs_event), "the file's events are the recorder's");
_Static_assert(sizeof(rs_ring_segment) == 24, "segment table entries are 24 bytes");

struct rs_ring_file {
    int fd;
    void *map;
    size_t len;
    rs_ring_header *hdr;
    rs_ring_segment *segs;
    rs_event *events;
    char path[RS_PATH_MAX + 128];
};

/* Removes `path` if it still is the file open on `fd`. */
static void rs_ring_unlink_own(const char *path, int fd)
{
    struct stat a, b;
    if (fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        unlink(path);
}

/* Undoes a half-made ring: its mapping, its descriptor and its temporary name. */
static ranksnap_status rs_ring_abandon(rs_ring_file *f, const char *tmp, ranksnap_status st)
{
    if (f->map && f->map != MAP_FAILED) munmap(f->map, f->len);
    close(f->fd);
    unlink(tmp);
    free(f);
    return st;
}

ranksnap_status rs_ring_file_open(const char *path, int replace, uint64_t capacity,
                                  const rs_ring_identity *id, rs_ring_file **out, int *existed)
{
    *out = NULL;
    if (existed) *existed = 0;
    size_t seg_bytes = RS_RING_MAX_SEGMENTS * sizeof(rs_ring_segment);
    if (capacity > (SIZE_MAX - RS_RING_HEADER_SIZE - seg_bytes) / sizeof(rs_event))
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "RANKSNAP_RING=mmap: %llu events do not fit a mapping",
                        (unsigned long long)capacity);
    rs_ring_file *f = calloc(1, sizeof *f);
    if (!f) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "RANKSNAP_RING=mmap: out of host memory");
    snprintf(f->path, sizeof f->path, "%s", path);
    f->len = RS_RING_HEADER_SIZE + seg_bytes + (size_t)capacity * sizeof(rs_event);
    /* Made whole under a temporary name (atomic_file.h's, which a later start of this job
     * removes if a SIGKILL leaves it), then given its name: a reader never finds a ring without
     * its header, whenever the process is killed. */
    char tmp[sizeof f->path + RS_ATOMIC_TMP_EXTRA];
    rs_atomic_file_temp_name(path, tmp, sizeof tmp);
    f->fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (f->fd < 0) {
        ranksnap_status st = rs_error(RANKSNAP_ERR_IO, "RANKSNAP_RING=mmap: %s: %s", tmp, strerror(errno));
        free(f);
        return st;
    }
    /* posix_fallocate returns the error instead of setting errno */
    int err = posix_fallocate(f->fd, 0, (off_t)f->len);
    if (err != 0)
        return rs_ring_abandon(f, tmp, rs_error(RANKSNAP_ERR_IO, "RANKSNAP_RING=mmap: %s: cannot reserve "
                                                "its %zu bytes on disk: %s", path, f->len, strerror(err)));
    f->map = mmap(NULL, f->len, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
    if (f->map == MAP_FAILED)
        return rs_ring_abandon(f, tmp, rs_error(RANKSNAP_ERR_IO, "RANKSNAP_RING=mmap: %s: mmap of %zu "
                                                "bytes failed: %s", path, f->len, strerror(errno)));
    f->hdr = f->map;
    f->segs = (rs_ring_segment *)((char *)f->map + RS_RING_HEADER_SIZE);
    f->events = (rs_event *)((char *)f->map + RS_RING_HEADER_SIZE + seg_bytes);
    rs_ring_header *h = f->hdr;
    rs_ring_header_init(h, capacity, RS_RING_MAX_SEGMENTS);
    h->rank = id->rank;
    h->world_size = id->world_size;
    h->pid = id->pid;
    snprintf(h->job, sizeof h->job, "%s", id->job ? id->job : "");
    snprintf(h->host, sizeof h->host, "%s", id->host ? id->host : "");
    snprintf(h->device_name, sizeof h->device_name, "%s", id->device_name ? id->device_name : "");
    h->device_total = id->device_total;
    h->memory_limit = id->memory_limit;
    h->clock_offset_us = id->clock_offset_us;
    if (id->alloc_conf) rs_alloc_conf_describe(id->alloc_conf, NULL, h->alloc_conf, sizeof h->alloc_conf);
    h->created_us = rs_now_us();
    memcpy(h->magic, RS_RING_MAGIC, sizeof h->magic);
    /* an old file of this job (the caller checked) is replaced; any other never is */
    if (rs_atomic_file_rename(tmp, path, replace) != 0) {
        int e = errno;
        if (existed && e == EEXIST) *existed = 1;
        return rs_ring_abandon(f, tmp, rs_error(RANKSNAP_ERR_IO, "RANKSNAP_RING=mmap: %s: %s", path,
                                                strerror(e)));
    }
    *out = f;
    return RANKSNAP_OK;
}

void rs_ring_file_pub(rs_ring_file *f, rs_ring_pub *pub)
{
    pub->ring = f->events;
    pub->total = (_Atomic uint64_t *)&f->hdr->total;
    pub->streams = f->hdr->streams;
    pub->n_streams = &f->hdr->n_streams;
    pub->streams_max = RS_RING_MAX_STREAMS;
}

void rs_ring_file_segment(rs_ring_file *f, int alloc, uint64_t addr, uint64_t size, uint32_t stream,
                          int is_small)
{
    if (!f) return;
    rs_ring_header *h = f->hdr;
    /* open addressing on the segment address: segment events are rare, the table is small */
    size_t n = RS_RING_MAX_SEGMENTS, i = (size_t)((addr >> 21) * 0x9e3779b97f4a7c15ull) % n;
    if (alloc) {
        for (size_t k = 0; k < n; k++, i = (i + 1) % n)
            if (f->segs[i].addr == 0 || f->segs[i].addr == UINT64_MAX) {
                f->segs[i].size = size;
                f->segs[i].stream = stream;
                f->segs[i].is_small = (uint32_t)is_small;
                f->segs[i].addr = addr; /* last: the entry counts once its address is there */
                h->reserved_bytes += size;
                return;
            }
        h->segments_overflow++;
        h->reserved_bytes += size;
        return;
    }
    for (size_t k = 0; k < n && f->segs[i].addr != 0; k++, i = (i + 1) % n)
        if (f->segs[i].addr == addr) {
            f->segs[i].addr = UINT64_MAX; /* a tombstone keeps later probes going */
            h->reserved_bytes -= f->segs[i].size < h->reserved_bytes ? f->segs[i].size : h->reserved_bytes;
            return;
        }
    if (h->segments_overflow) {
        h->segments_overflow--;
        h->reserved_bytes -= size < h->reserved_bytes ? size : h->reserved_bytes;
    }
}

void rs_ring_file_step(rs_ring_file *f, int64_t step, uint64_t allocated, uint64_t allocated_peak,
                       uint64_t reserved_peak)
{
    if (!f) return;
    rs_ring_header *h = f->hdr;
    h->step = step;
    h->allocated_at_step = allocated;
    h->allocated_peak_at_step = allocated_peak;
    h->reserved_peak_at_step = reserved_peak;
    /* the step event itself is appended right after this: it is event number `total` */
    h->step_total = atomic_load_explicit((_Atomic uint64_t *)&h->total, memory_order_acquire);
}

void rs_ring_file_set_device(rs_ring_file *f, const char *name, uint64_t total)
{
    if (!f) return;
    snprintf(f->hdr->device_name, sizeof f->hdr->device_name, "%s", name ? name : "");
    f->hdr->device_total = total;
}

void rs_ring_file_snapshot_written(rs_ring_file *f, uint64_t time_us)
{
    if (f) f->hdr->snapshot_time_us = time_us;
}

void rs_ring_file_steps_from(rs_ring_file *f, const char *how)
{
    /* a reader of a live ring may meet the words half rewritten: they change only when the way
     * the steps are numbered does (or its counts), so most steps write nothing */
    if (!f || !how || !strncmp(f->hdr->steps_from, how, sizeof f->hdr->steps_from - 1)) return;
    snprintf(f->hdr->steps_from, sizeof f->hdr->steps_from, "%s", how);
}

void rs_ring_file_end(rs_ring_file *f, const rs_end *end)
{
    if (!f) return;
    f->hdr->end.status = end->status;
    f->hdr->end.abort_code = end->abort_code;
    f->hdr->end.flags = end->flags; /* last: the flags say which of the values are there */
}

const char *rs_ring_file_path(const rs_ring_file *f)
{
    return f->path;
}

void rs_ring_file_close(rs_ring_file *f, int remove)
{
    if (!f) return;
    if (remove) f->hdr->closed = 1;
    munmap(f->map, f->len);
    /* the name may have been taken over since (by hand, by an older ranksnap): only ours goes */
    if (remove) rs_ring_unlink_own(f->path, f->fd);
    close(f->fd);
    free(f);
}

int rs_ring_file_peek(const char *path, rs_ring_owner *out)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat sb;
    rs_ring_header h;
    int ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
             pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
             memcmp(h.magic, RS_RING_MAGIC, sizeof h.magic) == 0;
    close(fd);
    if (!ok) return -1;
    memcpy(out->job, h.job, sizeof out->job - 1);
    memcpy(out->host, h.host, sizeof out->host - 1);
    out->pid = h.pid;
    out->closed = h.closed != 0;
    return 0;
}
