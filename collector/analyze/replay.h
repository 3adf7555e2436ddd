/*
 * replay.h — a rank's allocation history replayed through ranksnap's allocator (alloc/)
 * on the sim backend, against the original's own numbers; under the trace's own settings (to
 * check that the replay reproduces it) or under others (what-if).
 *
 * How the allocator under test would have done on the very same requests: the same sizes, in
 * the same order, on the same streams, each free_requested freeing the replayed block that
 * stands for the original's address. Blocks alive before the history began are allocated first
 * (in address order), so both sides start from the same allocated level. An `oom` event is the
 * original's failed request: the replay asks for it again (and, when it gets it, gives it back at
 * once, since the program went on without it).
 *
 * The device: the snapshot's capacity, and the cap in force — RANKSNAP_MEMORY_LIMIT and the
 * per_process_memory_fraction of the settings — as the snapshot recorded them. PyTorch's pickles
 * record neither the device's memory nor the fraction; when such a trace ended in an OOM, the cap
 * is derived from it: at least the highest reserved level the trace reached (every segment it got
 * fitted), below the reserved level at the OOM plus the segment the request needed (the request
 * did not fit); the replay uses the lower bound, so that a setting it finds to avoid the OOM avoids
 * it under any cap the trace allows. `device_memory` replaces the device (a smaller card): its
 * fraction is taken anew, and a derived cap is dropped.
 *
 * "Allocated" here is what the trace shows on both sides: each live block's size as the one
 * history walk counts it (collector/model/walk.h). It does not depend on the policy, so the
 * replay reproduces the original's peak exactly unless a replayed request failed. The allocator's
 * own count (block sizes, which include the tail of a segment too small to split) is reported
 * apart, as peak_allocated_blocks. Reserved is the policy's result: for the original, the level
 * its segment_alloc/segment_free events give, started from the segments at the end minus those
 * events' changes; for ranksnap, the sim device's segments and mapped pages. Fragmentation is
 * reserved minus allocated at the moment allocated first peaks (the report's fragmentation):
 * the same moment on every side, since allocated does not depend on the policy; its largest value
 * over the history would mostly measure the cache kept after a step or an OOM.
 */
#ifndef RANKSNAP_REPLAY_H
#define RANKSNAP_REPLAY_H

#include <stdint.h>

#include "alloc_conf.h"
#include "ranksnap.h"
#include "snapshot.h"

typedef struct rs_replay_side {
    uint64_t peak_allocated;
    uint64_t peak_reserved;
    uint64_t fragmentation;       /* reserved - allocated when allocated first peaked        */
    uint64_t device_allocs;       /* cudaMalloc calls (with expandable segments: maps)       */
    uint64_t device_frees;        /* cudaFree calls (unmaps)                                 */
    uint64_t ooms;                /* requests that failed                                    */
    int64_t first_oom_event;      /* index in the history of the first that failed, -1 none */
    uint64_t first_oom_request;   /* its size                                                */
} rs_replay_side;

/* The device the replay ran on. */
typedef struct rs_replay_device {
    uint64_t memory;   /* the sim device's capacity; 0 = unknown (a petabyte was used)          */
    int has_cap;       /* a cap on reserved bytes applied                                       */
    uint64_t cap;
    int cap_derived;   /* the cap was derived from the trace's OOM (see above)                  */
    uint64_t cap_below; /* then: the true cap is below this                                     */
} rs_replay_device;

typedef struct rs_replay_result {
    rs_replay_side original;
    rs_replay_side ranksnap;
    uint64_t ranksnap_peak_allocated_blocks; /* the allocator's allocated_bytes_peak       */
    uint64_t events;        /* events in the history                                     */
    uint64_t allocs, frees; /* replayed alloc and free_requested events                   */
    uint64_t preexisting;   /* blocks alive before the history, allocated first           */
    uint64_t inconsistent;  /* frees of blocks not alive, allocations over live ones      */
    uint64_t dropped;       /* events the ring lost before the history's first            */
    int incomplete;         /* dropped > 0: the history is a suffix of what happened      */
    uint64_t original_ooms; /* oom events in the history (= original.ooms)                */
    /* The original's private pools (CUDA graphs', pools.h) when allocated first peaked, and
     * their bytes in no block, which its fragmentation leaves out as the report's does; the
     * replay has no private pool and serves their requests from its default pool. */
    uint64_t pools_at_peak, pools_free_at_peak;
    uint64_t ranksnap_ooms; /* replayed requests ranksnap could not serve (= ranksnap.ooms) */
    rs_alloc_conf conf;     /* the settings replayed                                      */
    rs_replay_device device;
} rs_replay_result;

typedef struct rs_replay_opts {
    const rs_alloc_conf *conf; /* NULL: the trace's own settings                            */
    uint64_t device_memory;    /* 0: the snapshot's device; else a device of this many bytes */
    int unlimited;             /* 1: no cap and a device of unbounded size (what the
                                  settings would have needed)                                */
} rs_replay_opts;

/* Replays `s` under its own settings. Errors (HOST_MEMORY, or the allocator failing other than by
 * running out of device memory) start with `name_for_errors`. */
ranksnap_status rs_replay(const rs_snap *s, const char *name_for_errors, rs_replay_result *out);

/* The same under `o` (NULL: as rs_replay). */
ranksnap_status rs_replay_with(const rs_snap *s, const char *name_for_errors,
                               const rs_replay_opts *o, rs_replay_result *out);

/* Several replays of one snapshot share the history walk's table and the side table: open once,
 * run as often as needed (each run starts from scratch), close. A session is used by one thread
 * at a time; sessions of one snapshot may run on several threads. */
typedef struct rs_replay_session rs_replay_session;
ranksnap_status rs_replay_open(const rs_snap *s, const char *name_for_errors,
                               rs_replay_session **out);
ranksnap_status rs_replay_run(rs_replay_session *ss, const rs_replay_opts *o,
                              rs_replay_result *out);
void rs_replay_close(rs_replay_session *ss);

#endif
