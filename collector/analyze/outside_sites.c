/*
 * outside_sites.c — the peak of memory outside ranksnap's allocators and where it came from
 * (outside_sites.h).
 *
 * The CUDA driver's interposers, ncclMemAlloc and CUDA pools record such memory as outside_alloc
 * and outside_free events keyed by address (or handle), with the allocation's stack. Two passes
 * over those events alone (they are few next to the allocator's): the first finds the moment the
 * live outside bytes peaked, the second replays up to it and adds the bytes live then by stack,
 * which are then named as the allocator's blocks are (sites.h) and merged by site; those the
 * rank held when its range began (history.held) are sites of their own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outside_sites.h"
#include "owners.h"
#include "sat.h"

typedef struct live_slot {
    uint64_t key; /* address + 1, 0 = empty */
    uint64_t size;
    uint32_t stack;
    int gone;
    int held; /* allocated by one of the history's held events */
} live_slot;

typedef struct live_table {
    live_slot *slots;
    size_t mask;
} live_table;

static live_slot *live_find(live_table *t, uint64_t addr)
{
    uint64_t key = addr + 1;
    for (size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 17) & t->mask;; i = (i + 1) & t->mask)
        if (t->slots[i].key == key || t->slots[i].key == 0) return &t->slots[i];
}

/* Replays the events [0, end) of actions `alloc` and `free`: the live bytes after each, the
 * highest level and the index just after it in *peak_end. */
static uint64_t replay(const rs_snap_history *h, uint64_t end, uint8_t alloc, uint8_t free_,
                       live_table *t, uint64_t *peak_end)
{
    uint64_t level = 0, peak = 0;
    for (uint64_t i = 0; i < end; i++) {
        uint8_t a = h->action[i];
        if (a != alloc && a != free_) continue;
        live_slot *sl = live_find(t, h->addr[i]);
        if (a == alloc) {
            if (sl->key && !sl->gone) level = rs_sat_sub_u64(level, sl->size); /* seen twice: the later one counts */
            sl->key = h->addr[i] + 1;
            sl->size = h->size[i];
            sl->stack = h->stack[i];
            sl->gone = 0;
            sl->held = i < h->held;
            level = rs_sat_add_u64(level, h->size[i]);
        } else if (sl->key && !sl->gone) {
            /* a free leaves a tombstone, so that the probe chain past it stays whole */
            sl->gone = 1;
            level = rs_sat_sub_u64(level, sl->size);
        }
        if (level > peak) {
            peak = level;
            if (peak_end) *peak_end = i + 1;
        }
    }
    return peak;
}

typedef struct owned_site {
    rs_site site;
    const char *owner;
    uint32_t stack;      /* the stack of its largest live allocation: its path's */
    uint64_t stack_size;
} owned_site;

static int by_bytes_desc(const void *a, const void *b)
{
    int64_t x = ((const owned_site *)a)->site.bytes, y = ((const owned_site *)b)->site.bytes;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The library the memory of stack `id` was taken through: the outermost frame in one of the
 * libraries that allocate for their caller (NCCL's buffers, ncclMemAlloc, cuBLAS's workspace),
 * as the report names it; "" when the program called the driver itself. */
static const char *stack_owner(const rs_snap *s, uint32_t id)
{
    static const char *const shown[][2] = {
        {"nccl", "NCCL"}, {"cublas", "cuBLAS"}, {"cudnn", "cuDNN"}, {"torch", "PyTorch"}};
    if (id == 0 || id > s->n_stacks) return "";
    const rs_snap_stack *st = &s->stacks[id - 1];
    const char *found = NULL;
    for (size_t i = 0; i < st->n_frames; i++) {
        const rs_snap_frame *f = &s->frames[st->frames[i]];
        if (f->module < 0 || (size_t)f->module >= s->n_modules) continue;
        const char *owner = rs_owner_of_module(s->modules[f->module].path);
        if (owner) found = owner;
    }
    for (size_t k = 0; found && k < sizeof shown / sizeof shown[0]; k++)
        if (!strcmp(found, shown[k][0])) return shown[k][1];
    return "";
}

void rs_outside_sites_at_peak(const rs_snap *s, const rs_site_picker *pk, int async, uint64_t *peak,
                              rs_site *sites, char (*owners)[RS_OUTSIDE_OWNER_LEN], int max,
                              int *n_sites, int64_t *peak_step, rs_site_path *paths)
{
    *peak = 0;
    *n_sites = 0;
    if (peak_step) *peak_step = -1;
    const rs_snap_history *h = &s->history;
    uint8_t alloc = async ? RS_ACT_ASYNC_ALLOC : RS_ACT_OUTSIDE_ALLOC;
    uint8_t free_ = async ? RS_ACT_ASYNC_FREE : RS_ACT_OUTSIDE_FREE;
    size_t n = 0;
    for (uint64_t i = 0; i < h->count; i++) n += h->action[i] == alloc;
    if (!n) return;
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    live_table t = {calloc(cap, sizeof(live_slot)), cap - 1};
    if (!t.slots) return;
    uint64_t end = 0;
    *peak = replay(h, h->count, alloc, free_, &t, &end);
    memset(t.slots, 0, cap * sizeof(live_slot));
    replay(h, end, alloc, free_, &t, NULL);
    for (uint64_t i = end; peak_step && i-- > 0;)
        if (h->action[i] == RS_ACT_STEP) {
            *peak_step = (int64_t)h->size[i];
            break;
        }
    owned_site *list = calloc(n, sizeof *list);
    int k = 0;
    for (size_t i = 0; list && i < cap; i++) {
        const live_slot *sl = &t.slots[i];
        if (!sl->key || sl->gone) continue;
        rs_site site;
        rs_site_pick(pk, sl->stack, &site);
        site.held = sl->held;
        site.held_step = sl->held ? (int32_t)rs_site_held_step(s) : 0;
        const char *owner = stack_owner(s, sl->stack);
        int j = 0;
        while (j < k && !(rs_site_same(&list[j].site, &site) && !strcmp(list[j].owner, owner))) j++;
        if (j == k) {
            list[k].site = site;
            list[k].site.bytes = 0;
            list[k].site.blocks = 0;
            list[k].owner = owner;
            k++;
        }
        /* sizes from a crafted file can sum past the integer range */
        list[j].site.bytes = rs_sat_add_i64(list[j].site.bytes, rs_sat_i64(sl->size));
        list[j].site.blocks++;
        if (sl->size > list[j].stack_size || !list[j].stack) {
            list[j].stack = sl->stack;
            list[j].stack_size = sl->size;
        }
    }
    if (list) {
        qsort(list, (size_t)k, sizeof *list, by_bytes_desc);
        *n_sites = k < max ? k : max;
        for (int j = 0; j < *n_sites; j++) {
            sites[j] = list[j].site;
            if (owners) snprintf(owners[j], RS_OUTSIDE_OWNER_LEN, "%s", list[j].owner);
            if (paths) {
                rs_site picked;
                rs_site_pick_path(pk, list[j].stack, &picked, &paths[j]);
            }
        }
    }
    free(list);
    free(t.slots);
}
