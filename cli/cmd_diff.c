/*
 * cmd_diff.c — `ranksnap diff BEFORE AFTER`: two runs of a job compared rank by rank and role by
 * role (diff.h), and the gate a CI pipeline stops on (--fail-on, diff_gate.h).
 *
 * Each run is read as `ranksnap report` reads a job (job_files.h): when both runs' snapshots
 * are expected to fit in RS_JOB_KEEP_BYTES every rank's sites are made in the one read;
 * otherwise the first read keeps summaries, the diff of the summaries says which ranks it
 * explains, and only those files are read again for their sites.
 *
 * A gate must not pass what it did not see: a run with a file that cannot be read, or (given as a
 * directory) without a file for every rank of its job, is refused (exit 2; --allow-missing
 * compares the ranks there are), as is a condition that cannot be checked. Exit status: 0 no
 * condition exceeded, 1 one was, 2 bad input, a missing run or a usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "atomic_file.h"
#include "cli.h"
#include "cmd_diff.h"
#include "diff.h"
#include "diff_gate.h"
#include "diff_html.h"
#include "diff_json.h"
#include "diff_text.h"
#include "job_files.h"
#include "options.h"
#include "roles_found.h"
#include "text.h"

static const char *const run_name[2] = {"before", "after"};

typedef struct diff_opts {
    const char *operand[2];
    int n_operands;
    rs_job_flags rf;           /* how the files are read (job_files.h) */
    int json;
    const char *out_dir;
    const char *html;
    const char *threshold;
    const char *groups;        /* --groups: both runs (NULL: RANKSNAP_GROUPS) */
    const char *run_groups[2]; /* --before-groups, --after-groups */
    int allow_missing;
    rs_diff_gate gate;
} diff_opts;

/* The flags that take a value: 1 matched (set), 0 none of them, -1 the value is missing or empty
 * (*name: the flag). */
static int valued_flag(diff_opts *o, int argc, char **argv, int *i, const char **name)
{
    const struct {
        const char *name;
        const char **dst;
    } flags[] = {{"--out", &o->out_dir},          {"--html", &o->html},
                 {"--threshold", &o->threshold},  {"--groups", &o->groups},
                 {"--before-groups", &o->run_groups[0]}, {"--after-groups", &o->run_groups[1]}};
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
        int got = rs_cli_flag_value(flags[k].name, argc, argv, i, flags[k].dst);
        if (got == 0) continue;
        *name = flags[k].name;
        return got < 0 || !**flags[k].dst ? -1 : 1;
    }
    return 0;
}

static int diff_parse(const rs_cli_verb *verb, int argc, char **argv, diff_opts *o, int *code)
{
    rs_cli_args it;
    rs_cli_args_init(&it, argc, argv);
    const char *a, *v = NULL;
    int kind;
    while ((kind = rs_cli_next(verb, &it, &a)) != RS_CLI_END) {
        if (kind == RS_CLI_HELP) {
            *code = RS_EXIT_OK;
            return -1;
        }
        if (kind == RS_CLI_OPERAND) {
            if (o->n_operands == 2) {
                *code = rs_cli_usage_error(verb, "'%s': expected two runs, BEFORE and AFTER, not more", a);
                return -1;
            }
            o->operand[o->n_operands++] = a;
            continue;
        }
        int got;
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if (strcmp(a, "--allow-missing") == 0) {
            o->allow_missing = 1;
        } else if ((got = rs_job_flag(verb, argc, argv, &it.i, &o->rf, code)) != 0) {
            if (got < 0) return -1;
        } else if ((got = rs_cli_flag_value("--fail-on", argc, argv, &it.i, &v)) != 0) {
            if (got < 0) {
                *code = rs_cli_usage_error(verb, "--fail-on expects a condition such as 'peak>5%%'");
                return -1;
            }
            if (rs_diff_gate_parse(&o->gate, v) != RANKSNAP_OK) {
                *code = rs_cli_usage_error(verb, "%s", ranksnap_last_error());
                return -1;
            }
        } else if ((got = valued_flag(o, argc, argv, &it.i, &v)) != 0) {
            if (got < 0) {
                *code = rs_cli_usage_error(verb, "%s expects a value", v);
                return -1;
            }
        } else {
            *code = rs_cli_usage_error(verb, "unknown option '%s'", a);
            return -1;
        }
    }
    if (o->n_operands < 2) {
        *code = rs_cli_usage_error(verb, "expected two runs: BEFORE and AFTER (each a directory of "
                                         "rank files, or one file)");
        return -1;
    }
    return 0;
}

