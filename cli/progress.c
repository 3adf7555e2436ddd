/*
 * progress.c — the progress line of progress.h: "ranksnap report: reading 12/32 files,
 * 14.0 of 37.3 MB", redrawn in place with a carriage return and an erase-to-end-of-line.
 */
#include <time.h>

#include "progress.h"

int rs_progress_wanted(int forced, int is_tty, size_t n_files, uint64_t bytes)
{
    if (forced >= 0) return forced != 0;
    return is_tty && (n_files >= RS_PROGRESS_MIN_FILES || bytes >= RS_PROGRESS_MIN_BYTES);
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void draw(rs_progress *p)
{
    fprintf(p->out, "\rranksnap report: %s %zu/%zu files", p->what, p->done, p->total);
    if (p->bytes_total)
        fprintf(p->out, ", %.1f of %.1f MB", (double)p->bytes_done / 1e6, (double)p->bytes_total / 1e6);
    fputs("\033[K", p->out);
    fflush(p->out);
    p->drawn = 1;
}

void rs_progress_begin(rs_progress *p, FILE *out, const char *what, size_t total,
                        uint64_t bytes_total)
{
    p->out = out;
    p->what = what;
    p->done = 0;
    p->total = total;
    p->bytes_done = 0;
    p->bytes_total = bytes_total;
    p->drawn = 0;
    p->last_us = -1;
    if (!out) return;
    draw(p);
    p->last_us = now_us();
}

void rs_progress_step(rs_progress *p, uint64_t bytes)
{
    if (!p->out) return;
    p->done++;
    p->bytes_done += bytes;
    int64_t t = now_us();
    /* the last item is always drawn (a person sees the phase complete before it is erased), and
     * so is the line after an erase for an error message */
    if (!p->drawn || p->done == p->total || t - p->last_us >= 1000000 / RS_PROGRESS_HZ) {
        draw(p);
        p->last_us = t;
    }
}

void rs_progress_end(rs_progress *p)
{
    if (!p->out || !p->drawn) return;
    fputs("\r\033[K", p->out);
    fflush(p->out);
    p->drawn = 0;
}
