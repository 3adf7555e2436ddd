/*
 * comms.c — owns the table of the communicators this rank belonged to (comms.h): filled and
 * emptied under a lock as communicators are created and freed, read without one by the
 * all-reduce counter, which must cost next to nothing on every collective call.
 *
 * The table is a list of chunks that only grows (a job may make any number of communicators);
 * a slot is used again once its communicator is freed and no snapshot can list it any more, so
 * the counter's scan covers the communicators in use, not every one the run ever made.
 *
 * Which communicators a snapshot lists is decided by moments, numbered in order: a range's begin,
 * each step boundary, a range's end, a dump. A communicator made after moment b and freed after
 * moment d was alive at the moments b+1..d; it belongs to the range of moments [s, e] when those
 * overlap. So a library's temporary communicators, made and freed before the job's first step,
 * are never listed, while the job's own, alive at its steps, are even when the job frees them
 * before MPI_Finalize writes the snapshot.
 */
#include "comms.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "log.h"

#define RS_COMM_CHUNK 64
#define RS_NEVER UINT64_MAX

enum { RS_SLOT_EMPTY, RS_SLOT_ALIVE, RS_SLOT_FREED };

typedef struct comm_slot {
    _Atomic uint64_t allreduces; /* every all-reduce made on it */
    /* under the lock (c.id is read without it once the slot is published) */
    _Atomic uint64_t *live;      /* its cell of comm_chunk.live */
    int state;
    rs_snapshot_comm c;
    /* the moments it was made and freed after (RS_NEVER: alive), and its all-reduce count at
     * the range's begin and end (RS_NEVER: the range is open) */
    uint64_t born, died;
    uint64_t ar_begin, ar_end;
} comm_slot;

typedef struct comm_chunk {
    /* the handle of each slot's communicator while it is alive, else 0: all that the counter's
     * scan reads, packed eight to a cache line; stored last when a slot is filled */
    _Atomic uint64_t live[RS_COMM_CHUNK];
    comm_slot slot[RS_COMM_CHUNK];
    struct comm_chunk *_Atomic next;
} comm_chunk;

static comm_chunk rs_comm_first;
/* slots [0, rs_comm_high) have been used; one is published by the store that counts it */
static _Atomic size_t rs_comm_high;
static pthread_mutex_t rs_comm_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t rs_comm_moments;
/* under the lock: the range's first and last moments (before any range: the whole run so far),
 * and the communicators recorded since the process began (listed or not) */
static uint64_t rs_range_first = 1, rs_range_last = RS_NEVER;
static uint64_t rs_comm_seen;

uint64_t rs_comms_hash(uint64_t seed, const void *p, size_t n)
{
    /* FNV-1a over the seed's bytes and then the data's */
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = p;
    for (int i = 0; i < 8; i++) h = (h ^ ((seed >> (8 * i)) & 0xff)) * 1099511628211ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h ? h : 1;
}

/* The live slot of `handle` (0 is none's): at most one is, rs_comms_add ends an older one.
 * Lock-free. */
static comm_slot *find(uint64_t handle)
{
    size_t high = atomic_load_explicit(&rs_comm_high, memory_order_acquire);
    for (comm_chunk *ch = &rs_comm_first; ch && high;
         ch = atomic_load_explicit(&ch->next, memory_order_acquire)) {
        size_t n = high < RS_COMM_CHUNK ? high : RS_COMM_CHUNK;
        for (size_t k = 0; k < n; k++)
            if (atomic_load_explicit(&ch->live[k], memory_order_acquire) == handle) return &ch->slot[k];
        high -= n;
    }
    return NULL;
}

/* Calls fn on each used slot. Lock held. */
static void each_slot(void (*fn)(comm_slot *s, void *arg), void *arg)
{
    size_t high = atomic_load_explicit(&rs_comm_high, memory_order_relaxed);
    for (comm_chunk *ch = &rs_comm_first; ch && high; ch = atomic_load_explicit(&ch->next, memory_order_relaxed)) {
        size_t n = high < RS_COMM_CHUNK ? high : RS_COMM_CHUNK;
        for (size_t k = 0; k < n; k++) fn(&ch->slot[k], arg);
        high -= n;
    }
}

