/*
 * dump.h — this rank's files on disk (dump.c): RANKSNAP_DIR, the names that are this job's, the
 * snapshot.
 */
#ifndef RANKSNAP_DUMP_H
#define RANKSNAP_DUMP_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "ring_file.h"
#include "state.h"

/* Creates RANKSNAP_DIR (0700, with its parents) when missing; refuses a symbolic link, a
 * non-directory, a directory of another user and one every user may write without the sticky
 * bit. Warns once per process about a world-writable (sticky) one and about parents that are
 * symbolic links or world-writable. */
ranksnap_status rs_dump_ensure_dir(const char *dir);
/* At init, once rank, job and host are known: which names this rank's files take (the plain
 * ones, or the job-qualified ones when the plain ones hold another job's files, with a
 * warning naming them), and the removal of what a SIGKILL of this job left mid-write. */
ranksnap_status rs_dump_claim(rs_runtime *rt);
/* A running rank takes another rank, world size or job (ranksnap_set_identity: the framework's
 * process group knows better than the launcher), and claims its names again, as at init. Only
 * before it wrote a file (or opened a ring file) under the first one: RANKSNAP_ERR_UNSUPPORTED after,
 * since those files keep the identity they were written under. Called by the thread that steps,
 * between steps: the rank and job are read without a lock elsewhere. */
ranksnap_status rs_dump_reidentify(rs_runtime *rt, int rank, int world_size, const char *job);
/* RANKSNAP_DIR/`name`, or its job-qualified name (STEM.job-TAG.EXT, the tag of this job) when
 * `qualified`: a peer of this job that found another job's file under its plain name wrote that
 * one. -1 when it does not fit. */
int rs_dump_path_of(const rs_runtime *rt, const char *name, int qualified, char *buf, size_t n);
/* This rank's ring file (RANKSNAP_RING=mmap) under the name rs_dump_claim chose. */
ranksnap_status rs_dump_open_ring(rs_runtime *rt, const rs_ring_identity *id, rs_ring_file **out);
/* Writes RANKSNAP_DIR/`name` (report.txt, ...) atomically as this job's file: never over
 * another job's file of that name (its job-qualified name is used instead, with a warning). */
ranksnap_status rs_dump_write_file(rs_runtime *rt, const char *name, const void *buf, size_t len,
                                   int durable);
/* The same for this rank's snapshot, rank-RRRRR.rsnap (a PyTorch job's pickle,
 * rank-RRRRR[.aK].pickle); the ring file notes the time. */
ranksnap_status rs_dump_write_snapshot(rs_runtime *rt, const void *buf, size_t len, int durable);
/* At a range's end: this rank's snapshot written durably when RANKSNAP_WRITE asks for it (all
 * ranks', or rank 0's), a failure warned about; RANKSNAP_OK when nothing was asked. */
ranksnap_status rs_dump_write_range_snapshot(rs_runtime *rt, const void *buf, size_t len);
/* Encodes this rank's snapshot into a malloc'ed buffer: state, history and stacks taken at one
 * instant under the allocator lock. `complete` 0 marks one written from a crash path. */
ranksnap_status rs_dump_encode(rs_runtime *rt, int complete, char **out, size_t *out_len);
/* Writes the snapshot to `path` (NULL: the default path); `complete` 0 marks a crash path's,
 * which skips the fsyncs. */
ranksnap_status rs_dump_write(const char *path, int complete);
/* Before an OOM error goes back to the program: RANKSNAP_ON_OOM's dump (and abort). */
void rs_dump_after_oom(rs_runtime *rt);
/* On the process's way out: the snapshot written once the allocator's lock is free, waiting at
 * most half of RANKSNAP_DUMP_TIMEOUT_MS for it (a thread stopped inside the allocator never frees
 * it); with `only_open_range`, only when a range is being recorded and its snapshot is not on
 * disk yet. The end record notes the dump begun, then written or given up. 1 when written; `why`
 * names the occasion in the log. `complete` as for rs_dump_write. */
int rs_dump_on_the_way_out(rs_runtime *rt, int complete, int only_open_range, const char *why);
/* The post-mortem dumper thread's work on a fatal signal (rank/runtime/postmortem.h):
 * rs_dump_on_the_way_out. */
void rs_dump_on_signal(int sig);

#endif
