/*
 * test_alloc_threads.c — the allocator under concurrent use.
 *
 * Several threads share one allocator and run random mallocs (sizes across both pools and on
 * their own or other threads' streams), frees, record_streams, busy/complete stream toggles,
 * empty_caches and state snapshots. Afterwards no two live blocks overlap, the books match, and
 * once everything is freed empty_cache gives every byte and event back to the device.
 * Build it once with -fsanitize=thread as well: it is the test that finds lock mistakes.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "backend_sim.h"
#include "check.h"

#define MiB ((size_t)1 << 20)
#define GiB ((uint64_t)1 << 30)
#define N_THREADS 4
#define N_OPS 50000
#define MAX_LIVE 48

typedef struct live_block {
    void *ptr;
    size_t size;
} live_block;

typedef struct worker {
    int id;
    rs_alloc *a;
    rs_backend *b;
    uint64_t rng;
    live_block live[MAX_LIVE];
    int n_live;
    /* Counted by the worker, checked by main after join (CHECK is not thread-safe). */
    int bad_status, bad_owns, bad_stats, bad_state;
    int ooms;
} worker;

static void *stream_of(int id)
{
    return (void *)(uintptr_t)(0x1000 * (id + 1));
}

static uint64_t next_rand(worker *w)
{
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    return w->rng;
}

static size_t random_size(worker *w)
{
    uint64_t r = next_rand(w);
    unsigned cls = (unsigned)(r % 100);
    r >>= 8;
    if (cls < 70) return 1 + (size_t)(r % (64 * 1024));         /* small pool, mostly tiny */
    if (cls < 80) return 64 * 1024 + (size_t)(r % (MiB - 65536)); /* small pool, up to 1 MiB */
    if (cls < 96) return MiB + 1 + (size_t)(r % (9 * MiB));       /* large, 20 MiB segments */
    return 10 * MiB + (size_t)(r % (30 * MiB));                   /* large, own segments    */
}

/* The allocator's own invariants hold, and the snapshot it gives is tiled and sorted. */
static int state_consistent(rs_alloc *a)
{
    if (!rs_alloc_check(a)) return 0;
    rs_alloc_state st;
    if (rs_alloc_state_take(a, &st) != RANKSNAP_OK) return 0;
    int ok = 1;
    for (size_t i = 0; i < st.n_segments; i++) {
        const rs_segment_info *s = &st.segments[i];
        uint64_t next = s->addr, alloc = 0;
        if (i > 0 && st.segments[i - 1].addr + st.segments[i - 1].total_size > s->addr) ok = 0;
        for (size_t k = 0; k < s->n_blocks; k++) {
            if (s->blocks[k].addr != next) ok = 0;
            next += s->blocks[k].size;
            if (s->blocks[k].state == RS_BLOCK_ACTIVE_ALLOCATED) alloc += s->blocks[k].size;
        }
        if (next != s->addr + s->total_size || alloc != s->allocated_size) ok = 0;
    }
    rs_alloc_state_free(&st);
    return ok;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    void *own = stream_of(w->id);
    int busy = 0;
    for (int op = 0; op < N_OPS; op++) {
        unsigned r = (unsigned)(next_rand(w) % 1000);
        if (r < 480) {
            if (w->n_live == MAX_LIVE) continue;
            size_t size = random_size(w);
            void *stream = (next_rand(w) % 10) ? own : stream_of((int)(next_rand(w) % N_THREADS));
            void *p = NULL;
            ranksnap_status st = rs_alloc_malloc(w->a, size, stream, &p);
            if (st == RANKSNAP_OK && p) {
                w->live[w->n_live].ptr = p;
                w->live[w->n_live].size = size;
                w->n_live++;
            } else if (st == RANKSNAP_ERR_OUT_OF_MEMORY && !p) {
                w->ooms++;
            } else {
                w->bad_status++;
            }
        } else if (r < 850) {
            if (w->n_live == 0) continue;
            int k = (int)(next_rand(w) % (uint64_t)w->n_live);
            if (rs_alloc_free(w->a, w->live[k].ptr) != RANKSNAP_OK) w->bad_status++;
            w->live[k] = w->live[--w->n_live];
        } else if (r < 930) {
            if (w->n_live == 0) continue;
            int k = (int)(next_rand(w) % (uint64_t)w->n_live);
            void *s = stream_of((int)(next_rand(w) % N_THREADS));
            if (rs_alloc_record_stream(w->a, w->live[k].ptr, s) != RANKSNAP_OK) w->bad_status++;
        } else if (r < 960) {
            busy = !busy;
            rs_backend_sim_stream_set_busy(w->b, own, busy);
            if (!busy) rs_backend_sim_stream_complete(w->b, own);
        } else if (r < 965) {
            if (rs_alloc_empty_cache(w->a) != RANKSNAP_OK) w->bad_status++;
        } else if (r < 968) {
            if (!state_consistent(w->a)) w->bad_state++;
        } else {
            ranksnap_stats s;
            rs_alloc_get_stats(w->a, &s);
            if (s.allocated_bytes > s.active_bytes || s.active_bytes > s.reserved_bytes ||
                s.reserved_bytes > s.reserved_bytes_peak ||
                s.allocated_bytes > s.allocated_bytes_peak)
                w->bad_stats++;
            if (w->n_live && !rs_alloc_owns(w->a, w->live[0].ptr)) w->bad_owns++;
        }
    }
    rs_backend_sim_stream_set_busy(w->b, own, 0);
    rs_backend_sim_stream_complete(w->b, own);
    return NULL;
}

