/*
 * test_steps_infer.c — the training steps inferred from a history (collector/decode/
 * steps_infer.c) and the step events written into its columns (step_events.c), on histories
 * built here, where the answer is known. test_read_pickle.c infers them on PyTorch snapshots.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "snapshot.h"
#include "step_events.h"
#include "steps_infer.h"

static size_t count_action(const rs_snap *s, unsigned action)
{
    size_t n = 0;
    for (uint64_t i = 0; i < s->history.count; i++) n += s->history.action[i] == action;
    return n;
}

typedef struct hist {
    rs_snap *s;
    size_t cap;
    uint64_t next_addr;
} hist;

static void ev(hist *h, unsigned action, uint64_t addr, uint64_t size, uint32_t stack)
{
    rs_snap_history *y = &h->s->history;
    if (y->count == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 256;
        y->time_us = realloc(y->time_us, h->cap * sizeof *y->time_us);
        y->action = realloc(y->action, h->cap);
        y->addr = realloc(y->addr, h->cap * sizeof *y->addr);
        y->size = realloc(y->size, h->cap * sizeof *y->size);
        y->stream = realloc(y->stream, h->cap * sizeof *y->stream);
        y->stack = realloc(y->stack, h->cap * sizeof *y->stack);
        if (!y->time_us || !y->action || !y->addr || !y->size || !y->stream || !y->stack) abort();
    }
    uint64_t i = y->count++;
    y->time_us[i] = 1000 + i;
    y->action[i] = (uint8_t)action;
    y->addr[i] = addr;
    y->size[i] = size;
    y->stream[i] = 0;
    y->stack[i] = stack;
}

static uint64_t alloc(hist *h, uint64_t size, uint32_t stack)
{
    uint64_t a = h->next_addr += 1 << 20;
    ev(h, RS_ACT_ALLOC, a, size, stack);
    return a;
}

static void hist_init(hist *h)
{
    memset(h, 0, sizeof *h);
    h->s = calloc(1, sizeof *h->s);
    h->s->streams = calloc(1, sizeof *h->s->streams);
    h->s->n_streams = 1;
    h->s->world_size = 1;
    h->next_addr = 1 << 30;
}

/* A history of `count` events made by ev(), its columns with room for `room` entries. */
static rs_snap *history_of(uint64_t count, uint64_t room)
{
    hist h;
    hist_init(&h);
    for (uint64_t i = 0; i < count; i++) ev(&h, i % 3 ? RS_ACT_ALLOC : RS_ACT_FREE_COMPLETED, 4096 * i, 512 * (i + 1), (uint32_t)(i % 5));
    rs_snap_history *y = &h.s->history;
    if (room > h.cap) {
        y->time_us = realloc(y->time_us, room * sizeof *y->time_us);
        y->action = realloc(y->action, room);
        y->addr = realloc(y->addr, room * sizeof *y->addr);
        y->size = realloc(y->size, room * sizeof *y->size);
        y->stream = realloc(y->stream, room * sizeof *y->stream);
        y->stack = realloc(y->stack, room * sizeof *y->stack);
        if (!y->time_us || !y->action || !y->addr || !y->size || !y->stream || !y->stack) abort();
    }
    y->room = room;
    return h.s;
}

/* Step events put in where the decoder left room are where they go in new columns: the same
 * history, for events before the first entry, between entries (several before one), after the
 * last, and none; with too little room, new columns. */
