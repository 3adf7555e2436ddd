/*
 * test_driver_race.c — the driver layer's books (rank/intercept/driver.c) against the driver's
 * own, when several threads make a process's first driver calls at once.
 *
 *   test_driver_race MODE LIBRANKSNAP FAKE_DIR OUT [ROUNDS]
 *
 * Run by ctest, it is the parent: it starts ROUNDS fresh processes of itself (ranksnap starts once
 * per process, so each round must be a new one), each with LIBRANKSNAP preloaded in front of the
 * fake driver of FAKE_DIR (tests/gpu/fake_cuda_driver.c, which counts what it holds), and checks
 * what each child's snapshot says the program holds at the driver — the holders' bytes
 * (totals.outside_labels) and the history's outside_alloc/outside_free events replayed to the end
 * — against the fake driver's own count, byte for byte. The seed is printed; DRIVER_RACE_SEED
 * replays it (round r runs seed + r).
 *
 * MODE start: eight threads, released together by a barrier, each make a 64 MiB cuMemAlloc their
 * first driver call: 512 MiB held, all of it recorded.
 *
 * MODE start-cap: the same under RANKSNAP_MEMORY_LIMIT=224MiB, all at once: of each device's four
 * requests exactly three are granted, the fourth is the device's OOM.
 *
 * MODE mix: eight threads (four per device), each from its first driver call a seeded random
 * sequence of cuMemAlloc/cuMemFree, cuMemAllocAsync/cuMemFreeAsync (and the _ptsz variants) on
 * streams, cuMemAllocFromPoolAsync from the device's pool, and the virtual memory API:
 * cuMemCreate, cuMemMap of the whole handle or of its first part, one handle mapped more than
 * once, cuMemUnmap of one mapping or of several mapped side by side at once, partial unmaps and
 * unmaps of nothing (which the driver refuses: the CUDA documentation says a range must cover whole
 * mappings), handles released before or after their unmapping. Under RANKSNAP_MEMORY_LIMIT each
 * thread keeps within its own share of its device's cap, counting an allocation from when its
 * call begins and a free until its call returns, so that no request ever takes what is held
 * past the cap: any refusal is the cap refusing below it. At quiet points (every thread waiting
 * at a barrier) a request of exactly what the cap leaves on each device must be granted; at the
 * end, after a free, a release and a last unmap inside which the driver gives the address or the
 * handle's value to another allocation (given_again), one byte more must be refused (the rank's
 * only OOMs), then the snapshot is written with what was left live.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#undef cuGetProcAddress

#include "check.h"
#include "format.h"
#include "rsnap_decode.h"
#include "snapshot.h"

/* exported by the driver, declared by cuda.h only for per-thread-stream builds */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream s);

#define MiB ((size_t)1 << 20)
#define THREADS 8
#define CAP ((size_t)1 << 30)           /* RANKSNAP_MEMORY_LIMIT in mode mix, per device */
#define SHARE (CAP / (THREADS / 2))     /* each thread's part of its device's cap         */
#define OPS 400                         /* per thread and round                           */
#define QUIET_EVERY 100                 /* ops between quiet points                       */
#define PAGE ((size_t)2 << 20)          /* the fake driver's granularity                  */
#define SLOTS 8                         /* pages per address reservation                  */
#define MAX_RES 3                       /* reservations a thread holds at most            */
#define MAX_LIVE 512

static size_t (*fake_held)(int device);
static void (*fake_set_device)(int device);

/* ---- the child: one process, its threads ------------------------------------------------------ */

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

typedef struct handle {
    CUmemGenericAllocationHandle h;
    size_t size;
    int released;
    int mappings;
} handle;

typedef struct mapping {
    int handle; /* index into the thread's handles, -1: the slot is free */
    int first;  /* the mapping's first slot */
} mapping;

typedef struct reservation {
    CUdeviceptr va;
    mapping slot[SLOTS];
} reservation;

typedef struct worker {
    int id, device;
    uint64_t rng;
    size_t held; /* what this thread holds, as the driver counts it */
    CUdeviceptr sync[MAX_LIVE];
    size_t sync_n[MAX_LIVE], n_sync;
    CUdeviceptr async[MAX_LIVE];
    size_t async_n[MAX_LIVE], n_async;
    handle handles[MAX_LIVE];
    size_t n_handles;
    reservation res[MAX_RES];
    int n_res;
    int failures;
} worker;

