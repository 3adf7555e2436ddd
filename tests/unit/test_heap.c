/*
 * test_heap.c — the report's threads allocate from huge pages (cli/heap.h): after
 * rs_heap_thread_begin a thread's next large block lies where the kernel may back it with
 * transparent huge pages (smaps' THPeligible), on the calling thread (glibc's main arena, the
 * brk heap), on a thread of its own (an arena of its own) and on the pool's threads; before it,
 * it does not. Skipped (77, with the reason) where the two cannot be told apart: no THP, THP
 * "never" (nothing is eligible) or "always" (everything is), or another allocator than glibc's
 * (a sanitizer's).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "heap.h"
#include "pool.h"
#include "sanitized.h"

/* as the decoders' blocks: the memo's array, an event column */
#define BLOCK ((size_t)1 << 20)

/* smaps' THPeligible of the mapping that holds address a: 0 or 1, -1 when smaps does not say. A
 * block is asked about at its middle: its first bytes may share a page with what lies before
 * it. An address, not a pointer: GCC -O0 warns of a pointer to unwritten memory given as const. */
static int thp_eligible(uintptr_t a)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int in = 0, r = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
            in = lo <= a && a < hi;
            continue;
        }
        if (in && sscanf(line, "THPeligible: %d", &r) == 1) break;
    }
    fclose(f);
    return r;
}

/* A block allocated, its THPeligible taken and freed, with or without rs_heap_thread_begin
 * before it. Freed at once, a block goes back to the top it came from: the next is carved where
 * it was, not from a hole it left. */
typedef struct probe {
    int begin;
    int eligible;
} probe;

static int block_eligible(void)
{
    void *p = malloc(BLOCK);
    int e = p ? thp_eligible((uintptr_t)p + BLOCK / 2) : -1;
    free(p);
    return e;
}

static void *allocate(void *arg)
{
    probe *pr = arg;
    void *spacer = pr->begin ? rs_heap_thread_begin() : NULL;
    pr->eligible = block_eligible();
    rs_heap_thread_end(spacer);
    return NULL;
}

static int on_a_thread(probe *pr)
{
    pthread_t t;
    if (pthread_create(&t, NULL, allocate, pr) != 0) return -1;
    return pthread_join(t, NULL);
}

#define TASKS 6

static void pool_task(void *ctx, size_t i)
{
    probe *pr = ctx;
    pr[i].eligible = block_eligible();
}

/* Why huge pages cannot be seen to follow rs_heap_thread_begin here, NULL when they can. */
static const char *why_not(void)
{
#ifdef RS_TEST_SANITIZED
    return "a sanitizer's allocator, not glibc's, serves malloc";
#else
    char mode[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return "the kernel has no transparent huge pages";
    if (!fgets(mode, sizeof mode, f)) mode[0] = '\0';
    fclose(f);
    if (!strstr(mode, "[madvise]"))
        return "transparent huge pages are not in \"madvise\" mode (\"never\": nothing is "
               "eligible; \"always\": everything is)";
    void *p = malloc(16);
    int smaps = p ? thp_eligible((uintptr_t)p) : -1;
    free(p);
    if (smaps < 0) return "/proc/self/smaps has no THPeligible field (Linux before 5.0?)";
    return NULL;
#endif
}

static probe main_before = {0, -1}, thread_before = {0, -1};
static probe main_after = {1, -1}, thread_after = {1, -1};
static probe pooled[TASKS], alone[TASKS];

TEST(without_it_a_block_is_not_on_huge_pages)
{
    /* first, on each kind of arena, before any begin marked it: or the test could not fail */
    allocate(&main_before);
    CHECK(on_a_thread(&thread_before) == 0);
    CHECK_EQ_U64(main_before.eligible, 0);
    CHECK_EQ_U64(thread_before.eligible, 0);
}

TEST(after_it_the_next_block_is_on_huge_pages_in_the_main_arena_and_a_thread_arena)
{
    allocate(&main_after);
    CHECK(on_a_thread(&thread_after) == 0); /* thread_before's arena, free again */
    CHECK_EQ_U64(main_after.eligible, 1);
    CHECK_EQ_U64(thread_after.eligible, 1);
}

TEST(the_pools_threads_and_the_calling_thread_alone_allocate_on_huge_pages)
{
    rs_pool_run(TASKS, 2, pool_task, NULL, pooled);
    for (size_t i = 0; i < TASKS; i++) CHECK_EQ_U64(pooled[i].eligible, 1);
    rs_pool_run(TASKS, 1, pool_task, NULL, alone);
    for (size_t i = 0; i < TASKS; i++) CHECK_EQ_U64(alone[i].eligible, 1);
}

TEST(a_thread_whose_top_is_on_marked_pages_already_has_nothing_to_do)
{
    void *first = rs_heap_thread_begin();
    void *again = rs_heap_thread_begin(); /* the first's spacer held: the top is marked */
    CHECK(first != NULL);
    CHECK(again == NULL);
    CHECK_EQ_U64(block_eligible(), 1);
    rs_heap_thread_end(again);
    rs_heap_thread_end(first);
    /* the spacer freed, the top is back below the marked pages: a spacer again, the same range */
    void *third = rs_heap_thread_begin();
    CHECK(third != NULL);
    CHECK_EQ_U64(block_eligible(), 1);
    rs_heap_thread_end(third);
}

int main(void)
{
    const char *why = why_not();
    if (why) {
        printf("SKIPPED: %s\n", why);
        return 77;
    }
    /* as `ranksnap report` runs: a decode's large blocks come from the heaps */
    rs_heap_keep_freed_memory();
    RUN(without_it_a_block_is_not_on_huge_pages);
    RUN(after_it_the_next_block_is_on_huge_pages_in_the_main_arena_and_a_thread_arena);
    RUN(the_pools_threads_and_the_calling_thread_alone_allocate_on_huge_pages);
    RUN(a_thread_whose_top_is_on_marked_pages_already_has_nothing_to_do);
    return check_summary();
}