TEST(step_events_in_the_columns_room_are_those_of_new_columns)
{
    static const uint64_t befores[][6] = {
        {0, 0, 3, 7, 7, 20}, {20, 20, 20, 20, 20, 20}, {0, 1, 2, 3, 4, 5}, {5, 9, 9, 9, 13, 19},
    };
    for (size_t c = 0; c < sizeof befores / sizeof befores[0]; c++) {
        for (size_t n = 0; n <= 6; n++) {
            rs_step_event e[6];
            for (size_t k = 0; k < n; k++)
                e[k] = (rs_step_event){befores[c][k], (int64_t)(100 + k), 50000 + k, 0};
            rs_snap *copied = history_of(20, 0), *in_place = history_of(20, 20 + n),
                    *short_room = history_of(20, 20 + n - (n > 0));
            CHECK(rs_step_events_insert(copied, e, n) == RANKSNAP_OK);
            CHECK(rs_step_events_insert(in_place, e, n) == RANKSNAP_OK);
            CHECK(rs_step_events_insert(short_room, e, n) == RANKSNAP_OK);
            const rs_snap_history *a = &copied->history;
            for (int w = 0; w < 2; w++) {
                const rs_snap_history *b = w ? &short_room->history : &in_place->history;
                CHECK_EQ_U64(a->count, 20 + n);
                CHECK_EQ_U64(b->count, a->count);
                int same = b->count == a->count && b->capacity == a->capacity;
                for (uint64_t i = 0; same && i < a->count; i++)
                    same = a->time_us[i] == b->time_us[i] && a->action[i] == b->action[i] &&
                           a->addr[i] == b->addr[i] && a->size[i] == b->size[i] &&
                           a->stream[i] == b->stream[i] && a->stack[i] == b->stack[i];
                if (!same) fprintf(stderr, "case %zu, %zu events: the histories differ\n", c, n);
                CHECK(same);
            }
            /* the step events themselves, in order, before the entries they were given */
            uint64_t steps = 0, seen = 0;
            for (uint64_t i = 0; i < a->count; i++) {
                if (a->action[i] != RS_ACT_STEP) {
                    seen++;
                    continue;
                }
                CHECK_EQ_U64(a->size[i], 100 + steps);
                CHECK_EQ_U64(seen, befores[c][steps]);
                steps++;
            }
            CHECK_EQ_U64(steps, n);
            rs_snap_free(copied);
            rs_snap_free(in_place);
            rs_snap_free(short_room);
        }
    }
}

/* A training loop: `prelude` parameter allocations, then per iteration an input, `layers` pairs
 * of activations from the same two stacks, a backward pass that frees them and allocates
 * gradients, and in iteration 0 only `extra` optimizer-state allocations; `leak` keeps one
 * allocation per iteration alive; `cut` stops the last iteration after that many layers. */
static void training(hist *h, int prelude, int iterations, int layers, int extra, int leak,
                     int cut, uint64_t *starts)
{
    for (int i = 0; i < prelude; i++) alloc(h, 4096 * (uint64_t)(i + 1), 1);
    uint64_t grads[64];
    int n_grads = 0;
    for (int it = 0; it < iterations; it++) {
        for (int g = 0; g < n_grads; g++) ev(h, RS_ACT_FREE_REQUESTED, grads[g], 8192, 6);
        n_grads = 0;
        if (starts) starts[it] = h->s->history.count;
        uint64_t x = alloc(h, 1 << 20, 2), acts[128];
        int n = 0;
        int last = it == iterations - 1 && cut >= 0;
        for (int l = 0; l < layers && !(last && l == cut); l++) {
            acts[n++] = alloc(h, 3 << 20, 3);
            acts[n++] = alloc(h, 1 << 20, 4);
        }
        if (last && cut >= 0) return;
        if (leak) alloc(h, 1 << 16, 5);
        for (int l = 0; l < layers; l++) {
            grads[n_grads++] = alloc(h, 8192, 6);
            ev(h, RS_ACT_FREE_REQUESTED, acts[--n], 1 << 20, 4);
            ev(h, RS_ACT_FREE_REQUESTED, acts[--n], 3 << 20, 3);
        }
        ev(h, RS_ACT_FREE_REQUESTED, x, 1 << 20, 2);
        if (it == 0)
            for (int e = 0; e < extra; e++) alloc(h, 16384, 7);
        uint64_t t = alloc(h, 4096, 8);
        ev(h, RS_ACT_FREE_REQUESTED, t, 4096, 8);
    }
}

/* The step events' positions: each must sit where an iteration starts. */
static int steps_at(const rs_snap *s, const uint64_t *starts, int n)
{
    int k = 0, good = 1;
    for (uint64_t i = 0; i < s->history.count; i++) {
        if (s->history.action[i] != RS_ACT_STEP) continue;
        /* after insertion, the k-th iteration start moved by the k step events before it */
        if (k >= n || s->history.size[i] != (uint64_t)k || i != starts[k] + (uint64_t)k) good = 0;
        k++;
    }
    return good && k == n;
}