static pthread_barrier_t barrier;
static worker workers[THREADS];

#define FAIL(w, ...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, "thread %d: ", (w)->id);                                                   \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        (w)->failures++;                                                                           \
    } while (0)

/* Sizes that repeat, so that the driver often gives a freed address again at once, and bytes
 * that no page rounding would give. */
static size_t pick_size(worker *w)
{
    static const size_t sizes[] = {1, 4097, MiB, 3 * MiB + 7, 8 * MiB, 17 * MiB + 1, 32 * MiB};
    return sizes[next_rand(&w->rng) % (sizeof sizes / sizeof sizes[0])];
}

static CUstream pick_stream(worker *w)
{
    uint64_t k = next_rand(&w->rng) % 3;
    return k == 0 ? NULL : (CUstream)(uintptr_t)(0x1000 + 16 * (uint64_t)w->id + k);
}

static void op_alloc(worker *w)
{
    size_t n = pick_size(w);
    if (w->held + n > SHARE || w->n_sync == MAX_LIVE) return;
    CUdeviceptr p = 0;
    w->held += n; /* from when the call begins */
    CUresult r = cuMemAlloc_v2(&p, n);
    if (r != CUDA_SUCCESS) {
        w->held -= n;
        FAIL(w, "cuMemAlloc of %zu bytes answered %d, holding %zu of its %zu", n, (int)r, w->held, SHARE);
        return;
    }
    w->sync[w->n_sync] = p;
    w->sync_n[w->n_sync++] = n;
}

static void op_free(worker *w)
{
    if (!w->n_sync) return;
    size_t i = next_rand(&w->rng) % w->n_sync;
    CUresult r = cuMemFree_v2(w->sync[i]);
    if (r != CUDA_SUCCESS) FAIL(w, "cuMemFree answered %d", (int)r);
    w->held -= w->sync_n[i]; /* once the call returned */
    w->n_sync--;
    w->sync[i] = w->sync[w->n_sync];
    w->sync_n[i] = w->sync_n[w->n_sync];
}

static void op_alloc_async(worker *w)
{
    size_t n = pick_size(w);
    if (w->held + n > SHARE || w->n_async == MAX_LIVE) return;
    CUdeviceptr p = 0;
    CUstream s = pick_stream(w);
    int ptsz = next_rand(&w->rng) & 1;
    int pooled = next_rand(&w->rng) % 3 == 0;
    CUmemoryPool pool = NULL;
    if (pooled && cuDeviceGetMemPool(&pool, w->device) != CUDA_SUCCESS) {
        FAIL(w, "cuDeviceGetMemPool failed");
        return;
    }
    w->held += n;
    CUresult r = pooled ? (ptsz ? cuMemAllocFromPoolAsync_ptsz(&p, n, pool, s)
                                : cuMemAllocFromPoolAsync(&p, n, pool, s))
                        : (ptsz ? cuMemAllocAsync_ptsz(&p, n, s) : cuMemAllocAsync(&p, n, s));
    if (r != CUDA_SUCCESS) {
        w->held -= n;
        FAIL(w, "%s%s of %zu bytes answered %d, holding %zu of its %zu",
             pooled ? "cuMemAllocFromPoolAsync" : "cuMemAllocAsync", ptsz ? "_ptsz" : "", n, (int)r,
             w->held, SHARE);
        return;
    }
    w->async[w->n_async] = p;
    w->async_n[w->n_async++] = n;
}

static void op_free_async(worker *w)
{
    if (!w->n_async) return;
    size_t i = next_rand(&w->rng) % w->n_async;
    CUstream s = pick_stream(w);
    CUresult r = next_rand(&w->rng) & 1 ? cuMemFreeAsync_ptsz(w->async[i], s) : cuMemFreeAsync(w->async[i], s);
    if (r != CUDA_SUCCESS) FAIL(w, "cuMemFreeAsync answered %d", (int)r);
    w->held -= w->async_n[i];
    w->n_async--;
    w->async[i] = w->async[w->n_async];
    w->async_n[i] = w->async_n[w->n_async];
}

