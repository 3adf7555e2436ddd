/*
 * atomic_file.h — files that readers see whole or not at all.
 *
 * The writer puts the bytes in a temporary file in the same directory (0600, O_EXCL, O_NOFOLLOW),
 * fsyncs it, renames it over the target and fsyncs the directory, so a reader sees the old file or
 * the new one, never half of one. Snapshots, reports and exports all go through it.
 */
#ifndef RANKSNAP_ATOMIC_FILE_H
#define RANKSNAP_ATOMIC_FILE_H

#include <stddef.h>

#include "ranksnap.h"

/* Atomic write of `len` bytes to `path` (see above). Errors name the path and the failing step. */
ranksnap_status rs_atomic_file_write(const char *path, const void *buf, size_t len);
/* The same; `durable` 0 leaves out both fsyncs. The rename alone keeps readers from ever seeing
 * half a file; the fsyncs only make it survive a crash of the machine. A dying process, which
 * has a second before mpirun's SIGKILL, writes this way: an fsync on a busy disk can take longer. */
ranksnap_status rs_atomic_file_write_ex(const char *path, const void *buf, size_t len, int durable);

#endif
