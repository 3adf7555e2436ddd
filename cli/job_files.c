/*
 * job_files.c — owns reading one job's rank files for the verbs that compare ranks
 * (job_files.h): listing them, the first pass on --jobs threads, the files left out and why, and
 * the second reads of the files a verdict needs whole.
 *
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

#include "attempt.h"
#include "cli.h"
#include "decode.h"
#include "errors.h"
#include "heap.h"
#include "job_files.h"
#include "pool.h"
#include "site_rules.h"
#include "text.h"
#include "walk.h"

void rs_job_flags_init(rs_job_flags *f)
{
    memset(f, 0, sizeof *f);
    f->progress = -1;
}

int rs_job_flag(const rs_cli_verb *verb, int argc, char **argv, int *i, rs_job_flags *f, int *code)
{
    const rs_cli_switch sw[] = {{"--rank-from-name", &f->rank_from_name, 1},
                                {"--allow-mixed-jobs", &f->allow_mixed_jobs, 1},
                                {"--all-frames", &f->all_frames, 1},
                                {"--progress", &f->progress, 1},
                                {"--no-progress", &f->progress, 0}};
    if (rs_cli_switch_of(argv[*i], sw, sizeof sw / sizeof sw[0])) return 1;
    int got = rs_cli_jobs_flag(verb, argc, argv, i, RS_JOB_MAX_JOBS, &f->jobs, code);
    if (got) return got;
    const char *flag = argv[*i];
    got = rs_cli_flag_value("--site-skip", argc, argv, i, &f->site_skip);
    if (got < 0) {
        *code = rs_cli_usage_error(verb, "%s expects a value", flag);
        return -1;
    }
    return got;
}

int rs_job_flags_apply(const rs_cli_verb *verb, rs_job_flags *f, int *code)
{
    if (rs_site_rules_set(f->site_skip, f->all_frames) != RANKSNAP_OK) {
        *code = rs_cli_usage_error(verb, "--site-skip %s", ranksnap_last_error());
        return -1;
    }
    if (f->jobs == 0) f->jobs = rs_pool_cores();
    rs_heap_keep_freed_memory();
    rs_site_rules_remember(1); /* the ranks of a job name the same frames */
    return 0;
}

int rs_job_paths_push(rs_job_paths *l, const char *dir, const char *name)
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

void rs_job_paths_free(rs_job_paths *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void rs_job_file_release(rs_job_file *f)
{
    rs_summary_sites_free(&f->sites);
    rs_rank_comms_free(&f->comms);
    rs_snap_free(f->snap);
    rs_timeline_free(f->tl);
    f->snap = NULL;
    f->tl = NULL;
}

/* The options a PyTorch pickle is read with: its rank is the number in its name
 * (--rank-from-name) or its place among the pickles given (*n_pickles counts them). -1 (and the
 * message in *error, malloc'ed) when the name holds no rank. */
static int pickle_opts(const rs_job_opts *o, const char *path, int *n_pickles, rs_torch_opts *po,
                       int *is_pickle, char **error)
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
static size_t one_attempt(const rs_job_opts *o, rs_job_file *f, size_t n)
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
                    rs_job_file_release(&f[i]);
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
                fprintf(stderr, "%s: --attempt %d: no file of that attempt (the files "
                                "are of attempt %s)\n", o->who, keep, seen);
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
static size_t prefer_newest(rs_job_file *f, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (w > 0 && f[w - 1].sum.rank == f[i].sum.rank && (f[w - 1].is_ring != f[i].is_ring) &&
            strcmp(f[w - 1].sum.job, f[i].sum.job) == 0) {
            rs_job_file *ring = f[i].is_ring ? &f[i] : &f[w - 1];
            rs_job_file *snap = f[i].is_ring ? &f[w - 1] : &f[i];
            /* an OOM dump is the moment that matters, whatever the ring saw after it */
            rs_job_file *keep = ring->time_us > snap->time_us && !snap->sum.oom ? ring : snap;
            /* the ring's header was written with every note, the snapshot's copy at its dump */
            if (keep == snap && ring->pid == snap->pid && (ring->sum.end.flags & RS_END_HOW_)) {
                int before = !(snap->sum.end.flags & RS_END_HOW_);
                snap->sum.end = ring->sum.end;
                if (before) snap->sum.end.flags |= RS_END_AFTER_SNAPSHOT;
            }
            rs_job_file_release(keep == ring ? snap : ring);
            f[w - 1] = *keep;
            continue;
        }
        f[w++] = f[i];
    }
    return w;
}

