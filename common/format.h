/*
 * format.h — what the snapshot writer (rank/) and the readers (collector/) share.
 *
 * The only header both sides include: the format name and version, the event actions and block
 * states with their names (PyTorch's vocabulary wherever the concept is the same), and the map
 * keys. Nothing else crosses between rank/ and collector/. docs/FORMAT.md documents each field.
 */
#ifndef RANKSNAP_FORMAT_H
#define RANKSNAP_FORMAT_H

#include <stddef.h>
#include <string.h>

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

/* What a snapshot's outside bytes are measured against (totals.outside_of): this process's own
 * use of its devices, or the devices' whole use, every process on them counted, when the
 * process's own was not known. Files written before the field say nothing (UNSAID): their figure
 * is the device's. */
typedef enum rs_outside_of {
    RS_OUTSIDE_UNSAID = 0,
    RS_OUTSIDE_PROCESS = 1,
    RS_OUTSIDE_DEVICE = 2
} rs_outside_of;

/* "process", "device"; NULL for UNSAID (the key is left out). */
static inline const char *rs_outside_of_name(int of)
{
    return of == RS_OUTSIDE_PROCESS ? "process" : of == RS_OUTSIDE_DEVICE ? "device" : NULL;
}

/* Why a process's own figure was not known (totals.outside_why), as words a reader can act on;
 * the file's outside_why_detail says the rest (NVML's own message). A word this reader does not
 * know reads as OTHER. */
typedef enum rs_outside_why {
    RS_OUTSIDE_WHY_UNSAID = 0,
    RS_OUTSIDE_WHY_NVML_OFF,       /* RANKSNAP_NVML=none */
    RS_OUTSIDE_WHY_NVML_UNUSABLE,  /* NVML not loaded, too old, or its init failed */
    RS_OUTSIDE_WHY_DEVICE_UNKNOWN, /* NVML does not find the device's UUID */
    RS_OUTSIDE_WHY_NOT_LISTED,     /* NVML would not list the device's processes */
    RS_OUTSIDE_WHY_PID_NOT_LISTED, /* the process's pid is not among them (a pid namespace) */
    RS_OUTSIDE_WHY_NO_FIGURE,      /* listed, with no figure (MIG without the privilege) */
    RS_OUTSIDE_WHY_OTHER,
    RS_OUTSIDE_WHY_COUNT_
} rs_outside_why;

static inline const char *rs_outside_why_name(unsigned w)
{
    static const char *const names[RS_OUTSIDE_WHY_COUNT_] = {
        "", "nvml_off", "nvml_unusable", "device_unknown", "not_listed", "pid_not_listed",
        "no_figure", "other"};
    return w < RS_OUTSIDE_WHY_COUNT_ ? names[w] : "other";
}

/* The rs_outside_of the n bytes at p name, UNSAID when neither word. */
static inline int rs_outside_of_parse(const void *p, size_t n)
{
    for (int k = RS_OUTSIDE_PROCESS; k <= RS_OUTSIDE_DEVICE; k++)
        if (n == strlen(rs_outside_of_name(k)) && !memcmp(p, rs_outside_of_name(k), n)) return k;
    return RS_OUTSIDE_UNSAID;
}

/* The rs_outside_why the n bytes at p name; OTHER for a word this reader does not know. */
static inline int rs_outside_why_parse(const void *p, size_t n)
{
    for (unsigned k = RS_OUTSIDE_WHY_UNSAID + 1; k < RS_OUTSIDE_WHY_OTHER; k++)
        if (n == strlen(rs_outside_why_name(k)) && !memcmp(p, rs_outside_why_name(k), n)) return (int)k;
    return RS_OUTSIDE_WHY_OTHER;
}

#endif
