/*
 * external.h — PyTorch jobs (RANKSNAP_RECORDER=torch): the framework's own allocator and
 * recorder, driven through the ops of ranksnap_set_recorder (include/ranksnap.h).
 *
 * The runtime keeps its schedule, triggers, clocks, dumps on signals and gathers; at the points
 * where a C program's snapshot would be encoded, the framework's is asked for instead, with the
 * rank's metadata (external.c builds it), and written as RANKSNAP_DIR/rank-RRRRR.pickle
 * (rank-RRRRR.aK.pickle for attempt K > 0 of a torchrun job; rank-RRRRR[.aK].job-TAG.pickle
 * when another job's file holds the plain name: dump.c).
 */
#ifndef RANKSNAP_EXTERNAL_H
#define RANKSNAP_EXTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "external_mode.h"
#include "options.h"
#include "ranksnap.h"
#include "state.h"

/* At init: RANKSNAP_STACKS=python|all belong to torch mode, native|fp to C programs (in torch
 * mode native stands for python). An error naming the variable otherwise. */
ranksnap_status rs_external_check_options(const rs_options *o);

/* After each step boundary (steps.c): starts the framework's recorder when a range has begun,
 * and while one is recorded notes the step's start time and samples the memory outside the
 * framework's allocator. */
void rs_external_step(rs_runtime *rt, int64_t step);

/* The framework's snapshot with this rank's metadata ("reason": range_end, dump, signal), as
 * the bytes of its file (malloc'ed, *buf; the caller frees it). */
ranksnap_status rs_external_snapshot(rs_runtime *rt, const char *reason, char **buf, size_t *len);

/* Stops the framework's recorder (after its snapshot: PyTorch clears the history on stop). */
void rs_external_stop(rs_runtime *rt);

/* rank-RRRRR.pickle, or rank-RRRRR.aK.pickle for attempt K > 0 (rank-RRRRR.rsnap when recorded
 * natively, as a C program's): the plain name of `rank`'s file in RANKSNAP_DIR (dump.c qualifies it with the job when another job's file holds it, and
 * the file rendezvous of external_gather.c looks for both). -1 when it does not fit. */
int rs_external_file_name(int rank, char *buf, size_t n);

/* ranksnap_dump and the post-mortem dump in torch mode (dump.c writes it): the framework's
 * snapshot; `complete` 0 (the crash path) waits for a dump already running at most half of
 * RANKSNAP_DUMP_TIMEOUT_MS. */
ranksnap_status rs_external_dump_snapshot(rs_runtime *rt, int complete, char **buf, size_t *len);

/* The framework's process group (the ops' gather and bcast): 0 on success, -1 when it has none
 * or the collective failed. */
int rs_external_group_gather(const void *buf, size_t len, int timeout_s, void *arg,
                             void (*take)(void *arg, int rank, const void *buf, size_t len));
int rs_external_group_bcast(void *buf, size_t len, int timeout_s);

#endif
