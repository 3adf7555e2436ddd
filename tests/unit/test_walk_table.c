/*
 * test_walk_table.c — the history walk's table (collector/model/walk.c) holds one slot per
 * distinct address, not per event: a long history over a few reused addresses needs a small
 * table, and the levels and live blocks come out as the events say.
 */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "summary.h"
#include "synth_snapshot.h"
#include "walk.h"
#include "walk_records.h"

/* `n` allocation/free pairs of 512 bytes cycling over `distinct` addresses. */
static rs_snap *cycling(uint64_t n, uint64_t distinct)
{
    synth y;
    synth_init(&y, 0, 1, "walk");
    for (uint64_t i = 0; i < n; i++) {
        uint64_t addr = 0x7f0000000000ull + (i % distinct) * 4096;
        sy_event(&y, RS_ACT_ALLOC, addr, 512, 0);
        sy_event(&y, RS_ACT_FREE_REQUESTED, addr, 512, 0);
    }
    return synth_finish(&y);
}

TEST(walk_table_holds_one_slot_per_distinct_address)
{
    rs_snap *s = cycling(50000, 7);
    rs_walk w;
    CHECK(rs_walk_init(&w, s) == RANKSNAP_OK);
    printf("  100000 events over 7 addresses: %zu slots\n", rs_walk_capacity(&w));
    CHECK_EQ_U64(rs_walk_capacity(&w), 7);
    rs_walk_free(&w);
    rs_snap_free(s);

    s = cycling(20000, 20000);
    CHECK(rs_walk_init(&w, s) == RANKSNAP_OK);
    CHECK_EQ_U64(rs_walk_capacity(&w), 20000);
    rs_walk_free(&w);
    rs_snap_free(s);
}

TEST(walk_follows_each_event_to_its_address)
{
    rs_snap *s = cycling(3000, 3);
    rs_walk w;
    CHECK(rs_walk_init(&w, s) == RANKSNAP_OK);
    CHECK_EQ_U64(w.peak_allocated, 512);
    for (int64_t moment = 0; moment < 12; moment++) {
        rs_walk_to(&w, moment);
        size_t it = 0, live = 0;
        const rs_walk_block *b;
        while ((b = rs_walk_next_live(&w, &it)) != NULL) {
            live++;
            /* the one live block is the one event `moment` allocated */
            CHECK_EQ_U64(b->addr, s->history.addr[moment]);
        }
        CHECK_EQ_U64(live, moment % 2 == 0 ? 1 : 0);
        CHECK_EQ_U64(w.allocated, moment % 2 == 0 ? 512 : 0);
    }
    rs_walk_to(&w, RS_WALK_END);
    CHECK_EQ_U64(w.allocated, 0);
    rs_walk_free(&w);
    rs_snap_free(s);
}

/* A training loop's history (steps, a leak, an OOM): the levels never stop at 0 on the way, and
 * what the first pass recorded is what a walk of every event finds. */
TEST(walk_first_pass_records_are_what_a_walk_finds)
{
    train_cfg c = train_default();
    c.leak_from = 2;
    c.leak_bytes = 4 * SY_MIB;
    c.oom_step = 5;
    c.oom_request = 512 * SY_MIB;
    rs_snap *s = synth_train(0, 1, "walk", &c);
    int exact = 0;
    const char *bad = walk_records_differ(s, &exact);
    if (bad) fprintf(stderr, "  differs: %s\n", bad);
    CHECK(exact);
    CHECK(bad == NULL);
    rs_walk w;
    CHECK(rs_walk_init(&w, s) == RANKSNAP_OK);
    CHECK(w.n_runs >= 5 && w.last_oom >= 0);
    rs_walk_free(&w);
    rs_snap_free(s);
}

/* A history whose levels stop at 0 on the way (it frees a block alive before it, of an end state
 * that holds less than its changes add up to): not exact, and the summary's step series and
 * reserved level at the peak are those of the walk (3 MiB in step 1, not the 2 MiB that the
 * start plus the first pass's relative level would say). */
TEST(walk_levels_that_stop_at_zero_are_walked_not_computed)
{
    synth y;
    synth_init(&y, 0, 1, "walk");
    synth_step(&y, 0);
    sy_event(&y, RS_ACT_FREE_REQUESTED, 0x7f0000100000ull, SY_MIB, 0);
    synth_step(&y, 1);
    sy_event(&y, RS_ACT_SEGMENT_ALLOC, 0x7f0000200000ull, 4 * SY_MIB, 0);
    sy_event(&y, RS_ACT_ALLOC, 0x7f0000200000ull, 3 * SY_MIB, 0);
    rs_snap *s = synth_finish(&y); /* nothing alive at the end: allocated 0 */
    rs_walk w;
    CHECK(rs_walk_init(&w, s) == RANKSNAP_OK);
    CHECK(!rs_walk_levels_exact(&w));
    rs_walk_free(&w);
    rs_summary sum;
    rs_summary_of(s, &sum);
    CHECK(sum.n_steps == 2);
    CHECK_EQ_U64(sum.step_peak[1], 3 * SY_MIB);
    CHECK_EQ_U64(sum.step_peak[0], 0);
    CHECK_EQ_U64(sum.reserved_at_peak, 4 * SY_MIB);
    rs_snap_free(s);
}

int main(void)
{
    RUN(walk_table_holds_one_slot_per_distinct_address);
    RUN(walk_follows_each_event_to_its_address);
    RUN(walk_first_pass_records_are_what_a_walk_finds);
    RUN(walk_levels_that_stop_at_zero_are_walked_not_computed);
    return check_summary();
}