/* A PyTorch pickle named as users name their dumps: "snapshot_rank3.pickle", "oom_rank-3_x.pickle". */
static int is_named_pickle(const char *name)
{
    size_t n = strlen(name);
    int rank;
    return n > 7 && !strcmp(name + n - 7, ".pickle") && rs_decode_rank_from_name(name, &rank) == 0;
}

/* Adds the rank files of `dir` in name order; where it has none, its PyTorch pickles named with
 * their rank (*by_name set: their rank is read from the name, and a line says so). -1 (and a
 * message) when there are neither. */
static int add_dir(rs_job_paths *l, const char *dir, int *by_name)
{
    size_t first = l->n;
    for (int pass = 0; pass < 2 && l->n == first; pass++) {
        DIR *d = opendir(dir);
        if (!d) {
            fprintf(stderr, "ranksnap: %s: cannot open the directory: %s\n", dir, strerror(errno));
            return -1;
        }
        struct dirent *e;
        int oom = 0;
        while ((e = readdir(d)) != NULL)
            if ((pass ? is_named_pickle(e->d_name) : rs_attempt_is_rank_file(e->d_name)) &&
                rs_job_paths_push(l, dir, e->d_name) != 0)
                oom = 1;
        closedir(d);
        if (oom) {
            fprintf(stderr, "ranksnap: %s: out of memory listing the directory\n", dir);
            return -1;
        }
        if (pass && l->n > first) {
            *by_name = 1;
            fprintf(stderr, "ranksnap: %s: no rank-* files; reading its %zu PyTorch pickle%s, each "
                            "one's rank from the number in its name (as --rank-from-name)\n",
                    dir, l->n - first, l->n - first == 1 ? "" : "s");
        }
    }
    if (l->n == first) {
        fprintf(stderr, "ranksnap: %s: no rank-*.rsnap files in this directory\n", dir);
        return -1;
    }
    qsort(l->v + first, l->n - first, sizeof *l->v, cmp_str);
    return 0;
}

static int cmp_file_rank(const void *pa, const void *pb)
{
    const rs_job_file *a = pa, *b = pb;
    if (a->sum.rank != b->sum.rank) return a->sum.rank < b->sum.rank ? -1 : 1;
    return strcmp(a->path, b->path);
}

/* Two files of one rank: the comparison would compare the wrong things, so there is none. Files
 * of another job than most of them (a directory two jobs wrote into) are left out, each with an
 * error naming it and both jobs, unless allow_mixed_jobs; the rest are compared. Files are in
 * rank order; *n becomes the number kept. Returns 0, or -1. */
