/*
 * file_map.h — an input file mapped instead of copied, for a process that reads many (`ranksnap
 * report`), and what happens when another process truncates it meanwhile.
 *
 * read() copies a file into fresh memory: for a PyTorch pickle that is a copy and a page fault
 * per 4 KiB (a third of the kernel time of a report). A private read-only mapping of the page
 * cache costs neither. Its one danger is a file truncated while mapped (PyTorch's
 * _dump_snapshot rewrites its file in place): a read of a page past the new end raises SIGBUS,
 * which would kill the report. With rs_file_map_enable, a handler puts a page of zeros there
 * instead, for the thread whose watched mapping it is, and rs_file_map_end says the file was cut
 * short, so that its decode is an error and not a crash. Any other SIGBUS keeps its old effect.
 *
 * Without rs_file_map_enable (the library on its own, which installs no handler) rs_file_map
 * reads the file with rs_file_read.
 */
#ifndef RANKSNAP_FILE_MAP_H
#define RANKSNAP_FILE_MAP_H

#include <stddef.h>

#include "ranksnap.h"

typedef struct rs_file_mapped {
    const char *p;
    size_t len;
    int mapped; /* 0: a malloc'ed copy (rs_file_read) */
} rs_file_mapped;

/* Process-wide, once: installs the SIGBUS handler and makes rs_file_map map files of at least
 * RS_FILE_MAP_MIN bytes. RANKSNAP_ERR_IO when sigaction fails (files are then read). */
ranksnap_status rs_file_map_enable(void);

#define RS_FILE_MAP_MIN ((size_t)64 << 10)

/* `path` (a regular file, opened as rs_file_read opens it) mapped read-only, or read. Errors as
 * rs_file_read's, naming the path. */
ranksnap_status rs_file_map(const char *path, rs_file_mapped *m);

/* The calling thread reads m from here to rs_file_map_end: a page of it past the file's end
 * reads as zeros. */
void rs_file_map_begin(const rs_file_mapped *m);

/* 1 when a page of the watched mapping was past the file's end (another process truncated it
 * while it was read): what was decoded from it is not the file. */
int rs_file_map_end(void);

/* Unmaps or frees m. */
void rs_file_map_close(rs_file_mapped *m);

#endif
