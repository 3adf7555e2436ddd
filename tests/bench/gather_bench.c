/*
 * gather_bench.c — what the end of a recorded range costs: encode, write, gather to rank 0,
 * compare and report, with N events per rank.
 *
 * Every rank records --events events (alloc/free of varying sizes from four call sites, a window
 * of live blocks, over --steps steps, so that the per-step series exists); rank --diverge-rank
 * holds one extra --diverge-bytes buffer through each step, so that the comparison has a rank to
 * flag and RANKSNAP_GATHER=flagged has something to fetch in phase 2. The range is closed by the
 * ranksnap_step that follows its last step, after an MPI_Barrier; that call's MPI_Wtime, the
 * maximum over ranks, is the end-of-range time (gather + compare + report, and the per-rank
 * encode + file write that precede the gather). --reps ranges are recorded in one run
 * (RANKSNAP_STEPS=1:11,12:22,...) and the median is reported, since oversubscribed ranks make
 * single runs noisy.
 *
 * It also reports sizeof(rs_summary) (the bytes each rank sends in phase 1), the gather's own
 * line from the MPI INFO log (rank 0's stderr is captured around the closing call for it), the
 * snapshot file sizes in RANKSNAP_DIR and so the bytes per event, and rank 0's peak RSS growth.
 *
 *   mpirun -np 4 gather_bench [--json] [--events N] [--steps S] [--reps R] [--window K]
 *                             [--diverge-rank R] [--diverge-bytes B] [--verbose]
 *
 * Linked against the ranksnap shared library before libmpi, so that its MPI_Init wrapper starts
 * ranksnap on MPI_COMM_WORLD as it would in any application. The bench sets RANKSNAP_STEPS and
 * RANKSNAP_MAX_ENTRIES itself (they must match what it records) and defaults RANKSNAP_BACKEND to
 * sim, RANKSNAP_DIR to gather-bench-out and the log to INFO for MPI; the environment overrides
 * the latter ones (RANKSNAP_GATHER, RANKSNAP_STACKS, ...).
 */
#include <fcntl.h>
#include <inttypes.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_sites.h"
#include "ranksnap.h"
#include "summary.h"

#define MAX_WINDOW 1024
#define MAX_REPS 16

typedef struct cfg {
    uint64_t events;
    int steps, reps, window;
    int diverge_rank;
    uint64_t diverge_bytes;
    int json, verbose;
} cfg;

/* One rep's numbers on rank 0. */
typedef struct rep_result {
    double eor_max_s, eor_rank0_s; /* the closing ranksnap_step: max over ranks, rank 0's own */
    double gather_s;               /* from the INFO log line: phase 1 + phase 2 on rank 0 */
    long long gathered, world;     /* "N of W ranks" */
    unsigned long long bytes_summaries, bytes_snapshots;
    int log_found;
    int flagged_ok; /* report.json names the divergent rank */
    uint64_t events_min, events_max, events_sum, dropped_max;
    uint64_t file_bytes_sum, file_bytes_max;
    int files_found;
} rep_result;

static int rank_ = 0;

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "gather_bench[%d]: %s: %s\n", rank_, what, detail);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static void rs_ok(ranksnap_status st, const char *what)
{
    if (st != RANKSNAP_OK) die(what, ranksnap_last_error());
}

static void bench_ok(ranksnap_status st, const char *what)
{
    rs_ok(st, what);
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (!s || !*s || *s == '-') return -1;
    unsigned long long x = strtoull(s, &end, 10);
    if (*end) return -1;
    *out = x;
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: gather_bench [--json] [--events N] [--steps S] [--reps R] [--window K] "
                    "[--diverge-rank R] [--diverge-bytes B] [--verbose]\n");
    exit(2);
}

