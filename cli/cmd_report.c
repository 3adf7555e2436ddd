/*
 * cmd_report.c — `ranksnap report DIR|FILE...`: the comparison of rank snapshots written to disk, as rank 0
 * prints it live. It works the way the gather does, so that a thousand files do not all sit in
 * memory: each file is read, summarized (and reduced to its timeline when a page is wanted) on one
 * of --jobs threads; the summaries decide the reference and the flagged ranks; only those files are
 * read again, whole, for their allocation sites. Snapshots read in the first pass are kept for the
 * second while they fit in RS_REPORT_KEEP_BYTES, so that a job of a few ranks is read once.
 * Memory: the summaries (2.4 KB a rank) and timelines (a few KB a rank), the kept snapshots, one
 * snapshot being decoded per thread, and the flagged ranks' and the reference's snapshots.
 * Results go to per-file slots and are sorted by rank, and errors are printed after the pass in
 * the order of the paths, so the output is the same whatever the number of threads.
 */
#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "attempt.h"
#include "cli.h"
#include "cmd_report.h"
#include "decode.h"
#include "errors.h"
#include "heap.h"
#include "options.h"
#include "pool.h"
#include "progress.h"
#include "report_html.h"
#include "report_json.h"
#include "report_text.h"
#include "roles.h"
#include "roles_found.h"
#include "site_rules.h"
#include "suggest.h"
#include "text.h"
#include "timeline.h"
#include "walk.h"

/* The first pass keeps, for the verdicts, each rank's sites in full (and the whole snapshot of a
 * rank that ran out of memory, for the replay of suggest.h) when all the snapshots are expected
 * to hold no more than this (and stops keeping snapshots when they do): a job of a few ranks, or
 * one long history, is read once; a larger job keeps only summaries, and the second pass reads
 * the flagged ranks and the reference again. Expected: 3 times a .rsnap file (its delta-encoded
 * columns grow to 33 bytes an event), 1.5 times a ring file (26 bytes an event), half a pickle
 * (most of its bytes are the trace's dicts). */
#define RS_REPORT_KEEP_BYTES ((uint64_t)64 << 20)
/* --jobs above this is refused: threads beyond the cores only add memory. */
#define RS_REPORT_MAX_JOBS 1024

typedef struct report_opts {
    int jobs;               /* --jobs, 0: the machine's cores */
    int json;
    int allow_mixed_jobs;
    const char *out_dir;
    const char *divergence; /* NULL: RANKSNAP_DIVERGENCE or its default */
    int rank_from_name;     /* PyTorch pickles: rank = the number in the file name */
    int all_frames;         /* sites are the innermost frame that is not ranksnap's (site_rules.h) */
    const char *site_skip;  /* --site-skip PATTERNS, NULL: RANKSNAP_SITE_SKIP */
    const char *html;       /* --html OUT.html */
    int progress;           /* --progress 1, --no-progress 0, -1: stderr is a terminal (progress.h) */
    int attempt;            /* --attempt K, -1: the newest complete one (attempt.h) */
    const char *groups;     /* --groups DIMS, NULL: RANKSNAP_GROUPS */
    rs_roles roles;         /* parsed from groups; n_roles 0: ranks not grouped */
} report_opts;

typedef struct report_file {
    char *path;
    rs_summary sum;
    uint64_t time_us; /* when the snapshot was taken, or the ring's last event */
    int64_t pid;      /* the process that wrote it */
    int is_ring;      /* recovered from a ring file a dead rank left */
    rs_snap *snap;    /* the whole snapshot when the first pass kept it, else NULL */
    rs_summary_sites sites; /* its sites in full, made with the summary (a small job's, or read again) */
    rs_rank_comms comms; /* its communicators, for the roles (roles_found.h) */
    rs_timeline *tl;  /* its timeline when a page is wanted (NULL: none could be made) */
    ranksnap_status tl_st;
} report_file;

static void report_file_release(report_file *f)
{
    rs_summary_sites_free(&f->sites);
    rs_rank_comms_free(&f->comms);
    rs_snap_free(f->snap);
    rs_timeline_free(f->tl);
    f->snap = NULL;
    f->tl = NULL;
}

/* The paths to read: each operand, a directory standing for its rank-*.rsnap files. */
typedef struct path_list {
    size_t n, cap;
    char **v;
} path_list;

static int path_push(path_list *l, const char *dir, const char *name)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    size_t len = (dir ? strlen(dir) + 1 : 0) + strlen(name) + 1;
    char *p = malloc(len);
    if (!p) return -1;
    if (dir)
        snprintf(p, len, "%s/%s", dir, name);
    else
        snprintf(p, len, "%s", name);
    l->v[l->n++] = p;
    return 0;
}

static void path_list_free(path_list *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}


/* The options a PyTorch pickle is read with: its rank is the number in its name
 * (--rank-from-name) or its place among the pickles given (*n_pickles counts them). -1 (and the
 * message in *error, malloc'ed) when the name holds no rank. */