static void op_create(worker *w)
{
    size_t n = PAGE * (1 + next_rand(&w->rng) % 4);
    if (w->held + n > SHARE || w->n_handles == MAX_LIVE) return;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = w->device;
    handle *h = &w->handles[w->n_handles];
    memset(h, 0, sizeof *h);
    h->size = n;
    w->held += n;
    CUresult r = cuMemCreate(&h->h, n, &prop, 0);
    if (r != CUDA_SUCCESS) {
        w->held -= n;
        FAIL(w, "cuMemCreate of %zu bytes answered %d, holding %zu of its %zu", n, (int)r, w->held, SHARE);
        return;
    }
    w->n_handles++;
}

/* A handle's memory is gone once it is released and unmapped everywhere (its entry stays, gone:
 * the mappings name handles by their index). */
static void handle_maybe_gone(worker *w, int i)
{
    handle *h = &w->handles[i];
    if (!h->released || h->mappings) return;
    w->held -= h->size;
}

static void op_release(worker *w)
{
    int live[MAX_LIVE], n = 0;
    for (size_t i = 0; i < w->n_handles; i++)
        if (!w->handles[i].released) live[n++] = (int)i;
    if (!n) return;
    int i = live[next_rand(&w->rng) % (uint64_t)n];
    CUresult r = cuMemRelease(w->handles[i].h);
    if (r != CUDA_SUCCESS) FAIL(w, "cuMemRelease answered %d", (int)r);
    w->handles[i].released = 1;
    handle_maybe_gone(w, i);
}

static void op_reserve(worker *w)
{
    if (w->n_res == MAX_RES) return;
    reservation *v = &w->res[w->n_res];
    CUresult r = cuMemAddressReserve(&v->va, SLOTS * PAGE, 0, 0, 0);
    if (r != CUDA_SUCCESS) {
        FAIL(w, "cuMemAddressReserve answered %d", (int)r);
        return;
    }
    for (int s = 0; s < SLOTS; s++) v->slot[s].handle = -1;
    w->n_res++;
}

static int reservation_empty(const reservation *v)
{
    for (int s = 0; s < SLOTS; s++)
        if (v->slot[s].handle >= 0) return 0;
    return 1;
}

static void op_address_free(worker *w)
{
    for (int k = 0; k < w->n_res; k++) {
        if (!reservation_empty(&w->res[k])) continue;
        CUresult r = cuMemAddressFree(w->res[k].va, SLOTS * PAGE);
        if (r != CUDA_SUCCESS) FAIL(w, "cuMemAddressFree answered %d", (int)r);
        w->res[k] = w->res[--w->n_res];
        return;
    }
}

/* A handle not yet released, mapped whole or its first pages, into free slots side by side. */
static void op_map(worker *w)
{
    int live[MAX_LIVE], n = 0;
    for (size_t i = 0; i < w->n_handles; i++)
        if (!w->handles[i].released) live[n++] = (int)i;
    if (!n || !w->n_res) return;
    int hi = live[next_rand(&w->rng) % (uint64_t)n];
    handle *h = &w->handles[hi];
    int pages = (int)(h->size / PAGE);
    if (next_rand(&w->rng) % 3 == 0) pages = 1 + (int)(next_rand(&w->rng) % (uint64_t)pages);
    reservation *v = &w->res[next_rand(&w->rng) % (uint64_t)w->n_res];
    for (int s = 0; s + pages <= SLOTS; s++) {
        int free_run = 1;
        for (int k = s; k < s + pages && free_run; k++) free_run = v->slot[k].handle < 0;
        if (!free_run) continue;
        CUresult r = cuMemMap(v->va + (CUdeviceptr)s * PAGE, (size_t)pages * PAGE, 0, h->h, 0);
        if (r != CUDA_SUCCESS) {
            FAIL(w, "cuMemMap of %d pages answered %d", pages, (int)r);
            return;
        }
        for (int k = s; k < s + pages; k++) v->slot[k] = (mapping){hi, s};
        h->mappings++;
        return;
    }
}

/* The mappings from slot `s` on, side by side, at most `most`: their end slot. */
static int run_end(const reservation *v, int s, int most)
{
    int e = s;
    while (e < SLOTS && most > 0 && v->slot[e].handle >= 0 && v->slot[e].first == e) {
        int m = e;
        do e++;
        while (e < SLOTS && v->slot[e].handle == v->slot[m].handle && v->slot[e].first == m);
        most--;
    }
    return e;
}

