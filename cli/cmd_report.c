/*
 * cmd_report.c — `ranksnap report DIR|FILE...`: the comparison of rank snapshots written to disk, as rank 0
 * prints it live. It works the way the gather does, so that a thousand files do not all sit in
 * memory: each file is read, summarized (and reduced to its timeline when a page is wanted) on one
 * of --jobs threads; the summaries decide the reference and the flagged ranks; only those files are
 * read again, whole, for their allocation sites. Snapshots read in the first pass are kept for the
 * second while they fit in RS_JOB_KEEP_BYTES, so that a job of a few ranks is read once (the
 * reading: job_files.h). Memory: the summaries (2.4 KB a rank) and timelines (a few KB a rank),
 * the kept snapshots, one snapshot being decoded per thread, and the flagged ranks' and the
 * reference's snapshots.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "atomic_file.h"
#include "cli.h"
#include "cmd_report.h"
#include "errors.h"
#include "job_files.h"
#include "options.h"
#include "progress.h"
#include "report_html.h"
#include "report_json.h"
#include "report_text.h"
#include "roles.h"
#include "roles_found.h"
#include "suggest.h"
#include "timeline.h"

typedef struct report_opts {
    rs_job_flags rf;        /* how the files are read (job_files.h) */
    int json;
    const char *out_dir;
    const char *divergence; /* NULL: RANKSNAP_DIVERGENCE or its default */
    const char *html;       /* --html OUT.html */
    int attempt;            /* --attempt K, -1: the newest complete one (attempt.h) */
    const char *groups;     /* --groups DIMS, NULL: RANKSNAP_GROUPS */
    rs_roles roles;         /* parsed from groups; n_roles 0: ranks not grouped */
} report_opts;

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
    return rs_cli_groups("ranksnap report", "--groups", o->groups, &o->roles);
}

static int report_parse(const rs_cli_verb *verb, int argc, char **argv, report_opts *o,
                        rs_job_paths *operands, int *code)
{
    rs_cli_args it;
    rs_cli_args_init(&it, argc, argv);
    const char *a;
    int kind;
    while ((kind = rs_cli_next(verb, &it, &a)) != RS_CLI_END) {
        if (kind == RS_CLI_HELP) {
            *code = RS_EXIT_OK;
            return -1;
        }
        if (kind == RS_CLI_OPERAND) {
            if (rs_job_paths_push(operands, NULL, a) != 0) {
                fprintf(stderr, "ranksnap report: out of memory\n");
                *code = RS_EXIT_FAILED;
                return -1;
            }
            continue;
        }
        int got;
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if ((got = rs_job_flag(verb, argc, argv, &it.i, &o->rf, code)) != 0) {
            if (got < 0) return -1;
        } else if ((got = rs_cli_flag_value("--attempt", argc, argv, &it.i, &a)) != 0) {
            long k = 0;
            if (got < 0 || rs_cli_number(a, 0, 1000000, &k) != 0) {
                *code = rs_cli_usage_error(verb, "--attempt expects an attempt number (0, 1, ...)");
                return -1;
            }
            o->attempt = (int)k;
        } else if ((got = rs_cli_flag_value("--out", argc, argv, &it.i, &o->out_dir)) != 0 ||
                   (got = rs_cli_flag_value("--divergence", argc, argv, &it.i, &o->divergence)) != 0 ||
                   (got = rs_cli_flag_value("--html", argc, argv, &it.i, &o->html)) != 0 ||
                   (got = rs_cli_flag_value("--groups", argc, argv, &it.i, &o->groups)) != 0) {
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

/* report.html draws every rank's history, reduced to a bounded timeline (timeline.h) while the
 * first pass had the file in memory. That pass chose the number of buckets from the number of
 * files given; when fewer files made it into the report and the page wants another number,
 * each file is read once more, one at a time, as the page's own pass. A file without a
 * timeline is drawn as "summary only". */
static ranksnap_status render_html(const report_opts *o, const rs_compare_result *r,
                                   rs_job_file *f, size_t n, uint32_t points_built,
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
            rs_snap *snap = f[i].snap ? f[i].snap : rs_job_reread(&f[i]);
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

/* Compares the summaries, gets the flagged and reference ranks' sites (kept from the first pass,
 * or made from their files read again) and the OOM ranks' whole snapshots, and prints or writes
 * the report. `failed` are the operands that could not be read. */
static int report_emit(const report_opts *o, double pct, rs_job_file *f, size_t n,
                       const rs_job_paths *failed, uint32_t points_built, FILE *progress)
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
        rs_job_reread_sites(f, full, which, n_which, o->rf.jobs);
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
    static const char *const names[3] = {"report.txt", "report.json", "report.html"};
    char *const bufs[3] = {txt, json, html};
    const size_t lens[3] = {txt_len, json_len, html_len};
    if (o->out_dir && rs_cli_write_files(o->out_dir, names, bufs, lens, 3) != 0) goto done;
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

static int run_report(const rs_cli_verb *verb, int argc, char **argv)
{
    report_opts o;
    memset(&o, 0, sizeof o);
    rs_job_flags_init(&o.rf);
    o.attempt = -1;
    rs_job_paths operands = {0, 0, NULL};
    rs_job job;
    memset(&job, 0, sizeof job);
    int code = RS_EXIT_OK;
    double pct = 0;
    FILE *progress = NULL;
    if (report_parse(verb, argc, argv, &o, &operands, &code) != 0) goto done;
    if (report_divergence(&o, &pct) != 0 || report_groups(&o) != 0) {
        code = RS_EXIT_USAGE;
        goto done;
    }
    if (rs_job_flags_apply(verb, &o.rf, &code) != 0) goto done;
    code = RS_EXIT_FAILED;
    rs_job_opts jo = {"ranksnap report", o.rf.jobs, o.rf.rank_from_name, o.rf.allow_mixed_jobs,
                      o.attempt};
    if (rs_job_list(&job, &jo, operands.v, operands.n) != 0) goto done;
    rs_job_read_opts ro = {job.decoded <= RS_JOB_KEEP_BYTES, 0, 0, o.rf.progress};
    if (o.html || o.out_dir) ro.points = rs_timeline_points_for(job.expected);
    if (rs_job_progress_wanted(&job, o.rf.progress)) progress = stderr;
    if (rs_job_read(&job, &ro, progress) != 0) goto done;
    code = report_emit(&o, pct, job.f, job.n, &job.failed, ro.points, progress);
done:
    rs_job_free(&job);
    rs_job_paths_free(&operands);
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
     "                      the rank-*.ring files of ranks that died (recovered, incomplete);\n"
     "                      where there are none, its pickles named with their rank\n"
     "                      (snapshot_rank3.pickle), each one's rank from its name\n"
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
