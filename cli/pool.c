/*
 * pool.c — pool.h: a counter of the next task and a lock for the completion callback; threads
 * live for one rs_pool_run.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "pool.h"

/* More threads than this never pay off for reading files, whatever --jobs says. */
#define RS_POOL_MAX_THREADS 256

typedef struct pool {
    size_t n;
    atomic_size_t next;
    rs_pool_task task;
    rs_pool_done done;
    void *ctx;
    pthread_mutex_t lock;
} pool;

static void *pool_worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (i >= p->n) break;
        p->task(p->ctx, i);
        if (p->done) {
            pthread_mutex_lock(&p->lock);
            p->done(p->ctx, i);
            pthread_mutex_unlock(&p->lock);
        }
    }
    return NULL;
}

void rs_pool_run(size_t n, int jobs, rs_pool_task task, rs_pool_done done, void *ctx)
{
    pool p = {.n = n, .task = task, .done = done, .ctx = ctx};
    atomic_init(&p.next, 0);
    size_t want = jobs > 1 ? (size_t)jobs : 1;
    if (want > n) want = n;
    if (want > RS_POOL_MAX_THREADS) want = RS_POOL_MAX_THREADS;
    pthread_t threads[RS_POOL_MAX_THREADS];
    size_t started = 0;
    if (want > 1 && pthread_mutex_init(&p.lock, NULL) == 0) {
        /* the calling thread is one of the `want`: it starts the others, then works */
        while (started + 1 < want && pthread_create(&threads[started], NULL, pool_worker, &p) == 0)
            started++;
        pool_worker(&p);
        for (size_t i = 0; i < started; i++) pthread_join(threads[i], NULL);
        pthread_mutex_destroy(&p.lock);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        task(ctx, i);
        if (done) done(ctx, i);
    }
}

int rs_pool_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n < RS_POOL_MAX_THREADS ? n : RS_POOL_MAX_THREADS) : 1;
}
