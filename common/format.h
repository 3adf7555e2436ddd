/*
 * format.h — what the snapshot writer (rank/) and the readers (collector/) share.
 *
 * The only header both sides include: the format name and version, the event actions and block
 * states with their names (PyTorch's vocabulary wherever the concept is the same), how a rank's
 * process ended, and the map keys. Nothing else crosses between rank/ and collector/.
 * docs/FORMAT.md documents each field.
 */
#ifndef RANKSNAP_FORMAT_H
#define RANKSNAP_FORMAT_H

#include <stddef.h>
#include <stdint.h>
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
    /* The same for an allocation of a stream-ordered pool (cuMemAllocAsync,
     * cuMemAllocFromPoolAsync and their frees) in a rank that its framework's allocator serves
     * from that pool (ranksnap_record_natively): its allocator's own allocations, which the
     * summary counts as the rank's allocated bytes, not as memory outside. */
    RS_ACT_ASYNC_ALLOC = 11,
    RS_ACT_ASYNC_FREE = 12,
    RS_ACT_COUNT_
} rs_action;

/* PyTorch's names where the concept exists ("alloc", "free_requested", ...). */
static inline const char *rs_action_name(unsigned a)
{
    static const char *const names[RS_ACT_COUNT_] = {
        "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
        "oom", "step", "annotation_begin", "annotation_end", "outside_alloc", "outside_free",
        "async_alloc", "async_free"};
    return a < RS_ACT_COUNT_ ? names[a] : "unknown";
}

/* 1 for an allocation (a free) taken outside ranksnap's allocators, a pool's async one or not. */
static inline int rs_action_outside_alloc(unsigned a)
{
    return a == RS_ACT_OUTSIDE_ALLOC || a == RS_ACT_ASYNC_ALLOC;
}

static inline int rs_action_outside_free(unsigned a)
{
    return a == RS_ACT_OUTSIDE_FREE || a == RS_ACT_ASYNC_FREE;
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

/* How a rank's process ended, as far as ranksnap saw it (rank/runtime/ending.c): kept in the ring
 * file's header as it happens, in a snapshot written on the way out (its `end` map), in a
 * PyTorch job's "ranksnap" key. All zero while the process runs, and after a SIGKILL, _exit or
 * exec, which nothing in the process sees. */
#define RS_END_SIGNAL_MASK 0xffu     /* the first fatal signal ranksnap caught (flags' low byte) */
#define RS_END_EXIT (1u << 8)        /* exit() ran (a return from main too): `status` */
#define RS_END_MPI_ABORT (1u << 9)   /* MPI_Abort was called: `abort_code` */
#define RS_END_MPI_OPEN (1u << 10)   /* the program's MPI was initialized and not finalized */
#define RS_END_OFF_MAIN (1u << 11)   /* exit() was called on a thread other than the main one */
#define RS_END_DUMP_BEGAN (1u << 12) /* a snapshot on the way out was begun ... */
#define RS_END_DUMP_DONE (1u << 13)  /* ... and written */
#define RS_END_DUMP_GAVE_UP (1u << 14) /* ... or given up: the allocator stayed locked */
#define RS_END_KNOWN_ (RS_END_SIGNAL_MASK | ((RS_END_DUMP_GAVE_UP << 1) - RS_END_EXIT))
/* Readers only: the snapshot kept of a rank was written before this end, which its ring saw. */
#define RS_END_AFTER_SNAPSHOT (1u << 15)
/* The parts that say how the process ended (the rest says how its dump went). */
#define RS_END_HOW_ (RS_END_SIGNAL_MASK | RS_END_EXIT | RS_END_MPI_ABORT)

typedef struct rs_end {
    uint32_t flags;      /* RS_END_*, the signal number in the low byte */
    int32_t status;      /* exit's status, with RS_END_EXIT */
    int32_t abort_code;  /* MPI_Abort's error code, with RS_END_MPI_ABORT */
} rs_end;

/* The keys of the `end` map a snapshot (and a PyTorch job's "ranksnap" key) carries, for its
 * writers: each part that was noted, once, in this order (docs/FORMAT.md); a boolean key is
 * written only as the value below. Returns how many. */
typedef struct rs_end_key {
    const char *name;
    int is_bool;
    int64_t value;
} rs_end_key;

static inline int rs_end_keys(const rs_end *e, rs_end_key out[5])
{
    int n = 0;
    uint32_t sig = e->flags & RS_END_SIGNAL_MASK;
    if (e->flags & RS_END_EXIT) out[n++] = (rs_end_key){"exit_status", 0, e->status};
    if (sig) out[n++] = (rs_end_key){"signal", 0, (int64_t)sig};
    if (e->flags & RS_END_MPI_ABORT) out[n++] = (rs_end_key){"mpi_abort", 0, e->abort_code};
    if (e->flags & RS_END_MPI_OPEN) out[n++] = (rs_end_key){"before_mpi_finalize", 1, 1};
    if ((e->flags & RS_END_EXIT) && (e->flags & RS_END_OFF_MAIN))
        out[n++] = (rs_end_key){"main_thread", 1, 0};
    return n;
}

/* rs_end_keys' inverse, for the readers: what each key said (`has_*` 0 and `signal` 0 when the
 * key is absent; the booleans their defaults, 0 and 1, then). */
static inline rs_end rs_end_from_keys(int has_status, int32_t status, uint32_t signal, int has_code,
                                      int32_t code, int before_mpi_finalize, int main_thread)
{
    rs_end e = {(signal & RS_END_SIGNAL_MASK) | (has_status ? RS_END_EXIT : 0) |
                    (has_code ? RS_END_MPI_ABORT : 0) | (before_mpi_finalize ? RS_END_MPI_OPEN : 0) |
                    (has_status && !main_thread ? RS_END_OFF_MAIN : 0),
                has_status ? status : 0, has_code ? code : 0};
    return e;
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
