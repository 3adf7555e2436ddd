/*
 * comms.c — owns the table of the communicators this rank belonged to (comms.h): a fixed array
 * filled under a lock as communicators are created, and read without one by the all-reduce
 * counter, which must cost next to nothing on every collective call.
 */
#include "comms.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

typedef struct comm_slot {
    uint64_t handle;
    rs_snapshot_comm c;
    _Atomic uint64_t allreduces;
} comm_slot;

static comm_slot rs_comm_slots[RS_COMMS_MAX];
/* slots [0, rs_comm_used) are filled; a slot is published by the store that counts it */
static _Atomic size_t rs_comm_used;
static pthread_mutex_t rs_comm_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t rs_comms_hash(uint64_t seed, const void *p, size_t n)
{
    /* FNV-1a over the seed's bytes and then the data's */
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = p;
    for (int i = 0; i < 8; i++) h = (h ^ ((seed >> (8 * i)) & 0xff)) * 1099511628211ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h ? h : 1;
}

void rs_comms_add(uint64_t handle, uint64_t id, int32_t size, int32_t rank, const char *kind)
{
    pthread_mutex_lock(&rs_comm_lock);
    size_t n = atomic_load_explicit(&rs_comm_used, memory_order_relaxed);
    if (n < RS_COMMS_MAX) {
        comm_slot *s = &rs_comm_slots[n];
        memset(&s->c, 0, sizeof s->c);
        s->handle = handle;
        s->c.id = id;
        s->c.size = size;
        s->c.rank = rank;
        strncpy(s->c.kind, kind ? kind : "", sizeof s->c.kind - 1);
        atomic_store_explicit(&s->allreduces, 0, memory_order_relaxed);
        atomic_store_explicit(&rs_comm_used, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&rs_comm_lock);
}

/* The newest slot of `handle` (a handle freed and made again names its newest communicator). */
static comm_slot *find(uint64_t handle)
{
    size_t n = atomic_load_explicit(&rs_comm_used, memory_order_acquire);
    while (n--)
        if (rs_comm_slots[n].handle == handle) return &rs_comm_slots[n];
    return NULL;
}

void rs_comms_allreduce(uint64_t handle)
{
    comm_slot *s = find(handle);
    if (s) atomic_fetch_add_explicit(&s->allreduces, 1, memory_order_relaxed);
}

uint64_t rs_comms_id_of(uint64_t handle)
{
    comm_slot *s = find(handle);
    return s ? s->c.id : 0;
}

size_t rs_comms_copy(rs_snapshot_comm *out, size_t max)
{
    size_t n = atomic_load_explicit(&rs_comm_used, memory_order_acquire);
    if (n > max) n = max;
    for (size_t i = 0; i < n; i++) {
        out[i] = rs_comm_slots[i].c;
        out[i].allreduces = atomic_load_explicit(&rs_comm_slots[i].allreduces, memory_order_relaxed);
    }
    return n;
}
