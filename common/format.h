/*
 * format.h — what the snapshot writer (rank/) and the readers (collector/) share.
 *
 * The only header both sides include: the format name and version, the event actions and block
 * states with their names (PyTorch's vocabulary wherever the concept is the same), and the map
 * keys. Nothing else crosses between rank/ and collector/. docs/FORMAT.md documents each field.
 */
#ifndef RANKSNAP_FORMAT_H
#define RANKSNAP_FORMAT_H

#define RSNAP_FORMAT_NAME "ranksnap"
#define RSNAP_FORMAT_VERSION 1

/* streams[] entry for events whose stream the recorder could not intern (its table was full). */
#define RSNAP_STREAM_OTHER 0xffffffffffffffffull

/* Event actions, stored as small integers in history.action. Never renumber: files keep them. */
typedef enum rs_action {
    RS_ACT_ALLOC = 0,
    RS_ACT_FREE_REQUESTED = 1,
    RS_ACT_FREE_COMPLETED = 2,
    RS_ACT_SEGMENT_ALLOC = 3,
    RS_ACT_SEGMENT_FREE = 4,
    RS_ACT_OOM = 5,         /* size = the rounded request, addr = device free bytes */
    RS_ACT_STEP = 6,        /* size = step number                        */
    RS_ACT_ANNOTATION_BEGIN = 7, /* addr = index into history.strings    */
    RS_ACT_ANNOTATION_END = 8,
    /* Device memory the program got from another allocator while ranksnap recorded
     * (ncclMemAlloc, a CUDA memory pool other than the device's default): addr = pointer,
     * size = bytes. Not part of the allocator's state: replays and the torch export skip them. */
    RS_ACT_OUTSIDE_ALLOC = 9,
    RS_ACT_OUTSIDE_FREE = 10,
    RS_ACT_COUNT_
} rs_action;

/* PyTorch's names where the concept exists ("alloc", "free_requested", ...). */
static inline const char *rs_action_name(unsigned a)
{
    static const char *const names[RS_ACT_COUNT_] = {
        "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
        "oom", "step", "annotation_begin", "annotation_end", "outside_alloc", "outside_free"};
    return a < RS_ACT_COUNT_ ? names[a] : "unknown";
}

/* Block states, as PyTorch names them. */
typedef enum rs_block_state {
    RS_BLOCK_INACTIVE = 0,
    RS_BLOCK_ACTIVE_ALLOCATED = 1,
    RS_BLOCK_ACTIVE_AWAITING_FREE = 2,
    RS_BLOCK_STATE_COUNT_
} rs_block_state;

static inline const char *rs_block_state_name(unsigned s)
{
    static const char *const names[RS_BLOCK_STATE_COUNT_] = {"inactive", "active_allocated",
                                                             "active_awaiting_free"};
    return s < RS_BLOCK_STATE_COUNT_ ? names[s] : "unknown";
}

#endif
