/*
 * pools.h — PyTorch's private memory pools (pools.c): the segments of a CUDA graph's pool (or a
 * torch.cuda.MemPool's), apart from the allocator's default pool.
 *
 * A captured graph (torch.cuda.graph, torch.compile's "reduce-overhead") allocates from a pool of
 * its own, whose segments stay reserved between replays, by design, with few blocks allocated in
 * them as the allocator sees it: counted as fragmentation (reserved minus allocated) they would
 * send the user to expandable_segments or max_split_size_mb, the wrong fix. A snapshot names
 * each segment's pool (rs_snap_segment.pool_id, PyTorch's segment_pool_id); the history's
 * segment events do not, so a segment is a pool's when the state at the end has it there, and a
 * pool's segment released before the end counts as the default pool's.
 */
#ifndef RANKSNAP_POOLS_H
#define RANKSNAP_POOLS_H

#include <stdint.h>

#include "ranksnap.h"
#include "sites.h"
#include "snapshot.h"
#include "walk.h"

/* What private pools held at a moment. */
typedef struct rs_pools_use {
    uint64_t reserved;   /* bytes of their segments alive then                        */
    uint64_t allocated;  /* of which in live blocks                                    */
} rs_pools_use;

/* 1 when a segment of the state at the end is in a private pool. */
int rs_pools_any(const rs_snap *s);

/* What the private pools held just after event `moment` of the walk's history (-1: before the
 * first, RS_WALK_END: at the end), walking there. Zero when there is none; RANKSNAP_ERR_HOST_MEMORY
 * without memory for the table of their segments (then zero too). */
ranksnap_status rs_pools_at(rs_walk *w, int64_t moment, rs_pools_use *out);

/* Names the largest private pool at the end, as a site: "CUDA graph pool of FUNCTION" with the
 * line that captured it (outside PyTorch's capture code, the first of the user's own Python
 * frames, else the first frame that may be a site; with no capture code in the stack, the site
 * of the stack that made its first segment), or "private memory pool of ..." for a pool no
 * capture is seen to have made (a MemPool; with no stack, saying it cannot tell); bytes = its
 * reserved bytes. 0 when there is no private pool. */
int rs_pools_site(const rs_snap *s, const rs_site_picker *pk, rs_site *out);

#endif
