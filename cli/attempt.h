/*
 * attempt.h — the rank files of a directory and the attempt they belong to: torchrun restarts
 * failed workers (TORCHELASTIC_RESTART_COUNT), and attempt K > 0 names its files
 * rank-RRRRR.aK.pickle (.rsnap, .ring) so that it never overwrites attempt K - 1's
 * (rank/runtime/external.c). `ranksnap report DIR` compares one attempt.
 */
#ifndef RANKSNAP_ATTEMPT_H
#define RANKSNAP_ATTEMPT_H

#include <stddef.h>

/* 1 for rank-DIGITS.rsnap, .ring and .pickle, each also with .aK and / or .job-TAG (a job's
 * qualified names, dump.c) before the extension. */
int rs_attempt_is_rank_file(const char *name);

/* The parts of such a name: the rank, the attempt (0 without .aK), the job's TAG ("" for a plain
 * name; NULL: not wanted) and the extension; each output may be NULL. -1 for any other name. */
int rs_attempt_parse(const char *name, long *rank, int *attempt, char *tag, size_t tag_size,
                     const char **ext);

/* The attempt a file's name says: K for rank-RRRRR.aK.*, 0 otherwise. */
int rs_attempt_of_name(const char *path);

/* Which attempt to compare, of n files with their attempt, rank and world size: `requested`
 * when it is >= 0; else the newest attempt that has a file for each of its ranks, and when none
 * has, the newest. -1 when n is 0. */
int rs_attempt_choose(const int *attempt, const int *rank, const int *world, size_t n, int requested);

#endif
