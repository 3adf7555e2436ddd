/*
 * alloc_release.h — giving cached memory back (alloc_release.c): empty_cache, the release of
 * what an allocation that failed needs, and the garbage collection of
 * garbage_collection_threshold.
 */
#ifndef RANKSNAP_ALLOC_RELEASE_H
#define RANKSNAP_ALLOC_RELEASE_H

#include <stddef.h>

#include "alloc_struct.h"

/* PyTorch's release_cached_blocks (also empty_cache): wait for every event, then release the
 * large pools' cached memory and the small pools'. */
ranksnap_status rs_al_release_cached(rs_alloc *a);

/* PyTorch's release_available_cached_blocks (only with max_split_size): frees the smallest
 * cached oversize segment that holds the request, else the largest ones below it, largest first,
 * until they add up to it. *released says whether enough was freed (what was freed stays freed
 * either way). */
ranksnap_status rs_al_release_available(rs_alloc *a, rs_pool *pool, size_t rounded,
                                         int *released);

/* PyTorch's garbage_collect_cached_blocks: over the threshold's share of the cap, free cached
 * whole large segments that have gone unused for at least the average age (in searches of the
 * large pools), pass after pass, until the excess is reclaimed or nothing more goes. No
 * synchronisation. */
ranksnap_status rs_al_garbage_collect(rs_alloc *a);

#endif
