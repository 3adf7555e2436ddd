/*
 * rsnap_state.h — the .rsnap decoder's state, which its files share: the maps the scan noted,
 * the decoder, what a value is, where a value is (for messages) and a map being read. Types
 * only: each pass's functions are in its own file's header.
 */
#ifndef RANKSNAP_RSNAP_STATE_H
#define RANKSNAP_RSNAP_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"

/* Our format nests five deep; unknown keys from newer writers get room to nest further. */
#define RSNAP_MAX_DEPTH 24

#define RSNAP_NAME 192

/* A map the scan saw: its entries are ents[first .. first + 2n) (key, value, key, value ...). */
typedef struct map_rec {
    size_t at, end;
    size_t first;
    uint32_t n;
} map_rec;

typedef struct dec {
    const char *name;
    const unsigned char *buf;
    size_t len;
    map_rec *maps; /* in the order of their offsets */
    size_t n_maps, maps_cap;
    size_t *ents;  /* offsets of every map key and value, each map's in one piece */
    size_t n_ents, ents_cap;
    size_t *open;  /* the same for the maps not yet ended, innermost last */
    size_t n_open, open_cap;
} dec;

/* What a value is, by its first byte. */
typedef enum kind { K_INT, K_MAP, K_ARRAY, K_STR, K_NIL, K_BOOL, K_BIN, K_FLOAT, K_C1, K_EXT } kind;

/* Where a value is, for messages: its name is made from these parts only when one is needed,
 * "base[index].key[elem]" with the parts that are set. */
typedef struct where {
    const char *base;  /* "" at the top level */
    int64_t index;     /* -1: none */
    const char *key;   /* NULL: none */
    int64_t elem;      /* -1: none */
} where;

/* A map being read: its entries as the scan noted them, and its name for messages. */
typedef struct mapv {
    const dec *d;
    const map_rec *m;
    where w;               /* where the map is; a named one ("totals") keeps its name in path */
    char path[RSNAP_NAME];
} mapv;

#endif