static int report_pickle_opts(const report_opts *o, const char *path, int *n_pickles,
                              rs_torch_opts *po, int *is_pickle, char **error)
{
    rs_torch_opts_default(po);
    *is_pickle = !rs_decode_is_ring_path(path) && rs_decode_is_pickle_file(path) == 1;
    if (!*is_pickle) return 0;
    if (!o->rank_from_name) {
        po->rank = (*n_pickles)++;
        return 0;
    }
    if (rs_decode_rank_from_name(path, &po->rank) == 0) return 0;
    static const char fmt[] = "ranksnap: %s: --rank-from-name: no rank number in the file name "
                              "(such as snapshot_rank3.pickle, rank-3.pickle or "
                              "oom_rank-3_NAME.pickle)\n";
    size_t n = strlen(fmt) + strlen(path);
    *error = malloc(n);
    if (*error) snprintf(*error, n, fmt, path);
    return -1;
}

/* The files of one attempt of a restarted torchrun job (attempt.h), the others left out with a
 * note; returns the new count. */
static size_t report_one_attempt(const report_opts *o, report_file *f, size_t n)
{
    int *att = calloc(n ? n : 1, sizeof *att), *rank = calloc(n ? n : 1, sizeof *rank);
    int *world = calloc(n ? n : 1, sizeof *world);
    size_t w = n;
    if (att && rank && world) {
        int mixed = 0;
        for (size_t i = 0; i < n; i++) {
            att[i] = rs_attempt_of_name(f[i].path);
            rank[i] = f[i].sum.rank;
            world[i] = f[i].sum.world_size;
            mixed |= att[i] != att[0];
        }
        int keep = rs_attempt_choose(att, rank, world, n, o->attempt);
        if (mixed || o->attempt >= 0) {
            w = 0;
            for (size_t i = 0; i < n; i++) {
                if (att[i] == keep)
                    f[w++] = f[i];
                else
                    report_file_release(&f[i]);
            }
            if (w == 0) {
                /* the attempts there are, once each, in the order met */
                char seen[256] = "";
                for (size_t i = 0; i < n; i++) {
                    int dup = 0;
                    for (size_t j = 0; j < i; j++) dup |= att[j] == att[i];
                    size_t used = strlen(seen);
                    if (!dup)
                        snprintf(seen + used, sizeof seen - used, "%s%d", used ? ", " : "", att[i]);
                }
                fprintf(stderr, "ranksnap report: --attempt %d: no file of that attempt (the files "
                                "are of attempt %s)\n", keep, seen);
            } else if (w < n) {
                fprintf(stderr, "ranksnap: comparing attempt %d of the job; %zu files of other "
                                "attempts left out (--attempt K picks one)\n", keep, n - w);
            }
        }
    }
    free(att);
    free(rank);
    free(world);
    return w;
}

/* A rank with both a snapshot and a ring keeps whichever is newer: a snapshot written at the end
 * of a range, then a SIGKILL later, leaves a ring that knows more; a crash-path dump is at least
 * as new as its ring; a snapshot written at an OOM is kept even if the ring saw the frees that
 * followed. A snapshot kept over the ring of the same process takes how the process ended from
 * the ring, which alone saw it when it came after the snapshot (an exit after the range, the
 * MPI_Abort after an OOM). Files are in rank order; returns the new count. */
static size_t report_prefer_newest(report_file *f, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (w > 0 && f[w - 1].sum.rank == f[i].sum.rank && (f[w - 1].is_ring != f[i].is_ring) &&
            strcmp(f[w - 1].sum.job, f[i].sum.job) == 0) {
            report_file *ring = f[i].is_ring ? &f[i] : &f[w - 1];
            report_file *snap = f[i].is_ring ? &f[w - 1] : &f[i];
            /* an OOM dump is the moment that matters, whatever the ring saw after it */
            report_file *keep = ring->time_us > snap->time_us && !snap->sum.oom ? ring : snap;
            /* the ring's header was written with every note, the snapshot's copy at its dump */
            if (keep == snap && ring->pid == snap->pid && (ring->sum.end.flags & RS_END_HOW_)) {
                int before = !(snap->sum.end.flags & RS_END_HOW_);
                snap->sum.end = ring->sum.end;
                if (before) snap->sum.end.flags |= RS_END_AFTER_SNAPSHOT;
            }
            report_file_release(keep == ring ? snap : ring);
            f[w - 1] = *keep;
            continue;
        }
        f[w++] = f[i];
    }
    return w;
}

/* Adds the rank files of `dir` in name order; -1 (and a message) when there are none. */
static int add_dir(path_list *l, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "ranksnap: %s: cannot open the directory: %s\n", dir, strerror(errno));
        return -1;
    }
    size_t first = l->n;
    struct dirent *e;
    int oom = 0;
    while ((e = readdir(d)) != NULL)
        if (rs_attempt_is_rank_file(e->d_name) && path_push(l, dir, e->d_name) != 0) oom = 1;
    closedir(d);
    if (oom) {
        fprintf(stderr, "ranksnap: %s: out of memory listing the directory\n", dir);
        return -1;
    }
    if (l->n == first) {
        fprintf(stderr, "ranksnap: %s: no rank-*.rsnap files in this directory\n", dir);
        return -1;
    }
    qsort(l->v + first, l->n - first, sizeof *l->v, cmp_str);
    return 0;
}

