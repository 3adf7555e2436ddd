/*
 * heap.c — heap.h, over glibc's malloc.
 *
 * Linux gives an anonymous range a 2 MiB page on its first touch where the range is marked
 * MADV_HUGEPAGE (the "madvise" setting most distributions ship) and the whole 2 MiB around the
 * address is mapped and still untouched. glibc marks nothing unless GLIBC_TUNABLES says so, which
 * only the environment can, before the program starts. So a thread about to decode:
 *   1. takes one block of SPACER_MAX + AHEAD bytes from its heap's top (each thread has an arena
 *      of its own), which malloc hands over untouched but for the headers at its two ends;
 *   2. marks the whole huge pages inside it;
 *   3. shrinks it (realloc, in place) to end where the first of them starts: the rest goes back
 *      to the top, where the thread's next allocations come from.
 * The shrunk block, the spacer, stays allocated until the thread is done, or the top would move
 * back onto the 4 KiB pages below it. A thread whose block starts in a range marked before (its
 * top on marked pages already: a spacer held, or the arena kept what it allocated there) has
 * nothing to do; one whose block starts where one did before (the spacer freed, the top back
 * below it) marks no range twice. Only memory the thread holds is marked: no other mapping is
 * touched. Nothing but speed depends on it: where a call fails, the block comes from elsewhere
 * than the top, or the kernel makes 4 KiB pages, allocations are as they were.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "heap.h"

#ifdef MADV_HUGEPAGE
/* The huge page's size where it is known: 512 page-table entries of 4 KiB pages (x86-64, and
 * arm64 and RISC-V with 4 KiB pages). Other page sizes make huge pages of 32 MiB or more, too
 * big to mark for one thread's files: left alone. */
#define HUGE_PAGE ((uintptr_t)2 << 20)
#define SMALL_PAGE 4096
/* Marked ahead of the spacer: a thread's decodes of a few 2.5 MB pickles use ~2 MiB of them */
#define AHEAD ((size_t)8 << 20)
#define SPACER_MAX ((size_t)HUGE_PAGE)
/* Ranges marked so far: one an arena, and a process has at most 8 a core (glibc's limit) */
#define MARKED_MAX 1024

static pthread_mutex_t marked_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uintptr_t from, to;
} marked[MARKED_MAX];
static size_t n_marked;

/* 1 when `at` lies in a range marked before: nothing to do. Else 0 once [from, to) is marked
 * (what of it a range recorded holds was; a range from the same `from`, the same arena's top
 * again, grows to `to`), -1 when it cannot be. */
static int mark(uintptr_t at, uintptr_t from, uintptr_t to)
{
    if (to <= from) return -1;
    int r = -1;
    pthread_mutex_lock(&marked_lock);
    size_t i, same = n_marked;
    for (i = 0; i < n_marked; i++) {
        if (marked[i].from <= at && at < marked[i].to) break;
        if (marked[i].from == from) same = i;
    }
    if (i < n_marked) {
        r = 1;
    } else if (same < n_marked && marked[same].to >= to) {
        r = 0;
    } else {
        uintptr_t lo = same < n_marked ? marked[same].to : from;
        if ((same < n_marked || n_marked < MARKED_MAX) &&
            madvise((void *)lo, to - lo, MADV_HUGEPAGE) == 0) {
            if (same == n_marked) marked[n_marked++].from = from;
            marked[same].to = to;
            r = 0;
        }
    }
    pthread_mutex_unlock(&marked_lock);
    return r;
}

void *rs_heap_thread_begin(void)
{
    if (sysconf(_SC_PAGESIZE) != SMALL_PAGE) return NULL;
    unsigned char *block = malloc(SPACER_MAX + AHEAD);
    if (!block) return NULL;
    uintptr_t at = (uintptr_t)block, end = at + SPACER_MAX + AHEAD;
    /* at least a page above the block's start (the spacer keeps its header's page), at least a
     * page below its end (malloc wrote the next chunk's header there: its huge page cannot be
     * whole) */
    uintptr_t from = (at + SMALL_PAGE + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    uintptr_t to = (end - SMALL_PAGE) & ~(HUGE_PAGE - 1);
    if (mark(at, from, to) != 0) {
        free(block);
        return NULL;
    }
    /* ends where the next block's header (two words) ends at `from`: that block starts there */
    void *spacer = realloc(block, from - at - 2 * sizeof(size_t));
    if (!spacer) free(block);
    return spacer;
}
#else
void *rs_heap_thread_begin(void)
{
    return NULL;
}
#endif

void rs_heap_keep_freed_memory(void)
{
#if defined(M_TRIM_THRESHOLD) && defined(M_MMAP_THRESHOLD)
    (void)mallopt(M_MMAP_THRESHOLD, 64 << 20);
    (void)mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
}

void rs_heap_thread_end(void *spacer)
{
    free(spacer);
}
