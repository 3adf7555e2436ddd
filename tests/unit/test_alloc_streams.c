/*
 * test_alloc_streams.c — per-stream pools and cross-stream frees on the sim device.
 *
 * A block belongs to the stream it was allocated on. A block also used on other streams
 * (record_stream) is held, when freed, until events recorded on those streams complete: the sim
 * keeps an event pending while its stream is busy, until rs_backend_sim_stream_complete.
 */
#include <string.h>

#include "alloc_fixture.h"
#include "backend_sim.h"

static void *const S0 = NULL; /* the default stream */
static void *const S1 = (void *)0x1001;
static void *const S2 = (void *)0x2002;

static int count_act(const recorder *r, rs_action act, const void *addr)
{
    int n = 0;
    for (int i = 0; i < r->n; i++)
        if (r->ev[i].act == act && r->ev[i].addr == u(addr)) n++;
    return n;
}

/* The state of the block starting at `p`, or -1. */
static int block_state(rs_alloc *a, const void *p)
{
    rs_alloc_state st;
    int state = -1;
    if (rs_alloc_state_take(a, &st) != RANKSNAP_OK) return -1;
    for (size_t i = 0; i < st.n_segments; i++)
        for (size_t k = 0; k < st.segments[i].n_blocks; k++)
            if (st.segments[i].blocks[k].addr == u(p))
                state = st.segments[i].blocks[k].state;
    rs_alloc_state_free(&st);
    return state;
}

TEST(freed_block_is_reused_on_its_own_stream)
{
    fixture f;
    fx_init(&f, GiB, 0, UINT64_MAX);
    void *p = must_alloc(f.a, 4096, S1);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    CHECK(must_alloc(f.a, 4096, S1) == p);
    CHECK_EQ_U64(stats_of(f.a).num_segment_allocs, 1);
    fx_done(&f);
}

TEST(block_freed_on_one_stream_is_not_reused_for_another)
{
    fixture f;
    fx_init(&f, GiB, 0, UINT64_MAX);
    void *p = must_alloc(f.a, 4096, S1);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    void *q = must_alloc(f.a, 4096, S2);
    CHECK(q != p);
    void *r = must_alloc(f.a, 5 * MiB, S0);
    void *big = must_alloc(f.a, 5 * MiB, S1);
    CHECK(rs_alloc_free(f.a, big) == RANKSNAP_OK);
    CHECK(must_alloc(f.a, 5 * MiB, S2) != big);
    CHECK(r != big);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.num_segment_allocs, 5);
    fx_done(&f);
}

TEST(segments_carry_the_stream_they_were_created_on)
{
    fixture f;
    fx_init(&f, GiB, 0, UINT64_MAX);
    must_alloc(f.a, 100, S2);
    rs_alloc_state st;
    CHECK(rs_alloc_state_take(f.a, &st) == RANKSNAP_OK);
    CHECK_EQ_U64(st.n_segments, 1);
    CHECK(st.n_segments == 1 && st.segments[0].stream == S2);
    rs_alloc_state_free(&st);
    fx_done(&f);
}

TEST(block_used_on_a_busy_stream_waits_for_its_event_before_reuse)
{
    fixture f;
    fx_init(&f, GiB, 0, UINT64_MAX);
    rs_backend_sim_stream_set_busy(f.b, S1, 1);
    void *p = must_alloc(f.a, 4096, S0);
    CHECK(rs_alloc_record_stream(f.a, p, S1) == RANKSNAP_OK);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    CHECK(rs_alloc_owns(f.a, p) == 0);
    CHECK_EQ_U64(rs_backend_sim_live_events(f.b), 1);

    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.allocated_bytes, 0);
    CHECK_EQ_U64(s.active_bytes, 4096);
    CHECK_EQ_U64(s.num_frees, 1);
    CHECK_EQ_U64(block_state(f.a, p), RS_BLOCK_ACTIVE_AWAITING_FREE);
    CHECK_EQ_U64(count_act(&f.rec, RS_ACT_FREE_REQUESTED, p), 1);
    CHECK_EQ_U64(count_act(&f.rec, RS_ACT_FREE_COMPLETED, p), 0);

    void *q = must_alloc(f.a, 4096, S0);
    CHECK(q != p);
    CHECK(rs_alloc_free(f.a, q) == RANKSNAP_OK);

    rs_backend_sim_stream_complete(f.b, S1);
    void *r = must_alloc(f.a, 4096, S0);
    CHECK(r == p);
    CHECK_EQ_U64(count_act(&f.rec, RS_ACT_FREE_COMPLETED, p), 1);
    CHECK_EQ_U64(rs_backend_sim_live_events(f.b), 0);
    /* free_completed of the old block comes before the alloc that reuses it. */
    int completed_at = -1, realloc_at = -1;
    for (int i = 0; i < f.rec.n; i++) {
        if (f.rec.ev[i].act == RS_ACT_FREE_COMPLETED && f.rec.ev[i].addr == u(p)) completed_at = i;
        if (f.rec.ev[i].act == RS_ACT_ALLOC && f.rec.ev[i].addr == u(p)) realloc_at = i;
    }
    CHECK(completed_at >= 0 && completed_at < realloc_at);
    fx_done(&f);
}