/* --threshold PCT: a percentage above 0 and at most 1000, "5" or "5%". */
static int diff_threshold(const rs_cli_verb *verb, const diff_opts *o, double *pct, int *code)
{
    *pct = 5.0;
    if (!o->threshold) return 0;
    char buf[32], *end = NULL;
    snprintf(buf, sizeof buf, "%s", o->threshold);
    size_t n = strlen(buf);
    if (n && buf[n - 1] == '%') buf[n - 1] = '\0';
    errno = 0;
    double v = buf[0] ? strtod(buf, &end) : 0;
    if (!buf[0] || *end || errno || !(v > 0) || v > 1000) {
        *code = rs_cli_usage_error(verb, "--threshold '%s': expected a percentage such as 5%% or 2.5, "
                                         "above 0 and at most 1000", o->threshold);
        return -1;
    }
    *pct = v;
    return 0;
}

/* One run: its files, read; its roles. */
typedef struct diff_run {
    rs_job job;
    int is_dir;
    int world;
    rs_roles roles;       /* declared or found; n_roles 0: none */
    const rs_summary_sites **sites;
    rs_summary *sums;
} diff_run;

static void diff_run_free(diff_run *r)
{
    rs_job_free(&r->job);
    rs_roles_free(&r->roles);
    free(r->sites);
    free(r->sums);
}

/* "ranks 5, 7-9": the ranks of [0, world) with no file. */
static size_t list_missing(const diff_run *r, char *buf, size_t cap)
{
    size_t missing = 0, used = 0, k = 0;
    buf[0] = '\0';
    for (int32_t rank = 0; rank < r->world; rank++) {
        while (k < r->job.n && r->job.f[k].sum.rank < rank) k++;
        if (k < r->job.n && r->job.f[k].sum.rank == rank) continue;
        if (used + 16 < cap) {
            int w = snprintf(buf + used, cap - used, "%s%d", missing ? ", " : "", (int)rank);
            if (w > 0) used += (size_t)w;
        } else if (used + 5 < cap && buf[used - 1] != '.') {
            used += (size_t)snprintf(buf + used, cap - used, ", ...");
        }
        missing++;
    }
    return missing;
}

/* Reads run `side`; -1 (said on stderr) when it cannot be compared. */
static int read_run(const diff_opts *o, int side, diff_run *r, int keep, FILE *progress)
{
    char esc[512];
    rs_text_escape(esc, sizeof esc, o->operand[side]);
    struct stat sb;
    if (stat(o->operand[side], &sb) != 0) {
        fprintf(stderr, "ranksnap diff: %s: %s: %s (no run to compare)\n", run_name[side], esc,
                strerror(errno));
        return -1;
    }
    r->is_dir = S_ISDIR(sb.st_mode);
    /* a job too large to keep: its files' totals first, the ranks explained read again whole */
    if (rs_job_read(&r->job, &(rs_job_read_opts){keep, !keep, 0, o->rf.progress}, progress) != 0 ||
        r->job.failed.n) {
        if (r->job.failed.n)
            fprintf(stderr, "ranksnap diff: %s: %zu file%s of %s could not be read or %s left out "
                            "(named above): a gate over part of a run would pass what it did not see\n",
                    run_name[side], r->job.failed.n, r->job.failed.n == 1 ? "" : "s", esc,
                    r->job.failed.n == 1 ? "was" : "were");
        return -1;
    }
    for (size_t i = 0; i < r->job.n; i++)
        if (r->job.f[i].sum.world_size > r->world) r->world = r->job.f[i].sum.world_size;
    char list[256];
    size_t missing = r->is_dir ? list_missing(r, list, sizeof list) : 0;
    if (missing && !o->allow_missing) {
        fprintf(stderr, "ranksnap diff: %s: %s has no file for %zu of the job's %d ranks (rank%s "
                        "%s): a gate over part of a run would pass what it did not see; "
                        "--allow-missing compares the ranks there are\n",
                run_name[side], esc, missing, r->world, missing == 1 ? "" : "s", list);
        return -1;
    }
    return 0;
}

