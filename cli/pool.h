/*
 * pool.h — independent tasks run on a few threads: `ranksnap report` reads its files this way
 * (--jobs N, default the machine's cores).
 *
 * The tasks are the indexes 0..n-1; each thread takes the next one when it finishes one, so a
 * large file does not hold back the small ones behind it. Results belong in per-index slots the
 * caller owns, which keeps the output the same whatever the number of threads.
 */
#ifndef RANKSNAP_POOL_H
#define RANKSNAP_POOL_H

#include <stddef.h>

/* The task: works on index i (its own slot of ctx's results); runs on any of the threads. */
typedef void (*rs_pool_task)(void *ctx, size_t i);
/* Called after each task by the thread that ran it, one call at a time (under the pool's lock):
 * progress. May be NULL. */
typedef void (*rs_pool_done)(void *ctx, size_t i);

/* Runs task(ctx, i) for every i < n on min(jobs, n) threads, the calling thread among them, and
 * returns when all are done. With jobs <= 1, or when no thread can be started, the calling
 * thread runs them all, in order. */
void rs_pool_run(size_t n, int jobs, rs_pool_task task, rs_pool_done done, void *ctx);

/* The machine's cores this process may run on, at least 1: the default of --jobs. */
int rs_pool_cores(void);

#endif