static void op_unmap(worker *w)
{
    if (!w->n_res) return;
    reservation *v = &w->res[next_rand(&w->rng) % (uint64_t)w->n_res];
    int starts[SLOTS], n = 0;
    for (int s = 0; s < SLOTS; s++)
        if (v->slot[s].handle >= 0 && v->slot[s].first == s) starts[n++] = s;
    uint64_t kind = next_rand(&w->rng) % 4;
    if (kind == 0) {
        /* what the driver refuses: part of a mapping, or a range that holds none */
        int cut = -1, empty = -1;
        for (int s = 0; s < SLOTS; s++) {
            if (v->slot[s].handle >= 0 && v->slot[s].first != s) cut = v->slot[s].first;
            if (v->slot[s].handle < 0) empty = s;
        }
        if (cut >= 0) {
            CUresult r = cuMemUnmap(v->va + (CUdeviceptr)cut * PAGE, PAGE);
            if (r == CUDA_SUCCESS) FAIL(w, "a cuMemUnmap of part of a mapping succeeded");
        } else if (empty >= 0) {
            CUresult r = cuMemUnmap(v->va + (CUdeviceptr)empty * PAGE, PAGE);
            if (r == CUDA_SUCCESS) FAIL(w, "a cuMemUnmap of nothing mapped succeeded");
        }
        return;
    }
    if (!n) return;
    int s = starts[next_rand(&w->rng) % (uint64_t)n];
    int e = run_end(v, s, 1 + (int)(next_rand(&w->rng) % 4));
    CUresult r = cuMemUnmap(v->va + (CUdeviceptr)s * PAGE, (size_t)(e - s) * PAGE);
    if (r != CUDA_SUCCESS) {
        FAIL(w, "cuMemUnmap of slots %d..%d answered %d", s, e, (int)r);
        return;
    }
    /* their handles' mappings end; a released handle is then gone */
    for (int k = s; k < e; k++) {
        if (v->slot[k].first == k) {
            w->handles[v->slot[k].handle].mappings--;
            handle_maybe_gone(w, v->slot[k].handle);
        }
        v->slot[k].handle = -1;
    }
}

static void quiet_point(worker *w)
{
    pthread_barrier_wait(&barrier);
    if (w->id == 0) {
        /* nothing in flight: what the cap leaves on each device is granted, all of it */
        for (int d = 0; d < 2; d++) {
            fake_set_device(d);
            size_t left = CAP - fake_held(d);
            CUdeviceptr p = 0;
            CUresult r = cuMemAlloc_v2(&p, left);
            if (r != CUDA_SUCCESS)
                FAIL(w, "device %d: the %zu bytes the cap leaves were refused (%d); the driver holds %zu",
                     d, left, (int)r, fake_held(d));
            else if (cuMemFree_v2(p) != CUDA_SUCCESS)
                FAIL(w, "device %d: the probe's free failed", d);
        }
        fake_set_device(w->device);
    }
    pthread_barrier_wait(&barrier);
}

static void *mix_thread(void *arg)
{
    worker *w = arg;
    fake_set_device(w->device);
    pthread_barrier_wait(&barrier);
    /* the first driver call of the thread (and, racing the others, of the process) allocates */
    uint64_t first = next_rand(&w->rng) % 3;
    if (first == 0) op_alloc(w);
    else if (first == 1) op_alloc_async(w);
    else op_create(w);
    for (int i = 1; i < OPS; i++) {
        if (i % QUIET_EVERY == 0) quiet_point(w);
        switch (next_rand(&w->rng) % 12) {
        case 0: case 1: op_alloc(w); break;
        case 2: op_free(w); break;
        case 3: op_alloc_async(w); break;
        case 4: op_free_async(w); break;
        case 5: op_create(w); break;
        case 6: op_release(w); break;
        case 7: op_reserve(w); break;
        case 8: case 9: op_map(w); break;
        case 10: op_unmap(w); break;
        default: op_address_free(w); break;
        }
    }
    return NULL;
}

static int capped; /* mode start-cap */

