/*
 * alloc_expandable.h — expandable segments (alloc_expandable.c): one virtual range per (stream,
 * pool), of which only some pages are mapped, as PyTorch's ExpandableSegment.
 */
#ifndef RANKSNAP_ALLOC_EXPANDABLE_H
#define RANKSNAP_ALLOC_EXPANDABLE_H

#include <stddef.h>

#include "alloc_struct.h"

/* PyTorch's try_allocate_expandable_block: maps the free or unmapped space found for `size` bytes;
 * *out is the free block (in its pool) that holds them, or NULL when the device had no room (the
 * pages already mapped stay mapped: free, reserved memory). */
ranksnap_status rs_al_expandable_alloc(rs_alloc *a, rs_pool *pool, size_t size, rs_block **out);

/* PyTorch's unmap_block: gives back the whole pages inside the free block `b`; partial pages at
 * either end stay mapped as free blocks of their own. The unmapped part merges with unmapped
 * neighbours. */
ranksnap_status rs_al_expandable_unmap(rs_alloc *a, rs_block *b);

/* PyTorch's release_expandable_segment: a range with nothing mapped is given back. */
ranksnap_status rs_al_expandable_release(rs_alloc *a, rs_segment *s);

#endif
