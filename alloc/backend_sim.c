/*
 * backend_sim.c — a simulated device, so that every allocator, OOM and MPI path runs without a GPU.
 *
 * Memory: a capacity and a bump pointer. Each reservation gets a fresh synthetic address range
 * (2 MiB aligned, starting at 0x7f0000000000) that is never handed out again, so a block used
 * after its segment was released can never alias a live one. Addresses are never dereferenced.
 * Live reservations are remembered so that a release of something never reserved (or of the
 * wrong size) is reported instead of silently corrupting the used-bytes count.
 *
 * Replays: PyTorch breaks ties between equally good free blocks by address, so a replay that
 * wants the original's placement must get the original's addresses. With hints enabled the sim's
 * own addresses move to 2^56 and up, out of the way, and a reservation takes the address the
 * original's segment had (a hint, one-shot) when it has that size and overlaps nothing live; an
 * address range takes the first hint's address, the start of the original's first mapping.
 *
 * Expandable segments: an address range (va_reserve) takes addresses from the same bump pointer
 * and no capacity; mapping pages of it takes capacity, as cuMemCreate + cuMemMap do. The mapped
 * pages are kept as sorted, disjoint intervals, so that mapping a page twice, unmapping one never
 * mapped, or giving back a range with pages still mapped is an error rather than a wrong count.
 *
 * Streams and events: every stream (keyed by its void *, NULL = the default stream) counts the
 * work submitted and the work completed. An event recorded on an idle stream is complete at once;
 * on a busy stream (rs_backend_sim_stream_set_busy) it takes a ticket that completes when the test calls
 * rs_backend_sim_stream_complete, or when someone synchronizes on it (as cudaEventSynchronize waits).
 * Clearing busy submits no more work but does not finish what is queued.
 *
 * One mutex guards everything, so allocators on several threads may share the device.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_sim.h"
#include "errors.h"

#define SIM_BASE_ADDR ((uint64_t)0x7f0000000000)
/* Each simulated device's addresses start this far above the previous one's, so that pointers of
 * a rank's devices never collide (devices 0..63 stay below the hinted range at 2^56). */
#define SIM_DEVICE_STRIDE ((uint64_t)1 << 48)
#define SIM_ALIGN ((uint64_t)2 << 20)
#define SIM_EVENT_MAGIC 0x5349454eu /* "SIEN": catches events that are not ours or destroyed */
#define SIM_HINTED_BASE ((uint64_t)1 << 56)
#define SIM_MAX_HINTS 16

typedef struct sim_stream {
    void *key;
    uint64_t submitted; /* tickets handed to events recorded while busy */
    uint64_t completed; /* every ticket up to this one has completed    */
    int busy;
    struct sim_stream *next;
} sim_stream;

typedef struct sim_event {
    uint32_t magic;
    sim_stream *stream;
    uint64_t ticket;
} sim_event;

typedef struct sim_range {
    uint64_t addr;
    uint64_t size;
} sim_range;

typedef struct sim_va {
    uint64_t addr;
    uint64_t size;
    uint64_t mapped;
} sim_va;

typedef struct sim_backend {
    rs_backend base;
    pthread_mutex_t mu;
    int device;
    uint64_t capacity;
    uint64_t used;
    uint64_t next_addr;
    unsigned fail_countdown; /* 0 = off; 1 = the next reserve (or map) fails */
    unsigned live_events;
    sim_stream *streams;
    sim_range *ranges; /* live reservations, unordered */
    size_t n_ranges, cap_ranges;
    sim_va *vas;       /* live address ranges, unordered */
    size_t n_vas, cap_vas;
    sim_range *maps;   /* mapped pages as disjoint intervals, address order */
    size_t n_maps, cap_maps;
    int hints_on;
    sim_range hints[SIM_MAX_HINTS]; /* addresses the next reservations should get */
    size_t n_hints;
} sim_backend;

static const rs_backend_ops sim_ops;

