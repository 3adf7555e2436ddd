/*
 * alloc_check.c — the allocator's self-check (rs_alloc_check): every structure walked and its
 * invariants checked, for tests and debugging.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "errors.h"
#include "log.h"
#include "mutex.h"
#include "options.h"
#include "text.h"
#include "alloc_block.h"
#include "alloc_check.h"

#define FAIL_IF(cond, ...)                                                                         \
    do {                                                                                           \
        if (cond) {                                                                                \
            rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, __VA_ARGS__);                                  \
            return 0;                                                                              \
        }                                                                                          \
    } while (0)

/* Every node of one bin: parent links, heap order, key order, class, state and pool. */
static int validate_bin(const rs_pool *p, unsigned c, size_t limit, size_t *count)
{
    const rs_block *root = p->bins[c];
    int bit = (p->bitmap[c >> 6] >> (c & 63u)) & 1u;
    FAIL_IF(bit != (root != NULL), "bin %u: bitmap bit %d disagrees with the tree", c, bit);
    FAIL_IF(root && root->parent, "bin %u: root has a parent", c);
    const rs_block *prev = NULL;
    for (rs_block *b = treap_first((rs_block *)(uintptr_t)root); b; b = rs_al_treap_next(b)) {
        FAIL_IF(++*count > limit, "bin %u: more nodes than blocks (a cycle?)", c);
        FAIL_IF(b->state != RS_BLOCK_INACTIVE, "block 0x%" PRIxPTR " in a bin is not inactive",
                b->addr);
        FAIL_IF(b->pool != p, "block 0x%" PRIxPTR " is in the bins of another pool", b->addr);
        FAIL_IF(size_class(b->size) != c || b->bin != c,
                "block 0x%" PRIxPTR " of %zu bytes is in bin %u (its own says %u)", b->addr,
                b->size, c, (unsigned)b->bin);
        FAIL_IF(prev && !key_less(prev, b), "bin %u: blocks out of (size, address) order", c);
        for (int k = 0; k < 2; k++)
            FAIL_IF(b->child[k] && (b->child[k]->parent != b || b->child[k]->prio > b->prio),
                    "bin %u: bad parent link or heap order below 0x%" PRIxPTR, c, b->addr);
        prev = b;
    }
    return 1;
}