static void parse_args(int argc, char **argv, cfg *c)
{
    *c = (cfg){.events = 100000, .steps = 10, .reps = 3, .window = 48, .diverge_rank = 1,
               .diverge_bytes = (uint64_t)16 << 20};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x = 0;
        if (!strcmp(a, "--json")) {
            c->json = 1;
        } else if (!strcmp(a, "--verbose")) {
            c->verbose = 1;
        } else if (!strcmp(a, "--events") && !parse_u64(v, &x) && x >= 100 && x <= ((uint64_t)1 << 29)) {
            c->events = x;
            i++;
        } else if (!strcmp(a, "--steps") && !parse_u64(v, &x) && x >= 1 && x <= 1000) {
            c->steps = (int)x;
            i++;
        } else if (!strcmp(a, "--reps") && !parse_u64(v, &x) && x >= 1 && x <= MAX_REPS) {
            c->reps = (int)x;
            i++;
        } else if (!strcmp(a, "--window") && !parse_u64(v, &x) && x >= 1 && x <= MAX_WINDOW) {
            c->window = (int)x;
            i++;
        } else if (!strcmp(a, "--diverge-rank") && v && (!strcmp(v, "-1") || (!parse_u64(v, &x) && x < 1u << 30))) {
            c->diverge_rank = !strcmp(v, "-1") ? -1 : (int)x;
            i++;
        } else if (!strcmp(a, "--diverge-bytes") && !parse_u64(v, &x)) {
            c->diverge_bytes = x;
            i++;
        } else {
            usage();
        }
    }
}

static uint64_t events_now(uint64_t *dropped)
{
    ranksnap_stats s;
    rs_ok(ranksnap_get_stats(&s), "ranksnap_get_stats");
    if (dropped) *dropped = s.events_dropped;
    return s.events_recorded;
}

/* One recorded step: replace the oldest block of the window until the recorder holds `target`
 * events. The recorder's own count decides, so N is events, not pairs, whatever the allocator
 * adds (segment allocations, free_requested/free_completed). */
static void run_step(void **win, int window, int *slot, uint64_t *seed, uint64_t target,
                     int divergent, uint64_t diverge_bytes)
{
    void *extra = divergent && diverge_bytes ? site_divergent_buffer(diverge_bytes) : NULL;
    while (events_now(NULL) < target) {
        int i = *slot;
        *slot = (i + 1) % window;
        rs_ok(ranksnap_free(win[i]), "ranksnap_free");
        unsigned k = (unsigned)bench_rng_next(seed) % BENCH_N_SITES;
        win[i] = bench_sites[k](bench_next_size(seed));
    }
    rs_ok(ranksnap_free(extra), "ranksnap_free (divergent)");
}

static void free_window(void **win, int window)
{
    for (int i = 0; i < window; i++) {
        rs_ok(ranksnap_free(win[i]), "ranksnap_free");
        win[i] = NULL;
    }
}

/* Rank 0's stdout and stderr go to temporary files around the closing call: the report (stdout)
 * must not mix with --json, and the gather's INFO line (stderr) is read back. */
typedef struct capture {
    int saved_out, saved_err;
    FILE *out, *err;
} capture;

static void capture_begin(capture *c)
{
    fflush(stdout);
    fflush(stderr);
    c->out = tmpfile();
    c->err = tmpfile();
    if (!c->out || !c->err) die("tmpfile", "cannot capture rank 0's output");
    c->saved_out = dup(STDOUT_FILENO);
    c->saved_err = dup(STDERR_FILENO);
    if (c->saved_out < 0 || c->saved_err < 0 || dup2(fileno(c->out), STDOUT_FILENO) < 0 ||
        dup2(fileno(c->err), STDERR_FILENO) < 0)
        die("dup2", "cannot capture rank 0's output");
}

/* Restores the descriptors; returns the captured stderr (malloc'ed, NUL-terminated). */
static char *slurp(FILE *f)
{
    long n = ftell(f);
    if (n < 0) n = 0;
    char *buf = malloc((size_t)n + 1);
    if (!buf) die("malloc", "capture buffer");
    rewind(f);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = '\0';
    fclose(f);
    return buf;
}

static void capture_end(capture *c, char **out_text, char **err_text)
{
    fflush(stdout);
    fflush(stderr);
    dup2(c->saved_out, STDOUT_FILENO);
    dup2(c->saved_err, STDERR_FILENO);
    close(c->saved_out);
    close(c->saved_err);
    /* the files' offsets moved through the duplicated descriptors; the FILE's idea of where it
     * is has not, so seek to the end before asking */
    fseek(c->out, 0, SEEK_END);
    fseek(c->err, 0, SEEK_END);
    *out_text = slurp(c->out);
    *err_text = slurp(c->err);
}

