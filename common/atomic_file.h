/*
 * atomic_file.h — files that readers see whole or not at all.
 *
 * The writer puts the bytes in a temporary file in the same directory (0600, O_EXCL, O_NOFOLLOW),
 * fsyncs it, renames it over the target and fsyncs the directory, so a reader sees the old file or
 * the new one, never half of one. Snapshots, reports and exports all go through it. Only a
 * regular file is replaced: anything else at the target (a device node, a FIFO, a socket, a
 * directory, a symbolic link) is an error naming the path, before anything is written.
 */
#ifndef RANKSNAP_ATOMIC_FILE_H
#define RANKSNAP_ATOMIC_FILE_H

#include <stddef.h>

#include "ranksnap.h"

/* Room for "<job tag>@<host tag>" (text.h's tags). */
#define RS_ATOMIC_OWNER_MAX 160
/* What a temporary name adds to its target's length, at most (NUL included). */
#define RS_ATOMIC_TMP_EXTRA (RS_ATOMIC_OWNER_MAX + 64)

/* Atomic write of `len` bytes to `path` (see above). Errors name the path and the failing step. */
ranksnap_status rs_atomic_file_write(const char *path, const void *buf, size_t len);
/* The same; `durable` 0 leaves out both fsyncs. The rename alone keeps readers from ever seeing
 * half a file; the fsyncs only make it survive a crash of the machine. A dying process, which
 * has a second before mpirun's SIGKILL, writes this way: an fsync on a busy disk can take longer. */
ranksnap_status rs_atomic_file_write_ex(const char *path, const void *buf, size_t len, int durable);
/* The same, but an existing `path` is never replaced: RANKSNAP_ERR_IO with *existed = 1 (when
 * not NULL) if a file is there, whoever put it there, even a moment before. How a job keeps off
 * another job's file of the same name (rank/runtime/dump.c). */
ranksnap_status rs_atomic_file_create(const char *path, const void *buf, size_t len, int durable,
                                      int *existed);

/* The same, written in parts (bytes that arrive in chunks, never all in memory at once): begin
 * creates the temporary, append adds to it, commit fsyncs (`durable`), renames (`replace`, else
 * as rs_atomic_file_create, *existed when not NULL) and ends the writer; abort removes the
 * temporary. A failed append or commit has removed it already. `path` must outlive the writer. */
typedef struct rs_atomic_writer {
    const char *path;
    char *tmp;
    int fd;
} rs_atomic_writer;
ranksnap_status rs_atomic_file_begin(const char *path, rs_atomic_writer *w);
ranksnap_status rs_atomic_file_append(rs_atomic_writer *w, const void *buf, size_t len);
ranksnap_status rs_atomic_file_commit(rs_atomic_writer *w, int durable, int replace, int *existed);
void rs_atomic_file_abort(rs_atomic_writer *w);

/* Temporaries are named `<path>.tmp.<pid>.<n>`; once a process knows its job and host (init),
 * `<path>.tmp.<job tag>@<host tag>.<pid>.<n>`, so that they can be told apart from other jobs'.
 * Call before other threads write; NULL or "" goes back to the plain names. */
void rs_atomic_file_set_owner(const char *job, const char *host);
/* A fresh temporary name for `path` (buf of strlen(path) + RS_ATOMIC_TMP_EXTRA), for writers that
 * make a file whole under it before it takes its name (rank/record/ring_file.c). */
void rs_atomic_file_temp_name(const char *path, char *buf, size_t n);
/* Gives `tmp` the name `path`: replacing a file there (`replace`), or never (RENAME_NOREPLACE,
 * else link + unlink, else a look first), failing with errno EEXIST. 0, or -1 and errno. */
int rs_atomic_file_rename(const char *tmp, const char *path, int replace);
/* Removes the temporaries of `path` that a process of this job on this host left when it was
 * killed mid-write: those named for this owner (rs_atomic_file_set_owner), belonging to this
 * user, regular files, whose pid is not alive. Nothing without an owner. Returns how many. */
size_t rs_atomic_file_clean_stale(const char *path);

#endif
