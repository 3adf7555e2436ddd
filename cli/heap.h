/*
 * heap.h — the report's decoding threads allocate from transparent huge pages: a decode's
 * fresh memory, on 4 KiB pages, costs a page fault every 4 KiB (about 440 for a thread's first
 * 2.5 MB PyTorch pickle, a fifth of a report's CPU on the CPU machine: docs/BENCHMARKS.md).
 */
#ifndef RANKSNAP_HEAP_H
#define RANKSNAP_HEAP_H

/* The calling thread's next allocations from its heap's pages marked for huge pages, aligned
 * for them; what it returns goes to rs_heap_thread_end when the thread is done (NULL where
 * nothing was set up: then its allocations are as before). Pays off only in a process whose
 * malloc takes large blocks from its heaps (rs_decode_keep_freed_memory, called before). */
void *rs_heap_thread_begin(void);
void rs_heap_thread_end(void *spacer);

#endif
