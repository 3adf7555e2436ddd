/*
 * pool.c — pool.h: a counter of the next task and a lock for the completion callback; threads
 * live for one rs_pool_run, each started on a CPU of its own, and allocate from huge pages while
 * they work (heap.h).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "heap.h"
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
    cpu_set_t allowed; /* the process's CPUs, which a thread started on one gets back */
} pool;

static void *pool_worker(void *arg)
{
    pool *p = arg;
    void *spacer = rs_heap_thread_begin();
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
    rs_heap_thread_end(spacer);
    return NULL;
}

/* A thread started on one CPU (start_thread): once it runs there, any CPU the process may use
 * is its again, so that the kernel can move it off a CPU that other work needs. */
static void *placed_worker(void *arg)
{
    pool *p = arg;
    /* refused only when the process's CPUs changed since the pool read them: the thread then
     * works on the CPU it was started on, which it may use */
    (void)sched_setaffinity(0, sizeof p->allowed, &p->allowed);
    return pool_worker(p);
}

/* The k-th (k >= 1) of the CPUs in `set` after CPU `from`, round the set. */
static int nth_cpu_after(const cpu_set_t *set, int from, size_t k)
{
    size_t skip = (k - 1) % (size_t)CPU_COUNT(set);
    for (int i = 1; i <= CPU_SETSIZE; i++) {
        int c = (from + i) % CPU_SETSIZE;
        if (CPU_ISSET(c, set) && skip-- == 0) return c;
    }
    return -1;
}

/* Starts thread k of the pool (the calling thread, on CPU `from`, is thread 0) on the k-th CPU
 * after the caller's. A new thread is otherwise queued on its parent's CPU and moved only when
 * the kernel next balances its CPUs: on the CPU machine (a 2-CPU KVM guest) both threads shared
 * one CPU for the first 10 to 20 ms while the other idled, the whole of a report of four PyTorch
 * pickles. Started where the kernel places it when no CPU can be named. */
static int start_thread(pool *p, pthread_t *t, size_t k, int from)
{
    int cpu = from >= 0 && CPU_COUNT(&p->allowed) > 1 ? nth_cpu_after(&p->allowed, from, k) : -1;
    if (cpu >= 0) {
        pthread_attr_t a;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (pthread_attr_init(&a) == 0) {
            int started = pthread_attr_setaffinity_np(&a, sizeof one, &one) == 0 &&
                          pthread_create(t, &a, placed_worker, p) == 0;
            pthread_attr_destroy(&a);
            if (started) return 0;
        }
    }
    return pthread_create(t, NULL, pool_worker, p);
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
        int from = -1;
        if (sched_getaffinity(0, sizeof p.allowed, &p.allowed) == 0) from = sched_getcpu();
        if (from >= 0 && !CPU_ISSET(from, &p.allowed)) from = -1;
        /* the calling thread is one of the `want`: it starts the others, then works */
        while (started + 1 < want && start_thread(&p, &threads[started], started + 1, from) == 0)
            started++;
        pool_worker(&p);
        for (size_t i = 0; i < started; i++) pthread_join(threads[i], NULL);
        pthread_mutex_destroy(&p.lock);
        return;
    }
    void *spacer = n ? rs_heap_thread_begin() : NULL;
    for (size_t i = 0; i < n; i++) {
        task(ctx, i);
        if (done) done(ctx, i);
    }
    rs_heap_thread_end(spacer);
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