static sim_backend *as_sim(const rs_backend *b)
{
    return (b && b->ops == &sim_ops) ? (sim_backend *)(uintptr_t)b : NULL;
}

/* Finds the stream's counters, creating them on first use. NULL only when malloc fails. */
static sim_stream *sim_stream_get(sim_backend *s, void *key)
{
    for (sim_stream *st = s->streams; st; st = st->next)
        if (st->key == key) return st;
    sim_stream *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->key = key;
    st->next = s->streams;
    s->streams = st;
    return st;
}

/* Makes room for one more element of a growing array. */
static int grow(void **v, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap) return 0;
    size_t ncap = *cap ? *cap * 2 : 64;
    void *nv = realloc(*v, ncap * elem);
    if (!nv) return -1;
    *v = nv;
    *cap = ncap;
    return 0;
}

/* 1 when [addr, addr+size) overlaps no live reservation or address range. */
static int is_vacant(const sim_backend *s, uint64_t addr, uint64_t size)
{
    if (size == 0 || addr > UINT64_MAX - size) return 0;
    for (size_t i = 0; i < s->n_ranges; i++)
        if (addr < s->ranges[i].addr + s->ranges[i].size && s->ranges[i].addr < addr + size)
            return 0;
    for (size_t i = 0; i < s->n_vas; i++)
        if (addr < s->vas[i].addr + s->vas[i].size && s->vas[i].addr < addr + size) return 0;
    return 1;
}

/* The hinted address for a reservation of `size` (a range: `any_size`, the first hint), removed
 * from the hints; 0 when none fits. */
static uint64_t take_hint(sim_backend *s, uint64_t size, int any_size)
{
    for (size_t i = 0; i < s->n_hints; i++) {
        if (!any_size && s->hints[i].size != size) continue;
        uint64_t addr = s->hints[i].addr;
        memmove(&s->hints[i], &s->hints[i + 1], (s->n_hints - i - 1) * sizeof *s->hints);
        s->n_hints--;
        return addr && is_vacant(s, addr, size) ? addr : 0;
    }
    return 0;
}

/* Where a reservation (or, `range`, an address range) of `size` bytes goes: the hinted address
 * when one fits, else the next fresh one. */