/* The flag, else RANKSNAP_DIVERGENCE, parsed by the options table's own parser; only that one
 * variable is read, so that a bad value of an unrelated RANKSNAP_* does not stop a report. */
static int report_divergence(const report_opts *o, double *pct)
{
    rs_options opts;
    if (rs_options_load_one(&opts, "RANKSNAP_DIVERGENCE", o->divergence) != RANKSNAP_OK) {
        if (o->divergence)
            fprintf(stderr, "ranksnap report: --divergence '%s': expected a percentage such as "
                            "5%% or 2.5, above 0 and at most 1000\n", o->divergence);
        else
            fprintf(stderr, "ranksnap: %s\n", ranksnap_last_error());
        return -1;
    }
    *pct = opts.divergence;
    return 0;
}

/* The flag, else RANKSNAP_GROUPS: the roles each rank is compared within (roles.h). */
static int report_groups(report_opts *o)
{
    rs_options opts;
    if (rs_options_load_one(&opts, "RANKSNAP_GROUPS", o->groups) != RANKSNAP_OK) {
        /* the option table names the variable: a value given as the flag is named as the flag */
        const char *e = ranksnap_last_error(), *why = o->groups ? strstr(e, ": ") : NULL;
        if (why)
            fprintf(stderr, "ranksnap report: --groups %s%s\n", o->groups, why);
        else
            fprintf(stderr, "ranksnap: %s\n", e);
        return -1;
    }
    if (!opts.groups[0]) return 0;
    char source[320];
    snprintf(source, sizeof source, "%s %s", o->groups ? "--groups" : "RANKSNAP_GROUPS", opts.groups);
    if (rs_roles_parse(opts.groups, source, &o->roles) != RANKSNAP_OK) {
        fprintf(stderr, "ranksnap report: %s\n", ranksnap_last_error());
        return -1;
    }
    return 0;
}

static int report_parse(const rs_cli_verb *verb, int argc, char **argv, report_opts *o,
                        path_list *operands, int *code)
{
    rs_cli_args it;
    rs_cli_args_init(&it, argc, argv);
    const char *a, *jobs = NULL;
    int kind;
    while ((kind = rs_cli_next(verb, &it, &a)) != RS_CLI_END) {
        if (kind == RS_CLI_HELP) {
            *code = RS_EXIT_OK;
            return -1;
        }
        if (kind == RS_CLI_OPERAND) {
            if (path_push(operands, NULL, a) != 0) {
                fprintf(stderr, "ranksnap report: out of memory\n");
                *code = RS_EXIT_FAILED;
                return -1;
            }
            continue;
        }
        int got;
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if (strcmp(a, "--allow-mixed-jobs") == 0) {
            o->allow_mixed_jobs = 1;
        } else if (strcmp(a, "--rank-from-name") == 0) {
            o->rank_from_name = 1;
        } else if (strcmp(a, "--all-frames") == 0) {
            o->all_frames = 1;
        } else if (strcmp(a, "--progress") == 0 || strcmp(a, "--no-progress") == 0) {
            o->progress = a[2] == 'p';
        } else if ((got = rs_cli_flag_value("--attempt", argc, argv, &it.i, &a)) != 0) {
            long k = 0;
            if (got < 0 || rs_cli_number(a, 0, 1000000, &k) != 0) {
                *code = rs_cli_usage_error(verb, "--attempt expects an attempt number (0, 1, ...)");
                return -1;
            }
            o->attempt = (int)k;
        } else if ((got = rs_cli_flag_value("--jobs", argc, argv, &it.i, &jobs)) != 0) {
            long v = 0;
            if (got < 0 || rs_cli_number(jobs, 1, RS_REPORT_MAX_JOBS, &v) != 0) {
                *code = rs_cli_usage_error(verb, "--jobs expects a number of threads, 1 to %d",
                                           RS_REPORT_MAX_JOBS);
                return -1;
            }
            o->jobs = (int)v;
        } else if ((got = rs_cli_flag_value("--out", argc, argv, &it.i, &o->out_dir)) != 0 ||
                   (got = rs_cli_flag_value("--divergence", argc, argv, &it.i, &o->divergence)) != 0 ||
                   (got = rs_cli_flag_value("--html", argc, argv, &it.i, &o->html)) != 0 ||
                   (got = rs_cli_flag_value("--groups", argc, argv, &it.i, &o->groups)) != 0 ||
                   (got = rs_cli_flag_value("--site-skip", argc, argv, &it.i, &o->site_skip)) != 0) {
            if (got < 0 || (o->out_dir && !*o->out_dir) || (o->divergence && !*o->divergence) ||
                (o->html && !*o->html) || (o->groups && !*o->groups)) {
                *code = rs_cli_usage_error(verb, "%s expects a value", a);
                return -1;
            }
        } else {
            *code = rs_cli_usage_error(verb, "unknown option '%s'", a);
            return -1;
        }
    }
    if (operands->n == 0) {
        *code = rs_cli_usage_error(verb, "expected a directory or at least one FILE");
        return -1;
    }
    return 0;
}