static int cmp_live(const void *x, const void *y)
{
    const live_block *a = x, *b = y;
    uintptr_t pa = (uintptr_t)a->ptr, pb = (uintptr_t)b->ptr;
    return (pa > pb) - (pa < pb);
}

/* Runs the workers on a device of `capacity` bytes and checks everything afterwards. */
static void run_workers(uint64_t capacity, int expect_ooms)
{
    rs_backend *b = NULL;
    rs_alloc *a = NULL;
    CHECK(rs_backend_sim_create(capacity, &b) == RANKSNAP_OK);
    rs_alloc_config cfg = {.max_split_size = UINT64_MAX};
    CHECK(rs_alloc_create(b, &cfg, &a) == RANKSNAP_OK);

    static worker w[N_THREADS];
    pthread_t tid[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].id = i;
        w[i].a = a;
        w[i].b = b;
        w[i].rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1) + capacity;
        CHECK(pthread_create(&tid[i], NULL, worker_main, &w[i]) == 0);
    }
    for (int i = 0; i < N_THREADS; i++) CHECK(pthread_join(tid[i], NULL) == 0);

    live_block all[N_THREADS * MAX_LIVE];
    int n = 0, ooms = 0;
    for (int i = 0; i < N_THREADS; i++) {
        CHECK_EQ_U64(w[i].bad_status, 0);
        CHECK_EQ_U64(w[i].bad_owns, 0);
        CHECK_EQ_U64(w[i].bad_stats, 0);
        CHECK_EQ_U64(w[i].bad_state, 0);
        ooms += w[i].ooms;
        for (int k = 0; k < w[i].n_live; k++) all[n++] = w[i].live[k];
    }
    if (expect_ooms) CHECK(ooms > 0);
    else CHECK_EQ_U64(ooms, 0);

    /* Live blocks never overlap, and they account for the allocated bytes. */
    qsort(all, (size_t)n, sizeof all[0], cmp_live);
    uint64_t rounded_sum = 0;
    for (int i = 0; i < n; i++) {
        rounded_sum += rs_alloc_round_size(all[i].size);
        if (i + 1 < n)
            CHECK((uintptr_t)all[i].ptr + rs_alloc_round_size(all[i].size) <= (uintptr_t)all[i + 1].ptr);
    }
    ranksnap_stats s;
    memset(&s, 0, sizeof s);
    rs_alloc_get_stats(a, &s);
    CHECK(s.allocated_bytes >= rounded_sum);
    CHECK_EQ_U64(s.num_allocs - s.num_frees, n);
    CHECK_EQ_U64(s.num_ooms, ooms);
    CHECK_EQ_U64(s.reserved_bytes, rs_backend_sim_used_bytes(b));
    CHECK(state_consistent(a));
    printf("  %llu allocs, %d ooms, %llu retries, %llu syncs, %llu segments\n",
           (unsigned long long)s.num_allocs, ooms, (unsigned long long)s.num_alloc_retries,
           (unsigned long long)s.num_sync_all_streams, (unsigned long long)s.num_segment_allocs);

    for (int i = 0; i < n; i++) CHECK(rs_alloc_free(a, all[i].ptr) == RANKSNAP_OK);
    CHECK(rs_alloc_empty_cache(a) == RANKSNAP_OK);
    rs_alloc_get_stats(a, &s);
    CHECK_EQ_U64(s.allocated_bytes, 0);
    CHECK_EQ_U64(s.active_bytes, 0);
    CHECK_EQ_U64(s.requested_bytes, 0);
    CHECK_EQ_U64(s.reserved_bytes, 0);
    CHECK_EQ_U64(s.inactive_split_bytes, 0);
    CHECK_EQ_U64(s.num_segment_allocs, s.num_segment_frees);
    CHECK_EQ_U64(rs_backend_sim_used_bytes(b), 0);
    CHECK_EQ_U64(rs_backend_sim_live_events(b), 0);
    rs_alloc_destroy(a);
    b->ops->destroy(b);
}

TEST(concurrent_random_operations_keep_the_books_and_release_everything)
{
    run_workers(64 * GiB, 0);
}

TEST(concurrent_operations_near_capacity_fail_only_with_oom_and_recover)
{
    run_workers(160 * MiB, 1);
}

int main(void)
{
    RUN(concurrent_random_operations_keep_the_books_and_release_everything);
    RUN(concurrent_operations_near_capacity_fail_only_with_oom_and_recover);
    return check_summary();
}
