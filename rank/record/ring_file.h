/* ring_file.h — the rank's ring file (RANKSNAP_RING=mmap): layout in common/ring_format.h. */
#ifndef RANKSNAP_RING_FILE_H
#define RANKSNAP_RING_FILE_H

#include <stdint.h>

#include "alloc_conf.h"
#include "ring_format.h"
#include "ranksnap.h"
#include "recorder.h"

typedef struct rs_ring_file rs_ring_file;

typedef struct rs_ring_identity {
    int rank, world_size;
    int64_t pid;
    const char *job, *host, *device_name;
    uint64_t device_total, memory_limit;
    int64_t clock_offset_us;
    const rs_alloc_conf *alloc_conf; /* NULL: PyTorch's defaults */
} rs_ring_identity;

/* Makes the ring file `path` (0600) for `capacity` events: every block reserved on disk
 * (posix_fallocate: a full disk is an error here, never a SIGBUS later), mapped shared, the header
 * written, all under a temporary name that then becomes `path`, so that a ring without its header
 * is never seen. `replace` lets it take the place of a file at `path`: only for one the caller
 * knows is this job's. A file there otherwise is an error with *existed = 1 (when not NULL). */
ranksnap_status rs_ring_file_open(const char *path, int replace, uint64_t capacity,
                                  const rs_ring_identity *id, rs_ring_file **out, int *existed);
const char *rs_ring_file_path(const rs_ring_file *f);
/* Where the recorder writes (rs_recorder_create_on). */
void rs_ring_file_pub(rs_ring_file *f, rs_ring_pub *pub);
/* The segment table mirrors the allocator's segments (allocator lock held). */
void rs_ring_file_segment(rs_ring_file *f, int alloc, uint64_t addr, uint64_t size, uint32_t stream,
                          int is_small);
/* At a step boundary (allocator lock held): the step and the allocator's totals then. */
void rs_ring_file_step(rs_ring_file *f, int64_t step, uint64_t allocated, uint64_t allocated_peak,
                       uint64_t reserved_peak);
void rs_ring_file_snapshot_written(rs_ring_file *f, uint64_t time_us);
/* How the rank's steps are numbered, for a ring recovered without a snapshot; at a step. */
void rs_ring_file_steps_from(rs_ring_file *f, const char *how);
/* How the process is ending (format.h), written as each part of it is known. */
void rs_ring_file_end(rs_ring_file *f, const rs_end *end);
/* The device the rank first allocated on, which the file opened at init could not know yet. */
void rs_ring_file_set_device(rs_ring_file *f, const char *name, uint64_t total);
/* Unmaps; with `remove` (a clean finalize) marks it closed and deletes the file, if its name
 * still points at it. */
void rs_ring_file_close(rs_ring_file *f, int remove);

/* Who wrote the ring file at `path`: its header's job, host and pid, and whether it was closed.
 * -1 when there is no such file, or it is not a regular file with a ring's header. */
typedef struct rs_ring_owner {
    char job[256];
    char host[64];
    int64_t pid;
    int closed;
} rs_ring_owner;
int rs_ring_file_peek(const char *path, rs_ring_owner *out);

#endif