static void *start_thread(void *arg)
{
    worker *w = arg;
    fake_set_device(w->device);
    /* half the threads come a little later, at a seeded moment of ranksnap's start; under the cap
     * all at once, for the cap's check to meet the others' requests in flight */
    unsigned spins = !capped && next_rand(&w->rng) & 1 ? (unsigned)(next_rand(&w->rng) % 200000) : 0;
    pthread_barrier_wait(&barrier);
    for (volatile unsigned i = 0; i < spins; i++) {
    }
    CUdeviceptr p = 0;
    CUresult r = cuMemAlloc_v2(&p, 64 * MiB);
    if (r == CUDA_SUCCESS) w->held = 64 * MiB;
    else if (!capped || r != CUDA_ERROR_OUT_OF_MEMORY)
        FAIL(w, "its first cuMemAlloc of 64 MiB answered %d", (int)r);
    return NULL;
}

/* ---- a freed address or handle given again inside the freeing call -------------------------------
 * The driver may give what a free ended to another thread's allocation before the free returns;
 * the fake driver's after-free hook plays that allocation, and gives the same address or handle
 * value. The allocation made then is left live: the end's figures count it. */
static CUdeviceptr again_ptr;
static CUmemGenericAllocationHandle again_handle;

static void alloc_again(void)
{
    if (cuMemAlloc_v2(&again_ptr, 8 * MiB) != CUDA_SUCCESS) again_ptr = 0;
}

static void create_again(void)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    if (cuMemCreate(&again_handle, PAGE, &prop, 0) != CUDA_SUCCESS) again_handle = 0;
}

static int given_again(void *drv)
{
    void (*after_next_free)(void (*)(void));
    *(void **)&after_next_free = dlsym(drv, "fake_driver_after_next_free");
    if (!after_next_free) return fprintf(stderr, "the fake driver has no after-free hook\n"), 1;
    int failures = 0;
    fake_set_device(0);
    /* cuMemFree */
    CUdeviceptr p = 0;
    if (cuMemAlloc_v2(&p, 8 * MiB) != CUDA_SUCCESS) return fprintf(stderr, "cuMemAlloc failed\n"), 1;
    after_next_free(alloc_again);
    if (cuMemFree_v2(p) != CUDA_SUCCESS || again_ptr != p)
        failures++, fprintf(stderr, "the freed address was not given again inside cuMemFree\n");
    /* cuMemRelease of a handle no longer mapped */
    CUmemGenericAllocationHandle h = 0;
    create_again();
    h = again_handle;
    after_next_free(create_again);
    if (!h || cuMemRelease(h) != CUDA_SUCCESS || again_handle != h)
        failures++, fprintf(stderr, "the released handle was not given again inside cuMemRelease\n");
    /* cuMemUnmap of the last mapping of a released handle */
    create_again();
    h = again_handle;
    CUdeviceptr va = 0;
    if (!h || cuMemAddressReserve(&va, PAGE, 0, 0, 0) != CUDA_SUCCESS || cuMemMap(va, PAGE, 0, h, 0) != CUDA_SUCCESS ||
        cuMemRelease(h) != CUDA_SUCCESS)
        return fprintf(stderr, "cuMemCreate, cuMemMap or cuMemRelease failed\n"), failures + 1;
    after_next_free(create_again);
    if (cuMemUnmap(va, PAGE) != CUDA_SUCCESS || again_handle != h)
        failures++, fprintf(stderr, "the handle was not given again inside cuMemUnmap\n");
    return failures;
}