/* Whether the moments a slot's communicator was alive at meet the range's. Lock held. */
static int in_range(const comm_slot *s)
{
    uint64_t from = s->born + 1 > rs_range_first ? s->born + 1 : rs_range_first;
    uint64_t to = s->died < rs_range_last ? s->died : rs_range_last;
    return from <= to;
}

/* Ends the communicator of slot s now: kept while the range can list it, else the slot is free
 * again. Lock held. */
static void end_slot(comm_slot *s)
{
    atomic_store_explicit(s->live, 0, memory_order_release);
    s->died = atomic_load_explicit(&rs_comm_moments, memory_order_relaxed);
    s->state = in_range(s) ? RS_SLOT_FREED : RS_SLOT_EMPTY;
}

/* A slot to fill: a free one, else one past the used ones (a new chunk when needed); NULL
 * without memory. *fresh is set when it is past the used ones. Lock held. */
static comm_slot *take_slot(int *fresh)
{
    size_t high = atomic_load_explicit(&rs_comm_high, memory_order_relaxed), left = high;
    comm_chunk *last = &rs_comm_first;
    *fresh = 0;
    for (comm_chunk *ch = &rs_comm_first; ch && left; ch = atomic_load_explicit(&ch->next, memory_order_relaxed)) {
        size_t n = left < RS_COMM_CHUNK ? left : RS_COMM_CHUNK;
        for (size_t k = 0; k < n; k++)
            if (ch->slot[k].state == RS_SLOT_EMPTY) return &ch->slot[k];
        left -= n;
        last = ch;
    }
    *fresh = 1;
    size_t k = high % RS_COMM_CHUNK;
    if (high && !k) {
        comm_chunk *next = atomic_load_explicit(&last->next, memory_order_relaxed);
        if (!next) {
            next = calloc(1, sizeof *next);
            if (!next) return NULL;
            atomic_store_explicit(&last->next, next, memory_order_release);
        }
        last = next;
    }
    last->slot[k].live = &last->live[k];
    return &last->slot[k];
}

void rs_comms_add(uint64_t handle, uint64_t id, int32_t size, int32_t rank, const char *kind)
{
    if (!handle) return; /* no communicator's: 0 marks a cell of none */
    pthread_mutex_lock(&rs_comm_lock);
    comm_slot *old = find(handle);
    if (old) end_slot(old);
    int fresh = 0;
    comm_slot *s = take_slot(&fresh);
    rs_comm_seen++;
    if (s) {
        memset(&s->c, 0, sizeof s->c);
        s->c.id = id;
        s->c.size = size;
        s->c.rank = rank;
        strncpy(s->c.kind, kind ? kind : "", sizeof s->c.kind - 1);
        s->state = RS_SLOT_ALIVE;
        s->born = atomic_load_explicit(&rs_comm_moments, memory_order_relaxed);
        s->died = RS_NEVER;
        s->ar_begin = 0;
        s->ar_end = RS_NEVER;
        atomic_store_explicit(&s->allreduces, 0, memory_order_relaxed);
        atomic_store_explicit(s->live, handle, memory_order_release);
        if (fresh) atomic_fetch_add_explicit(&rs_comm_high, 1, memory_order_release);
    }
    pthread_mutex_unlock(&rs_comm_lock);
    /* counted as seen all the same: the snapshot's count of those left out includes it */
    if (!s) RS_WARN(RS_SUB_INIT, "no host memory to record a communicator of %d ranks", (int)size);
}

void rs_comms_free(uint64_t handle)
{
    if (!handle) return;
    pthread_mutex_lock(&rs_comm_lock);
    comm_slot *s = find(handle);
    if (s) end_slot(s);
    pthread_mutex_unlock(&rs_comm_lock);
}

/* The slots a thread counted on last, by handle: a job's collectives go to a few communicators
 * (data-parallel, tensor-parallel, pipeline) over and over, while a library can leave hundreds
 * alive, and the scan of find() would cost every collective call some hundreds of nanoseconds.
 * An entry is good while its slot's live cell still holds the handle (the one live slot of it). */