static int check_files(const rs_job_opts *o, rs_job_file *f, size_t *n_io, rs_job_paths *failed)
{
    char a[256], b[256], ja[128], jb[128];
    size_t n = *n_io, w = n;
    if (!o->allow_mixed_jobs && n > 0) {
        /* the job most files belong to; ties go to the one of the lowest rank. Done before the
         * check below: two jobs that shared a directory each left a file of rank 0. */
        size_t best = 0, best_count = 0;
        for (size_t i = 0; i < n; i++) {
            size_t c = 0;
            for (size_t j = 0; j < n; j++) c += strcmp(f[j].sum.job, f[i].sum.job) == 0;
            if (c > best_count) best = i, best_count = c;
        }
        rs_job_file keep = f[best];
        w = 0;
        for (size_t i = 0; i < n; i++) {
            if (strcmp(f[i].sum.job, keep.sum.job) != 0) {
                fprintf(stderr, "ranksnap: %s is from job %s but %s (and %zu files in all) are from job %s; "
                                "left out (pass --allow-mixed-jobs to compare them anyway)\n",
                        rs_text_escape(a, sizeof a, f[i].path),
                        rs_text_escape(ja, sizeof ja, f[i].sum.job[0] ? f[i].sum.job : "(none)"),
                        rs_text_escape(b, sizeof b, keep.path), best_count,
                        rs_text_escape(jb, sizeof jb, keep.sum.job[0] ? keep.sum.job : "(none)"));
                rs_job_file_release(&f[i]);
                if (rs_job_paths_push(failed, NULL, f[i].path) != 0) {
                    /* the files after it are kept as they are, for the caller to free */
                    for (size_t k = i + 1; k < n; k++) f[w++] = f[k];
                    *n_io = w;
                    return -1;
                }
                continue;
            }
            f[w++] = f[i];
        }
    }
    *n_io = w;
    for (size_t i = 1; i < w; i++) {
        if (f[i].sum.rank == f[i - 1].sum.rank) {
            fprintf(stderr, "ranksnap: %s and %s are both rank %d; give one snapshot per rank\n",
                    rs_text_escape(a, sizeof a, f[i - 1].path), rs_text_escape(b, sizeof b, f[i].path),
                    (int)f[i].sum.rank);
            return -1;
        }
    }
    return 0;
}

rs_snap *rs_job_reread(const rs_job_file *f)
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

/* The second pass: the files a verdict needs whole and the first pass did not keep. */
typedef struct reread_pass {
    rs_job_file *f;
    rs_snap **full;
    const size_t *which;
} reread_pass;

static void reread_one(void *ctx, size_t k)
{
    reread_pass *rp = ctx;
    size_t i = rp->which[k];
    rp->full[i] = rs_job_reread(&rp->f[i]);
    /* its sites made here, in parallel, rather than by the comparison; the summary is the
     * first pass's, unless that pass read the file's totals alone */
    rs_summary again;
    if (rp->full[i] && !rp->f[i].sites.ok) {
        rs_summary_of_sites(rp->full[i], &again, &rp->f[i].sites);
        if (rp->f[i].sum.totals_only) rp->f[i].sum = again;
    }
}

void rs_job_reread_sites(rs_job_file *f, rs_snap **full, const size_t *which, size_t n_which,
                         int jobs)
{
    reread_pass rp = {f, full, which};
    rs_pool_run(n_which, jobs, reread_one, NULL, &rp);
}

/* One path of the first pass: filled by the thread that read it. */
typedef struct read_slot {
    rs_torch_opts po;
    char *error;        /* why it was left out (printed after the pass, in path order) */
    ranksnap_status st; /* of the decode, when that is why */
    int leftover;       /* a ring whose rank finalized cleanly: its .rsnap speaks */
    int done;           /* read into `f` */
    uint64_t bytes;     /* the file's size, for the progress line */
    rs_job_file f;
} read_slot;

