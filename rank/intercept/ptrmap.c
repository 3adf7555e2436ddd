/*
 * ptrmap.c — pointer -> uint64 map (ptrmap.h): open addressing with linear probing under one
 * mutex. Grows (and drops its tombstones) when live keys plus tombstones pass half the table.
 */
#include <stdlib.h>

#include "ptrmap.h"

static size_t rs_pm_hash(uintptr_t k, size_t cap)
{
    /* device pointers and communicator handles are aligned: mix the high bits down */
    return (size_t)(((uint64_t)k >> 4) * 0x9e3779b97f4a7c15ull >> 16) & (cap - 1);
}

/* mu held. The slot of `key`, or NULL. */
static rs_ptrmap_slot *rs_pm_find(rs_ptrmap *m, uintptr_t key)
{
    if (!m->cap) return NULL;
    size_t j = rs_pm_hash(key, m->cap);
    for (size_t k = 0; k < m->cap && m->slots[j].key; k++, j = (j + 1) & (m->cap - 1))
        if (m->slots[j].key == key) return &m->slots[j];
    return NULL;
}

/* mu held. */
static int rs_pm_grow(rs_ptrmap *m)
{
    size_t cap = m->cap ? m->cap : 64;
    while (cap < 4 * (m->live + 1)) cap *= 2;
    rs_ptrmap_slot *n = calloc(cap, sizeof *n);
    if (!n) return -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].key <= 1) continue;
        size_t j = rs_pm_hash(m->slots[i].key, cap);
        while (n[j].key) j = (j + 1) & (cap - 1);
        n[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = n;
    m->cap = cap;
    m->used = m->live;
    return 0;
}

int rs_ptrmap_put(rs_ptrmap *m, const void *key, uint64_t value)
{
    uintptr_t k = (uintptr_t)key;
    if (k <= 1) return -1;
    int rc = 0;
    pthread_mutex_lock(&m->mu);
    rs_ptrmap_slot *s = rs_pm_find(m, k);
    if (s) {
        s->value = value;
    } else if ((m->used + 1) * 2 > m->cap && rs_pm_grow(m) != 0) {
        rc = -1;
    } else {
        size_t j = rs_pm_hash(k, m->cap);
        while (m->slots[j].key > 1) j = (j + 1) & (m->cap - 1);
        if (m->slots[j].key == 0) m->used++; /* a reused tombstone was counted already */
        m->slots[j].key = k;
        m->slots[j].value = value;
        m->live++;
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int rs_ptrmap_add(rs_ptrmap *m, const void *key, uint64_t delta)
{
    pthread_mutex_lock(&m->mu);
    rs_ptrmap_slot *s = rs_pm_find(m, (uintptr_t)key);
    if (s) s->value += delta;
    pthread_mutex_unlock(&m->mu);
    return s != NULL;
}

int rs_ptrmap_add_take(rs_ptrmap *m, const void *key, uint64_t delta, uint64_t take_at)
{
    pthread_mutex_lock(&m->mu);
    rs_ptrmap_slot *s = rs_pm_find(m, (uintptr_t)key);
    int r = -1;
    if (s) {
        s->value += delta;
        r = s->value == take_at;
        if (r) {
            s->key = 1;
            m->live--;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return r;
}

int rs_ptrmap_get(rs_ptrmap *m, const void *key, uint64_t *value)
{
    pthread_mutex_lock(&m->mu);
    rs_ptrmap_slot *s = rs_pm_find(m, (uintptr_t)key);
    if (s && value) *value = s->value;
    pthread_mutex_unlock(&m->mu);
    return s != NULL;
}

int rs_ptrmap_take(rs_ptrmap *m, const void *key, uint64_t *value)
{
    pthread_mutex_lock(&m->mu);
    rs_ptrmap_slot *s = rs_pm_find(m, (uintptr_t)key);
    if (s) {
        if (value) *value = s->value;
        s->key = 1; /* deleted: probes go on past it */
        m->live--;
    }
    pthread_mutex_unlock(&m->mu);
    return s != NULL;
}

size_t rs_ptrmap_take_range(rs_ptrmap *m, uintptr_t lo, uintptr_t hi, uintptr_t *keys, uint64_t *values,
                            size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->cap && n < max; i++) {
        rs_ptrmap_slot *s = &m->slots[i];
        if (s->key <= 1 || s->key < lo || s->key >= hi) continue;
        if (keys) keys[n] = s->key;
        values[n++] = s->value;
        s->key = 1;
        m->live--;
    }
    pthread_mutex_unlock(&m->mu);
    return n;
}

size_t rs_ptrmap_count(rs_ptrmap *m)
{
    pthread_mutex_lock(&m->mu);
    size_t n = m->live;
    pthread_mutex_unlock(&m->mu);
    return n;
}

void rs_ptrmap_clear(rs_ptrmap *m)
{
    pthread_mutex_lock(&m->mu);
    free(m->slots);
    m->slots = NULL;
    m->cap = m->used = m->live = 0;
    pthread_mutex_unlock(&m->mu);
}
