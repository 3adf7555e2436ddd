/*
 * job_files.h — the rank files of one job, read the way the verbs that compare ranks read them
 * (`ranksnap report`, `ranksnap diff`): a directory stands for its rank files, a PyTorch pickle's
 * rank is its place among the pickles given (or the number in its name), one attempt of a
 * restarted job is kept, a rank with both a snapshot and a ring keeps the newer, files of
 * another job than most are left out; the files are read on --jobs threads, each reduced to its
 * summary (and, asked for, its sites in full and its timeline) while it is in memory.
 */
#ifndef RANKSNAP_JOB_FILES_H
#define RANKSNAP_JOB_FILES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "progress.h"
#include "roles_found.h"
#include "snapshot.h"
#include "summary.h"
#include "timeline.h"
#include "torch_decode.h"

/* The first pass keeps, for the verdicts, each rank's sites in full (and the whole snapshot of a
 * rank that ran out of memory, for the replay of suggest.h) when all the snapshots are expected
 * to hold no more than this (and stops keeping snapshots when they do): a job of a few ranks, or
 * one long history, is read once; a larger job keeps only summaries, and a second pass reads the
 * files a verdict needs again. Expected: 3 times a .rsnap file (its delta-encoded columns grow to
 * 33 bytes an event), 1.5 times a ring file (26 bytes an event), half a pickle (most of its bytes
 * are the trace's dicts). */
#define RS_JOB_KEEP_BYTES ((uint64_t)64 << 20)

/* A list of paths, each malloc'ed. */
typedef struct rs_job_paths {
    size_t n, cap;
    char **v;
} rs_job_paths;

/* Appends DIR/NAME (NAME alone when dir is NULL); -1 without memory. */
int rs_job_paths_push(rs_job_paths *l, const char *dir, const char *name);
void rs_job_paths_free(rs_job_paths *l);

/* --jobs above this is refused: threads beyond the cores only add memory. */
#define RS_JOB_MAX_JOBS 1024

/* The flags of how a job's files are read and their sites named, which every verb that reads
 * jobs takes alike. */
typedef struct rs_job_flags {
    int jobs;              /* --jobs N, 0: the machine's cores */
    int rank_from_name;    /* --rank-from-name: a pickle's rank is the number in its name */
    int allow_mixed_jobs;  /* --allow-mixed-jobs: keep files of other jobs than most */
    int all_frames;        /* --all-frames: a site is the innermost frame not ranksnap's */
    const char *site_skip; /* --site-skip PATTERNS, NULL: RANKSNAP_SITE_SKIP */
    int progress;          /* --progress 1, --no-progress 0, -1: stderr is a terminal */
} rs_job_flags;

/* The defaults: the machine's cores, progress when stderr is a terminal. */
void rs_job_flags_init(rs_job_flags *f);

/* One of those flags at argv[*i] (advanced over its value): 1 taken, 0 not one of them, -1 after
 * a usage error (*code set). */
int rs_job_flag(const rs_cli_verb *verb, int argc, char **argv, int *i, rs_job_flags *f, int *code);

/* What the flags set for the whole command: the site rules (--site-skip, --all-frames; a bad
 * pattern is a usage error, *code set, -1), the threads (0: the machine's cores); and the heap
 * kept and frames remembered across files, as for every read of a job. */
int rs_job_flags_apply(const rs_cli_verb *verb, rs_job_flags *f, int *code);

typedef struct rs_job_opts {
    const char *who;      /* "ranksnap report": starts the messages that are the verb's */
    int jobs;             /* threads */
    int rank_from_name;   /* PyTorch pickles: rank = the number in the file name */
    int allow_mixed_jobs; /* keep files of other jobs than most */
    int attempt;          /* a restarted job's attempt, -1: the newest complete one (attempt.h) */
} rs_job_opts;

typedef struct rs_job_file {
    char *path;
    rs_summary sum;
    uint64_t time_us; /* when the snapshot was taken, or the ring's last event */
    int64_t pid;      /* the process that wrote it */
    int is_ring;      /* recovered from a ring file a dead rank left */
    rs_snap *snap;    /* the whole snapshot when the first pass kept it, else NULL */
    rs_summary_sites sites; /* its sites in full, made with the summary (a small job's, or read again) */
    rs_rank_comms comms; /* its communicators, for the roles (roles_found.h) */
    rs_timeline *tl;  /* its timeline when one was asked for (NULL: none could be made) */
    ranksnap_status tl_st;
} rs_job_file;

/* What the first pass was asked to do with each file. */
typedef struct rs_job_read_opts {
    int keep;        /* make each rank's sites in full, keep OOM snapshots within RS_JOB_KEEP_BYTES */
    int totals;      /* without keep: a .rsnap's totals alone (rs_decode_file_how), its summary
                        then without steps (summary.h: totals_only) until it is read again */
    uint32_t points; /* timeline buckets, 0: no timeline */
    int progress;    /* --progress 1, --no-progress 0, -1: when stderr is a terminal (progress.h) */
} rs_job_read_opts;

typedef struct rs_job {
    rs_job_opts o;
    rs_job_paths paths;   /* every file the operands stand for */
    rs_job_paths failed;  /* operands and files left out, each named on stderr already */
    uint64_t bytes;       /* of the files */
    uint64_t decoded;     /* what their snapshots are expected to hold in memory */
    size_t expected;      /* files whose rank is settled (a pickle without one is not) */
    rs_job_file *f;       /* the files read, in rank order, once settled */
    size_t n;
    void *slots;          /* the first pass's per-path state (job_files.c) */
} rs_job;

/* Lists the files of `operands` (a directory stands for its rank files; one that cannot be
 * opened or holds none is named and goes to `failed`) and settles each pickle's rank. -1 without
 * memory. */
int rs_job_list(rs_job *j, const rs_job_opts *o, char *const *operands, size_t n_operands);

/* Reads every listed file on o.jobs threads; `progress` (NULL: none) gets the reading line.
 * Files that fail are named on stderr (in the order of the paths) and go to `failed`. Then keeps
 * one attempt, sorts by rank, keeps a rank's newer file and leaves out other jobs' files.
 * Returns 0, or -1 (said on stderr) when no file could be read, two files are of one rank, or
 * there is no memory. */
int rs_job_read(rs_job *j, const rs_job_read_opts *ro, FILE *progress);

/* Whether the progress line is wanted for this job's files (rs_progress_wanted). */
int rs_job_progress_wanted(const rs_job *j, int forced);

/* Frees what the first pass kept of one file (sites, communicators, snapshot, timeline). */
void rs_job_file_release(rs_job_file *f);
void rs_job_free(rs_job *j);

/* The snapshot of `f` read again, whole: NULL when it cannot be (it changed or vanished since
 * the first read). */
rs_snap *rs_job_reread(const rs_job_file *f);

/* Reads the files f[which[k]] again on `jobs` threads, each into full[which[k]] (NULL when it
 * cannot be), and makes its sites in full where the first pass did not (and its whole summary,
 * where the first pass read its totals alone). */
void rs_job_reread_sites(rs_job_file *f, rs_snap **full, const size_t *which, size_t n_which,
                         int jobs);

#endif
