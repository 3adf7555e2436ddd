/*
 * progress.h — a one-line progress display on stderr for long collector work (`ranksnap report`
 * over many or large files).
 *
 * Shown only where a person watches: stderr is a terminal and the work is long enough to be worth
 * a line (RS_PROGRESS_MIN_FILES files or RS_PROGRESS_MIN_BYTES bytes), unless --progress or
 * --no-progress says otherwise. Logs and pipes never get carriage returns. The line is redrawn at
 * most RS_PROGRESS_HZ times a second and erased at the end, so the report that follows starts
 * on a clean line.
 */
#ifndef RANKSNAP_PROGRESS_H
#define RANKSNAP_PROGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define RS_PROGRESS_MIN_FILES 8
#define RS_PROGRESS_MIN_BYTES ((uint64_t)16 << 20)
#define RS_PROGRESS_HZ 10

/* forced: 1 (--progress), 0 (--no-progress), -1 (decide): then on when `is_tty` and the work is
 * `n_files` >= RS_PROGRESS_MIN_FILES or `bytes` >= RS_PROGRESS_MIN_BYTES. */
int rs_progress_wanted(int forced, int is_tty, size_t n_files, uint64_t bytes);

typedef struct rs_progress {
    FILE *out;          /* NULL: off */
    const char *what;   /* "reading", "timelines" */
    size_t done, total;
    uint64_t bytes_done, bytes_total;
    int64_t last_us;    /* when the line was last drawn, -1 never */
    int drawn;          /* the line is on the screen */
} rs_progress;

/* Starts a phase of `total` items (`bytes_total` bytes, 0 when unknown); `out` NULL = off. */
void rs_progress_begin(rs_progress *p, FILE *out, const char *what, size_t total,
                        uint64_t bytes_total);
/* One more item done, of `bytes` bytes. */
void rs_progress_step(rs_progress *p, uint64_t bytes);
/* Erases the line. */
void rs_progress_end(rs_progress *p);

#endif
