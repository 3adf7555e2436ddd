/*
 * held.h — what a rank holds when a recorded range begins (held.c).
 */
#ifndef RANKSNAP_HELD_H
#define RANKSNAP_HELD_H

#include <stdint.h>

struct rs_runtime;

/* Device memory taken outside the allocator (the driver's interposers, other pools) while it is
 * live: `key` its pointer or handle, pcs[0..n) the allocating stack (n may be 0). Each returns the
 * instance whose history the allocation's (or free's) own event goes to, NULL when none records:
 * decided together with the table's change, so that nothing is both held at a range's start (or
 * at the instance's publication) and recorded by its own event, or neither. `async`: a
 * stream-ordered pool's allocation in a rank recorded natively, held as async_alloc. */
struct rs_runtime *rs_held_outside_alloc(uint64_t key, uint64_t size, int device, const uintptr_t *pcs,
                                         int n, int async);
struct rs_runtime *rs_held_outside_free(uint64_t key);

/* Appends, as the first events of a range's fresh history, an alloc for every block the
 * allocators hold and an outside_alloc (async_alloc) for every live outside allocation, each with its stack
 * (a block allocated while nothing recorded: its caller's return address), marks them as held
 * (rs_recorder_mark_held), and turns the recording flag on. Allocator lock held, recorder on. */
void rs_held_range_begin_locked(struct rs_runtime *rt);
/* Publishes a new instance (rs_state_publish); when it records from its start (the whole run), its
 * history begins with what is held now, as a range's does: the driver's interposers record
 * before the instance is up (instance.h, rs_instance_starting). */
void rs_held_publish(struct rs_runtime *rt);

#endif