static int cmp_file_rank(const void *pa, const void *pb)
{
    const report_file *a = pa, *b = pb;
    if (a->sum.rank != b->sum.rank) return a->sum.rank < b->sum.rank ? -1 : 1;
    return strcmp(a->path, b->path);
}

/* Two files of one rank: the report would compare the wrong things, so there is none. Files of
 * another job than most of them (a directory two jobs wrote into) are left out, each with an
 * error naming it and both jobs, unless --allow-mixed-jobs; the report covers the rest. Files are
 * in rank order. Returns the number kept, or -1. */
static long report_check_files(const report_opts *o, report_file *f, size_t n, path_list *failed)
{
    char a[256], b[256], ja[128], jb[128];
    size_t w = n;
    if (!o->allow_mixed_jobs && n > 0) {
        /* the job most files belong to; ties go to the one of the lowest rank. Done before the
         * check below: two jobs that shared a directory each left a file of rank 0. */
        size_t best = 0, best_count = 0;
        for (size_t i = 0; i < n; i++) {
            size_t c = 0;
            for (size_t j = 0; j < n; j++) c += strcmp(f[j].sum.job, f[i].sum.job) == 0;
            if (c > best_count) best = i, best_count = c;
        }
        report_file keep = f[best];
        w = 0;
        for (size_t i = 0; i < n; i++) {
            if (strcmp(f[i].sum.job, keep.sum.job) != 0) {
                fprintf(stderr, "ranksnap: %s is from job %s but %s (and %zu files in all) are from job %s; "
                                "left out (pass --allow-mixed-jobs to compare them anyway)\n",
                        rs_text_escape(a, sizeof a, f[i].path),
                        rs_text_escape(ja, sizeof ja, f[i].sum.job[0] ? f[i].sum.job : "(none)"),
                        rs_text_escape(b, sizeof b, keep.path), best_count,
                        rs_text_escape(jb, sizeof jb, keep.sum.job[0] ? keep.sum.job : "(none)"));
                if (path_push(failed, NULL, f[i].path) != 0) return -1;
                report_file_release(&f[i]);
                continue;
            }
            f[w++] = f[i];
        }
    }
    for (size_t i = 1; i < w; i++) {
        if (f[i].sum.rank == f[i - 1].sum.rank) {
            fprintf(stderr, "ranksnap: %s and %s are both rank %d; give one snapshot per rank\n",
                    rs_text_escape(a, sizeof a, f[i - 1].path), rs_text_escape(b, sizeof b, f[i].path),
                    (int)f[i].sum.rank);
            return -1;
        }
    }
    return (long)w;
}

static int needs_full(const rs_compare_result *r, int32_t rank)
{
    if (rank == r->reference_rank) return 1;
    for (size_t i = 0; i < r->n_oom; i++)
        if (r->oom[i].rank == rank) return 1;
    for (size_t i = 0; i < r->n_divergent; i++)
        if (r->divergent[i].rank == rank) return 1;
    return 0;
}

/* Renders the report into a malloc'ed string. */
static ranksnap_status render(const rs_compare_result *r, int json, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    FILE *m = open_memstream(text, len);
    if (!m) return RANKSNAP_ERR_HOST_MEMORY;
    ranksnap_status st = json ? rs_report_json(m, r) : rs_report_text(m, r);
    if (fclose(m) != 0 && st == RANKSNAP_OK) st = RANKSNAP_ERR_HOST_MEMORY;
    if (st != RANKSNAP_OK) {
        free(*text);
        *text = NULL;
    }
    return st;
}

/* The snapshot of `f` read again, whole: NULL when it cannot be (it changed or vanished since
 * the first read; the report then falls back to its summary). */
static rs_snap *report_reread(const report_opts *o, const report_file *f)
{
    int ring, closed;
    rs_snap *snap = NULL;
    rs_torch_opts po;
    rs_torch_opts_default(&po);
    po.rank = f->sum.rank;
    if (rs_decode_file_ex(f->path, &po, &snap, &ring, &closed) != RANKSNAP_OK ||
        snap->rank != f->sum.rank) {
        rs_snap_free(snap);
        snap = NULL;
    }
    return snap;
}

/* report.html draws every rank's history, reduced to a bounded timeline (timeline.h) while the
 * first pass had the file in memory. That pass chose the number of buckets from the number of
 * files given; when fewer files made it into the report and the page wants another number,
 * each file is read once more, one at a time, as the page's own pass. A file without a
 * timeline is drawn as "summary only". */
