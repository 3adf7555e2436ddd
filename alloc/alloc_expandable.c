/*
 * alloc_expandable.c — expandable segments (PyTorch's ExpandableSegment and the blocks over it):
 * one virtual range per (stream, pool), 1.125 times the device's memory; a block is served by
 * mapping pages after the free space at its end, and freed memory is given back by unmapping
 * whole pages. Unmapped address space is kept as blocks in the pool's `unmapped` list.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "errors.h"
#include "log.h"
#include "mutex.h"
#include "options.h"
#include "text.h"
#include "alloc_block.h"
#include "alloc_expandable.h"

static void unmapped_insert(rs_pool *p, rs_block *b)
{
    rs_block *prev = NULL, *cur = p->unmapped;
    while (cur && cur->addr < b->addr) {
        prev = cur;
        cur = cur->un_next;
    }
    b->un_prev = prev;
    b->un_next = cur;
    if (prev)
        prev->un_next = b;
    else
        p->unmapped = b;
    if (cur) cur->un_prev = b;
}

static void unmapped_remove(rs_pool *p, rs_block *b)
{
    if (b->un_prev)
        b->un_prev->un_next = b->un_next;
    else
        p->unmapped = b->un_next;
    if (b->un_next) b->un_next->un_prev = b->un_prev;
    b->un_prev = b->un_next = NULL;
}

/* Free address space a request may take: a free mapped block or unmapped space. */
static int allocatable(const rs_block *b)
{
    return b && b->state == RS_BLOCK_INACTIVE;
}

static int has_room(const rs_block *b, size_t size)
{
    size_t bytes = 0;
    for (; bytes < size && allocatable(b); b = b->next) bytes += b->size;
    return bytes >= size;
}

/* A new virtual range for (stream, pool): 1.125 times the device's memory, in whole pages. */
static ranksnap_status expandable_create(rs_alloc *a, rs_pool *pool, rs_block **out)
{
    size_t page = pool->is_small ? RS_SMALL_BUFFER : (size_t)rs_alloc_conf_large_segment(&a->conf);
    uint64_t want = a->device_total + a->device_total / 8;
    uint64_t pages = (want + page - 1) / page;
    if (pages == 0 || pages > SIZE_MAX / page)
        return rs_error(RANKSNAP_ERR_BACKEND,
                        "allocator: no address range for an expandable segment of a %" PRIu64
                        "-byte device in %zu-byte pages", a->device_total, page);
    size_t size = (size_t)pages * page;
    RS_CHECK(rs_al_spare_reserve(a, 1));
    rs_segment *s = calloc(1, sizeof *s);
    if (!s) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "allocator: out of host memory for "
                                                      "segment bookkeeping");
    void *ptr = NULL;
    ranksnap_status st = a->backend->ops->va_reserve(a->backend, size, &ptr);
    if (st != RANKSNAP_OK) {
        free(s);
        return st;
    }
    s->addr = (uintptr_t)ptr;
    s->size = size;
    s->pool = pool;
    s->expandable = 1;
    s->page = page;
    rs_al_segment_link(a, s);
    rs_block *b = spare_pop(a);
    b->addr = s->addr;
    b->size = size;
    b->pool = pool;
    b->seg = s;
    b->mapped = 0;
    b->state = RS_BLOCK_INACTIVE;
    s->head = b;
    unmapped_insert(pool, b);
    *out = b;
    return RANKSNAP_OK;
}

/* PyTorch's find_expandable_block: the lowest address where `size` bytes of free or unmapped
 * space follow one another (starting at the free block just before unmapped space, if any); else
 * a new range. */
static ranksnap_status expandable_find(rs_alloc *a, rs_pool *pool, size_t size, rs_block **out)
{
    for (rs_block *u = pool->unmapped; u; u = u->un_next) {
        rs_block *c = allocatable(u->prev) ? u->prev : u;
        if (has_room(c, size)) {
            *out = c;
            return RANKSNAP_OK;
        }
    }
    return expandable_create(a, pool, out);
}

/* PyTorch's map_block: backs the first `size` bytes (in whole pages) of the unmapped block `m`,
 * which then merges with free mapped neighbours; *out is the free block that holds them, in its
 * pool, or NULL when the device had no room. */
