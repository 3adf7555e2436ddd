/*
 * alloc_check.h — the allocator's self-check (alloc_check.c).
 */
#ifndef RANKSNAP_ALLOC_CHECK_H
#define RANKSNAP_ALLOC_CHECK_H

typedef struct rs_alloc rs_alloc;

/* Walks every structure and checks its invariants: blocks tile their segments, free neighbours
 * are coalesced, the pools' bins are ordered, the counters match the blocks. 1 if all hold;
 * otherwise 0, and the thread's last error names the first violation. Costs a walk of the whole
 * allocator, under the lock: for tests and debugging. */
int rs_alloc_check(rs_alloc *a);

#endif