static ranksnap_status render_html(const report_opts *o, const rs_compare_result *r,
                                   report_file *f, size_t n, uint32_t points_built,
                                   FILE *progress, char **html, size_t *len)
{
    *html = NULL;
    *len = 0;
    uint32_t points = rs_timeline_points_for(n);
    ranksnap_status st = RANKSNAP_OK;
    for (size_t i = 0; i < n && st == RANKSNAP_OK; i++)
        if (points == points_built && f[i].tl_st != RANKSNAP_OK) st = f[i].tl_st;
    if (st == RANKSNAP_OK && points != points_built) {
        uint64_t bytes = 0;
        for (size_t i = 0; i < n; i++) {
            struct stat sb;
            if (stat(f[i].path, &sb) == 0) bytes += (uint64_t)sb.st_size;
        }
        rs_progress pg;
        rs_progress_begin(&pg, progress, "drawing", n, bytes);
        for (size_t i = 0; i < n && st == RANKSNAP_OK; i++) {
            rs_snap *snap = f[i].snap ? f[i].snap : report_reread(o, &f[i]);
            struct stat sb;
            rs_timeline_free(f[i].tl);
            f[i].tl = NULL;
            if (snap) st = rs_timeline_build(snap, points, &f[i].tl);
            if (snap != f[i].snap) rs_snap_free(snap);
            rs_progress_step(&pg, stat(f[i].path, &sb) == 0 ? (uint64_t)sb.st_size : 0);
        }
        rs_progress_end(&pg);
    }
    rs_timeline **tl = calloc(n ? n : 1, sizeof *tl);
    if (st == RANKSNAP_OK && !tl) st = RANKSNAP_ERR_HOST_MEMORY;
    for (size_t i = 0; tl && i < n; i++) tl[i] = f[i].tl;
    FILE *m = st == RANKSNAP_OK ? open_memstream(html, len) : NULL;
    if (st == RANKSNAP_OK && !m) st = RANKSNAP_ERR_HOST_MEMORY;
    if (m) {
        st = rs_report_html(m, r, (const rs_timeline *const *)tl, n);
        if (fclose(m) != 0 && st == RANKSNAP_OK) st = RANKSNAP_ERR_HOST_MEMORY;
    }
    free(tl);
    if (st != RANKSNAP_OK) {
        free(*html);
        *html = NULL;
        *len = 0;
    }
    return st;
}

static int write_reports(const char *dir, const char *txt, size_t txt_len, const char *json,
                         size_t json_len, const char *html, size_t html_len)
{
    struct stat sb;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "ranksnap: --out %s: cannot create the directory: %s\n", dir,
                strerror(errno));
        return -1;
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "ranksnap: --out %s: not a directory\n", dir);
        return -1;
    }
    const char *names[3] = {"report.txt", "report.json", "report.html"};
    const char *bufs[3] = {txt, json, html};
    size_t lens[3] = {txt_len, json_len, html_len};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(dir) + strlen(names[i]) + 2;
        char *path = malloc(n);
        if (!path) {
            fprintf(stderr, "ranksnap: out of memory\n");
            return -1;
        }
        snprintf(path, n, "%s/%s", dir, names[i]);
        ranksnap_status st = rs_atomic_file_write(path, bufs[i], lens[i]);
        if (st != RANKSNAP_OK) rs_cli_failure("ranksnap", path, st);
        free(path);
        if (st != RANKSNAP_OK) return -1;
    }
    return 0;
}

/* The second pass: the files the verdict needs whole and the first pass did not keep. */
typedef struct reread_pass {
    const report_opts *o;
    report_file *f;
    rs_snap **full;
    const size_t *which;
} reread_pass;

static void reread_one(void *ctx, size_t k)
{
    reread_pass *rp = ctx;
    size_t i = rp->which[k];
    rp->full[i] = report_reread(rp->o, &rp->f[i]);
    /* its sites made here, in parallel, rather than by the comparison; the summary is the
     * first pass's */
    rs_summary again;
    if (rp->full[i] && !rp->f[i].sites.ok) rs_summary_of_sites(rp->full[i], &again, &rp->f[i].sites);
}

/* Compares the summaries, gets the flagged and reference ranks' sites (kept from the first pass,
 * or made from their files read again) and the OOM ranks' whole snapshots, and prints or writes
 * the report. `failed` are the operands that could not be read. */