/* The last "gather: N of W ranks in S s, X bytes of summaries, Y bytes of snapshots" line. */
static void parse_gather_line(const char *log, rep_result *r)
{
    for (const char *p = strstr(log, "gather: "); p; p = strstr(p + 1, "gather: ")) {
        long long n = 0, w = 0;
        double s = 0;
        unsigned long long xs = 0, ys = 0;
        if (sscanf(p, "gather: %lld of %lld ranks in %lf s, %llu bytes of summaries, %llu bytes of snapshots",
                   &n, &w, &s, &xs, &ys) == 5) {
            r->gathered = n;
            r->world = w;
            r->gather_s = s;
            r->bytes_summaries = xs;
            r->bytes_snapshots = ys;
            r->log_found = 1;
        }
    }
}

static char *read_small_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    char *s = slurp(f);
    return s;
}

/* report.json lists the divergent rank among "divergent_ranks" (one object per line). */
static int report_flags(const char *dir, int r)
{
    char path[4200], needle[48];
    snprintf(path, sizeof path, "%s/report.json", dir);
    char *j = read_small_file(path);
    if (!j) return 0;
    snprintf(needle, sizeof needle, "{\"rank\": %d,", r);
    const char *d = strstr(j, "\"divergent_ranks\"");
    const char *end = d ? strstr(d, "\"notes\"") : NULL;
    const char *hit = d ? strstr(d, needle) : NULL;
    int ok = hit && (!end || hit < end);
    free(j);
    return ok;
}

static long maxrss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double tmp[MAX_REPS];
    memcpy(tmp, v, (size_t)n * sizeof *v);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
    return n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
}

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