#define RS_COMM_HOT_BITS 3
typedef struct comm_hot {
    uint64_t handle;
    comm_slot *slot;
} comm_hot;
static _Thread_local comm_hot rs_comm_hot[1u << RS_COMM_HOT_BITS];

static comm_slot *find_hot(uint64_t handle)
{
    /* handles are aligned pointers (Open MPI, NCCL) or small tagged integers (MPICH): the
     * product's top bits mix all of them */
    comm_hot *h = &rs_comm_hot[(handle * 0x9e3779b97f4a7c15ull) >> (64 - RS_COMM_HOT_BITS)];
    if (h->handle == handle && atomic_load_explicit(h->slot->live, memory_order_acquire) == handle)
        return h->slot;
    comm_slot *s = find(handle);
    if (s) *h = (comm_hot){handle, s};
    return s;
}

void rs_comms_allreduce(uint64_t handle)
{
    comm_slot *s = handle ? find_hot(handle) : NULL;
    if (s) atomic_fetch_add_explicit(&s->allreduces, 1, memory_order_relaxed);
}

uint64_t rs_comms_id_of(uint64_t handle)
{
    comm_slot *s = handle ? find(handle) : NULL;
    return s ? s->c.id : 0;
}

void rs_comms_moment(void)
{
    atomic_fetch_add_explicit(&rs_comm_moments, 1, memory_order_relaxed);
}

/* At a range's begin: one freed before it no snapshot lists any more; the all-reduces of the
 * others count from here. */
static void begin_slot(comm_slot *s, void *arg)
{
    (void)arg;
    if (s->state == RS_SLOT_FREED) s->state = RS_SLOT_EMPTY;
    if (s->state != RS_SLOT_ALIVE) return;
    s->ar_begin = atomic_load_explicit(&s->allreduces, memory_order_relaxed);
    s->ar_end = RS_NEVER;
}

void rs_comms_range_begin(void)
{
    pthread_mutex_lock(&rs_comm_lock);
    rs_range_first = atomic_fetch_add_explicit(&rs_comm_moments, 1, memory_order_relaxed) + 1;
    rs_range_last = RS_NEVER;
    each_slot(begin_slot, NULL);
    pthread_mutex_unlock(&rs_comm_lock);
}

static void end_range_slot(comm_slot *s, void *arg)
{
    (void)arg;
    if (s->state == RS_SLOT_ALIVE) s->ar_end = atomic_load_explicit(&s->allreduces, memory_order_relaxed);
}

void rs_comms_range_end(void)
{
    pthread_mutex_lock(&rs_comm_lock);
    rs_range_last = atomic_fetch_add_explicit(&rs_comm_moments, 1, memory_order_relaxed) + 1;
    each_slot(end_range_slot, NULL);
    pthread_mutex_unlock(&rs_comm_lock);
}

typedef struct copy_ctx {
    rs_snapshot_comm *v;
    size_t n;
} copy_ctx;

static void copy_slot(comm_slot *s, void *arg)
{
    copy_ctx *x = arg;
    if (s->state == RS_SLOT_EMPTY || !in_range(s)) return;
    uint64_t end = s->ar_end != RS_NEVER ? s->ar_end : atomic_load_explicit(&s->allreduces, memory_order_relaxed);
    x->v[x->n] = s->c;
    x->v[x->n++].allreduces = end > s->ar_begin ? end - s->ar_begin : 0;
}

ranksnap_status rs_comms_copy(rs_snapshot_comm **out, size_t *n, uint64_t *left_out)
{
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&rs_comm_lock);
    size_t high = atomic_load_explicit(&rs_comm_high, memory_order_relaxed);
    copy_ctx x = {high ? malloc(high * sizeof *x.v) : NULL, 0};
    if (high && !x.v) {
        pthread_mutex_unlock(&rs_comm_lock);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu communicators", high);
    }
    each_slot(copy_slot, &x);
    *left_out = rs_comm_seen - x.n;
    pthread_mutex_unlock(&rs_comm_lock);
    if (!x.n) free(x.v);
    else *out = x.v;
    *n = x.n;
    return RANKSNAP_OK;
}