TEST(step_inference_finds_every_iteration_of_a_periodic_trace)
{
    static const struct {
        int prelude, iterations, layers, extra, leak, cut;
    } cases[] = {
        {10, 6, 4, 0, 0, -1},  /* regular */
        {10, 6, 4, 16, 0, -1}, /* a first iteration with optimizer state, 16 more allocations */
        {0, 2, 3, 0, 0, -1},   /* just two iterations */
        {5, 8, 6, 12, 1, -1},  /* a leak: the level grows, the pattern does not change */
        {5, 5, 6, 12, 0, 3},   /* the last iteration stops halfway (an OOM) */
        {3, 200, 12, 30, 0, -1}, /* long */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        hist h;
        hist_init(&h);
        uint64_t starts[256];
        training(&h, cases[c].prelude, cases[c].iterations, cases[c].layers, cases[c].extra,
                 cases[c].leak, cases[c].cut, starts);
        rs_steps_infer_result f;
        CHECK(rs_steps_infer(h.s, &f) == RANKSNAP_OK);
        if (!f.found) fprintf(stderr, "case %zu: %s\n", c, f.why_not);
        CHECK(f.found && f.n_steps == (uint64_t)cases[c].iterations);
        CHECK(steps_at(h.s, starts, cases[c].iterations));
        CHECK(h.s->time.n_ranges == 1 && h.s->time.ranges[0].begin == 0 &&
              h.s->time.ranges[0].end == cases[c].iterations);
        CHECK(h.s->time.current_step == cases[c].iterations - 1);
        rs_snap_free(h.s);
    }
}

TEST(step_inference_leaves_out_what_it_cannot_tell)
{
    /* One iteration: nothing repeats. */
    hist h;
    hist_init(&h);
    training(&h, 10, 1, 4, 0, 0, -1, NULL);
    uint64_t before = h.s->history.count;
    rs_steps_infer_result f;
    CHECK(rs_steps_infer(h.s, &f) == RANKSNAP_OK);
    CHECK(!f.found && f.why_not[0] && h.s->history.count == before);
    rs_snap_free(h.s);

    /* Sizes and stacks that follow no pattern. */
    hist_init(&h);
    uint64_t x = 12345;
    for (int i = 0; i < 2000; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        alloc(&h, (x >> 33) % 100000, (uint32_t)((x >> 20) % 50));
    }
    CHECK(rs_steps_infer(h.s, &f) == RANKSNAP_OK);
    CHECK(!f.found && strstr(f.why_not, "repeats") != NULL);
    CHECK_EQ_U64(count_action(h.s, RS_ACT_STEP), 0);
    rs_snap_free(h.s);

    /* A history with step events of its own keeps them. */
    hist_init(&h);
    training(&h, 2, 4, 2, 0, 0, -1, NULL);
    ev(&h, RS_ACT_STEP, 0, 9, 0);
    CHECK(rs_steps_infer(h.s, &f) == RANKSNAP_OK);
    CHECK(!f.found && count_action(h.s, RS_ACT_STEP) == 1);
    rs_snap_free(h.s);

    /* Nothing at all. */
    hist_init(&h);
    CHECK(rs_steps_infer(h.s, &f) == RANKSNAP_OK && !f.found);
    rs_snap_free(h.s);

    /* The layers of one pass repeat, but each keeps its activations: no steps. */
    hist_init(&h);
    training(&h, 10, 1, 40, 0, 0, 30, NULL);
    CHECK(rs_steps_infer(h.s, &f) == RANKSNAP_OK);
    CHECK(!f.found && strstr(f.why_not, "layers of one pass") != NULL);
    CHECK_EQ_U64(count_action(h.s, RS_ACT_STEP), 0);
    rs_snap_free(h.s);
}

TEST(an_oom_in_the_first_pass_is_in_step_0_not_in_a_layer_counted_as_a_step)
{
    /* the forward pass of the first iteration runs out of memory at its 30th of 40 layers */
    hist h;
    hist_init(&h);
    training(&h, 10, 1, 40, 0, 0, 30, NULL);
    ev(&h, RS_ACT_OOM, 1 << 20, (uint64_t)1 << 34, 3);
    rs_steps_infer_result f;
    CHECK(rs_steps_infer(h.s, &f) == RANKSNAP_OK);
    CHECK(f.found && f.n_steps == 1);
    CHECK_EQ_U64(count_action(h.s, RS_ACT_STEP), 1);
    /* the OOM comes after the one step marker, which comes after the parameters */
    uint64_t step_at = 0, oom_at = 0;
    for (uint64_t i = 0; i < h.s->history.count; i++) {
        if (h.s->history.action[i] == RS_ACT_STEP) step_at = i;
        if (h.s->history.action[i] == RS_ACT_OOM) oom_at = i;
    }
    CHECK(step_at >= 10 && step_at < oom_at);
    rs_snap_free(h.s);
}

int main(void)
{
    RUN(step_events_in_the_columns_room_are_those_of_new_columns);
    RUN(step_inference_finds_every_iteration_of_a_periodic_trace);
    RUN(step_inference_leaves_out_what_it_cannot_tell);
    RUN(an_oom_in_the_first_pass_is_in_step_0_not_in_a_layer_counted_as_a_step);
    return check_summary();
}