static int report_emit(const report_opts *o, double pct, report_file *f, size_t n,
                       const path_list *failed, uint32_t points_built, FILE *progress)
{
    int code = RS_EXIT_FAILED;
    rs_compare_config cfg;
    rs_compare_config_default(&cfg);
    cfg.divergence_pct = pct;
    if (o->roles.n_roles) cfg.roles = &o->roles;
    rs_roles found; /* none declared: from the ranks' communicators (roles_found.h) */
    memset(&found, 0, sizeof found);
    int world = 0;
    rs_summary *sums = malloc(n * sizeof *sums);
    rs_rank_comms *comms = malloc(n * sizeof *comms);
    rs_snap **full = calloc(n, sizeof *full);
    const rs_summary_sites **sites = calloc(n, sizeof *sites);
    size_t *which = malloc(n * sizeof *which), n_which = 0;
    rs_compare_result *r = NULL;
    char *txt = NULL, *json = NULL, *html = NULL;
    size_t txt_len = 0, json_len = 0, html_len = 0;
    if (!sums || !comms || !full || !sites || !which) {
        fprintf(stderr, "ranksnap: out of memory for %zu summaries\n", n);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        sums[i] = f[i].sum;
        comms[i] = f[i].comms; /* borrowed */
        comms[i].rank = sums[i].rank;
        if (sums[i].world_size > world) world = sums[i].world_size;
    }
    if (cfg.roles && world && cfg.roles->world_size != world) {
        /* a grouping of another job's size would compare ranks with the wrong peers */
        fprintf(stderr, "ranksnap report: %s describes %d ranks, but the job has %d\n",
                o->roles.source, cfg.roles->world_size, world);
        code = RS_EXIT_USAGE;
        goto done;
    }
    if (!cfg.roles) rs_roles_found_apply(&cfg, comms, n, world, &found);
    ranksnap_status st = rs_compare(sums, NULL, n, world, &cfg, &r);
    for (size_t i = 0; st == RANKSNAP_OK && i < n; i++) {
        if (!needs_full(r, sums[i].rank)) {
            /* what the first pass kept and the verdict does not need goes now */
            rs_snap_free(f[i].snap);
            f[i].snap = NULL;
            rs_summary_sites_free(&f[i].sites);
        } else if (f[i].snap) {
            full[i] = f[i].snap;
        } else if (!f[i].sites.ok || sums[i].oom) {
            which[n_which++] = i; /* its sites, or the snapshot an OOM's replay needs */
        }
    }
    if (st == RANKSNAP_OK && n_which) {
        reread_pass rp = {o, f, full, which};
        rs_pool_run(n_which, o->jobs, reread_one, NULL, &rp);
        for (size_t k = 0; k < n_which; k++) f[which[k]].snap = full[which[k]];
    }
    if (st == RANKSNAP_OK) {
        rs_compare_result_free(r);
        r = NULL;
        for (size_t i = 0; i < n; i++) sites[i] = &f[i].sites;
        st = rs_compare_ex(sums, (const rs_snap *const *)full, sites, n, world, &cfg, &r);
    }
    for (size_t i = 0; st == RANKSNAP_OK && i < failed->n; i++)
        st = rs_compare_add_note(r, "%s could not be read and is left out", failed->v[i]);
    /* the OOM verdict: which allocator setting would have avoided it (replayed) */
    for (size_t i = 0; st == RANKSNAP_OK && i < n; i++) {
        char note[640];
        if (full[i] && full[i]->has_oom && rs_suggest_note(full[i], f[i].path, note, sizeof note) ==
                                               RANKSNAP_OK && note[0])
            st = rs_compare_add_note(r, "%s", note);
    }
    if (st == RANKSNAP_OK && (!o->json || o->out_dir)) st = render(r, 0, &txt, &txt_len);
    if (st == RANKSNAP_OK && (o->json || o->out_dir)) st = render(r, 1, &json, &json_len);
    if (st == RANKSNAP_OK && (o->html || o->out_dir))
        st = render_html(o, r, f, n, points_built, progress, &html, &html_len);
    if (st != RANKSNAP_OK) {
        const char *d = ranksnap_last_error();
        fprintf(stderr, "ranksnap: report: %s\n", d[0] ? d : ranksnap_strerror(st));
        goto done;
    }
    if (o->json)
        fwrite(json, 1, json_len, stdout);
    else
        fwrite(txt, 1, txt_len, stdout);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "ranksnap: writing the report to stdout failed: %s\n", strerror(errno));
        goto done;
    }
    if (o->out_dir && write_reports(o->out_dir, txt, txt_len, json, json_len, html, html_len) != 0)
        goto done;
    if (o->html) {
        ranksnap_status hst = rs_atomic_file_write(o->html, html, html_len);
        if (hst != RANKSNAP_OK) {
            rs_cli_failure("ranksnap", o->html, hst);
            goto done;
        }
    }
    code = RS_EXIT_OK;
done:
    free(full);
    free(sites);
    free(which);
    rs_roles_free(&found);
    free(sums);
    free(comms);
    rs_compare_result_free(r);
    free(txt);
    free(json);
    free(html);
    return code;
}

/* One path of the first pass: filled by the thread that read it. */
typedef struct read_slot {
    rs_torch_opts po;
    char *error;        /* why it was left out (printed after the pass, in path order) */
    ranksnap_status st; /* of the decode, when that is why */
    int leftover;       /* a ring whose rank finalized cleanly: its .rsnap speaks */
    int done;           /* read into `f` */
    uint64_t bytes;     /* the file's size, for the progress line */
    report_file f;
} read_slot;

typedef struct read_pass {
    char **paths;
    read_slot *slots;
    uint32_t points;   /* timeline buckets, 0 when no page is wanted */
    int keep;          /* keep the sites, and the OOM snapshots, for the verdicts */
    atomic_uint_fast64_t kept; /* bytes of the snapshots kept */
    rs_progress *pg;
} read_pass;

/* What a decoded snapshot holds, roughly: the history, the blocks, the symbol tables. */
static uint64_t snap_bytes(const rs_snap *s)
{
    uint64_t b = sizeof *s + 33 * s->history.count;
    b += s->n_segments * (uint64_t)sizeof(rs_snap_segment);
    for (size_t i = 0; i < s->n_segments; i++) b += s->segments[i].n_blocks * (uint64_t)sizeof(rs_snap_block);
    b += s->n_frames * (uint64_t)(sizeof(rs_snap_frame) + 64);
    for (size_t i = 0; i < s->n_stacks; i++) b += sizeof(rs_snap_stack) + 4 * (uint64_t)s->stacks[i].n_frames;
    if (s->walk) /* the decoder's walk: its slots, index and each event's slot */
        b += s->walk->n_slots * (uint64_t)(sizeof(rs_walk_block) + 24) + 4 * s->history.count;
    return b;
}