/* The run's roles: declared (--before-groups/--after-groups, else --groups or RANKSNAP_GROUPS),
 * else found from its communicators. -1 (said) when a declared grouping does not fit it. */
static int run_roles(const diff_opts *o, int side, diff_run *r)
{
    static const char *const flag[2] = {"--before-groups", "--after-groups"};
    const char *value = o->run_groups[side] ? o->run_groups[side] : o->groups;
    const char *which = o->run_groups[side] ? flag[side] : "--groups";
    if (rs_cli_groups("ranksnap diff", which, value, &r->roles) != 0) return -1;
    if (r->roles.n_roles && r->roles.world_size != r->world) {
        fprintf(stderr, "ranksnap diff: %s describes %d ranks, but %s has %d; %s declares the "
                        "roles of %s alone\n", r->roles.source, r->roles.world_size,
                run_name[side], r->world, flag[side], run_name[side]);
        return -1;
    }
    if (r->roles.n_roles) return 0;
    rs_rank_comms *comms = malloc((r->job.n ? r->job.n : 1) * sizeof *comms);
    if (!comms) return -1;
    for (size_t i = 0; i < r->job.n; i++) {
        comms[i] = r->job.f[i].comms; /* borrowed */
        comms[i].rank = r->job.f[i].sum.rank;
    }
    ranksnap_status st = rs_roles_found(comms, r->job.n, r->world, &r->roles);
    free(comms);
    if (st != RANKSNAP_OK) {
        fprintf(stderr, "ranksnap diff: %s: %s\n", run_name[side], ranksnap_last_error());
        return -1;
    }
    return 0;
}

static int make_runs(diff_run *run, rs_diff_run *dr, const diff_opts *o)
{
    for (int side = 0; side < 2; side++) {
        diff_run *r = &run[side];
        if (!r->sums) r->sums = malloc((r->job.n ? r->job.n : 1) * sizeof *r->sums);
        r->sites = calloc(r->job.n ? r->job.n : 1, sizeof *r->sites);
        if (!r->sums || !r->sites) return -1;
        for (size_t i = 0; i < r->job.n; i++) {
            r->sums[i] = r->job.f[i].sum;
            r->sites[i] = &r->job.f[i].sites;
        }
        dr[side] = (rs_diff_run){o->operand[side], r->job.n, r->sums, r->sites, r->world,
                                 r->roles.n_roles ? &r->roles : NULL};
    }
    return 0;
}

/* The files the explanations need whole and the first read did not make the sites of. */
static void reread_wanted(const diff_opts *o, diff_run *run, const rs_diff_result *res)
{
    for (int side = 0; side < 2; side++) {
        rs_job *j = &run[side].job;
        size_t *which = malloc((j->n ? j->n : 1) * sizeof *which), n = 0;
        rs_snap **full = calloc(j->n ? j->n : 1, sizeof *full);
        if (which && full) {
            for (size_t i = 0; i < j->n; i++)
                if (!j->f[i].sites.ok && rs_diff_wants_sites(res, side, j->f[i].sum.rank)) which[n++] = i;
            /* a file that changed since cannot be read again: its top sites stand in (a note) */
            rs_job_reread_sites(j->f, full, which, n, o->rf.jobs);
            for (size_t k = 0; k < n; k++) {
                rs_snap_free(full[which[k]]);
                /* the whole summary where the first read had the totals alone */
                run[side].sums[which[k]] = j->f[which[k]].sum;
            }
        }
        free(which);
        free(full);
    }
}