static ranksnap_status expandable_map(rs_alloc *a, rs_block *m, size_t size, rs_block **out)
{
    rs_segment *s = m->seg;
    rs_pool *pool = m->pool;
    size_t len = (size + s->page - 1) / s->page * s->page;
    *out = NULL;
    RS_CHECK(rs_al_spare_reserve(a, 1));
    ranksnap_status st = a->backend->ops->map(a->backend, (void *)m->addr, len, s->page);
    if (st == RANKSNAP_ERR_OUT_OF_MEMORY) return RANKSNAP_OK;
    RS_CHECK(st);
    uintptr_t at = m->addr;
    unmapped_remove(pool, m);
    m->mapped = 1;
    if (len < m->size) {
        rs_block *r = spare_pop(a);
        r->addr = m->addr + len;
        r->size = m->size - len;
        r->pool = pool;
        r->seg = s;
        r->mapped = 0;
        r->state = RS_BLOCK_INACTIVE;
        r->prev = m;
        r->next = m->next;
        if (r->next) r->next->prev = r;
        m->next = r;
        m->size = len;
        unmapped_insert(pool, r);
    }
    m = coalesce(a, m);
    pool_insert(a, m);
    s->mapped += len;
    rs_al_reserved_add(a, len);
    a->st.num_segment_allocs++;
    uint32_t id = observe(a, RS_ACT_SEGMENT_ALLOC, at, len, pool->stream);
    if (!s->stack_id) s->stack_id = id;
    *out = m;
    return RANKSNAP_OK;
}

ranksnap_status rs_al_expandable_alloc(rs_alloc *a, rs_pool *pool, size_t size, rs_block **out)
{
    rs_block *c = NULL;
    *out = NULL;
    RS_CHECK(expandable_find(a, pool, size, &c));
    if (!c->mapped) {
        RS_CHECK(expandable_map(a, c, c->size < size ? c->size : size, &c));
        if (!c) return RANKSNAP_OK;
    }
    while (c->size < size) {
        rs_block *n = c->next; /* unmapped: free mapped neighbours are always merged */
        size_t rest = size - c->size;
        RS_CHECK(expandable_map(a, n, n->size < rest ? n->size : rest, &c));
        if (!c) return RANKSNAP_OK;
    }
    *out = c;
    return RANKSNAP_OK;
}

ranksnap_status rs_al_expandable_unmap(rs_alloc *a, rs_block *b)
{
    rs_segment *s = b->seg;
    rs_pool *pool = b->pool;
    uintptr_t end = b->addr + b->size;
    uintptr_t ub = s->addr + (b->addr - s->addr + s->page - 1) / s->page * s->page;
    uintptr_t ue = s->addr + (end - s->addr) / s->page * s->page;
    if (ub >= ue) return RANKSNAP_OK;
    RS_CHECK(rs_al_spare_reserve(a, 2));
    RS_CHECK(a->backend->ops->unmap(a->backend, (void *)ub, ue - ub, s->page, pool->stream));
    pool_remove(a, b);
    if (ub > b->addr) {
        rs_block *f = spare_pop(a);
        f->addr = b->addr;
        f->size = ub - b->addr;
        f->pool = pool;
        f->seg = s;
        f->prev = b->prev;
        f->next = b;
        if (f->prev)
            f->prev->next = f;
        else
            s->head = f;
        b->prev = f;
        pool_insert(a, f);
    }
    if (ue < end) {
        rs_block *g = spare_pop(a);
        g->addr = ue;
        g->size = end - ue;
        g->pool = pool;
        g->seg = s;
        g->prev = b;
        g->next = b->next;
        if (g->next) g->next->prev = g;
        b->next = g;
        pool_insert(a, g);
    }
    b->addr = ub;
    b->size = ue - ub;
    b->mapped = 0;
    b->state = RS_BLOCK_INACTIVE;
    rs_block *p = b->prev;
    if (p && !p->mapped) { /* unmapped space is always free */
        p->size += b->size;
        p->next = b->next;
        if (p->next) p->next->prev = p;
        spare_push(a, b);
        b = p;
    } else {
        unmapped_insert(pool, b);
    }
    rs_block *n = b->next;
    if (n && !n->mapped) {
        unmapped_remove(pool, n);
        b->size += n->size;
        b->next = n->next;
        if (b->next) b->next->prev = b;
        spare_push(a, n);
    }
    s->mapped -= ue - ub;
    a->st.reserved_bytes -= ue - ub;
    a->st.num_segment_frees++;
    observe(a, RS_ACT_SEGMENT_FREE, ub, ue - ub, pool->stream);
    return RANKSNAP_OK;
}

ranksnap_status rs_al_expandable_release(rs_alloc *a, rs_segment *s)
{
    RS_CHECK(a->backend->ops->va_release(a->backend, (void *)s->addr, s->size));
    unmapped_remove(s->pool, s->head);
    spare_push(a, s->head);
    rs_al_segment_unlink(a, s);
    free(s);
    return RANKSNAP_OK;
}
