/*
 * held.h — what a rank holds when a recorded range begins (held.c).
 */
#ifndef RANKSNAP_HELD_H
#define RANKSNAP_HELD_H

#include <stdint.h>

struct rs_runtime;

/* Device memory taken outside the allocator (the driver's interposers, other pools) while it is
 * live: `key` its pointer or handle, pcs[0..n) the allocating stack (n may be 0). */
void rs_held_outside_alloc(uint64_t key, uint64_t size, int device, const uintptr_t *pcs, int n);
void rs_held_outside_free(uint64_t key);

/* Appends, as the first events of a range's fresh history, an alloc for every block the
 * allocators hold and an outside_alloc for every live outside allocation, each with its stack
 * (a block allocated while nothing recorded: its caller's return address), and marks them as
 * held (rs_recorder_mark_held). Allocator lock held, recording on. */
void rs_held_range_begin_locked(struct rs_runtime *rt);

#endif