/* Renders what was asked for, prints the text or JSON, writes the files. */
static int emit(const diff_opts *o, const rs_diff_result *res)
{
    static const char *const names[3] = {"diff.txt", "diff.json", "diff.html"};
    char *buf[3] = {NULL, NULL, NULL};
    size_t len[3] = {0, 0, 0};
    const rs_diff_gate *g = o->gate.n ? &o->gate : NULL;
    ranksnap_status st = RANKSNAP_OK;
    if (!o->json || o->out_dir) st = rs_diff_render(rs_diff_text, res, g, &buf[0], &len[0]);
    if (st == RANKSNAP_OK && (o->json || o->out_dir)) st = rs_diff_render(rs_diff_json, res, g, &buf[1], &len[1]);
    if (st == RANKSNAP_OK && (o->html || o->out_dir)) st = rs_diff_render(rs_diff_html, res, g, &buf[2], &len[2]);
    int rc = -1;
    if (st != RANKSNAP_OK) {
        fprintf(stderr, "ranksnap diff: %s\n", ranksnap_last_error());
    } else {
        fwrite(o->json ? buf[1] : buf[0], 1, o->json ? len[1] : len[0], stdout);
        if (fflush(stdout) != 0)
            fprintf(stderr, "ranksnap diff: writing to stdout failed: %s\n", strerror(errno));
        else if (o->out_dir && rs_cli_write_files(o->out_dir, names, buf, len, 3) != 0)
            ;
        else if (o->html && (st = rs_atomic_file_write(o->html, buf[2], len[2])) != RANKSNAP_OK)
            rs_cli_failure("ranksnap diff", o->html, st);
        else
            rc = 0;
    }
    for (int i = 0; i < 3; i++) free(buf[i]);
    return rc;
}

static int run_diff(const rs_cli_verb *verb, int argc, char **argv)
{
    diff_opts o;
    memset(&o, 0, sizeof o);
    rs_job_flags_init(&o.rf);
    diff_run run[2];
    memset(run, 0, sizeof run);
    rs_diff_result *res = NULL;
    int code = RS_EXIT_USAGE;
    double pct = 5.0;
    if (diff_parse(verb, argc, argv, &o, &code) != 0 || diff_threshold(verb, &o, &pct, &code) != 0)
        goto done;
    if (rs_job_flags_apply(verb, &o.rf, &code) != 0) goto done;
    rs_job_opts jo = {"ranksnap diff", o.rf.jobs, o.rf.rank_from_name, o.rf.allow_mixed_jobs, -1};
    uint64_t decoded = 0;
    for (int side = 0; side < 2; side++) {
        char *operand = (char *)o.operand[side];
        if (rs_job_list(&run[side].job, &jo, &operand, 1) != 0) {
            fprintf(stderr, "ranksnap diff: out of memory\n");
            goto done;
        }
        decoded += run[side].job.decoded;
    }
    /* both runs read once when all their snapshots fit (job_files.h) */
    int keep = decoded <= RS_JOB_KEEP_BYTES;
    for (int side = 0; side < 2; side++) {
        FILE *progress = rs_job_progress_wanted(&run[side].job, o.rf.progress) ? stderr : NULL;
        if (read_run(&o, side, &run[side], keep, progress) != 0 || run_roles(&o, side, &run[side]) != 0)
            goto done;
    }
    rs_diff_config cfg;
    rs_diff_config_default(&cfg);
    cfg.threshold_pct = pct;
    rs_diff_run dr[2];
    if (make_runs(run, dr, &o) != 0) {
        fprintf(stderr, "ranksnap diff: out of memory\n");
        goto done;
    }
    ranksnap_status st = rs_diff(&dr[0], &dr[1], &cfg, &res);
    if (st == RANKSNAP_OK && !keep) {
        reread_wanted(&o, run, res);
        rs_diff_result_free(res);
        res = NULL;
        st = rs_diff(&dr[0], &dr[1], &cfg, &res);
    }
    if (st == RANKSNAP_OK && o.gate.n) st = rs_diff_gate_check(&o.gate, res);
    if (st != RANKSNAP_OK) {
        fprintf(stderr, "ranksnap diff: %s\n", ranksnap_last_error());
        goto done;
    }
    if (emit(&o, res) != 0) {
        code = RS_EXIT_USAGE;
        goto done;
    }
    code = rs_diff_gate_failed(&o.gate) ? RS_EXIT_FAILED : RS_EXIT_OK;
done:
    rs_diff_result_free(res);
    for (int side = 0; side < 2; side++) diff_run_free(&run[side]);
    rs_diff_gate_free(&o.gate);
    return code;
}