static int child(const char *mode, uint64_t seed, const char *dir)
{
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (drv) {
        *(void **)&fake_held = dlsym(drv, "fake_driver_held_bytes");
        *(void **)&fake_set_device = dlsym(drv, "fake_driver_set_device");
    }
    if (!fake_held || !fake_set_device) return fprintf(stderr, "not the fake driver\n"), 2;
    int mix = !strcmp(mode, "mix");
    capped = !strcmp(mode, "start-cap");
    pthread_barrier_init(&barrier, NULL, THREADS);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i].id = i;
        workers[i].device = i & 1;
        workers[i].rng = (seed + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(i + 1) << 32;
        pthread_create(&t[i], NULL, mix ? mix_thread : start_thread, &workers[i]);
    }
    int failures = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        failures += workers[i].failures;
    }
    if (capped) {
        /* three of each device's four 64 MiB requests fit under its 224 MiB cap */
        size_t granted[2] = {0, 0};
        for (int i = 0; i < THREADS; i++) granted[workers[i].device] += workers[i].held;
        for (int d = 0; d < 2; d++)
            if (granted[d] != 192 * MiB)
                failures++, fprintf(stderr, "device %d: %zu MiB granted under a 224 MiB cap, expected 192\n",
                                    d, granted[d] / MiB);
    }
    if (mix) {
        failures += given_again(drv);
        /* the cap, exactly: one byte past what it leaves is refused, what it leaves is granted */
        for (int d = 0; d < 2; d++) {
            fake_set_device(d);
            size_t left = CAP - fake_held(d);
            CUdeviceptr p = 0;
            if (cuMemAlloc_v2(&p, left + 1) != CUDA_ERROR_OUT_OF_MEMORY)
                failures++, fprintf(stderr, "device %d: one byte past the cap was granted\n", d);
            if (cuMemAlloc_v2(&p, left) != CUDA_SUCCESS || cuMemFree_v2(p) != CUDA_SUCCESS)
                failures++, fprintf(stderr, "device %d: what the cap leaves was refused\n", d);
        }
    }
    ranksnap_status (*dump)(const char *);
    *(void **)&dump = dlsym(RTLD_DEFAULT, "ranksnap_dump");
    char path[4096];
    snprintf(path, sizeof path, "%s/end.rsnap", dir);
    if (!dump || dump(path) != RANKSNAP_OK) failures++, fprintf(stderr, "no snapshot written\n");
    snprintf(path, sizeof path, "%s/driver-held", dir);
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%zu\n", fake_held(-1)) < 0 || fclose(f) != 0)
        failures++, fprintf(stderr, "%s: %s\n", path, strerror(errno));
    return failures ? 1 : 0;
}

/* ---- the parent: the rounds, and what each child's snapshot says ----------------------------- */

/* The outside bytes live at the end of the history: the held events, then every outside_alloc
 * and outside_free (an allocation at a live key replaces it, a free of no live key is nothing). */
static uint64_t replayed_outside(const rs_snap *s)
{
    const rs_snap_history *h = &s->history;
    size_t cap = 64;
    while (cap < 2 * h->count + 2) cap *= 2;
    uint64_t *key = calloc(cap, sizeof *key), *size = calloc(cap, sizeof *size);
    uint64_t live = 0;
    for (uint64_t i = 0; key && size && i < h->count; i++) {
        uint8_t a = h->action[i];
        if (a != RS_ACT_OUTSIDE_ALLOC && a != RS_ACT_OUTSIDE_FREE) continue;
        size_t j = (size_t)((h->addr[i] + 1) * 0x9e3779b97f4a7c15ull >> 20) & (cap - 1);
        while (key[j] && key[j] != h->addr[i] + 1) j = (j + 1) & (cap - 1);
        if (key[j] == h->addr[i] + 1) live -= size[j];
        key[j] = h->addr[i] + 1;
        size[j] = a == RS_ACT_OUTSIDE_ALLOC ? h->size[i] : 0;
        live += size[j];
    }
    free(key);
    free(size);
    return live;
}

static uint64_t labelled_outside(const rs_snap *s)
{
    uint64_t sum = 0;
    /* what a pool keeps is sampled from its attributes, not taken by the program's calls */
    for (size_t i = 0; i < s->totals.n_outside_labels; i++)
        if (strcmp(s->totals.outside_labels[i].label, "cuda_pool_cached") != 0)
            sum += s->totals.outside_labels[i].bytes;
    return sum;
}

/* `dir` made (with its parents) and emptied of an earlier run's files. */
static int fresh_dir(const char *dir)
{
    char path[4400];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) return 0;
        *p = '/';
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST) return 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    return 1;
}

/* The child's output, shown when its round failed. */
static void show_log(const char *dir)
{
    char path[4200], line[1024];
    snprintf(path, sizeof path, "%s/log", dir);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) fputs(line, stderr);
    if (f) fclose(f);
}