static void read_one(void *ctx, size_t i)
{
    read_pass *rp = ctx;
    read_slot *sl = &rp->slots[i];
    if (sl->error || sl->st != RANKSNAP_OK) return; /* --rank-from-name found no rank */
    rs_snap *snap = NULL;
    int ring = 0, closed = 0;
    sl->st = rs_decode_file_ex(rp->paths[i], &sl->po, &snap, &ring, &closed);
    if (sl->st != RANKSNAP_OK) {
        const char *d = ranksnap_last_error();
        sl->error = strdup(d[0] ? d : ranksnap_strerror(sl->st));
        if (!sl->error) sl->st = RANKSNAP_ERR_HOST_MEMORY;
        return;
    }
    if (ring && closed) {
        sl->leftover = 1;
        rs_snap_free(snap);
        return;
    }
    report_file *f = &sl->f;
    f->path = rp->paths[i];
    f->time_us = snap->time_us;
    f->pid = snap->pid;
    f->is_ring = ring;
    if ((sl->st = rs_rank_comms_of(snap, &f->comms)) != RANKSNAP_OK) {
        sl->error = strdup(ranksnap_last_error());
        rs_snap_free(snap);
        return;
    }
    if (rp->points) f->tl_st = rs_timeline_build(snap, rp->points, &f->tl);
    if (!rp->keep) {
        rs_summary_of(snap, &f->sum);
        rs_snap_free(snap);
        sl->done = 1;
        return;
    }
    /* Any rank may be a verdict's: its sites made now, on this thread, and the snapshot freed
     * (its memory serves this thread's next file) unless it ran out of memory. */
    rs_summary_of_sites(snap, &f->sum, &f->sites);
    uint64_t b = snap->has_oom ? snap_bytes(snap) : 0;
    if (b && atomic_fetch_add(&rp->kept, b) + b <= RS_REPORT_KEEP_BYTES) {
        f->snap = snap;
    } else {
        if (b) atomic_fetch_sub(&rp->kept, b);
        rs_snap_free(snap);
    }
    sl->done = 1;
}

static void read_done(void *ctx, size_t i)
{
    read_pass *rp = ctx;
    rs_progress_step(rp->pg, rp->slots[i].bytes);
}

static int run_report(const rs_cli_verb *verb, int argc, char **argv)
{
    report_opts o;
    memset(&o, 0, sizeof o);
    o.progress = -1;
    o.attempt = -1;
    path_list operands = {0, 0, NULL}, paths = {0, 0, NULL}, failed = {0, 0, NULL};
    report_file *files = NULL;
    read_slot *slots = NULL;
    size_t n = 0;
    int code = RS_EXIT_OK, n_pickles = 0;
    double pct = 0;
    FILE *progress = NULL;
    rs_progress pg;
    memset(&pg, 0, sizeof pg);
    if (report_parse(verb, argc, argv, &o, &operands, &code) != 0) goto done;
    if (report_divergence(&o, &pct) != 0 || report_groups(&o) != 0) {
        code = RS_EXIT_USAGE;
        goto done;
    }
    if (rs_site_rules_set(o.site_skip, o.all_frames) != RANKSNAP_OK) {
        code = rs_cli_usage_error(verb, "--site-skip %s", ranksnap_last_error());
        goto done;
    }
    if (o.jobs == 0) o.jobs = rs_pool_cores();
    rs_heap_keep_freed_memory();
    rs_site_rules_remember(1); /* the ranks of a job name the same frames */
    code = RS_EXIT_FAILED;
    for (size_t i = 0; i < operands.n; i++) {
        struct stat sb;
        int bad = 0;
        if (stat(operands.v[i], &sb) == 0 && S_ISDIR(sb.st_mode))
            bad = add_dir(&paths, operands.v[i]);
        else
            bad = path_push(&paths, NULL, operands.v[i]);
        if (bad && path_push(&failed, NULL, operands.v[i]) != 0) goto done;
    }
    files = calloc(paths.n ? paths.n : 1, sizeof *files);
    slots = calloc(paths.n ? paths.n : 1, sizeof *slots);
    if (!files || !slots) goto done;
    /* a pickle's rank is its place among the pickles given: settled before the threads start */
    uint64_t bytes = 0, decoded = 0;
    size_t expected = 0;
    for (size_t i = 0; i < paths.n; i++) {
        struct stat sb;
        int pickle = 0;
        slots[i].bytes = stat(paths.v[i], &sb) == 0 ? (uint64_t)sb.st_size : 0;
        bytes += slots[i].bytes;
        if (report_pickle_opts(&o, paths.v[i], &n_pickles, &slots[i].po, &pickle,
                               &slots[i].error) == 0)
            expected++;
        else if (!slots[i].error)
            slots[i].st = RANKSNAP_ERR_HOST_MEMORY;
        decoded += pickle ? slots[i].bytes / 2
                   : rs_decode_is_ring_path(paths.v[i]) ? slots[i].bytes / 2 * 3
                                                        : 3 * slots[i].bytes;
    }
    read_pass rp = {paths.v, slots, 0, decoded <= RS_REPORT_KEEP_BYTES, 0, &pg};
    atomic_init(&rp.kept, 0);
    if (o.html || o.out_dir) rp.points = rs_timeline_points_for(expected);
    /* "reading 3/32 files": three are read */
    if (rs_progress_wanted(o.progress, isatty(STDERR_FILENO), paths.n, bytes)) progress = stderr;
    rs_progress_begin(&pg, progress, "reading", paths.n, bytes);
    rs_pool_run(paths.n, o.jobs, read_one, read_done, &rp);
    rs_progress_end(&pg);
    for (size_t i = 0; i < paths.n; i++) {
        read_slot *sl = &slots[i];
        if (sl->done) {
            files[n++] = sl->f;
            continue;
        }
        if (sl->leftover) continue;
        if (sl->error && sl->st == RANKSNAP_OK) {
            fputs(sl->error, stderr); /* --rank-from-name's own message */
        } else {
            rs_error(sl->st, "%s", sl->error ? sl->error : "");
            rs_cli_failure("ranksnap", paths.v[i], sl->st);
        }
        if (path_push(&failed, NULL, paths.v[i]) != 0) goto done;
    }
    n = report_one_attempt(&o, files, n);
    if (n == 0) {
        fprintf(stderr, "ranksnap report: no snapshot could be read\n");
        goto done;
    }
    qsort(files, n, sizeof *files, cmp_file_rank);
    n = report_prefer_newest(files, n);
    long kept = report_check_files(&o, files, n, &failed);
    if (kept < 0) goto done;
    n = (size_t)kept;
    code = report_emit(&o, pct, files, n, &failed, rp.points, progress);
done:
    rs_progress_end(&pg);
    for (size_t i = 0; files && i < n; i++) report_file_release(&files[i]);
    for (size_t i = 0; slots && i < paths.n; i++) free(slots[i].error);
    free(slots);
    free(files);
    path_list_free(&operands);
    path_list_free(&paths);
    path_list_free(&failed);
    rs_roles_free(&o.roles);
    return code;
}