static uint64_t place(sim_backend *s, uint64_t size, int range)
{
    uint64_t addr = take_hint(s, size, range);
    if (!addr) {
        addr = s->next_addr;
        s->next_addr += (size + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN;
    }
    return addr;
}

/* An injected failure (rs_backend_sim_fail_reserve_after) is due now. */
static int fail_now(sim_backend *s)
{
    return s->fail_countdown && --s->fail_countdown == 0;
}

static ranksnap_status sim_reserve(rs_backend *b, size_t size, void **ptr)
{
    sim_backend *s = as_sim(b);
    if (!ptr || size == 0)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                        "sim reserve: expected a non-zero size and an output pointer");
    ranksnap_status st = RANKSNAP_OK;
    pthread_mutex_lock(&s->mu);
    if (fail_now(s)) {
        st = rs_error(RANKSNAP_ERR_OUT_OF_MEMORY,
                      "sim reserve of %zu bytes: injected failure (rs_backend_sim_fail_reserve_after)",
                      size);
    } else if ((uint64_t)size > s->capacity - s->used) {
        st = rs_error(RANKSNAP_ERR_OUT_OF_MEMORY,
                      "sim reserve of %zu bytes: device has %" PRIu64 " of %" PRIu64
                      " bytes free",
                      size, s->capacity - s->used, s->capacity);
    } else if (grow((void **)&s->ranges, &s->cap_ranges, s->n_ranges, sizeof *s->ranges) != 0) {
        st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "sim reserve: could not grow the table of live "
                                                "reservations beyond %zu entries", s->n_ranges);
    } else {
        uint64_t addr = place(s, size, 0);
        s->ranges[s->n_ranges++] = (sim_range){addr, size};
        s->used += size;
        *ptr = (void *)(uintptr_t)addr;
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

static ranksnap_status sim_release(rs_backend *b, void *ptr, size_t size)
{
    sim_backend *s = as_sim(b);
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    ranksnap_status st = RANKSNAP_OK;
    pthread_mutex_lock(&s->mu);
    size_t i = 0;
    while (i < s->n_ranges && s->ranges[i].addr != addr) i++;
    if (i == s->n_ranges) {
        st = rs_error(RANKSNAP_ERR_BACKEND,
                      "sim release of 0x%" PRIx64 ": expected the start of a live reservation",
                      addr);
    } else if (s->ranges[i].size != size) {
        st = rs_error(RANKSNAP_ERR_BACKEND,
                      "sim release of 0x%" PRIx64 ": expected size %" PRIu64 ", got %zu", addr,
                      s->ranges[i].size, size);
    } else {
        s->used -= size;
        s->ranges[i] = s->ranges[--s->n_ranges];
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

static ranksnap_status sim_va_reserve(rs_backend *b, size_t size, void **ptr)
{
    sim_backend *s = as_sim(b);
    if (!ptr || size == 0)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                        "sim va_reserve: expected a non-zero size and an output pointer");
    ranksnap_status st = RANKSNAP_OK;
    pthread_mutex_lock(&s->mu);
    uint64_t span = ((uint64_t)size + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN;
    if (span > UINT64_MAX - s->next_addr) {
        st = rs_error(RANKSNAP_ERR_OUT_OF_MEMORY, "sim va_reserve of %zu bytes: out of "
                                                  "addresses", size);
    } else if (grow((void **)&s->vas, &s->cap_vas, s->n_vas, sizeof *s->vas) != 0) {
        st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "sim va_reserve: out of host memory");
    } else {
        uint64_t addr = place(s, size, 1);
        s->vas[s->n_vas++] = (sim_va){addr, size, 0};
        *ptr = (void *)(uintptr_t)addr;
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

static ranksnap_status sim_va_release(rs_backend *b, void *ptr, size_t size)
{
    sim_backend *s = as_sim(b);
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    ranksnap_status st = RANKSNAP_OK;
    pthread_mutex_lock(&s->mu);
    size_t i = 0;
    while (i < s->n_vas && s->vas[i].addr != addr) i++;
    if (i == s->n_vas || s->vas[i].size != size)
        st = rs_error(RANKSNAP_ERR_BACKEND, "sim va_release of 0x%" PRIx64 " (%zu bytes): "
                      "expected a live address range of that size", addr, size);
    else if (s->vas[i].mapped)
        st = rs_error(RANKSNAP_ERR_BACKEND, "sim va_release of 0x%" PRIx64 ": %" PRIu64
                      " bytes of it are still mapped", addr, s->vas[i].mapped);
    else
        s->vas[i] = s->vas[--s->n_vas];
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* The address range holding [addr, addr+size), NULL when none does. */
static sim_va *va_of(sim_backend *s, uint64_t addr, uint64_t size)
{
    for (size_t i = 0; i < s->n_vas; i++)
        if (addr >= s->vas[i].addr && size <= s->vas[i].size &&
            addr - s->vas[i].addr <= s->vas[i].size - size)
            return &s->vas[i];
    return NULL;
}

/* Index of the first mapped interval that ends after addr. */
static size_t map_search(const sim_backend *s, uint64_t addr)
{
    size_t lo = 0, hi = s->n_maps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->maps[mid].addr + s->maps[mid].size <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static ranksnap_status sim_map(rs_backend *b, void *ptr, size_t size, size_t page)
{
    sim_backend *s = as_sim(b);
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    ranksnap_status st = RANKSNAP_OK;
    pthread_mutex_lock(&s->mu);
    sim_va *va = va_of(s, addr, size);
    size_t i = map_search(s, addr);
    if (size == 0 || page == 0 || size % page || !va || (addr - va->addr) % page) {
        st = rs_error(RANKSNAP_ERR_BACKEND, "sim map of 0x%" PRIx64 " (%zu bytes): expected "
                      "whole %zu-byte pages of a live address range", addr, size, page);
    } else if (i < s->n_maps && s->maps[i].addr < addr + size) {
        st = rs_error(RANKSNAP_ERR_BACKEND, "sim map of 0x%" PRIx64 " (%zu bytes): 0x%" PRIx64
                      " is mapped already", addr, size, s->maps[i].addr);
    } else if (fail_now(s)) {
        st = rs_error(RANKSNAP_ERR_OUT_OF_MEMORY, "sim map of %zu bytes: injected failure "
                      "(rs_backend_sim_fail_reserve_after)", size);
    } else if ((uint64_t)size > s->capacity - s->used) {
        st = rs_error(RANKSNAP_ERR_OUT_OF_MEMORY, "sim map of %zu bytes: device has %" PRIu64
                      " of %" PRIu64 " bytes free", size, s->capacity - s->used, s->capacity);
    } else if (grow((void **)&s->maps, &s->cap_maps, s->n_maps, sizeof *s->maps) != 0) {
        st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "sim map: out of host memory");
    } else {
        int left = i > 0 && s->maps[i - 1].addr + s->maps[i - 1].size == addr;
        int right = i < s->n_maps && s->maps[i].addr == addr + size;
        if (left && right) {
            s->maps[i - 1].size += size + s->maps[i].size;
            memmove(&s->maps[i], &s->maps[i + 1], (s->n_maps - i - 1) * sizeof *s->maps);
            s->n_maps--;
        } else if (left) {
            s->maps[i - 1].size += size;
        } else if (right) {
            s->maps[i].addr = addr;
            s->maps[i].size += size;
        } else {
            memmove(&s->maps[i + 1], &s->maps[i], (s->n_maps - i) * sizeof *s->maps);
            s->maps[i] = (sim_range){addr, size};
            s->n_maps++;
        }
        s->used += size;
        va->mapped += size;
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

static ranksnap_status sim_unmap(rs_backend *b, void *ptr, size_t size, size_t page, void *stream)
{
    sim_backend *s = as_sim(b);
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    ranksnap_status st = RANKSNAP_OK;
    pthread_mutex_lock(&s->mu);
    sim_va *va = va_of(s, addr, size);
    size_t i = map_search(s, addr);
    if (size == 0 || page == 0 || size % page || !va || (addr - va->addr) % page ||
        i == s->n_maps || s->maps[i].addr > addr ||
        s->maps[i].addr + s->maps[i].size < addr + size) {
        st = rs_error(RANKSNAP_ERR_BACKEND, "sim unmap of 0x%" PRIx64 " (%zu bytes): expected "
                      "mapped whole %zu-byte pages of a live address range", addr, size, page);
    } else if (grow((void **)&s->maps, &s->cap_maps, s->n_maps, sizeof *s->maps) != 0) {
        st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "sim unmap: out of host memory");
    } else {
        /* cudaStreamSynchronize: the stream's queued work has run */
        sim_stream *ss = sim_stream_get(s, stream);
        if (ss) ss->completed = ss->submitted;
        sim_range m = s->maps[i];
        uint64_t tail = m.addr + m.size - (addr + size);
        if (addr > m.addr) {
            s->maps[i].size = addr - m.addr;
            i++;
            if (tail) {
                memmove(&s->maps[i + 1], &s->maps[i], (s->n_maps - i) * sizeof *s->maps);
                s->n_maps++;
            }
        } else if (!tail) {
            memmove(&s->maps[i], &s->maps[i + 1], (s->n_maps - i - 1) * sizeof *s->maps);
            s->n_maps--;
        }
        if (tail) s->maps[i] = (sim_range){addr + size, tail};
        s->used -= size;
        va->mapped -= size;
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

static ranksnap_status sim_mem_info(rs_backend *b, uint64_t *free_bytes, uint64_t *total_bytes)
{
    sim_backend *s = as_sim(b);
    pthread_mutex_lock(&s->mu);
    if (free_bytes) *free_bytes = s->capacity - s->used;
    if (total_bytes) *total_bytes = s->capacity;
    pthread_mutex_unlock(&s->mu);
    return RANKSNAP_OK;
}

static ranksnap_status sim_event_record(rs_backend *b, void *stream, rs_dev_event *ev)
{
    sim_backend *s = as_sim(b);
    sim_event *e = malloc(sizeof *e);
    if (!e) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "sim event_record: out of host memory");
    pthread_mutex_lock(&s->mu);
    sim_stream *st = sim_stream_get(s, stream);
    if (!st) {
        pthread_mutex_unlock(&s->mu);
        free(e);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "sim event_record: out of host memory");
    }
    e->magic = SIM_EVENT_MAGIC;
    e->stream = st;
    /* In order, like a CUDA stream: the event waits for everything submitted before it. */
    e->ticket = st->busy ? ++st->submitted : st->submitted;
    s->live_events++;
    pthread_mutex_unlock(&s->mu);
    *ev = e;
    return RANKSNAP_OK;
}

static int sim_event_query(rs_backend *b, rs_dev_event ev)
{
    sim_backend *s = as_sim(b);
    sim_event *e = ev;
    if (!e || e->magic != SIM_EVENT_MAGIC) {
        rs_error(RANKSNAP_ERR_BACKEND, "sim event_query: %p is not a live sim event", ev);
        return -(int)RANKSNAP_ERR_BACKEND;
    }
    pthread_mutex_lock(&s->mu);
    int done = e->stream->completed >= e->ticket;
    pthread_mutex_unlock(&s->mu);
    return done;
}

static ranksnap_status sim_event_synchronize(rs_backend *b, rs_dev_event ev)
{
    sim_backend *s = as_sim(b);
    sim_event *e = ev;
    if (!e || e->magic != SIM_EVENT_MAGIC)
        return rs_error(RANKSNAP_ERR_BACKEND, "sim event_synchronize: %p is not a live sim event",
                        ev);
    pthread_mutex_lock(&s->mu);
    /* Waiting for the event means the stream's work up to it has run; later work stays queued. */
    if (e->stream->completed < e->ticket) e->stream->completed = e->ticket;
    pthread_mutex_unlock(&s->mu);
    return RANKSNAP_OK;
}

static void sim_event_destroy(rs_backend *b, rs_dev_event ev)
{
    sim_backend *s = as_sim(b);
    sim_event *e = ev;
    if (!e || e->magic != SIM_EVENT_MAGIC) return;
    e->magic = 0;
    pthread_mutex_lock(&s->mu);
    s->live_events--;
    pthread_mutex_unlock(&s->mu);
    free(e);
}

static ranksnap_status sim_device_info(rs_backend *b, rs_device_info *out)
{
    sim_backend *s = as_sim(b);
    memset(out, 0, sizeof *out);
    out->index = s->device;
    snprintf(out->name, sizeof out->name, "ranksnap-sim");
    pthread_mutex_lock(&s->mu);
    out->total_bytes = s->capacity;
    pthread_mutex_unlock(&s->mu);
    /* Stable for a given capacity, so that snapshots of the same simulated job compare equal. */
    snprintf(out->uuid, sizeof out->uuid, "SIM-%08x-%04x-0000-%012" PRIx64,
             (unsigned)(out->total_bytes >> 20), (unsigned)s->device,
             out->total_bytes & UINT64_C(0xffffffffffff));
    return RANKSNAP_OK;
}

static void sim_destroy(rs_backend *b)
{
    sim_backend *s = as_sim(b);
    if (!s) return;
    sim_stream *st = s->streams;
    while (st) {
        sim_stream *next = st->next;
        free(st);
        st = next;
    }
    free(s->ranges);
    free(s->vas);
    free(s->maps);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static const rs_backend_ops sim_ops = {
    .name = "sim",
    .reserve = sim_reserve,
    .release = sim_release,
    .mem_info = sim_mem_info,
    .event_record = sim_event_record,
    .event_query = sim_event_query,
    .event_synchronize = sim_event_synchronize,
    .event_destroy = sim_event_destroy,
    .device_info = sim_device_info,
    .destroy = sim_destroy,
    .va_reserve = sim_va_reserve,
    .va_release = sim_va_release,
    .map = sim_map,
    .unmap = sim_unmap,
};

ranksnap_status rs_backend_sim_create(uint64_t capacity, rs_backend **out)
{
    return rs_backend_sim_create_on(0, capacity, out);
}

ranksnap_status rs_backend_sim_create_on(int device, uint64_t capacity, rs_backend **out)
{
    if (!out) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_backend_sim_create: out is NULL");
    *out = NULL;
    if (device < 0 || device >= 64)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "sim device: expected a device 0..63, got %d",
                        device);
    if (capacity == 0)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                        "sim device: expected a capacity above 0 bytes");
    sim_backend *s = calloc(1, sizeof *s);
    if (!s) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "sim device: out of host memory");
    int rc = pthread_mutex_init(&s->mu, NULL);
    if (rc != 0) {
        free(s);
        return rs_error(RANKSNAP_ERR_BACKEND, "sim device: pthread_mutex_init failed (%s)",
                        strerror(rc));
    }
    s->base.ops = &sim_ops;
    s->capacity = capacity;
    s->device = device;
    s->next_addr = SIM_BASE_ADDR + (uint64_t)device * SIM_DEVICE_STRIDE;
    *out = &s->base;
    return RANKSNAP_OK;
}

void rs_backend_sim_stream_set_busy(rs_backend *b, void *stream, int busy)
{
    sim_backend *s = as_sim(b);
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    sim_stream *st = sim_stream_get(s, stream);
    if (st) st->busy = busy != 0;
    pthread_mutex_unlock(&s->mu);
}

void rs_backend_sim_stream_complete(rs_backend *b, void *stream)
{
    sim_backend *s = as_sim(b);
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    sim_stream *st = sim_stream_get(s, stream);
    if (st) st->completed = st->submitted;
    pthread_mutex_unlock(&s->mu);
}

void rs_backend_sim_hints_enable(rs_backend *b)
{
    sim_backend *s = as_sim(b);
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    if (!s->hints_on && s->next_addr == SIM_BASE_ADDR + (uint64_t)s->device * SIM_DEVICE_STRIDE)
        s->next_addr = SIM_HINTED_BASE;
    s->hints_on = 1;
    pthread_mutex_unlock(&s->mu);
}

void rs_backend_sim_hint(rs_backend *b, uint64_t addr, uint64_t size)
{
    sim_backend *s = as_sim(b);
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    if (s->hints_on && s->n_hints < SIM_MAX_HINTS) s->hints[s->n_hints++] = (sim_range){addr, size};
    pthread_mutex_unlock(&s->mu);
}

void rs_backend_sim_hints_clear(rs_backend *b)
{
    sim_backend *s = as_sim(b);
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->n_hints = 0;
    pthread_mutex_unlock(&s->mu);
}

void rs_backend_sim_fail_reserve_after(rs_backend *b, unsigned n)
{
    sim_backend *s = as_sim(b);
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->fail_countdown = n;
    pthread_mutex_unlock(&s->mu);
}

uint64_t rs_backend_sim_used_bytes(const rs_backend *b)
{
    sim_backend *s = as_sim(b);
    if (!s) return 0;
    pthread_mutex_lock(&s->mu);
    uint64_t used = s->used;
    pthread_mutex_unlock(&s->mu);
    return used;
}

unsigned rs_backend_sim_live_events(const rs_backend *b)
{
    sim_backend *s = as_sim(b);
    if (!s) return 0;
    pthread_mutex_lock(&s->mu);
    unsigned n = s->live_events;
    pthread_mutex_unlock(&s->mu);
    return n;
}