static int validate(rs_alloc *a)
{
    uint64_t allocated = 0, active = 0, requested = 0, reserved = 0, whole = 0;
    size_t n_blocks = 0, n_inactive = 0, n_allocated = 0, n_events = 0, n_segs = 0;
    size_t n_unmapped = 0;
    for (const rs_segment *s = a->segments; s; s = s->next) {
        FAIL_IF(++n_segs > a->n_segments, "more segments listed than counted");
        FAIL_IF(s->next && s->next->prev != s, "segment list links broken");
        uintptr_t at = s->addr;
        size_t mapped = 0;
        FAIL_IF(!s->head || s->head->prev, "segment 0x%" PRIxPTR ": bad head block", s->addr);
        for (const rs_block *b = s->head; b; b = b->next) {
            n_blocks++;
            FAIL_IF(b->addr != at, "segment 0x%" PRIxPTR ": gap or overlap at 0x%" PRIxPTR,
                    s->addr, b->addr);
            FAIL_IF(b->seg != s || b->pool != s->pool,
                    "block 0x%" PRIxPTR ": wrong segment or pool", b->addr);
            FAIL_IF(b->next && b->next->prev != b, "block 0x%" PRIxPTR ": broken next link",
                    b->addr);
            at += b->size;
            if (!b->mapped) {
                n_unmapped++;
                FAIL_IF(!s->expandable, "block 0x%" PRIxPTR " unmapped in a plain segment",
                        b->addr);
                FAIL_IF(b->state != RS_BLOCK_INACTIVE, "unmapped block 0x%" PRIxPTR " in use",
                        b->addr);
                FAIL_IF((b->addr - s->addr) % s->page || b->size % s->page,
                        "unmapped block 0x%" PRIxPTR " is not whole pages", b->addr);
                FAIL_IF(b->next && !b->next->mapped,
                        "unmapped neighbours 0x%" PRIxPTR " and 0x%" PRIxPTR " did not coalesce",
                        b->addr, b->next->addr);
                continue;
            }
            mapped += b->size;
            if (b->state == RS_BLOCK_INACTIVE) {
                n_inactive++;
                FAIL_IF(b->next && b->next->state == RS_BLOCK_INACTIVE && b->next->mapped,
                        "free neighbours 0x%" PRIxPTR " and 0x%" PRIxPTR " did not coalesce",
                        b->addr, b->next->addr);
                if (unsplit(b)) whole += b->size;
                continue;
            }
            active += b->size;
            requested += b->requested;
            if (b->state == RS_BLOCK_ACTIVE_ALLOCATED) {
                n_allocated++;
                allocated += b->size;
                map_slot *slot = map_find(a, b->addr);
                FAIL_IF(!slot || slot->block != b, "allocated block 0x%" PRIxPTR " not in the map",
                        b->addr);
            } else {
                FAIL_IF(b->event_count == 0, "awaiting block 0x%" PRIxPTR " has no events",
                        b->addr);
                n_events += b->event_count;
            }
        }
        FAIL_IF(at != s->addr + s->size, "segment 0x%" PRIxPTR ": blocks do not add up",
                s->addr);
        FAIL_IF(s->expandable && mapped != s->mapped,
                "expandable segment 0x%" PRIxPTR ": %zu bytes mapped, blocks say %zu", s->addr,
                s->mapped, mapped);
        reserved += mapped;
    }
    size_t listed = 0;
    for (int k = 0; k < 2; k++)
        for (const rs_pool *p = a->pools[k]; p; p = p->next)
            for (const rs_block *b = p->unmapped; b; b = b->un_next) {
                FAIL_IF(++listed > n_unmapped, "more unmapped blocks listed than exist");
                FAIL_IF(b->mapped || b->pool != p, "block 0x%" PRIxPTR " is in the wrong "
                                                   "unmapped list", b->addr);
                FAIL_IF(b->un_next && b->un_next->addr <= b->addr,
                        "unmapped list out of address order at 0x%" PRIxPTR, b->addr);
            }
    FAIL_IF(listed != n_unmapped, "%zu unmapped blocks, %zu listed", n_unmapped, listed);
    FAIL_IF(n_segs != a->n_segments, "segment count %zu, listed %zu", a->n_segments, n_segs);
    FAIL_IF(allocated != a->st.allocated_bytes, "allocated_bytes %" PRIu64 ", blocks %" PRIu64,
            a->st.allocated_bytes, allocated);
    FAIL_IF(active != a->st.active_bytes, "active_bytes %" PRIu64 ", blocks %" PRIu64,
            a->st.active_bytes, active);
    FAIL_IF(requested != a->st.requested_bytes, "requested_bytes %" PRIu64 ", blocks %" PRIu64,
            a->st.requested_bytes, requested);
    FAIL_IF(reserved != a->st.reserved_bytes, "reserved_bytes %" PRIu64 ", segments %" PRIu64,
            a->st.reserved_bytes, reserved);
    FAIL_IF(whole != a->whole_free, "whole free bytes %" PRIu64 ", blocks %" PRIu64,
            a->whole_free, whole);
    FAIL_IF(n_allocated != a->n_allocated, "map holds %zu blocks, %zu allocated", a->n_allocated,
            n_allocated);
    FAIL_IF(n_events != a->n_pending, "%zu pending events, blocks await %zu", a->n_pending,
            n_events);
    size_t in_bins = 0;
    for (int k = 0; k < 2; k++) {
        for (const rs_pool *p = a->pools[k]; p; p = p->next) {
            FAIL_IF(p->is_small != k, "pool of stream %p is in the wrong list", p->stream);
            for (unsigned w = 0; w < NBINS / 64; w++)
                FAIL_IF(((p->summary >> w) & 1u) != (p->bitmap[w] != 0),
                        "pool summary bit %u disagrees with its bitmap", w);
            for (unsigned c = 0; c < NBINS; c++)
                if (!validate_bin(p, c, n_blocks, &in_bins)) return 0;
        }
    }
    FAIL_IF(in_bins != n_inactive, "%zu blocks in bins, %zu inactive", in_bins, n_inactive);
    return 1;
}

int rs_alloc_check(rs_alloc *a)
{
    if (!a) return 0;
    rs_mutex_lock(a->lock);
    int ok = validate(a);
    rs_mutex_unlock(a->lock);
    return ok;
}