static int run_round(const char *self, const char *mode, const char *lib, const char *fake,
                     const char *out, uint64_t seed, int round)
{
    char dir[4096], arg[32];
    snprintf(dir, sizeof dir, "%s/%s-%d", out, mode, round);
    if (!fresh_dir(dir)) return fprintf(stderr, "%s: %s\n", dir, strerror(errno)), 0;
    snprintf(arg, sizeof arg, "%" PRIu64, seed);
    pid_t pid = fork();
    if (pid == 0) {
        char log[4200];
        snprintf(log, sizeof log, "%s/log", dir);
        if (!freopen(log, "w", stdout) || dup2(fileno(stdout), 2) < 0) _exit(126);
        setenv("LD_PRELOAD", lib, 1);
        setenv("LD_LIBRARY_PATH", fake, 1);
        setenv("RANKSNAP_DIR", dir, 1);
        setenv("RANKSNAP_REPORT", "0", 1);
        if (!strcmp(mode, "mix")) setenv("RANKSNAP_MEMORY_LIMIT", "1GiB", 1);
        if (!strcmp(mode, "start-cap")) setenv("RANKSNAP_MEMORY_LIMIT", "224MiB", 1);
        execl(self, self, "--child", mode, arg, dir, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return fprintf(stderr, "fork: %s\n", strerror(errno)), 0;
    int ok = 1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "round %d (seed %" PRIu64 "): the child failed (status %d)\n", round, seed, status);
        ok = 0;
    }
    char path[4200];
    unsigned long long driver = 0;
    snprintf(path, sizeof path, "%s/driver-held", dir);
    FILE *f = fopen(path, "r");
    if (!f || fscanf(f, "%llu", &driver) != 1) {
        fprintf(stderr, "round %d (seed %" PRIu64 "): %s not written\n", round, seed, path);
        ok = 0;
    }
    if (f) fclose(f);
    snprintf(path, sizeof path, "%s/end.rsnap", dir);
    rs_snap *s = NULL;
    if (rs_rsnap_decode_file(path, &s) != RANKSNAP_OK) {
        fprintf(stderr, "round %d (seed %" PRIu64 "): %s\n", round, seed, ranksnap_last_error());
        show_log(dir);
        return 0;
    }
    uint64_t ooms = s->totals.num_ooms, labelled = labelled_outside(s), replayed = replayed_outside(s);
    if (labelled != driver || replayed != driver) {
        fprintf(stderr, "round %d (seed %" PRIu64 "): the driver holds %llu bytes; the snapshot's holders say "
                "%" PRIu64 ", its history %" PRIu64 "\n", round, seed, driver, labelled, replayed);
        ok = 0;
    }
    /* the rank's OOMs (before ranksnap was up too): mode mix, the two requests one byte past the
     * cap; start-cap, one 64 MiB request per device */
    uint64_t want_ooms = strcmp(mode, "start") ? 2 : 0;
    if (!strcmp(mode, "start-cap") && (!s->has_oom || s->oom.requested != 64 * MiB)) {
        fprintf(stderr, "round %d (seed %" PRIu64 "): no OOM record of the refused 64 MiB\n", round, seed);
        ok = 0;
    }
    if (ooms != want_ooms) {
        fprintf(stderr, "round %d (seed %" PRIu64 "): %" PRIu64 " OOMs recorded, expected %" PRIu64 "\n",
                round, seed, ooms, want_ooms);
        ok = 0;
    }
    rs_snap_free(s);
    if (!ok) show_log(dir);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--child"))
        return child(argv[2], strtoull(argv[3], NULL, 10), argv[4]);
    if (argc < 5 || (strcmp(argv[1], "start") && strcmp(argv[1], "start-cap") && strcmp(argv[1], "mix"))) {
        fprintf(stderr, "usage: test_driver_race start|start-cap|mix LIBRANKSNAP FAKE_DIR OUT [ROUNDS]\n");
        return 2;
    }
    int rounds = argc > 5 ? atoi(argv[5]) : 10;
    const char *env = getenv("DRIVER_RACE_SEED");
    uint64_t seed = env && *env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 16;
    printf("%s: %d rounds, seed %" PRIu64 " (DRIVER_RACE_SEED=%" PRIu64 " replays them)\n", argv[1],
           rounds, seed, seed);
    fflush(stdout);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return fprintf(stderr, "/proc/self/exe: %s\n", strerror(errno)), 1;
    self[n] = '\0';
    int passed = 0;
    for (int r = 0; r < rounds; r++) {
        int ok = run_round(self, argv[1], argv[2], argv[3], argv[4], seed + (uint64_t)r, r);
        CHECK(ok);
        passed += ok;
    }
    printf("%s: %d of %d rounds held what the driver held, byte for byte\n", argv[1], passed, rounds);
    return check_summary();
}
