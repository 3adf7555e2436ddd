/*
 * alloc.h — the caching allocator (PyTorch's CUDACachingAllocator policy, in C).
 *
 * Sizes are rounded up to 512 B (or by roundup_power2_divisions). Requests <= 1 MiB come from the
 * small pool (2 MiB segments); larger ones from the large pool (20 MiB segments, or
 * large_segment_size_mb, below 10 MiB; otherwise the request rounded up to 2 MiB). Best fit by
 * (stream, size, address); a free block is split when the remainder is >= 512 B (small, or
 * expandable segments) or > 1 MiB (large, and only for requests below max_split_size); free
 * neighbours coalesce. Blocks belong to the stream they were allocated on; a block used on other
 * streams (record_stream) is reused only once events recorded on those streams at free time
 * completed. With expandable_segments, each (stream, pool) grows one virtual range by mapping
 * pages (2 MiB small, the large segment size large) instead of reserving segments.
 * When nothing cached fits, PyTorch 2.11's order: garbage collection (with a cap and a
 * garbage_collection_threshold), reserve; free just enough oversize cached blocks (with
 * max_split_size) and reserve; wait for every event, free every whole cached segment and unmap
 * every free page, reserve once more (a retry); then OOM. The settings: rs_alloc_conf
 * (common/alloc_conf.h).
 *
 * One mutex guards everything (shared by the allocators of a rank's devices when the config says
 * so); the observer (the recorder) is called with it held, so it needs no lock of its own. rs_alloc_lock/unlock let the runtime serialise its own recorder writes (steps,
 * annotations) with the allocator's.
 */
#ifndef RANKSNAP_ALLOC_H
#define RANKSNAP_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "alloc_check.h"
#include "alloc_conf.h"
#include "format.h"
#include "backend.h"
#include "alloc_snapshot.h"
#include "mutex.h"
#include "ranksnap.h"

#define RS_MIN_BLOCK_SIZE ((size_t)RS_CONF_MIN_BLOCK)
#define RS_SMALL_SIZE ((size_t)RS_CONF_SMALL_SIZE)          /* largest "small" request: 1 MiB */
#define RS_SMALL_BUFFER ((size_t)RS_CONF_SMALL_BUFFER)      /* small pool segments: 2 MiB     */
#define RS_LARGE_BUFFER ((size_t)RS_CONF_LARGE_BUFFER)      /* default large segments: 20 MiB */
#define RS_MIN_LARGE_ALLOC ((size_t)RS_CONF_MIN_LARGE_ALLOC) /* below this, large segments    */
#define RS_ROUND_LARGE ((size_t)RS_CONF_ROUND_LARGE)        /* above, round up to 2 MiB       */

typedef struct rs_alloc rs_alloc;
/* The map from an allocated block's address to its block; see rs_alloc_config.block_map. */
typedef struct rs_block_map rs_block_map;

/* Called (allocator lock held) for every alloc, free_requested, free_completed, segment_alloc,
 * segment_free and oom (expandable segments: segment_alloc/segment_free for each map/unmap, as
 * PyTorch's segment_map/segment_unmap). Returns the stack id to keep with an allocated block
 * (0 = none). */
typedef uint32_t (*rs_alloc_observer)(void *ctx, rs_action act, uint64_t addr, uint64_t size,
                                      void *stream);

typedef struct rs_alloc_config {
    uint64_t memory_limit;   /* cap of reserved bytes, 0 = none; with the conf's
                                per_process_memory_fraction, the lower of the two */
    /* PyTorch's settings; NULL = PyTorch's defaults */
    const rs_alloc_conf *conf;
    /* overrides conf's max_split_size when neither 0 nor UINT64_MAX (RANKSNAP_MAX_SPLIT_SIZE) */
    uint64_t max_split_size;
    int device_index;        /* for the OOM message                              */
    /* the lock to take, shared with the allocators of the rank's other devices and with the
     * runtime's recorder writes; NULL = the allocator's own */
    rs_mutex *lock;
    /* the block map to share with the allocators of the rank's other devices (which must share
     * `lock` too): a free given to any of them is served by the one that handed the block out,
     * found in one probe; NULL = the allocator's own */
    rs_block_map *block_map;
    rs_alloc_observer observer;
    void *observer_ctx;
} rs_alloc_config;