TEST(block_used_on_an_idle_stream_is_reusable_at_the_next_malloc)
{
    fixture f;
    fx_init(&f, GiB, 0, UINT64_MAX);
    void *p = must_alloc(f.a, 4096, S0);
    CHECK(rs_alloc_record_stream(f.a, p, S1) == RANKSNAP_OK);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    CHECK_EQ_U64(stats_of(f.a).active_bytes, 4096); /* events are polled at malloc */
    CHECK(must_alloc(f.a, 4096, S0) == p);
    CHECK_EQ_U64(rs_backend_sim_live_events(f.b), 0);
    fx_done(&f);
}

TEST(record_stream_on_the_blocks_own_stream_records_no_event)
{
    fixture f;
    fx_init(&f, GiB, 0, UINT64_MAX);
    rs_backend_sim_stream_set_busy(f.b, S1, 1);
    void *p = must_alloc(f.a, 4096, S1);
    CHECK(rs_alloc_record_stream(f.a, p, S1) == RANKSNAP_OK);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    CHECK_EQ_U64(rs_backend_sim_live_events(f.b), 0);
    CHECK_EQ_U64(stats_of(f.a).active_bytes, 0);
    CHECK(must_alloc(f.a, 4096, S1) == p);
    fx_done(&f);
}

TEST(recording_the_same_stream_twice_records_one_event)
{
    fixture f;
    fx_init(&f, GiB, 0, UINT64_MAX);
    rs_backend_sim_stream_set_busy(f.b, S1, 1);
    void *p = must_alloc(f.a, 4096, S0);
    CHECK(rs_alloc_record_stream(f.a, p, S1) == RANKSNAP_OK);
    CHECK(rs_alloc_record_stream(f.a, p, S1) == RANKSNAP_OK);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    CHECK_EQ_U64(rs_backend_sim_live_events(f.b), 1);
    fx_done(&f);
}

TEST(block_used_on_two_streams_waits_for_both)
{
    fixture f;
    fx_init(&f, GiB, 0, UINT64_MAX);
    rs_backend_sim_stream_set_busy(f.b, S1, 1);
    rs_backend_sim_stream_set_busy(f.b, S2, 1);
    void *p = must_alloc(f.a, 4096, S0);
    CHECK(rs_alloc_record_stream(f.a, p, S1) == RANKSNAP_OK);
    CHECK(rs_alloc_record_stream(f.a, p, S2) == RANKSNAP_OK);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    CHECK_EQ_U64(rs_backend_sim_live_events(f.b), 2);
    rs_backend_sim_stream_complete(f.b, S2);
    void *q = must_alloc(f.a, 4096, S0);
    CHECK(q != p);
    CHECK_EQ_U64(rs_backend_sim_live_events(f.b), 1);
    rs_backend_sim_stream_complete(f.b, S1);
    CHECK(must_alloc(f.a, 4096, S0) == p);
    CHECK_EQ_U64(rs_backend_sim_live_events(f.b), 0);
    fx_done(&f);
}

TEST(awaiting_block_does_not_coalesce_with_free_neighbours)
{
    fixture f;
    fx_init(&f, GiB, 0, UINT64_MAX);
    rs_backend_sim_stream_set_busy(f.b, S1, 1);
    void *a = must_alloc(f.a, 512 * KiB, S0);
    void *b = must_alloc(f.a, 512 * KiB, S0);
    CHECK(rs_alloc_record_stream(f.a, b, S1) == RANKSNAP_OK);
    CHECK(rs_alloc_free(f.a, b) == RANKSNAP_OK);
    CHECK(rs_alloc_free(f.a, a) == RANKSNAP_OK);
    CHECK_EQ_U64(block_state(f.a, a), RS_BLOCK_INACTIVE);
    CHECK_EQ_U64(block_state(f.a, b), RS_BLOCK_ACTIVE_AWAITING_FREE);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.active_bytes, 512 * KiB);
    CHECK_EQ_U64(s.inactive_split_bytes, 2 * MiB - 512 * KiB);
    rs_backend_sim_stream_complete(f.b, S1);
    must_alloc(f.a, 2 * MiB + 1, S2); /* any malloc polls the events */
    CHECK_EQ_U64(block_state(f.a, a), RS_BLOCK_INACTIVE);
    CHECK_EQ_U64(block_state(f.a, b), -1); /* merged into a */
    rs_alloc_state st;
    CHECK(rs_alloc_state_take(f.a, &st) == RANKSNAP_OK);
    for (size_t i = 0; i < st.n_segments; i++)
        if (st.segments[i].is_small) CHECK_EQ_U64(st.segments[i].n_blocks, 1);
    rs_alloc_state_free(&st);
    fx_done(&f);
}

