/*
 * decode_bench.c — how fast the decoders read a file already in memory, on one core: MB/s and
 * events/s of rs_rsnap_decode / rs_torch_decode / the ring decoder (decode.c picks by name and
 * content, as `ranksnap report` does), alone and followed by the summary `report` makes of each
 * file, and the memory a decode holds at its peak as a multiple of the file.
 *
 *   decode_bench [--reps R] [--json] [--general] FILE...
 *
 * --general decodes PyTorch pickles with the general pickle machine only (rs_torch_opts
 * read_entries 0): the figure the fast path for trace entries (torch_trace.c) is measured against.
 *
 * Each file is read once; then R decodes (default 5) are timed and the median is printed, with the
 * fastest decode beside it (what the code does when nothing else on a shared machine gets in its
 * way: the two are apart by the load's share of the caches and the memory bus). The time
 * is the decoding thread's CPU time (CLOCK_THREAD_CPUTIME_ID): on a machine shared with other
 * work the wall time says how long the decode waited for a core, not what it cost. The held memory is measured by the program run again on each file alone:
 * its ru_maxrss after one decode and summary minus before (the file's buffer excluded), so that
 * the memory earlier decodes left in malloc's free lists does not hide it.
 * The ring decoder reads its file itself, so for .ring files the time includes the read.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "decode.h"
#include "file_read.h"
#include "heap.h"
#include "rsnap_decode.h"
#include "summary.h"
#include "torch_decode.h"

#define MAX_REPS 64

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int g_general; /* --general */

/* One decode of `buf` the way `ranksnap report` opens `path`. */
static ranksnap_status decode(const char *path, const char *buf, size_t len, rs_snap **s)
{
    if (rs_decode_is_ring_path(path)) return rs_decode_file(path, NULL, s);
    if (rs_torch_is_pickle(buf, len)) {
        rs_torch_opts o;
        rs_torch_opts_default(&o);
        o.read_entries = !g_general;
        return rs_torch_decode(buf, len, path, &o, s);
    }
    return rs_rsnap_decode(buf, len, path, s);
}

static long maxrss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* `decode_bench --held FILE`: one decode and summary in a fresh process; prints the KiB its
 * peak RSS grew above what it had with the file read (ru_maxrss). */
static int held_main(const char *path)
{
    char *buf = NULL;
    size_t len = 0;
    if (rs_file_read(path, 0, &buf, &len) != RANKSNAP_OK) return 1;
    long before = maxrss_kib();
    rs_snap *s = NULL;
    if (decode(path, buf, len, &s) != RANKSNAP_OK) return 1;
    rs_summary sum;
    rs_summary_of(s, &sum);
    printf("%ld\n", maxrss_kib() - before);
    rs_snap_free(s);
    free(buf);
    return 0;
}

/* The memory one decode holds, measured by this program run again on the file alone, so that
 * the allocations of earlier decodes do not hide it. -1 when that fails. */
static long held_kib(const char *self, const char *path)
{
    char cmd[8192];
    long kib = -1;
    if (snprintf(cmd, sizeof cmd, "'%s' --held '%s'", self, path) >= (int)sizeof cmd) return -1;
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    if (fscanf(f, "%ld", &kib) != 1) kib = -1;
    if (pclose(f) != 0) kib = -1;
    return kib;
}

int main(int argc, char **argv)
{
    int reps = 5, json = 0, first = 1;
    if (argc == 3 && !strcmp(argv[1], "--held")) return held_main(argv[2]);
    char self[4096];
    ssize_t self_len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (self_len <= 0) {
        fprintf(stderr, "decode_bench: cannot find its own executable\n");
        return 1;
    }
    self[self_len] = '\0';
    for (; first < argc && argv[first][0] == '-'; first++) {
        if (!strcmp(argv[first], "--json")) {
            json = 1;
        } else if (!strcmp(argv[first], "--general")) {
            g_general = 1;
        } else if (!strcmp(argv[first], "--reps") && first + 1 < argc) {
            reps = atoi(argv[++first]);
            if (reps < 1 || reps > MAX_REPS) reps = 5;
        } else {
            fprintf(stderr, "usage: decode_bench [--reps R] [--json] [--general] FILE...\n");
            return 2;
        }
    }
    if (first >= argc) {
        fprintf(stderr, "usage: decode_bench [--reps R] [--json] [--general] FILE...\n");
        return 2;
    }
    /* malloc as `ranksnap report` sets it: a decode reuses the memory the one before it freed */
    rs_heap_keep_freed_memory();
    if (!json)
        printf("%-40s %10s %9s %10s %12s %10s %10s %12s %9s %9s\n", "file", "bytes", "events",
               "decode s", "decode MB/s", "best MB/s", "+summary s", "+sum. MB/s", "held", "x file");
    for (int a = first; a < argc; a++) {
        const char *path = argv[a];
        char *buf = NULL;
        size_t len = 0;
        if (rs_file_read(path, 0, &buf, &len) != RANKSNAP_OK) {
            fprintf(stderr, "decode_bench: %s\n", ranksnap_last_error());
            return 1;
        }
        double t_dec[MAX_REPS], t_sum[MAX_REPS];
        uint64_t events = 0;
        for (int r = 0; r < reps; r++) {
            rs_snap *s = NULL;
            double t0 = now_s();
            if (decode(path, buf, len, &s) != RANKSNAP_OK) {
                fprintf(stderr, "decode_bench: %s\n", ranksnap_last_error());
                return 1;
            }
            double t1 = now_s();
            rs_summary sum;
            rs_summary_of(s, &sum);
            double t2 = now_s();
            events = s->history.count;
            rs_snap_free(s);
            t_dec[r] = t1 - t0;
            t_sum[r] = t2 - t0;
        }
        qsort(t_dec, (size_t)reps, sizeof *t_dec, cmp_double);
        qsort(t_sum, (size_t)reps, sizeof *t_sum, cmp_double);
        double dec = t_dec[reps / 2], all = t_sum[reps / 2], best = t_dec[0];
        long held = held_kib(self, path);
        double mb = (double)len / 1e6;
        if (json)
            printf("{\"file\": \"%s\", \"bytes\": %zu, \"events\": %" PRIu64 ", \"decode_s\": %.6f, "
                   "\"decode_mb_s\": %.1f, \"decode_best_mb_s\": %.1f, \"decode_summary_s\": %.6f, "
                   "\"decode_summary_mb_s\": %.1f, \"events_per_s\": %.0f, \"held_kib\": %ld}\n",
                   path, len, events, dec, mb / dec, mb / best, all, mb / all, (double)events / all,
                   held);
        else
            printf("%-40s %10zu %9" PRIu64 " %10.4f %12.1f %10.1f %10.4f %12.1f %8ldM %9.1f\n", path,
                   len, events, dec, mb / dec, mb / best, all, mb / all, held / 1024,
                   held >= 0 ? (double)held * 1024 / (double)len : -1.0);
        free(buf);
    }
    return 0;
}
