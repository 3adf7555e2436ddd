/*
 * walk.h — the one walk over a snapshot's history: which blocks are live, and the allocated and
 * reserved levels, after every event.
 *
 * A snapshot holds the state at the end and the events that led there, but neither the state at
 * the start of the history nor the levels in between. Everything that needs them (the summary's
 * peaks and step series, the sites at the peak, the timeline, the replay, the totals the pickle
 * and ring decoders derive) walks the history through this module, so that they all follow the
 * same rules:
 *
 * - The live set at the history's start: a block whose first event is a free_requested was alive
 *   before the history (its allocation was dropped from the ring or happened before recording;
 *   its stack is unknown: RS_WALK_STACK_BEFORE, its size the free's request, rounded); a block
 *   alive at the end with no event in the history was alive throughout, with its own size and
 *   stack.
 * - `alloc` makes a block live with its request rounded up to the allocator's minimum block
 *   (allocator.min_block_size), except that the last allocation of a block still alive at the end
 *   takes the block's exact size from the state; `free_requested` ends it (a block awaiting stream
 *   events is already freed as far as allocated bytes go, as in PyTorch's stats); segment_alloc
 *   and segment_free move the reserved level.
 * - The levels at the history's start are the current totals minus the sum of the changes, so a
 *   walk ends exactly at the allocator's current values.
 * - Rings that dropped events, recording switched off for a while, or a crash-path snapshot can
 *   make a history inconsistent (a free of a block that is not live, an allocation over a live
 *   one): such an event is applied as well as it can be and counted; sizes come from an untrusted
 *   file, so every level saturates at 0 and at the integer range, never wraps.
 *
 * The table of blocks holds one slot per distinct address, found through an index keyed by a
 * hash seeded per process (common/addr_hash.h), so that no file can make its lookups degrade;
 * each block event's slot is found once, when the walk is made, and read from then on.
 */
#ifndef RANKSNAP_WALK_H
#define RANKSNAP_WALK_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "snapshot.h"

/* rs_walk_block.stack of a block alive before the history began (its stack is unknown). */
#define RS_WALK_STACK_BEFORE UINT32_MAX
/* A moment (rs_walk_moment) meaning "the state at the end", whose blocks are exact. */
#define RS_WALK_END INT64_MAX

/* One address of the table. Read-only for callers. */
typedef struct rs_walk_block {
    uint64_t addr;
    uint64_t size;       /* counted bytes while live                                        */
    uint64_t first;      /* index of its first alloc/free_requested event (when SEEN)         */
    uint64_t last;       /* index of its last alloc/free_requested event (when SEEN)          */
    const rs_snap_block *end; /* its block in the state at the end, NULL when none            */
    uint32_t stack;      /* stack id of the live allocation, RS_WALK_STACK_BEFORE, 0 = none   */
    uint32_t stream;     /* stream index of the live allocation                                */
    uint32_t flags;      /* RS_WALK_* below                                                     */
    uint32_t end_stream; /* stream index of `end`'s segment                                    */
} rs_walk_block;

enum {
    RS_WALK_USED = 1,       /* the slot holds an address                   */
    RS_WALK_LIVE = 2,       /* live at the walk's current position          */
    RS_WALK_START_LIVE = 4, /* live before the first event                  */
    RS_WALK_END_LIVE = 8,   /* allocated in the state at the end            */
    RS_WALK_SEEN = 16,      /* has an alloc or free_requested in the history */
    RS_WALK_HELD = 32,      /* live from one of the history's held events (history.held): the
                             * rank held it when the range began */
};

/* What rs_walk_event did. */
typedef struct rs_walk_change {
    int64_t d_allocated;    /* change of the allocated level                              */
    int64_t d_reserved;     /* change of the reserved level                               */
    rs_walk_block *block;   /* the block of an alloc or free_requested, NULL otherwise     */
    uint64_t replaced_size; /* alloc over a live block: the size it replaced, else 0       */
    int inconsistent;       /* a free of a block not live, or an alloc over a live one     */
} rs_walk_change;