typedef struct read_pass {
    char **paths;
    read_slot *slots;
    const rs_job_read_opts *ro;
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
    sl->st = rs_decode_file_how(rp->paths[i], &sl->po, rp->ro->totals && !rp->ro->keep, &snap, &ring,
                                &closed);
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
    rs_job_file *f = &sl->f;
    f->path = rp->paths[i];
    f->time_us = snap->time_us;
    f->pid = snap->pid;
    f->is_ring = ring;
    if ((sl->st = rs_rank_comms_of(snap, &f->comms)) != RANKSNAP_OK) {
        sl->error = strdup(ranksnap_last_error());
        rs_snap_free(snap);
        return;
    }
    if (rp->ro->points) f->tl_st = rs_timeline_build(snap, rp->ro->points, &f->tl);
    if (!rp->ro->keep) {
        rs_summary_of(snap, &f->sum);
        rs_snap_free(snap);
        sl->done = 1;
        return;
    }
    /* Any rank may be a verdict's: its sites made now, on this thread, and the snapshot freed
     * (its memory serves this thread's next file) unless it ran out of memory. */
    rs_summary_of_sites(snap, &f->sum, &f->sites);
    uint64_t b = snap->has_oom ? snap_bytes(snap) : 0;
    if (b && atomic_fetch_add(&rp->kept, b) + b <= RS_JOB_KEEP_BYTES) {
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

int rs_job_list(rs_job *j, const rs_job_opts *o, char *const *operands, size_t n_operands)
{
    memset(j, 0, sizeof *j);
    j->o = *o;
    for (size_t i = 0; i < n_operands; i++) {
        struct stat sb;
        int bad = 0;
        if (stat(operands[i], &sb) == 0 && S_ISDIR(sb.st_mode))
            bad = add_dir(&j->paths, operands[i], &j->o.rank_from_name);
        else
            bad = rs_job_paths_push(&j->paths, NULL, operands[i]);
        if (bad && rs_job_paths_push(&j->failed, NULL, operands[i]) != 0) return -1;
    }
    read_slot *slots = calloc(j->paths.n ? j->paths.n : 1, sizeof *slots);
    j->f = calloc(j->paths.n ? j->paths.n : 1, sizeof *j->f);
    j->slots = slots;
    if (!slots || !j->f) return -1;
    /* a pickle's rank is its place among the pickles given: settled before the threads start */
    int n_pickles = 0;
    for (size_t i = 0; i < j->paths.n; i++) {
        struct stat sb;
        int pickle = 0;
        const char *p = j->paths.v[i];
        slots[i].bytes = stat(p, &sb) == 0 ? (uint64_t)sb.st_size : 0;
        j->bytes += slots[i].bytes;
        if (pickle_opts(&j->o, p, &n_pickles, &slots[i].po, &pickle, &slots[i].error) == 0)
            j->expected++;
        else if (!slots[i].error)
            slots[i].st = RANKSNAP_ERR_HOST_MEMORY;
        j->decoded += pickle ? slots[i].bytes / 2
                      : rs_decode_is_ring_path(p) ? slots[i].bytes / 2 * 3
                                                  : 3 * slots[i].bytes;
    }
    return 0;
}

int rs_job_progress_wanted(const rs_job *j, int forced)
{
    return rs_progress_wanted(forced, isatty(STDERR_FILENO), j->paths.n, j->bytes);
}

int rs_job_read(rs_job *j, const rs_job_read_opts *ro, FILE *progress)
{
    read_slot *slots = j->slots;
    rs_progress pg;
    read_pass rp = {j->paths.v, slots, ro, 0, &pg};
    atomic_init(&rp.kept, 0);
    /* "reading 3/32 files": three are read */
    rs_progress_begin(&pg, progress, "reading", j->paths.n, j->bytes);
    rs_pool_run(j->paths.n, j->o.jobs, read_one, read_done, &rp);
    rs_progress_end(&pg);
    size_t n = 0;
    for (size_t i = 0; i < j->paths.n; i++) {
        read_slot *sl = &slots[i];
        if (sl->done) {
            j->f[n++] = sl->f;
            continue;
        }
        if (sl->leftover) continue;
        if (sl->error && sl->st == RANKSNAP_OK) {
            fputs(sl->error, stderr); /* --rank-from-name's own message */
        } else {
            rs_error(sl->st, "%s", sl->error ? sl->error : "");
            rs_cli_failure("ranksnap", j->paths.v[i], sl->st);
        }
        if (rs_job_paths_push(&j->failed, NULL, j->paths.v[i]) != 0) return -1;
    }
    j->n = n;
    n = one_attempt(&j->o, j->f, n);
    j->n = n;
    if (n == 0) {
        fprintf(stderr, "%s: no snapshot could be read\n", j->o.who);
        return -1;
    }
    qsort(j->f, n, sizeof *j->f, cmp_file_rank);
    n = prefer_newest(j->f, n);
    j->n = n;
    return check_files(&j->o, j->f, &j->n, &j->failed);
}

void rs_job_free(rs_job *j)
{
    for (size_t i = 0; j->f && i < j->n; i++) rs_job_file_release(&j->f[i]);
    read_slot *slots = j->slots;
    for (size_t i = 0; slots && i < j->paths.n; i++) free(slots[i].error);
    free(slots);
    free(j->f);
    rs_job_paths_free(&j->paths);
    rs_job_paths_free(&j->failed);
    memset(j, 0, sizeof *j);
}
