/*
 * ptrmap.h — a small thread-safe map from pointers to 64-bit values, for the interposers' own
 * bookkeeping: bytes per NCCL communicator, sizes of ncclMemAlloc buffers and of allocations from
 * CUDA memory pools that ranksnap passes through. These are few and off the hot path, so one
 * mutex and open addressing (linear probing, tombstones) are enough.
 *
 * A map is usable from its static initializer (RS_PTRMAP_INIT) without any init call; its table
 * is allocated on first insert and lives as long as the process (interposers are process-wide).
 */
#ifndef RANKSNAP_PTRMAP_H
#define RANKSNAP_PTRMAP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rs_ptrmap_slot {
    uintptr_t key; /* 0 = empty, 1 = deleted */
    uint64_t value;
} rs_ptrmap_slot;

typedef struct rs_ptrmap {
    pthread_mutex_t mu;
    rs_ptrmap_slot *slots;
    size_t cap;  /* power of two, or 0 before the first insert */
    size_t used; /* live keys plus tombstones */
    size_t live;
} rs_ptrmap;

#define RS_PTRMAP_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0}

/* Sets key -> value (replacing). 0 on success, -1 when the table could not grow (host memory);
 * keys 0 and 1 are refused (-1): they mark empty and deleted slots. */
int rs_ptrmap_put(rs_ptrmap *m, const void *key, uint64_t value);
/* Adds `delta` to the value of an existing key; 1 if the key was there, 0 if not. */
int rs_ptrmap_add(rs_ptrmap *m, const void *key, uint64_t delta);
/* Adds `delta` to the value of an existing key and, when the sum is `take_at`, removes the key,
 * both under the map's lock: 1 removed, 0 added only, -1 absent. So that of several threads
 * changing one key, exactly one sees it reach `take_at`. */
int rs_ptrmap_add_take(rs_ptrmap *m, const void *key, uint64_t delta, uint64_t take_at);
/* 1 and *value if present (value may be NULL). */
int rs_ptrmap_get(rs_ptrmap *m, const void *key, uint64_t *value);
/* Removes the key; 1 and its value in *value (may be NULL) if it was there. */
int rs_ptrmap_take(rs_ptrmap *m, const void *key, uint64_t *value);
/* Removes up to `max` keys in [lo, hi), the keys in keys[] (may be NULL) and their values in
 * values[]; returns how many. A scan of the whole table: for the rare call that ends several
 * entries at once (one cuMemUnmap over several mappings). */
size_t rs_ptrmap_take_range(rs_ptrmap *m, uintptr_t lo, uintptr_t hi, uintptr_t *keys, uint64_t *values,
                            size_t max);
size_t rs_ptrmap_count(rs_ptrmap *m);
/* Frees the table; the map is empty and usable again afterwards. */
void rs_ptrmap_clear(rs_ptrmap *m);

#endif
