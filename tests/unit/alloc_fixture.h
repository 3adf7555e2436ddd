/*
 * alloc_fixture.h — the allocator tests' fixture: a sim device, a caching allocator on it, and an
 * observer that records every event it is told of.
 *
 * fx_done is where every such test ends: the allocator's own invariants hold, and destroying it
 * gives every byte and every event back to the device, whatever the test left allocated.
 * Header-only (static inline) so that each test stays one source file.
 */
#ifndef RANKSNAP_TEST_ALLOC_FIXTURE_H
#define RANKSNAP_TEST_ALLOC_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "backend_sim.h"
#include "check.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

typedef struct obs_event {
    rs_action act;
    uint64_t addr, size;
    void *stream;
} obs_event;

/* Records every observer call and hands out stack ids 100, 101, ... (distinct and non-zero, so
 * a test can tell which call a block's stack id came from). */
typedef struct recorder {
    obs_event ev[256];
    int n;
    uint32_t next_id;
} recorder;

static inline uint32_t record_cb(void *ctx, rs_action act, uint64_t addr, uint64_t size,
                                 void *stream)
{
    recorder *r = ctx;
    if (r->n < (int)(sizeof r->ev / sizeof r->ev[0])) {
        r->ev[r->n].act = act;
        r->ev[r->n].addr = addr;
        r->ev[r->n].size = size;
        r->ev[r->n].stream = stream;
        r->n++;
    }
    return r->next_id++;
}

typedef struct fixture {
    rs_backend *b;
    rs_alloc *a;
    recorder rec;
} fixture;

/* A device of `capacity` bytes; `limit` and `max_split` as in rs_alloc_config (0: none). */
static inline void fx_init(fixture *f, uint64_t capacity, uint64_t limit, uint64_t max_split)
{
    memset(f, 0, sizeof *f);
    f->rec.next_id = 100;
    CHECK(rs_backend_sim_create(capacity, &f->b) == RANKSNAP_OK);
    rs_alloc_config cfg = {.memory_limit = limit,
                           .max_split_size = max_split,
                           .device_index = 0,
                           .observer = record_cb,
                           .observer_ctx = &f->rec};
    CHECK(rs_alloc_create(f->b, &cfg, &f->a) == RANKSNAP_OK);
}

/* The same with PyTorch's settings `conf` (PYTORCH_CUDA_ALLOC_CONF syntax). */
static inline void fx_init_conf(fixture *f, uint64_t capacity, uint64_t limit, const char *conf)
{
    memset(f, 0, sizeof *f);
    f->rec.next_id = 100;
    rs_alloc_conf c;
    char why[256];
    rs_alloc_conf_reset(&c);
    CHECK(rs_alloc_conf_parse(&c, conf, 0, why, sizeof why) == 0);
    CHECK(rs_backend_sim_create(capacity, &f->b) == RANKSNAP_OK);
    rs_alloc_config cfg = {.memory_limit = limit,
                           .conf = &c,
                           .device_index = 0,
                           .observer = record_cb,
                           .observer_ctx = &f->rec};
    CHECK(rs_alloc_create(f->b, &cfg, &f->a) == RANKSNAP_OK);
}

static inline void fx_done(fixture *f)
{
    CHECK(rs_alloc_check(f->a));
    if (!rs_alloc_check(f->a)) fprintf(stderr, "  %s\n", ranksnap_last_error());
    rs_alloc_destroy(f->a);
    CHECK_EQ_U64(rs_backend_sim_used_bytes(f->b), 0);
    CHECK_EQ_U64(rs_backend_sim_live_events(f->b), 0);
    f->b->ops->destroy(f->b);
}

static inline ranksnap_stats stats_of(rs_alloc *a)
{
    ranksnap_stats s;
    memset(&s, 0, sizeof s);
    rs_alloc_get_stats(a, &s);
    return s;
}

static inline void *must_alloc(rs_alloc *a, size_t size, void *stream)
{
    void *p = NULL;
    ranksnap_status st = rs_alloc_malloc(a, size, stream, &p);
    CHECK_EQ_U64(st, RANKSNAP_OK);
    if (st != RANKSNAP_OK) fprintf(stderr, "  malloc(%zu): %s\n", size, ranksnap_last_error());
    return p;
}

/* A pointer as the address the observer and the state report it by. */
static inline uint64_t u(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

#endif
