/*
 * passthrough.c — the RANKSNAP_DISABLE=1 path: every allocation is its own device reservation.
 *
 * The backend's release wants the size back (the sim device checks it), so live pointers are kept
 * in a small open-addressing table (pointer -> size) under one mutex. This path exists so that a
 * job can switch ranksnap off without relinking; it is not meant to be fast.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cuda.h"
#include "backend_sim.h"
#include "errors.h"
#include "passthrough.h"

typedef struct rs_pt_slot {
    uintptr_t ptr; /* 0 = empty, 1 = deleted */
    size_t size;
} rs_pt_slot;

static pthread_mutex_t rs_pt_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int rs_pt_on;
static rs_backend *rs_pt_backend;
static rs_pt_slot *rs_pt_slots;
static size_t rs_pt_cap, rs_pt_used;

static size_t rs_pt_hash(uintptr_t p, size_t cap)
{
    return (size_t)((p >> 9) * 0x9e3779b97f4a7c15ull) & (cap - 1);
}

static int rs_pt_grow(void)
{
    size_t cap = rs_pt_cap ? rs_pt_cap * 2 : 1024;
    rs_pt_slot *n = calloc(cap, sizeof *n);
    if (!n) return -1;
    for (size_t i = 0; i < rs_pt_cap; i++) {
        if (rs_pt_slots[i].ptr <= 1) continue;
        size_t j = rs_pt_hash(rs_pt_slots[i].ptr, cap);
        while (n[j].ptr) j = (j + 1) & (cap - 1);
        n[j] = rs_pt_slots[i];
    }
    free(rs_pt_slots);
    rs_pt_slots = n;
    rs_pt_cap = cap;
    return 0;
}

ranksnap_status rs_passthrough_init(rs_backend_kind kind, uint64_t sim_capacity)
{
    pthread_mutex_lock(&rs_pt_mu);
    ranksnap_status st = RANKSNAP_OK;
    if (!rs_pt_backend) {
        if (kind == RS_BACKEND_AUTO) kind = rs_backend_cuda_available() ? RS_BACKEND_CUDA : RS_BACKEND_SIM;
        st = kind == RS_BACKEND_CUDA ? rs_backend_cuda_create(-1, &rs_pt_backend)
                                     : rs_backend_sim_create(sim_capacity, &rs_pt_backend);
        if (st == RANKSNAP_OK) atomic_store(&rs_pt_on, 1);
    }
    pthread_mutex_unlock(&rs_pt_mu);
    return st;
}

int rs_passthrough_on(void)
{
    return atomic_load_explicit(&rs_pt_on, memory_order_acquire);
}

ranksnap_status rs_passthrough_malloc(void **ptr, size_t size)
{
    *ptr = NULL;
    if (size == 0) return RANKSNAP_OK;
    pthread_mutex_lock(&rs_pt_mu);
    ranksnap_status st = RANKSNAP_OK;
    if ((rs_pt_used + 1) * 2 > rs_pt_cap && rs_pt_grow() != 0) {
        st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "ranksnap (disabled): out of host memory");
        goto out;
    }
    st = rs_pt_backend->ops->reserve(rs_pt_backend, size, ptr);
    if (st == RANKSNAP_ERR_OUT_OF_MEMORY) {
        st = rs_error(st, "out of memory: tried to allocate %zu bytes (RANKSNAP_DISABLE=1, no cache)", size);
        goto out;
    }
    if (st != RANKSNAP_OK) goto out;
    size_t j = rs_pt_hash((uintptr_t)*ptr, rs_pt_cap);
    while (rs_pt_slots[j].ptr > 1) j = (j + 1) & (rs_pt_cap - 1);
    rs_pt_slots[j].ptr = (uintptr_t)*ptr;
    rs_pt_slots[j].size = size;
    rs_pt_used++;
out:
    pthread_mutex_unlock(&rs_pt_mu);
    return st;
}

ranksnap_status rs_passthrough_free(void *ptr)
{
    pthread_mutex_lock(&rs_pt_mu);
    ranksnap_status st = rs_error(RANKSNAP_ERR_UNKNOWN_POINTER,
                                  "ranksnap_free(%p): not allocated by ranksnap (RANKSNAP_DISABLE=1)", ptr);
    if (rs_pt_cap) {
        size_t j = rs_pt_hash((uintptr_t)ptr, rs_pt_cap);
        for (size_t k = 0; k < rs_pt_cap && rs_pt_slots[j].ptr; k++, j = (j + 1) & (rs_pt_cap - 1)) {
            if (rs_pt_slots[j].ptr != (uintptr_t)ptr) continue;
            st = rs_pt_backend->ops->release(rs_pt_backend, ptr, rs_pt_slots[j].size);
            rs_pt_slots[j].ptr = 1; /* deleted: later probes go on past it */
            rs_pt_used--;
            break;
        }
    }
    pthread_mutex_unlock(&rs_pt_mu);
    return st;
}

void rs_passthrough_shutdown(void)
{
    pthread_mutex_lock(&rs_pt_mu);
    atomic_store(&rs_pt_on, 0);
    if (rs_pt_backend) {
        for (size_t i = 0; i < rs_pt_cap; i++)
            if (rs_pt_slots[i].ptr > 1)
                rs_pt_backend->ops->release(rs_pt_backend, (void *)rs_pt_slots[i].ptr, rs_pt_slots[i].size);
        rs_pt_backend->ops->destroy(rs_pt_backend);
        rs_pt_backend = NULL;
    }
    free(rs_pt_slots);
    rs_pt_slots = NULL;
    rs_pt_cap = rs_pt_used = 0;
    pthread_mutex_unlock(&rs_pt_mu);
}