const rs_cli_verb rs_cmd_report = {
"report", "DIR|FILE... [--json] [--out DIR] [--html OUT.html] [--divergence PCT]\n"
     "                [--groups DIMS]\n"
     "                [--allow-mixed-jobs] [--rank-from-name] [--site-skip PATTERNS]\n"
     "                [--all-frames] [--attempt K] [--[no-]progress] [--jobs N]",
     "compare the ranks: peaks, OOMs, ranks diverging from the median, and the sites why",
     "  DIR                 every rank-*.rsnap and rank-*.pickle (PyTorch jobs) in it, and\n"
     "                      the rank-*.ring files of ranks that died (recovered, incomplete)\n"
     "  --attempt K         a restarted torchrun job: compare attempt K (rank-*.aK.*; by\n"
     "                      default the newest attempt with a file for each of its ranks)\n"
     "  --json              print report.json (schema: docs/FORMAT.md) instead of the text\n"
     "  --out DIR           also write DIR/report.txt, DIR/report.json and DIR/report.html\n"
     "  --html OUT.html     also write the HTML report (one self-contained page with every\n"
     "                      rank's timeline) to OUT.html\n"
     "  --divergence PCT    flag ranks whose peak is more than PCT% from the median\n"
     "                      (default: RANKSNAP_DIVERGENCE, else 5%)\n"
     "  --groups DIMS       compare each rank with the ranks of its role: dimensions in\n"
     "                      rank order, outermost first, e.g. pp=4,dp=8; dp names the\n"
     "                      replicas (default: RANKSNAP_GROUPS)\n"
     "  --allow-mixed-jobs  compare snapshots of different jobs instead of refusing\n"
     "  FILE.pickle         a PyTorch snapshot (torch.cuda.memory._dump_snapshot); its rank is\n"
     "                      its place among the pickles given, or with\n"
     "  --rank-from-name    the number in its name: snapshot_rank3, rank-3, oom_rank-3_NAME\n"
     "  --site-skip PATTERNS  frames never named as a site, added to the defaults (CUDA,\n"
     "                      NCCL, libc, Python, PyTorch's machinery): comma-separated shell\n"
     "                      patterns of function, file or library (default: RANKSNAP_SITE_SKIP)\n"
     "  --all-frames        a site is the innermost frame that is not ranksnap's, nothing\n"
     "                      else skipped (by default the user's line: docs/PYTORCH.md, Sites)\n"
     "  --progress, --no-progress\n"
     "                      progress on stderr: by default shown when stderr is a terminal\n"
     "                      and there are 8 files or 16 MiB or more\n"
     "  --jobs N            read N files at a time, each on a thread of its own (default: the\n"
     "                      machine's cores); the report is the same for every N\n"
     "exit status: 0 a report was produced, 1 no snapshot could be read (or two of one rank,\n"
     "or of different jobs), 2 usage error\n",
     run_report};

int rs_cmd_report_dir(const char *dir, int json)
{
    char *args[2] = {(char *)"--json", (char *)dir};
    return run_report(&rs_cmd_report, json ? 2 : 1, json ? args : args + 1);
}