/* A block map for rs_alloc_config.block_map; destroyed after every allocator that shares it. */
ranksnap_status rs_block_map_create(rs_block_map **out);
void rs_block_map_destroy(rs_block_map *m);

/* The moment of the last OOM, as PyTorch's OOM message and trace entry describe it. */
typedef struct rs_oom_info {
    uint64_t requested;      /* bytes asked for (unrounded)          */
    uint64_t rounded;        /* the segment it needed to reserve ("Tried to allocate" in
                                PyTorch's message); the oom event carries round_size(requested) */
    uint64_t device_free;    /* as the backend reported it            */
    uint64_t device_total;
    uint64_t allocated;      /* allocated bytes at that moment        */
    uint64_t reserved;       /* reserved bytes at that moment         */
    uint64_t memory_limit;   /* the cap in force (limit or fraction), 0 = none */
    uint64_t time_us;
    void *stream;
    int64_t step;            /* the step under way when it failed (-1: none yet) */
} rs_oom_info;

ranksnap_status rs_alloc_create(rs_backend *backend, const rs_alloc_config *cfg, rs_alloc **out);
/* Waits for pending events, releases every segment (allocated blocks too) and frees the
 * allocator. */
void rs_alloc_destroy(rs_alloc *a);

ranksnap_status rs_alloc_malloc(rs_alloc *a, size_t size, void *stream, void **ptr);
/* rs_alloc_malloc that remembers `caller` (the return address of the program's allocating call,
 * 0 = none) in the block while it is active: the site of a block allocated while nothing was
 * recorded (rs_alloc_each_active_locked). */
ranksnap_status rs_alloc_malloc_from(rs_alloc *a, size_t size, void *stream, void **ptr,
                                     uintptr_t caller);
/* Frees `ptr`, handed out by `a` or by an allocator sharing its block map (which then serves
 * the free: its statistics, pools and observer). */
ranksnap_status rs_alloc_free(rs_alloc *a, void *ptr);
ranksnap_status rs_alloc_record_stream(rs_alloc *a, void *ptr, void *stream);
ranksnap_status rs_alloc_empty_cache(rs_alloc *a);
/* 1 if `ptr` is the start of a block this allocator handed out and has not taken back. */
int rs_alloc_owns(rs_alloc *a, const void *ptr);
/* The allocator, `a` or one sharing its block map, that handed out `ptr` (the start of a block)
 * and has not taken it back; NULL if none. */
rs_alloc *rs_alloc_owner(rs_alloc *a, const void *ptr);
/* The observer context of `a`'s configuration. */
void *rs_alloc_observer_ctx(const rs_alloc *a);

/* Fills the allocator's fields of `out` (sizes, counts, peaks); leaves the others as they are. */
void rs_alloc_get_stats(rs_alloc *a, ranksnap_stats *out);
void rs_alloc_reset_peak_stats(rs_alloc *a);
/* The step recorded as peak_step when a new allocated peak is reached. */
void rs_alloc_set_step(rs_alloc *a, int64_t step);
/* 1 and fills `out` if an OOM happened since create. */
int rs_alloc_last_oom(rs_alloc *a, rs_oom_info *out);
/* The cap on reserved bytes in force (RANKSNAP_MEMORY_LIMIT, per_process_memory_fraction), 0 = none. */
uint64_t rs_alloc_memory_limit(const rs_alloc *a);
/* Sets RANKSNAP_MEMORY_LIMIT's part of the cap (0 = none); a fraction in the settings still caps. */
void rs_alloc_set_memory_limit(rs_alloc *a, uint64_t limit);
/* The settings in force (after RANKSNAP_MAX_SPLIT_SIZE; expandable_segments off when the backend
 * cannot map memory). */
void rs_alloc_get_conf(rs_alloc *a, rs_alloc_conf *out);

void rs_alloc_lock(rs_alloc *a);
void rs_alloc_unlock(rs_alloc *a);
/* 1 if the lock was free and is now held; for the crash path, which must not wait forever on a
 * thread that died holding it. */
int rs_alloc_trylock(rs_alloc *a);

/* Policy helpers with PyTorch's default settings, exposed for the tests (any settings:
 * rs_alloc_conf_round, rs_alloc_conf_segment_size). */
size_t rs_alloc_round_size(size_t size);
size_t rs_alloc_segment_size(size_t rounded);

#endif