typedef struct rs_walk {
    const rs_snap *s;
    /* found when the walk was made (one pass over the history) */
    uint64_t start_allocated, start_reserved; /* levels before the first event              */
    uint64_t peak_allocated;  /* highest allocated level (the start level when nothing rose)  */
    uint64_t peak_reserved;
    int64_t peak_event;       /* event after which allocated first peaked, -1 = at the start */
    int64_t last_oom;         /* index of the last oom event, -1 = none                      */
    int any_block_event;      /* an alloc or free_requested exists                            */
    int any_step;
    int64_t step_min, step_max; /* step numbers seen, when any_step                          */
    uint64_t n_start_live;    /* blocks live before the first event                          */
    /* What the first pass saw, relative to the start levels (rs_walk_levels_exact says when a
     * level is the start plus these): the reserved level at peak_event, the step in effect
     * there and at last_oom (a step event's size; -1 before the first), the levels at last_oom,
     * and each run of events from a step event to the next with the highest allocated level
     * in it (run_step/run_peak, NULL when there is no step event). */
    int64_t rel_reserved_at_peak, peak_step;
    int64_t rel_allocated_at_oom, rel_reserved_at_oom, oom_step;
    int64_t rel_allocated_min, rel_allocated_max, rel_reserved_min, rel_reserved_max;
    size_t n_runs;
    int64_t *run_step, *run_peak;
    /* the walk's position (rs_walk_reset, rs_walk_event) */
    uint64_t next;            /* index of the next event to apply                            */
    uint64_t allocated, reserved;      /* levels after the events applied so far              */
    int64_t rel_allocated, rel_reserved; /* the same, relative to the start (saturating)      */
    /* the table: one slot per distinct address, in the order the walk first met them */
    rs_walk_block *slots;
    size_t n_slots;
    uint32_t *index;          /* open addressing by address hash: slot + 1, 0 = empty */
    uint64_t *index_addr;     /* the address of each used index entry                        */
    size_t index_mask;
    uint32_t *event_slot;     /* the slot of each block event (undefined for other events) */
    uint64_t min_block;
    uint64_t seed;
    int borrowed;             /* index, index_addr and event_slot are the kept walk's */
} rs_walk;

/* Builds the table and the live set at the start, and makes the first pass (the fields above the
 * position); leaves the walk reset. RANKSNAP_ERR_HOST_MEMORY when the table does not fit. When
 * the snapshot keeps a walk (rs_walk_keep), a copy of it: its table's slots copied, its index
 * and noted slots shared (read only), the same as building them. */
ranksnap_status rs_walk_init(rs_walk *w, const rs_snap *s);
void rs_walk_free(rs_walk *w);

/* For a decoder, once its snapshot is finished (nothing in it changes after): w, reset, goes to
 * the snapshot (rs_snap.walk), for every rs_walk_init after (the summary, the sites at the peak,
 * the timeline each make one). *w is left empty; without memory it is only freed. */
void rs_walk_keep(rs_walk *w);

/* Whether every allocated level (and reserved level) of a walk is its start level plus the
 * first pass's relative one: no level saturated, at 0 or at the integer range, on the way. A
 * history that frees more than it had (inconsistent) may make a level stop at 0; its readers
 * walk instead of computing. */
int rs_walk_levels_exact(const rs_walk *w);

/* Back to the live set and the levels at the start, before event 0. */
void rs_walk_reset(rs_walk *w);

/* Applies event w->next (which must be < the history's count), advances, and says what changed. */
void rs_walk_event(rs_walk *w, rs_walk_change *c);

/* Walks to just after event `moment` (-1: the start, RS_WALK_END: the whole history). */
void rs_walk_to(rs_walk *w, int64_t moment);

/* The moment whose live blocks explain the rank: its OOM when it had one (the last oom event, or
 * RS_WALK_END when the ring lost it), otherwise its peak (RS_WALK_END for a history without
 * allocations). */
int64_t rs_walk_moment(const rs_walk *w);

/* The allocator's rounding of a request to the minimum block; 0 stays 0. */
uint64_t rs_walk_round(const rs_walk *w, uint64_t request);

/* The request a live block stands for, and its stream index: for blocks live before the history,
 * the free's request or the end state's requested size; otherwise the alloc's. */
uint64_t rs_walk_request(const rs_walk *w, const rs_walk_block *b);

/* The slot of `addr`, NULL when the walk has none. */
rs_walk_block *rs_walk_find(rs_walk *w, uint64_t addr);

/* Iterates over the table's live blocks: start with *it = 0; NULL at the end. */
rs_walk_block *rs_walk_next_live(rs_walk *w, size_t *it);

/* Slots are stable for the walk's life: callers key side tables by this index (< capacity). */
static inline size_t rs_walk_capacity(const rs_walk *w)
{
    return w->n_slots;
}
static inline size_t rs_walk_index(const rs_walk *w, const rs_walk_block *b)
{
    return (size_t)(b - w->slots);
}

#endif
