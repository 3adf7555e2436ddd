/*
 * progress.h — a one-line progress display on stderr for long collector work (`ranksnap report`
 * over many or large files).
 *
 * Shown only where a person watches: stderr is a terminal and the work is long enough to be worth
 * a line (RSC_PROGRESS_MIN_FILES files or RSC_PROGRESS_MIN_BYTES bytes), unless --progress or
 * --no-progress says otherwise. Logs and pipes never get carriage returns. The line is redrawn at
 * most RSC_PROGRESS_HZ times a second and erased at the end, so the report that follows starts
 * on a clean line.
 */
#ifndef RANKSNAP_PROGRESS_H
#define RANKSNAP_PROGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define RSC_PROGRESS_MIN_FILES 8
#define RSC_PROGRESS_MIN_BYTES ((uint64_t)16 << 20)
#define RSC_PROGRESS_HZ 10

/* forced: 1 (--progress), 0 (--no-progress), -1 (decide): then on when `is_tty` and the work is
 * `n_files` >= RSC_PROGRESS_MIN_FILES or `bytes` >= RSC_PROGRESS_MIN_BYTES. */
int rsc_progress_wanted(int forced, int is_tty, size_t n_files, uint64_t bytes);

typedef struct rsc_progress {
    FILE *out;          /* NULL: off */
    const char *what;   /* "reading", "timelines" */
    size_t done, total;
    uint64_t bytes_done, bytes_total;
    int64_t last_us;    /* when the line was last drawn, -1 never */
    int drawn;          /* the line is on the screen */
} rsc_progress;

/* Starts a phase of `total` items (`bytes_total` bytes, 0 when unknown); `out` NULL = off. */
void rsc_progress_begin(rsc_progress *p, FILE *out, const char *what, size_t total,
                        uint64_t bytes_total);
/* One more item done, of `bytes` bytes. */
void rsc_progress_step(rsc_progress *p, uint64_t bytes);
/* Erases the line. */
void rsc_progress_end(rsc_progress *p);

#endif