TEST(empty_cache_waits_for_pending_events_and_releases_their_segments)
{
    fixture f;
    fx_init(&f, GiB, 0, UINT64_MAX);
    rs_backend_sim_stream_set_busy(f.b, S1, 1);
    void *p = must_alloc(f.a, 5 * MiB, S0);
    CHECK(rs_alloc_record_stream(f.a, p, S1) == RANKSNAP_OK);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    CHECK(rs_alloc_empty_cache(f.a) == RANKSNAP_OK);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.reserved_bytes, 0);
    CHECK_EQ_U64(s.active_bytes, 0);
    CHECK_EQ_U64(s.num_sync_all_streams, 1);
    CHECK_EQ_U64(rs_backend_sim_live_events(f.b), 0);
    CHECK_EQ_U64(rs_backend_sim_used_bytes(f.b), 0);
    CHECK_EQ_U64(count_act(&f.rec, RS_ACT_FREE_COMPLETED, p), 1);
    fx_done(&f);
}

TEST(failed_reservation_waits_for_events_but_like_pytorch_does_not_search_again)
{
    fixture f;
    fx_init(&f, 20 * MiB, 0, UINT64_MAX);
    rs_backend_sim_stream_set_busy(f.b, S1, 1);
    void *keep = must_alloc(f.a, 4 * MiB, S0); /* splits a 20 MiB segment */
    void *p = must_alloc(f.a, 12 * MiB, S0);
    CHECK(rs_alloc_record_stream(f.a, p, S1) == RANKSNAP_OK);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    /* No cached block until the event completes, no room for a new segment: PyTorch waits for
     * the events (the block goes back to its split segment, which nothing can release) and asks
     * for a new segment once more, without looking at the pool again: out of memory. */
    void *q = (void *)1;
    CHECK(rs_alloc_malloc(f.a, 12 * MiB, S0, &q) == RANKSNAP_ERR_OUT_OF_MEMORY);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.num_sync_all_streams, 1);
    CHECK_EQ_U64(s.num_alloc_retries, 1);
    CHECK_EQ_U64(s.num_segment_allocs, 1);
    CHECK_EQ_U64(s.num_ooms, 1);
    CHECK_EQ_U64(rs_backend_sim_live_events(f.b), 0);
    /* The awaited block is cached now: the next request takes it. */
    q = must_alloc(f.a, 12 * MiB, S0);
    CHECK(q == p);
    CHECK(keep != NULL);
    fx_done(&f);
}

TEST(failed_reservation_waits_for_events_then_releases_the_freed_segment)
{
    fixture f;
    fx_init(&f, 32 * MiB, 0, UINT64_MAX);
    rs_backend_sim_stream_set_busy(f.b, S1, 1);
    void *p = must_alloc(f.a, 20 * MiB, S0);
    CHECK(rs_alloc_record_stream(f.a, p, S1) == RANKSNAP_OK);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    void *q = must_alloc(f.a, 30 * MiB, S0);
    CHECK(q != NULL);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.num_alloc_retries, 1);
    CHECK_EQ_U64(s.num_sync_all_streams, 1);
    CHECK_EQ_U64(s.num_segment_frees, 1);
    CHECK_EQ_U64(s.reserved_bytes, 30 * MiB);
    CHECK_EQ_U64(rs_backend_sim_live_events(f.b), 0);
    fx_done(&f);
}

TEST(destroy_waits_for_pending_events_and_leaks_none)
{
    fixture f;
    fx_init(&f, GiB, 0, UINT64_MAX);
    rs_backend_sim_stream_set_busy(f.b, S1, 1);
    for (int i = 0; i < 10; i++) {
        void *p = must_alloc(f.a, 4096 * (size_t)(i + 1), S0);
        CHECK(rs_alloc_record_stream(f.a, p, S1) == RANKSNAP_OK);
        CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    }
    CHECK_EQ_U64(rs_backend_sim_live_events(f.b), 10);
    fx_done(&f);
}

int main(void)
{
    RUN(freed_block_is_reused_on_its_own_stream);
    RUN(block_freed_on_one_stream_is_not_reused_for_another);
    RUN(segments_carry_the_stream_they_were_created_on);
    RUN(block_used_on_a_busy_stream_waits_for_its_event_before_reuse);
    RUN(block_used_on_an_idle_stream_is_reusable_at_the_next_malloc);
    RUN(record_stream_on_the_blocks_own_stream_records_no_event);
    RUN(recording_the_same_stream_twice_records_one_event);
    RUN(block_used_on_two_streams_waits_for_both);
    RUN(awaiting_block_does_not_coalesce_with_free_neighbours);
    RUN(empty_cache_waits_for_pending_events_and_releases_their_segments);
    RUN(failed_reservation_waits_for_events_but_like_pytorch_does_not_search_again);
    RUN(failed_reservation_waits_for_events_then_releases_the_freed_segment);
    RUN(destroy_waits_for_pending_events_and_leaks_none);
    return check_summary();
}
