/*
 * torch_mapper.h — the state of a PyTorch snapshot's mapping onto rs_snap, which the files of
 * torch_decode.c's walk share: where in the snapshot a value is (for messages), the identity
 * caches, the dict of fields read in one pass, and the mapper itself. Types only: each part's
 * functions are in its own file's header.
 */
#ifndef RANKSNAP_TORCH_MAPPER_H
#define RANKSNAP_TORCH_MAPPER_H

#include <stddef.h>
#include <stdint.h>

#include "pickle.h"
#include "snapshot.h"
#include "torch_trace.h"

/* PyTorch's CUDACachingAllocator constants (c10/cuda/CUDACachingAllocator.cpp), which a
 * snapshot does not carry: the replay rounds trace sizes with the first. */
#define TORCH_MIN_BLOCK 512u

#define TORCH_SMALL_SIZE ((uint64_t)1 << 20)

#define TORCH_SMALL_BUFFER ((uint64_t)2 << 20)

#define TORCH_LARGE_BUFFER ((uint64_t)20 << 20)

#define TORCH_MIN_LARGE_ALLOC ((uint64_t)10 << 20)

#define TORCH_ROUND_LARGE ((uint64_t)2 << 20)

#define LOC_DEPTH 8

/* A chain of (name, index) on the C stack, built as the walk descends (three stores per level)
 * and turned into text only for an error message. */
typedef struct loc {
    const struct loc *up;
    const char *part; /* "segments", ".blocks", "" (an index right after an index) */
    size_t idx;
} loc;

/* Identity caches: PyTorch's pickles share (memoize) strings, frame dicts and frame lists, and
 * the tree is immutable once decoded, so a value already seen maps to the same frame or stack
 * without hashing its text again. Keys are (pointer, pointer, number); values index + 1. */
typedef struct idcache {
    uintptr_t *a, *b;
    int64_t *c;
    uint32_t *val; /* 0 = empty */
    size_t mask, n;
    uint64_t seed; /* the process's (addr_hash.h), read once */
} idcache;

/* The frame dicts and frames lists' item arrays last met, by address: PyTorch 2.11 shares one
 * dict per distinct frame between the entries that name it, and frames lists with the same dicts
 * share one item array in the decoder (pickle.c, shared_list). A fixed
 * table (a newer entry takes an older one's place): a miss costs only the work it would save,
 * and no input can make it grow. */
#define PTR_CACHE 4096

typedef struct ptr_cache {
    const void *key[PTR_CACHE]; /* a value, or a list's item array */
    uint32_t val[PTR_CACHE]; /* 0 = none */
} ptr_cache;

/* Key and action strings remembered by address (powers of two). */
#define KEY_CACHE 256

#define ACTION_CACHE 64

/* PyTorch's dicts have 3 to 12 keys; a dict of a segment, block, trace entry or frame with more
 * than this is refused, so that a pickle that repeats one huge dict through its memo cannot make
 * the reader's work grow with the product of the two. */
#define MAX_KEYS 64

typedef struct mapper {
    const char *name;
    size_t len;        /* of the pickle, for the streamed lists' guess (streamed_want) */
    rs_snap *s;
    /* frames: (function, file, line) -> index */
    size_t *frame_slot; /* index + 1, 0 = empty */
    uint64_t *frame_hash;
    size_t frame_mask, frames_cap;
    /* stacks: frame index sequence -> id */
    uint32_t *stack_slot; /* id, 0 = empty */
    uint64_t *stack_hash;
    size_t stack_mask, stacks_cap;
    uint64_t seed;     /* the process's hash seed (addr_hash.h), read once */
    idcache frame_ids; /* (name str, filename str, line) -> index + 1 */
    ptr_cache *frame_dicts; /* frame dict -> index + 1 */
    /* frames list item arrays -> stack id: a list met again, or one whose array pickle.c shares
     * with an earlier list of the same frame dicts (3,986 lists of 123 contents in a real trace) */
    ptr_cache *stack_items;
    uint32_t *scratch; /* the frames of the stack being built */
    size_t scratch_cap;
    /* streams: handle -> index */
    uint64_t *stream_key;
    uint32_t *stream_slot; /* index + 1, 0 = empty */
    size_t stream_mask, streams_cap;
    uint64_t last_handle; /* stream_index's last answer, */
    uint32_t last_stream; /* its index + 1 (0: none yet) */
    size_t hist_cap;
    const rs_pickle_value *key_ptr[KEY_CACHE]; /* key_id's cache */
    uint8_t key_id[KEY_CACHE];
    /* the keys of the dict read last, and their ids: PyTorch's entries (and its frames, blocks)
     * repeat one dict's memoized key strings in one order */
    const rs_pickle_value *shape_key[MAX_KEYS];
    uint8_t shape_id[MAX_KEYS];
    uint32_t shape_present; /* the fields the shape has (struct fields) */
    size_t shape_n;
    idcache seen;        /* segment and block dicts mapped: (dict, 0, 1) -> 1 */
    const rs_pickle_value *action_ptr[ACTION_CACHE]; /* action_of's cache */
    int action_code[ACTION_CACHE];
    struct streamed *streamed; /* device_traces' lists as the pickle streamed them */
    size_t n_streamed, streamed_cap;
    size_t last_streamed;      /* the one an entry went to last */
    rs_torch_trace *trace;     /* what the entries read from their bytes learnt (NULL: none) */
    size_t n_read;             /* entries read from their bytes */
} mapper;

/* A dict's values by key, last one winning as in Python; v[F_OTHER] is unused. v[id] holds a
 * value only where `present` has bit id (field_of): cleared by one store, not by zeroing the
 * array, which a trace entry would pay for every time. */
typedef struct fields {
    const rs_pickle_value *dict;
    uint32_t present;
    const rs_pickle_value *v[F_COUNT_];
} fields;

_Static_assert(F_COUNT_ <= 32, "struct fields keeps which are there in 32 bits");

/* The six columns of a history, or of a streamed list before it becomes one: where each array
 * is and the size of its elements, grown together (doubling from 1,024) or not at all. */
typedef struct column {
    void **p;
    size_t size;
} column;

#define N_COLUMNS 6

/* The entries of one list of device_traces as the pickle streamed them (take_entries), in the
 * history's columns: when the list is the device's trace they become the history (map_trace),
 * each stream handle and frames list replaced there, in place, by its index. Entries left out
 * (action LEFT_OUT) stay until then, so that errors name entries by their place in the list. */
#define LEFT_OUT 0xff

typedef struct streamed {
    const rs_pickle_value *list;
    size_t index;
    uint64_t *time_us, *addr, *size;
    uint8_t *action;
    unsigned char *stream; /* uint64_t handles (memcpy: they become uint32_t indexes in place) */
    unsigned char *frames; /* const rs_pickle_value * (NULL: none), then uint32_t stack ids */
    size_t n, cap;
    size_t first_at;     /* the first entry's offset in the pickle */
    ranksnap_status err; /* the first entry that is wrong stops the list: its message, kept */
    char *err_msg;       /* for when (and if) this device's trace is the one read */
} streamed;

#endif