int main(int argc, char **argv)
{
    cfg c;
    parse_args(argc, argv, &c);

    /* The schedule must be what the loop below records: rep i records steps b..b+S-1 and its
     * closing step b+S is outside every range, b = 1 + i*(S+1). Step 0 warms the cache. */
    char steps[512] = "";
    size_t used = 0;
    for (int i = 0; i < c.reps; i++) {
        int b = 1 + i * (c.steps + 1);
        used += (size_t)snprintf(steps + used, sizeof steps - used, "%s%d:%d", i ? "," : "", b, b + c.steps);
        if (used >= sizeof steps) die("RANKSNAP_STEPS", "too many reps for the schedule string");
    }
    setenv("RANKSNAP_STEPS", steps, 1);
    /* Headroom over N: the step events and the divergent buffer's events land in the ring too,
     * and a dropped event would make the snapshot smaller than N. */
    uint64_t want_entries = c.events + c.events / 8 + 1024;
    uint64_t have = 0;
    if (parse_u64(getenv("RANKSNAP_MAX_ENTRIES"), &have) != 0 || have < want_entries) {
        char buf[32];
        snprintf(buf, sizeof buf, "%" PRIu64, want_entries);
        setenv("RANKSNAP_MAX_ENTRIES", buf, 1);
    }
    setenv("RANKSNAP_BACKEND", "sim", 0);
    setenv("RANKSNAP_DIR", "gather-bench-out", 0);
    setenv("RANKSNAP_DEBUG", "INFO", 0);
    setenv("RANKSNAP_DEBUG_SUBSYS", "MPI", 0);
    const char *dir = getenv("RANKSNAP_DIR");

    MPI_Init(&argc, &argv);
    int world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    ranksnap_stats probe;
    if (ranksnap_get_stats(&probe) != RANKSNAP_OK)
        die("ranksnap did not start in MPI_Init",
            "link libranksnap before libmpi (or RANKSNAP_DISABLE is set)");

    void *win[MAX_WINDOW] = {0};
    int slot = 0;
    uint64_t seed = 0x9e3779b97f4a7c15ull;

    /* warm-up, not recorded: the cache holds segments of every size class before rep 0 */
    rs_ok(ranksnap_step(0), "ranksnap_step");
    for (int i = 0; i < 4 * c.window; i++) {
        int k = slot;
        slot = (slot + 1) % c.window;
        rs_ok(ranksnap_free(win[k]), "ranksnap_free");
        unsigned site = (unsigned)bench_rng_next(&seed) % BENCH_N_SITES;
        win[k] = bench_sites[site](bench_next_size(&seed));
    }
    free_window(win, c.window);

    rep_result res[MAX_REPS];
    memset(res, 0, sizeof res);
    long rss_before = maxrss_kib(), rss_after = rss_before;
    int divergent = rank_ == c.diverge_rank && c.diverge_rank < world;

    for (int rep = 0; rep < c.reps; rep++) {
        int b = 1 + rep * (c.steps + 1);
        slot = 0;
        seed = 0x9e3779b97f4a7c15ull + (uint64_t)rep;
        for (int k = 0; k < c.steps; k++) {
            rs_ok(ranksnap_step(b + k), "ranksnap_step");
            uint64_t target = c.events * (uint64_t)(k + 1) / (uint64_t)c.steps;
            run_step(win, c.window, &slot, &seed, target, divergent, c.diverge_bytes);
        }
        uint64_t dropped = 0;
        uint64_t ev = events_now(&dropped);

        capture cap = {-1, -1, NULL, NULL};
        char *out_text = NULL, *err_text = NULL;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank_ == 0) capture_begin(&cap);
        double t0 = MPI_Wtime();
        rs_ok(ranksnap_step(b + c.steps), "ranksnap_step (closing the range)");
        double dt = MPI_Wtime() - t0;
        if (rank_ == 0) capture_end(&cap, &out_text, &err_text);
        free_window(win, c.window);

        double dt_max = 0;
        uint64_t ev_min = 0, ev_max = 0, ev_sum = 0, drop_max = 0;
        MPI_Reduce(&dt, &dt_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&ev, &ev_min, 1, MPI_UINT64_T, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&ev, &ev_max, 1, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&ev, &ev_sum, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&dropped, &drop_max, 1, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank_ != 0) continue;

        rep_result *r = &res[rep];
        r->eor_max_s = dt_max;
        r->eor_rank0_s = dt;
        r->events_min = ev_min;
        r->events_max = ev_max;
        r->events_sum = ev_sum;
        r->dropped_max = drop_max;
        parse_gather_line(err_text, r);
        r->flagged_ok = c.diverge_rank >= 0 && c.diverge_rank < world ? report_flags(dir, c.diverge_rank) : 1;
        /* every rank wrote its file before entering the gather, and the reductions above
         * follow every rank's closing call, so all files are there */
        for (int q = 0; q < world; q++) {
            char path[4200];
            struct stat sb;
            snprintf(path, sizeof path, "%s/rank-%05d.rsnap", dir, q);
            if (stat(path, &sb) == 0) {
                r->file_bytes_sum += (uint64_t)sb.st_size;
                if ((uint64_t)sb.st_size > r->file_bytes_max) r->file_bytes_max = (uint64_t)sb.st_size;
                r->files_found++;
            }
        }
        if (c.verbose) {
            fputs(out_text, stderr);
            fputs(err_text, stderr);
        } else {
            /* warnings still deserve to be seen */
            for (char *line = strtok(err_text, "\n"); line; line = strtok(NULL, "\n"))
                if (strstr(line, " WARN ")) fprintf(stderr, "%s\n", line);
        }
        free(out_text);
        free(err_text);
        if (rep == 0) rss_after = maxrss_kib();
    }

    if (rank_ == 0) {
        double eor[MAX_REPS], eor0[MAX_REPS], gs[MAX_REPS];
        int all_log = 1, all_flag = 1, all_files = 1;
        uint64_t drop = 0;
        for (int i = 0; i < c.reps; i++) {
            eor[i] = res[i].eor_max_s;
            eor0[i] = res[i].eor_rank0_s;
            gs[i] = res[i].gather_s;
            all_log &= res[i].log_found;
            all_flag &= res[i].flagged_ok;
            all_files &= res[i].files_found == world;
            if (res[i].dropped_max > drop) drop = res[i].dropped_max;
        }
        const rep_result *last = &res[c.reps - 1];
        double ev_mean = (double)last->events_sum / world;
        double file_mean = last->files_found ? (double)last->file_bytes_sum / last->files_found : 0;
        double bpe = ev_mean > 0 ? file_mean / ev_mean : 0;
        size_t sum_bytes = sizeof(rs_summary);
        const char *gather = env_or("RANKSNAP_GATHER", "auto");
        const char *stacks = env_or("RANKSNAP_STACKS", "native");
        double med = median(eor, c.reps), lo = eor[0], hi = eor[0];
        for (int i = 1; i < c.reps; i++) {
            if (eor[i] < lo) lo = eor[i];
            if (eor[i] > hi) hi = eor[i];
        }
        if (c.json) {
            printf("{\"bench\": \"gather_bench\", \"ranks\": %d, \"gather\": \"%s\", \"stacks\": \"%s\", "
                   "\"events_per_rank\": %" PRIu64 ", \"steps\": %d, \"reps\": %d, "
                   "\"events_recorded_min\": %" PRIu64 ", \"events_recorded_max\": %" PRIu64
                   ", \"events_dropped_max\": %" PRIu64 ", "
                   "\"end_of_range_s_median\": %.4f, \"end_of_range_s_min\": %.4f, \"end_of_range_s_max\": %.4f, "
                   "\"end_of_range_rank0_s_median\": %.4f, \"gather_s_median\": %.4f, "
                   "\"ranks_gathered\": %lld, \"summary_bytes_per_rank\": %zu, \"summary_bytes_ok\": %s, "
                   "\"summary_bytes_received\": %llu, \"snapshot_bytes_received\": %llu, "
                   "\"snapshot_file_bytes_mean\": %.0f, \"snapshot_file_bytes_max\": %" PRIu64
                   ", \"bytes_per_event\": %.2f, "
                   "\"rank0_maxrss_kib_before\": %ld, \"rank0_maxrss_kib_after\": %ld, "
                   "\"divergent_rank\": %d, \"divergent_flagged\": %s, \"log_line_found\": %s, "
                   "\"target_4_ranks_under_1s\": %s}\n",
                   world, gather, stacks, c.events, c.steps, c.reps, last->events_min, last->events_max,
                   drop, med, lo, hi,
                   median(eor0, c.reps), median(gs, c.reps), last->gathered, sum_bytes,
                   sum_bytes <= 4096 ? "true" : "false", last->bytes_summaries, last->bytes_snapshots,
                   file_mean, last->file_bytes_max, bpe, rss_before, rss_after, c.diverge_rank,
                   all_flag ? "true" : "false", all_log ? "true" : "false",
                   world != 4 ? "null" : med < 1.0 ? "true" : "false");
        } else {
            printf("gather_bench: %d ranks, RANKSNAP_GATHER=%s, RANKSNAP_STACKS=%s, %" PRIu64
                   " events per rank over %d steps, %d reps\n",
                   world, gather, stacks, c.events, c.steps, c.reps);
            printf("  end of range (gather+compare+report), max over ranks: median %.3f s\n", med);
            printf("  gather alone (INFO log, rank 0): median %.3f s, %lld of %d ranks\n",
                   median(gs, c.reps), last->gathered, world);
            printf("  phase 1: %zu bytes per rank (sizeof(rs_summary), %s 4 KiB), %llu bytes received\n",
                   sum_bytes, sum_bytes <= 4096 ? "<=" : ">", last->bytes_summaries);
            printf("  phase 2: %llu bytes of snapshots received\n", last->bytes_snapshots);
            printf("  snapshot files: mean %.0f bytes, %.2f bytes per event (%.0f events)\n", file_mean, bpe, ev_mean);
            printf("  rank 0 max RSS: %ld KiB before the first gather, %ld KiB after\n", rss_before, rss_after);
            printf("  divergent rank %d flagged: %s\n", c.diverge_rank, all_flag ? "yes" : "NO");
        }
        if (!all_log) fprintf(stderr, "gather_bench: the gather's INFO line was not found (RANKSNAP_DEBUG?)\n");
        if (!all_files) fprintf(stderr, "gather_bench: not every rank's snapshot file was found in %s\n", dir);
        if (drop) fprintf(stderr, "gather_bench: %" PRIu64 " events dropped: RANKSNAP_MAX_ENTRIES too small\n", drop);
    }
    MPI_Finalize();
    return 0;
}