const rs_cli_verb rs_cmd_diff = {
    "diff", "BEFORE AFTER [--fail-on COND]... [--json] [--out DIR] [--html OUT.html]\n"
            "                [--threshold PCT] [--groups DIMS] [--before-groups DIMS]\n"
            "                [--after-groups DIMS] [--allow-missing] [--allow-mixed-jobs]\n"
            "                [--rank-from-name] [--site-skip PATTERNS] [--all-frames]\n"
            "                [--[no-]progress] [--jobs N]",
    "compare two runs rank by rank and role by role; fail when memory grew (a CI gate)",
    "  BEFORE, AFTER       each a directory of rank files (rank-*.rsnap, rank-*.pickle, the\n"
    "                      rank-*.ring of dead ranks) or one file; every rank of a directory's\n"
    "                      job must have its file\n"
    "  --fail-on COND      exit 1 when COND holds for a rank, a role or the job; several\n"
    "                      flags or COND,COND: peak>5% reserved>1GiB outside>512MiB (growth\n"
    "                      from before, a share or a size), headroom<4GiB headroom<10% (after's\n"
    "                      capacity minus its peak), oom (a rank of after ran out of memory)\n"
    "  --json              print the diff as JSON (schema: docs/DIFF.md) instead of the text\n"
    "  --out DIR           also write DIR/diff.txt, DIR/diff.json and DIR/diff.html\n"
    "  --html OUT.html     also write the page with both runs side by side to OUT.html\n"
    "  --threshold PCT     changes below PCT% of before (or below 1 MiB) are not changes\n"
    "                      (default 5%)\n"
    "  --groups DIMS       the roles of both runs, e.g. pp=4,dp=8 (default: RANKSNAP_GROUPS;\n"
    "                      without either, found from each run's communicators)\n"
    "  --before-groups DIMS, --after-groups DIMS\n"
    "                      the roles of one run (runs of different sizes or layouts)\n"
    "  --allow-missing     compare the ranks there are when a run lacks some ranks' files\n"
    "  --allow-mixed-jobs  keep files of other jobs in a run's directory\n"
    "  --rank-from-name    PyTorch pickles: the rank is the number in the file's name\n"
    "  --site-skip PATTERNS, --all-frames\n"
    "                      which frames name a site, as for ranksnap report\n"
    "  --progress, --no-progress\n"
    "                      progress on stderr (default: when stderr is a terminal)\n"
    "  --jobs N            read N files at a time (default: the machine's cores)\n"
    "exit status: 0 no --fail-on condition holds, 1 one does, 2 bad input (a run missing or\n"
    "unreadable, a condition that cannot be checked) or a usage error\n",
    run_diff};
