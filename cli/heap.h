/*
 * heap.h — how the command's malloc is set up for decoding file after file: freed memory kept
 * for the next file, and the report's decoding threads on transparent huge pages. A decode's
 * fresh memory, on 4 KiB pages, costs a page fault every 4 KiB, hundreds for a thread's first
 * large PyTorch pickle: a large share of a report's CPU (docs/BENCHMARKS.md measures what each
 * setting earns, with the command that measures it).
 */
#ifndef RANKSNAP_HEAP_H
#define RANKSNAP_HEAP_H

/* For a process that decodes file after file (`ranksnap report`, the benchmarks that time it):
 * each decode fills tens of MB that are freed before the next, which glibc would hand back to
 * the kernel and fault in again, zeroed, for every file (a third of a decode's time). This keeps
 * them for the next file, which costs nothing above the peak. A setting of the whole process's
 * malloc, so the command's to make (mallopt), never a library layer's. */
void rs_heap_keep_freed_memory(void);

/* The calling thread's next allocations from its heap's pages marked for huge pages, aligned
 * for them; what it returns goes to rs_heap_thread_end when the thread is done (NULL where
 * nothing was set up: then its allocations are as before). Pays off only in a process whose
 * malloc takes large blocks from its heaps (rs_heap_keep_freed_memory, called before). */
void *rs_heap_thread_begin(void);
void rs_heap_thread_end(void *spacer);

#endif
