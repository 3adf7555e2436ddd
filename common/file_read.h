/*
 * file_read.h — reading a whole input file, safely.
 *
 * Snapshots, rings and pickles come from directories anyone may have written to, so the reader
 * opens without blocking (a FIFO would hang a blocking open), checks that what it opened is a
 * regular file (a link to /dev/zero would otherwise be read for ever) and reads at most what
 * fstat said, plus what was appended meanwhile up to `max_bytes`.
 */
#ifndef RANKSNAP_FILE_READ_H
#define RANKSNAP_FILE_READ_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ranksnap.h"

/* Reads `path` into a malloc'ed buffer (*buf, *len; the caller frees it; one NUL byte follows
 * the data so that text readers may treat it as a string). `max_bytes` 0 = no limit. Errors name
 * the path: RANKSNAP_ERR_IO (cannot open, not a regular file, read error), RANKSNAP_ERR_FORMAT
 * (larger than max_bytes), RANKSNAP_ERR_HOST_MEMORY. */
ranksnap_status rs_file_read(const char *path, uint64_t max_bytes, char **buf, size_t *len);

/* Opens `path` for reading as rs_file_read does (O_NONBLOCK, regular files only) and returns the
 * descriptor, or -1 with the error set (rs_error) naming the path. */
int rs_file_open_regular(const char *path);

/* What a non-regular file is, for messages: "a directory", "a FIFO", "a character device", ... */
const char *rs_file_kind(mode_t mode);

#endif
