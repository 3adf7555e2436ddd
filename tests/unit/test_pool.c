/*
 * test_pool.c — the report's thread pool (cli/pool.h): every task runs once whatever --jobs
 * says, progress is called one task at a time, and the threads it starts on CPUs of their own
 * run their tasks free to use every CPU the process may use (a thread left pinned could not be
 * moved off a CPU that other work needs), also when the process may use one CPU only.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "pool.h"

#define TASKS 200

typedef struct run {
    atomic_int ran[TASKS];
    atomic_int not_free; /* tasks whose thread could not use every CPU of `allowed` */
    atomic_int in_done;  /* done calls under way */
    atomic_int overlap;  /* done calls that met another one */
    int done_calls;      /* counted by done, which the pool calls one at a time */
    cpu_set_t allowed;
} run;

static void task(void *ctx, size_t i)
{
    run *r = ctx;
    cpu_set_t mine;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0 || !CPU_EQUAL(&mine, &r->allowed))
        atomic_fetch_add(&r->not_free, 1);
    atomic_fetch_add(&r->ran[i], 1);
}

static void done(void *ctx, size_t i)
{
    run *r = ctx;
    (void)i;
    if (atomic_fetch_add(&r->in_done, 1) != 0) atomic_fetch_add(&r->overlap, 1);
    r->done_calls++;
    atomic_fetch_sub(&r->in_done, 1);
}

/* Runs TASKS tasks with `jobs` and checks every one ran once, on a thread free to use `allowed`
 * (the process's CPUs when the pool ran). */
static void run_all(int jobs)
{
    run *r = calloc(1, sizeof *r);
    CHECK(r != NULL);
    if (!r) return;
    CHECK(sched_getaffinity(0, sizeof r->allowed, &r->allowed) == 0);
    rs_pool_run(TASKS, jobs, task, done, r);
    int once = 1;
    for (size_t i = 0; i < TASKS; i++) once &= atomic_load(&r->ran[i]) == 1;
    CHECK(once);
    CHECK_EQ_U64(r->done_calls, TASKS);
    CHECK_EQ_U64(atomic_load(&r->overlap), 0);
    CHECK_EQ_U64(atomic_load(&r->not_free), 0);
    /* the calling thread, which ran tasks too, is as it was */
    cpu_set_t after;
    CHECK(sched_getaffinity(0, sizeof after, &after) == 0 && CPU_EQUAL(&after, &r->allowed));
    free(r);
}

TEST(every_task_runs_once_on_a_thread_free_to_use_every_cpu_whatever_the_jobs)
{
    int cores = rs_pool_cores();
    CHECK(cores >= 1);
    /* one thread; one per core; more threads than cores (started round the CPUs); more than
     * the tasks; more than the pool ever starts */
    int jobs[] = {0, 1, 2, cores, cores + 1, 3 * cores + 1, TASKS + 5, 1000};
    for (size_t k = 0; k < sizeof jobs / sizeof jobs[0]; k++) run_all(jobs[k]);
}

TEST(a_process_on_one_cpu_runs_every_task_there)
{
    cpu_set_t all, one;
    CHECK(sched_getaffinity(0, sizeof all, &all) == 0);
    int cpu = sched_getcpu();
    CHECK(cpu >= 0);
    if (cpu < 0) return;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
    CHECK_EQ_U64(rs_pool_cores(), 1);
    run_all(4);
    CHECK(sched_setaffinity(0, sizeof all, &all) == 0);
}

TEST(no_tasks_is_no_work)
{
    run *r = calloc(1, sizeof *r);
    CHECK(r != NULL);
    if (!r) return;
    rs_pool_run(0, 4, task, done, r);
    CHECK_EQ_U64(r->done_calls, 0);
    free(r);
}

int main(void)
{
    RUN(every_task_runs_once_on_a_thread_free_to_use_every_cpu_whatever_the_jobs);
    RUN(a_process_on_one_cpu_runs_every_task_there);
    RUN(no_tasks_is_no_work);
    return check_summary();
}
