/*
 * test_alloc_policy.c — the caching allocator's policy on the sim device: rounding, pools,
 * segment sizes, splitting, max_split_size, best fit, coalescing, the retry after freeing the
 * cache, the memory limit, OOM reports, fault injection, bad frees, stats, observer events and
 * the snapshot state.
 *
 * Every test builds its own sim device and allocator (alloc_fixture.h), and ends by checking that destroying the
 * allocator gave every byte and every event back to the device.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc_fixture.h"
#include "backend_sim.h"
#include "clock.h"
#include "mutex.h"

/* ---- rounding, pools, segment sizes ---------------------------------------------------------- */

TEST(rounds_requests_up_to_512_byte_multiples)
{
    CHECK_EQ_U64(rs_alloc_round_size(1), 512);
    CHECK_EQ_U64(rs_alloc_round_size(511), 512);
    CHECK_EQ_U64(rs_alloc_round_size(512), 512);
    CHECK_EQ_U64(rs_alloc_round_size(513), 1024);
    CHECK_EQ_U64(rs_alloc_round_size(1000), 1024);
    CHECK_EQ_U64(rs_alloc_round_size(MiB + 1), MiB + 512);
}

TEST(segment_size_is_2mib_small_20mib_mid_and_rounded_to_2mib_large)
{
    CHECK_EQ_U64(rs_alloc_segment_size(512), 2 * MiB);
    CHECK_EQ_U64(rs_alloc_segment_size(MiB), 2 * MiB);
    CHECK_EQ_U64(rs_alloc_segment_size(MiB + 512), 20 * MiB);
    CHECK_EQ_U64(rs_alloc_segment_size(5 * MiB), 20 * MiB);
    CHECK_EQ_U64(rs_alloc_segment_size(10 * MiB - 512), 20 * MiB);
    CHECK_EQ_U64(rs_alloc_segment_size(10 * MiB), 10 * MiB);
    CHECK_EQ_U64(rs_alloc_segment_size(12 * MiB), 12 * MiB);
    CHECK_EQ_U64(rs_alloc_segment_size(11 * MiB + 512), 12 * MiB);
}

TEST(one_mib_request_uses_the_small_pool_and_one_byte_more_the_large)
{
    fixture f;
    fx_init(&f, GiB, 0, 0);
    must_alloc(f.a, MiB, NULL);
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 2 * MiB);
    must_alloc(f.a, MiB + 1, NULL);
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 22 * MiB);
    rs_alloc_state s;
    CHECK(rs_alloc_state_take(f.a, &s) == RANKSNAP_OK);
    CHECK_EQ_U64(s.n_segments, 2);
    int small = 0, large = 0;
    for (size_t i = 0; i < s.n_segments; i++) {
        if (s.segments[i].is_small && s.segments[i].total_size == 2 * MiB) small++;
        if (!s.segments[i].is_small && s.segments[i].total_size == 20 * MiB) large++;
    }
    CHECK(small == 1 && large == 1);
    rs_alloc_state_free(&s);
    fx_done(&f);
}

TEST(new_segments_have_the_policy_sizes)
{
    const struct {
        size_t request, segment;
    } cases[] = {{1000, 2 * MiB},      {5 * MiB, 20 * MiB},        {12 * MiB, 12 * MiB},
                 {11 * MiB + 1, 12 * MiB}, {10 * MiB, 10 * MiB}, {100 * MiB + 1, 102 * MiB}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fixture f;
        fx_init(&f, GiB, 0, 0);
        must_alloc(f.a, cases[i].request, NULL);
        CHECK_EQ_U64(stats_of(f.a).reserved_bytes, cases[i].segment);
        CHECK_EQ_U64(rs_backend_sim_used_bytes(f.b), cases[i].segment);
        fx_done(&f);
    }
}

TEST(size_zero_gives_null_and_ok_without_touching_stats)
{
    fixture f;
    fx_init(&f, GiB, 0, 0);
    void *p = (void *)1;
    CHECK(rs_alloc_malloc(f.a, 0, NULL, &p) == RANKSNAP_OK);
    CHECK(p == NULL);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.num_allocs, 0);
    CHECK_EQ_U64(s.reserved_bytes, 0);
    CHECK(rs_alloc_free(f.a, NULL) == RANKSNAP_OK);
    CHECK_EQ_U64(stats_of(f.a).num_frees, 0);
    fx_done(&f);
}

/* ---- splitting ------------------------------------------------------------------------------- */

TEST(small_blocks_split_down_to_the_last_512_bytes)
{
    fixture f;
    fx_init(&f, GiB, 0, 0);
    void *a = must_alloc(f.a, MiB, NULL);
    void *b = must_alloc(f.a, MiB - 512, NULL);
    void *c = must_alloc(f.a, 1, NULL);
    CHECK_EQ_U64(u(b), u(a) + MiB);
    CHECK_EQ_U64(u(c), u(a) + 2 * MiB - 512);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.num_segment_allocs, 1);
    CHECK_EQ_U64(s.allocated_bytes, 2 * MiB);
    CHECK_EQ_U64(s.inactive_split_bytes, 0);
    fx_done(&f);
}

TEST(large_block_is_not_split_when_only_1mib_would_remain)
{
    fixture f;
    fx_init(&f, GiB, 0, 0);
    void *p = must_alloc(f.a, 19 * MiB, NULL);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.reserved_bytes, 20 * MiB);
    CHECK_EQ_U64(s.allocated_bytes, 20 * MiB); /* the whole block, as PyTorch counts it */
    CHECK_EQ_U64(s.requested_bytes, 19 * MiB);
    CHECK_EQ_U64(s.inactive_split_bytes, 0);
    rs_alloc_state st;
    CHECK(rs_alloc_state_take(f.a, &st) == RANKSNAP_OK);
    CHECK_EQ_U64(st.n_segments, 1);
    CHECK_EQ_U64(st.segments[0].n_blocks, 1);
    CHECK_EQ_U64(st.segments[0].blocks[0].size, 20 * MiB);
    rs_alloc_state_free(&st);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    fx_done(&f);
}

TEST(large_block_is_split_when_more_than_1mib_remains)
{
    fixture f;
    fx_init(&f, GiB, 0, 0);
    void *p = must_alloc(f.a, 18 * MiB + 512 * KiB, NULL);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.allocated_bytes, 18 * MiB + 512 * KiB);
    CHECK_EQ_U64(s.inactive_split_bytes, MiB + 512 * KiB);
    /* The remainder serves the next request of its size without a new segment. */
    void *q = must_alloc(f.a, MiB + 512 * KiB, NULL);
    CHECK_EQ_U64(u(q), u(p) + 18 * MiB + 512 * KiB);
    CHECK_EQ_U64(stats_of(f.a).num_segment_allocs, 1);
    fx_done(&f);
}

TEST(request_below_max_split_size_never_takes_an_oversized_block)
{
    fixture f;
    fx_init(&f, GiB, 0, 32 * MiB);
    void *big = must_alloc(f.a, 40 * MiB, NULL);
    CHECK(rs_alloc_free(f.a, big) == RANKSNAP_OK);
    void *p = must_alloc(f.a, 5 * MiB, NULL);
    CHECK(p != big);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.num_segment_allocs, 2);
    CHECK_EQ_U64(s.reserved_bytes, 60 * MiB);
    fx_done(&f);
}

TEST(oversized_request_takes_a_block_wasting_less_than_20mib_unsplit)
{
    fixture f;
    fx_init(&f, GiB, 0, 32 * MiB);
    void *big = must_alloc(f.a, 40 * MiB, NULL);
    CHECK(rs_alloc_free(f.a, big) == RANKSNAP_OK);
    void *p = must_alloc(f.a, 34 * MiB, NULL);
    CHECK(p == big);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.allocated_bytes, 40 * MiB); /* blocks >= max_split_size are never split */
    CHECK_EQ_U64(s.num_segment_allocs, 1);
    fx_done(&f);
}

TEST(oversized_request_skips_a_block_20mib_or_more_too_big)
{
    fixture f;
    fx_init(&f, GiB, 0, 32 * MiB);
    void *big = must_alloc(f.a, 60 * MiB, NULL);
    CHECK(rs_alloc_free(f.a, big) == RANKSNAP_OK);
    void *p = must_alloc(f.a, 40 * MiB, NULL);
    CHECK(p != big);
    CHECK_EQ_U64(stats_of(f.a).num_segment_allocs, 2);
    fx_done(&f);
}

TEST(without_max_split_size_a_large_cached_block_is_split_for_a_smaller_request)
{
    fixture f;
    fx_init(&f, GiB, 0, UINT64_MAX);
    void *big = must_alloc(f.a, 60 * MiB, NULL);
    CHECK(rs_alloc_free(f.a, big) == RANKSNAP_OK);
    void *p = must_alloc(f.a, 40 * MiB, NULL);
    CHECK(p == big);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.allocated_bytes, 40 * MiB);
    CHECK_EQ_U64(s.inactive_split_bytes, 20 * MiB);
    CHECK_EQ_U64(s.num_segment_allocs, 1);
    fx_done(&f);
}

/* ---- best fit and coalescing ----------------------------------------------------------------- */

TEST(best_fit_chooses_the_smallest_fitting_block_even_at_a_higher_address)
{
    fixture f;
    fx_init(&f, GiB, 0, 0);
    void *big = must_alloc(f.a, 14 * MiB, NULL);
    void *small = must_alloc(f.a, 12 * MiB, NULL);
    CHECK(u(small) > u(big));
    CHECK(rs_alloc_free(f.a, big) == RANKSNAP_OK);
    CHECK(rs_alloc_free(f.a, small) == RANKSNAP_OK);
    void *p = must_alloc(f.a, 11 * MiB, NULL);
    CHECK(p == small);
    void *q = must_alloc(f.a, 11 * MiB, NULL);
    CHECK(q == big);
    CHECK_EQ_U64(stats_of(f.a).num_segment_allocs, 2);
    fx_done(&f);
}

TEST(best_fit_takes_the_lowest_address_among_equal_sizes)
{
    fixture f;
    fx_init(&f, GiB, 0, 0);
    void *lo = must_alloc(f.a, 12 * MiB, NULL);
    void *hi = must_alloc(f.a, 12 * MiB, NULL);
    CHECK(u(lo) < u(hi));
    CHECK(rs_alloc_free(f.a, hi) == RANKSNAP_OK);
    CHECK(rs_alloc_free(f.a, lo) == RANKSNAP_OK);
    CHECK(must_alloc(f.a, 12 * MiB, NULL) == lo);
    fx_done(&f);
}

TEST(freed_neighbours_coalesce_into_one_releasable_block)
{
    fixture f;
    fx_init(&f, GiB, 0, 0);
    void *a = must_alloc(f.a, 512 * KiB, NULL);
    void *b = must_alloc(f.a, 512 * KiB, NULL);
    void *c = must_alloc(f.a, 512 * KiB, NULL);
    CHECK_EQ_U64(stats_of(f.a).inactive_split_bytes, 512 * KiB);
    CHECK(rs_alloc_free(f.a, b) == RANKSNAP_OK);
    CHECK_EQ_U64(stats_of(f.a).inactive_split_bytes, MiB);
    /* Still split: an allocated block holds the segment, so empty_cache keeps it. */
    CHECK(rs_alloc_empty_cache(f.a) == RANKSNAP_OK);
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 2 * MiB);
    CHECK(rs_alloc_free(f.a, a) == RANKSNAP_OK);
    CHECK(rs_alloc_free(f.a, c) == RANKSNAP_OK);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.inactive_split_bytes, 0);
    CHECK_EQ_U64(s.active_bytes, 0);
    rs_alloc_state st;
    CHECK(rs_alloc_state_take(f.a, &st) == RANKSNAP_OK);
    CHECK_EQ_U64(st.n_segments, 1);
    CHECK_EQ_U64(st.segments[0].n_blocks, 1);
    CHECK_EQ_U64(st.segments[0].blocks[0].size, 2 * MiB);
    CHECK_EQ_U64(st.segments[0].blocks[0].state, RS_BLOCK_INACTIVE);
    rs_alloc_state_free(&st);
    CHECK(rs_alloc_empty_cache(f.a) == RANKSNAP_OK);
    s = stats_of(f.a);
    CHECK_EQ_U64(s.reserved_bytes, 0);
    CHECK_EQ_U64(s.num_segment_frees, 1);
    CHECK_EQ_U64(rs_backend_sim_used_bytes(f.b), 0);
    fx_done(&f);
}

TEST(free_blocks_of_adjacent_segments_do_not_coalesce)
{
    /* Two small segments whose address ranges touch (the sim hands out consecutive 2 MiB). */
    fixture f;
    fx_init(&f, GiB, 0, 0);
    void *p = must_alloc(f.a, MiB, NULL);
    void *q = must_alloc(f.a, MiB, NULL);
    void *r = must_alloc(f.a, MiB, NULL);
    CHECK_EQ_U64(stats_of(f.a).num_segment_allocs, 2);
    CHECK_EQ_U64(u(r), u(p) + 2 * MiB);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    CHECK(rs_alloc_free(f.a, q) == RANKSNAP_OK);
    CHECK(rs_alloc_free(f.a, r) == RANKSNAP_OK);
    rs_alloc_state st;
    CHECK(rs_alloc_state_take(f.a, &st) == RANKSNAP_OK);
    CHECK_EQ_U64(st.n_segments, 2);
    for (size_t i = 0; i < st.n_segments; i++) CHECK_EQ_U64(st.segments[i].n_blocks, 1);
    rs_alloc_state_free(&st);
    CHECK(rs_alloc_empty_cache(f.a) == RANKSNAP_OK);
    CHECK_EQ_U64(stats_of(f.a).num_segment_frees, 2);
    fx_done(&f);
}

/* ---- retry, memory limit, OOM ---------------------------------------------------------------- */

TEST(failed_reservation_frees_the_cache_and_retries_once)
{
    fixture f;
    fx_init(&f, 64 * MiB, 0, 0);
    void *p = must_alloc(f.a, 40 * MiB, NULL);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    f.rec.n = 0;
    void *q = must_alloc(f.a, 50 * MiB, NULL);
    CHECK(q != NULL);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.num_alloc_retries, 1);
    CHECK_EQ_U64(s.num_sync_all_streams, 1);
    CHECK_EQ_U64(s.num_segment_frees, 1);
    CHECK_EQ_U64(s.num_ooms, 0);
    CHECK_EQ_U64(s.reserved_bytes, 50 * MiB);
    CHECK_EQ_U64(s.reserved_bytes_peak, 50 * MiB);
    /* The cached segment went back before the new one was taken. */
    CHECK(f.rec.n == 3 && f.rec.ev[0].act == RS_ACT_SEGMENT_FREE && f.rec.ev[0].addr == u(p) &&
          f.rec.ev[1].act == RS_ACT_SEGMENT_ALLOC && f.rec.ev[2].act == RS_ACT_ALLOC);
    fx_done(&f);
}

TEST(cached_segment_of_another_stream_is_freed_for_a_retry)
{
    fixture f;
    fx_init(&f, 32 * MiB, 0, 0);
    void *s1 = (void *)0x1000, *s2 = (void *)0x2000;
    void *p = must_alloc(f.a, 20 * MiB, s1);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    void *q = must_alloc(f.a, 20 * MiB, s2);
    CHECK(q != NULL);
    CHECK_EQ_U64(stats_of(f.a).num_alloc_retries, 1);
    CHECK_EQ_U64(rs_backend_sim_used_bytes(f.b), 20 * MiB);
    fx_done(&f);
}

TEST(memory_limit_caps_reserved_bytes_below_the_device_capacity)
{
    fixture f;
    fx_init(&f, GiB, 64 * MiB, 0);
    CHECK_EQ_U64(rs_alloc_memory_limit(f.a), 64 * MiB);
    void *p = must_alloc(f.a, 40 * MiB, NULL);
    void *q = NULL;
    CHECK(rs_alloc_malloc(f.a, 30 * MiB, NULL, &q) == RANKSNAP_ERR_OUT_OF_MEMORY);
    CHECK(q == NULL);
    CHECK_STR_CONTAINS(ranksnap_last_error(), " is free. 64.00 MiB allowed; Of the allocated memory");
    CHECK_EQ_U64(rs_backend_sim_used_bytes(f.b), 40 * MiB);
    rs_oom_info oom;
    CHECK(rs_alloc_last_oom(f.a, &oom) == 1);
    CHECK_EQ_U64(oom.memory_limit, 64 * MiB);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.memory_limit_bytes, 64 * MiB);
    CHECK_EQ_U64(s.num_ooms, 1);
    /* Exactly at the limit is allowed. */
    must_alloc(f.a, 24 * MiB, NULL);
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 64 * MiB);
    rs_alloc_set_memory_limit(f.a, 0);
    must_alloc(f.a, 30 * MiB, NULL);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    fx_done(&f);
}

TEST(oom_reports_request_capacity_free_allocated_and_unallocated_bytes)
{
    fixture f;
    fx_init(&f, 64 * MiB, 0, 0);
    must_alloc(f.a, 512 * KiB, NULL);
    void *big = must_alloc(f.a, 40 * MiB, NULL);
    CHECK(rs_alloc_last_oom(f.a, NULL) == 0);
    f.rec.n = 0;
    void *q = (void *)1;
    CHECK(rs_alloc_malloc(f.a, 30 * MiB, (void *)0x77, &q) == RANKSNAP_ERR_OUT_OF_MEMORY);
    CHECK(q == NULL);
    const char *msg = ranksnap_last_error();
    CHECK_STR_CONTAINS(msg, "CUDA out of memory. Tried to allocate 30.00 MiB. GPU 0 has a total "
                            "capacity of 64.00 MiB of which 22.00 MiB is free. Of the allocated "
                            "memory 40.50 MiB is allocated by ranksnap, and 1.50 MiB is reserved "
                            "by ranksnap but unallocated. If reserved but unallocated memory is "
                            "large try setting RANKSNAP_ALLOC_CONF=expandable_segments:True");
    CHECK(strstr(msg, "allowed") == NULL);

    rs_oom_info oom;
    CHECK(rs_alloc_last_oom(f.a, &oom) == 1);
    CHECK_EQ_U64(oom.requested, 30 * MiB);
    CHECK_EQ_U64(oom.rounded, 30 * MiB);
    CHECK_EQ_U64(oom.device_free, 22 * MiB);
    CHECK_EQ_U64(oom.device_total, 64 * MiB);
    CHECK_EQ_U64(oom.allocated, 40 * MiB + 512 * KiB);
    CHECK_EQ_U64(oom.reserved, 42 * MiB);
    CHECK_EQ_U64(oom.memory_limit, 0);
    CHECK(oom.stream == (void *)0x77);
    CHECK(oom.time_us > 0);

    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.num_ooms, 1);
    CHECK_EQ_U64(s.num_alloc_retries, 1);
    CHECK_EQ_U64(s.num_allocs, 2);
    CHECK_EQ_U64(s.allocated_bytes, 40 * MiB + 512 * KiB);
    CHECK(f.rec.n == 1 && f.rec.ev[0].act == RS_ACT_OOM && f.rec.ev[0].addr == 22 * MiB &&
          f.rec.ev[0].size == 30 * MiB && f.rec.ev[0].stream == (void *)0x77);

    /* Freed on another stream, the 40 MiB segment is given back so the request now fits. */
    CHECK(rs_alloc_free(f.a, big) == RANKSNAP_OK);
    CHECK(must_alloc(f.a, 30 * MiB, (void *)0x77) != NULL);
    s = stats_of(f.a);
    CHECK_EQ_U64(s.num_alloc_retries, 2);
    CHECK_EQ_U64(s.num_ooms, 1);
    CHECK_EQ_U64(s.reserved_bytes, 32 * MiB);
    fx_done(&f);
}

TEST(oom_says_the_segment_it_needed_and_traces_the_rounded_request_as_pytorch)
{
    fixture f;
    fx_init(&f, 64 * MiB, 0, 0);
    rs_alloc_set_memory_limit(f.a, 20 * MiB);
    must_alloc(f.a, 12 * MiB, NULL);
    void *q = NULL;
    f.rec.n = 0;
    CHECK(rs_alloc_malloc(f.a, 5 * MiB + 1, NULL, &q) == RANKSNAP_ERR_OUT_OF_MEMORY);
    /* PyTorch's "Tried to allocate" is the segment: 20 MiB for a 1-10 MiB request */
    CHECK_STR_CONTAINS(ranksnap_last_error(), "CUDA out of memory. Tried to allocate 20.00 MiB. ");
    CHECK_STR_CONTAINS(ranksnap_last_error(), " is free. 20.00 MiB allowed; Of the allocated");
    CHECK_STR_CONTAINS(ranksnap_last_error(), "(The request: 5.00 MiB.)");
    rs_oom_info oom;
    CHECK(rs_alloc_last_oom(f.a, &oom) == 1);
    CHECK_EQ_U64(oom.requested, 5 * MiB + 1);
    CHECK_EQ_U64(oom.rounded, 20 * MiB); /* the segment it needed */
    /* the trace entry: round_size(request), as PyTorch's record_trace(OOM, ..., params.size()) */
    CHECK(f.rec.n >= 1 && f.rec.ev[f.rec.n - 1].act == RS_ACT_OOM);
    CHECK_EQ_U64(f.rec.ev[f.rec.n - 1].size, 5 * MiB + 512);
    fx_done(&f);
}

TEST(allocator_recovers_after_an_oom)
{
    fixture f;
    fx_init(&f, 64 * MiB, 0, 0);
    void *big = must_alloc(f.a, 40 * MiB, NULL);
    void *q = NULL;
    CHECK(rs_alloc_malloc(f.a, 30 * MiB, NULL, &q) == RANKSNAP_ERR_OUT_OF_MEMORY);
    CHECK(rs_alloc_free(f.a, big) == RANKSNAP_OK);
    q = must_alloc(f.a, 30 * MiB, NULL);
    CHECK(q == big); /* the cached block, split */
    CHECK_EQ_U64(stats_of(f.a).num_segment_allocs, 1);
    fx_done(&f);
}

/* Reservation N of a fixed sequence fails, for every N: every call still ends in OK or OOM, the
 * books always match the device, and everything goes back at the end. */
TEST(injected_reservation_failures_leave_consistent_state_for_every_n)
{
    static const size_t sizes[] = {100,     MiB,     3 * MiB, 700 * KiB, 12 * MiB, 512,
                                   5 * MiB, 30 * MiB, 2 * MiB, 25 * MiB, 64 * KiB, 9 * MiB};
    const int n_sizes = (int)(sizeof sizes / sizeof sizes[0]);
    for (unsigned n = 1; n <= 40; n++) {
        fixture f;
        fx_init(&f, 80 * MiB, 0, 0);
        rs_backend_sim_fail_reserve_after(f.b, n);
        void *live[64];
        int n_live = 0, ooms = 0;
        for (int i = 0; i < 60; i++) {
            if (i % 3 == 2 && n_live > 0) {
                int k = (i * 7) % n_live;
                CHECK(rs_alloc_free(f.a, live[k]) == RANKSNAP_OK);
                live[k] = live[--n_live];
            } else {
                void *p = NULL;
                ranksnap_status st = rs_alloc_malloc(f.a, sizes[i % n_sizes], NULL, &p);
                CHECK(st == RANKSNAP_OK || st == RANKSNAP_ERR_OUT_OF_MEMORY);
                if (st == RANKSNAP_OK) {
                    CHECK(p != NULL);
                    if (n_live < 64) live[n_live++] = p;
                } else {
                    CHECK(p == NULL);
                    ooms++;
                }
            }
            CHECK(rs_alloc_check(f.a));
            ranksnap_stats s = stats_of(f.a);
            CHECK_EQ_U64(s.reserved_bytes, rs_backend_sim_used_bytes(f.b));
            CHECK(s.allocated_bytes <= s.reserved_bytes);
            CHECK_EQ_U64(s.num_ooms, ooms);
        }
        ranksnap_stats s = stats_of(f.a);
        CHECK_EQ_U64(s.num_allocs - s.num_frees, n_live);
        rs_alloc_state st;
        CHECK(rs_alloc_state_take(f.a, &st) == RANKSNAP_OK);
        uint64_t allocated = 0, reserved = 0;
        for (size_t i = 0; i < st.n_segments; i++) {
            allocated += st.segments[i].allocated_size;
            reserved += st.segments[i].total_size;
        }
        CHECK_EQ_U64(allocated, s.allocated_bytes);
        CHECK_EQ_U64(reserved, s.reserved_bytes);
        CHECK_EQ_U64(st.n_segments, s.num_segment_allocs - s.num_segment_frees);
        rs_alloc_state_free(&st);
        while (n_live > 0) CHECK(rs_alloc_free(f.a, live[--n_live]) == RANKSNAP_OK);
        /* After the failures, a fresh request works and everything can be given back. */
        void *p = must_alloc(f.a, 3 * MiB, NULL);
        CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
        CHECK(rs_alloc_empty_cache(f.a) == RANKSNAP_OK);
        s = stats_of(f.a);
        CHECK_EQ_U64(s.allocated_bytes, 0);
        CHECK_EQ_U64(s.active_bytes, 0);
        CHECK_EQ_U64(s.requested_bytes, 0);
        CHECK_EQ_U64(s.reserved_bytes, 0);
        CHECK_EQ_U64(rs_backend_sim_used_bytes(f.b), 0);
        fx_done(&f);
    }
}

TEST(injected_failure_is_absorbed_by_the_retry)
{
    fixture f;
    fx_init(&f, GiB, 0, 0);
    rs_backend_sim_fail_reserve_after(f.b, 1);
    void *p = must_alloc(f.a, 5 * MiB, NULL);
    CHECK(p != NULL);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.num_alloc_retries, 1);
    CHECK_EQ_U64(s.num_ooms, 0);
    CHECK_EQ_U64(s.num_segment_allocs, 1);
    fx_done(&f);
}

/* ---- bad frees ------------------------------------------------------------------------------- */

TEST(free_of_an_unknown_pointer_is_an_error_naming_it)
{
    fixture f;
    fx_init(&f, GiB, 0, 0);
    void *p = must_alloc(f.a, 4096, NULL);
    ranksnap_stats before = stats_of(f.a);
    CHECK(rs_alloc_free(f.a, (void *)0x1234) == RANKSNAP_ERR_UNKNOWN_POINTER);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "0x1234");
    /* An interior pointer is not a block either. */
    CHECK(rs_alloc_free(f.a, (char *)p + 512) == RANKSNAP_ERR_UNKNOWN_POINTER);
    CHECK(rs_alloc_record_stream(f.a, (void *)0x1234, (void *)1) == RANKSNAP_ERR_UNKNOWN_POINTER);
    ranksnap_stats after = stats_of(f.a);
    CHECK_EQ_U64(after.num_frees, before.num_frees);
    CHECK_EQ_U64(after.allocated_bytes, before.allocated_bytes);
    CHECK(rs_alloc_owns(f.a, p) == 1);
    CHECK(rs_alloc_owns(f.a, (char *)p + 512) == 0);
    fx_done(&f);
}

TEST(double_free_is_an_error_and_leaves_state_intact)
{
    fixture f;
    fx_init(&f, GiB, 0, 0);
    void *p = must_alloc(f.a, 4096, NULL);
    void *q = must_alloc(f.a, 4096, NULL);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    CHECK(rs_alloc_owns(f.a, p) == 0);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_ERR_UNKNOWN_POINTER);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "freed twice");
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.num_frees, 1);
    CHECK_EQ_U64(s.allocated_bytes, 4096);
    CHECK(rs_alloc_owns(f.a, q) == 1);
    /* The freed block is reused normally. */
    CHECK(must_alloc(f.a, 4096, NULL) == p);
    fx_done(&f);
}

/* A rank's devices: allocators sharing one lock and one block map. A free handed to either is
 * served by the one that allocated the block (its stats, its observer), found in one probe; an
 * allocator destroyed first leaves none of its blocks behind in the map. */
TEST(allocators_sharing_a_block_map_serve_each_others_frees)
{
    fixture f0, f1;
    memset(&f0, 0, sizeof f0);
    memset(&f1, 0, sizeof f1);
    f0.rec.next_id = f1.rec.next_id = 100;
    rs_mutex lock;
    atomic_init(&lock.v, 0);
    rs_block_map *map = NULL;
    CHECK(rs_block_map_create(&map) == RANKSNAP_OK);
    CHECK(rs_backend_sim_create_on(0, GiB, &f0.b) == RANKSNAP_OK);
    CHECK(rs_backend_sim_create_on(1, GiB, &f1.b) == RANKSNAP_OK);
    rs_alloc_config c0 = {.device_index = 0, .lock = &lock, .block_map = map,
                          .observer = record_cb, .observer_ctx = &f0.rec};
    rs_alloc_config c1 = c0;
    c1.device_index = 1;
    c1.observer_ctx = &f1.rec;
    CHECK(rs_alloc_create(f0.b, &c0, &f0.a) == RANKSNAP_OK);
    CHECK(rs_alloc_create(f1.b, &c1, &f1.a) == RANKSNAP_OK);

    void *p0 = must_alloc(f0.a, 4096, NULL);
    void *p1 = must_alloc(f1.a, 4096, NULL);
    void *keep = must_alloc(f1.a, 8192, NULL);
    CHECK(rs_alloc_owner(f0.a, p1) == f1.a);
    CHECK(rs_alloc_owner(f1.a, p0) == f0.a);
    CHECK(rs_alloc_owns(f0.a, p1) == 0);
    /* device 1's block freed through device 0's allocator: device 1's books change */
    int n1 = f1.rec.n, n0 = f0.rec.n;
    CHECK(rs_alloc_free(f0.a, p1) == RANKSNAP_OK);
    CHECK_EQ_U64(stats_of(f1.a).num_frees, 1);
    CHECK_EQ_U64(stats_of(f1.a).allocated_bytes, 8192);
    CHECK_EQ_U64(stats_of(f0.a).num_frees, 0);
    CHECK(f1.rec.n > n1 && f1.rec.ev[n1].act == RS_ACT_FREE_REQUESTED);
    CHECK(f0.rec.n == n0);
    CHECK(rs_alloc_owner(f0.a, p1) == NULL);
    /* and reused by device 1, not device 0 */
    CHECK(must_alloc(f1.a, 4096, NULL) == p1);
    CHECK(rs_alloc_free(f1.a, p0) == RANKSNAP_OK);
    CHECK_EQ_U64(stats_of(f0.a).num_frees, 1);
    CHECK(rs_alloc_check(f0.a));
    CHECK(rs_alloc_check(f1.a));
    /* device 1 goes with two blocks allocated: the map forgets them */
    rs_alloc_destroy(f1.a);
    CHECK(rs_alloc_owner(f0.a, keep) == NULL);
    CHECK(rs_alloc_owner(f0.a, p1) == NULL);
    CHECK(rs_alloc_free(f0.a, keep) == RANKSNAP_ERR_UNKNOWN_POINTER);
    CHECK(rs_alloc_check(f0.a));
    rs_alloc_destroy(f0.a);
    rs_block_map_destroy(map);
    f0.b->ops->destroy(f0.b);
    f1.b->ops->destroy(f1.b);
}

/* ---- stats, observer, state ------------------------------------------------------------------ */

TEST(stats_track_current_values_and_peaks)
{
    fixture f;
    fx_init(&f, GiB, 0, 0);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.peak_step, (uint64_t)(int64_t)-1);
    CHECK_EQ_U64(s.device_total_bytes, GiB);
    rs_alloc_set_step(f.a, 7);
    uint64_t t0 = rs_now_us();
    void *p = must_alloc(f.a, 1000, NULL);
    void *q = must_alloc(f.a, 3 * MiB, NULL);
    uint64_t t1 = rs_now_us();
    s = stats_of(f.a);
    CHECK_EQ_U64(s.allocated_bytes, 1024 + 3 * MiB);
    CHECK_EQ_U64(s.requested_bytes, 1000 + 3 * MiB);
    CHECK_EQ_U64(s.active_bytes, 1024 + 3 * MiB);
    CHECK_EQ_U64(s.reserved_bytes, 22 * MiB);
    CHECK_EQ_U64(s.inactive_split_bytes, 22 * MiB - 1024 - 3 * MiB);
    CHECK_EQ_U64(s.num_allocs, 2);
    CHECK_EQ_U64(s.num_segment_allocs, 2);
    CHECK_EQ_U64(s.peak_step, 7);
    CHECK(s.peak_time_us >= t0 && s.peak_time_us <= t1);

    rs_alloc_set_step(f.a, 8);
    CHECK(rs_alloc_free(f.a, q) == RANKSNAP_OK);
    must_alloc(f.a, 2048, NULL); /* below the peak: time and step of the peak stay */
    s = stats_of(f.a);
    CHECK_EQ_U64(s.allocated_bytes_peak, 1024 + 3 * MiB);
    CHECK_EQ_U64(s.requested_bytes_peak, 1000 + 3 * MiB);
    CHECK_EQ_U64(s.active_bytes_peak, 1024 + 3 * MiB);
    CHECK_EQ_U64(s.reserved_bytes_peak, 22 * MiB);
    CHECK_EQ_U64(s.peak_step, 7);
    CHECK_EQ_U64(s.allocated_bytes, 1024 + 2048);

    rs_alloc_reset_peak_stats(f.a);
    s = stats_of(f.a);
    CHECK_EQ_U64(s.allocated_bytes_peak, 1024 + 2048);
    CHECK_EQ_U64(s.active_bytes_peak, 1024 + 2048);
    CHECK_EQ_U64(s.reserved_bytes_peak, 22 * MiB);
    CHECK_EQ_U64(s.peak_step, 8);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    CHECK(rs_alloc_empty_cache(f.a) == RANKSNAP_OK);
    s = stats_of(f.a);
    CHECK_EQ_U64(s.reserved_bytes, 2 * MiB); /* the 2048-byte block holds the small segment */
    CHECK_EQ_U64(s.num_segment_frees, 1);
    CHECK_EQ_U64(s.num_frees, 2);
    fx_done(&f);
}

TEST(observer_sees_segment_alloc_alloc_free_requested_free_completed_segment_free)
{
    fixture f;
    fx_init(&f, GiB, 0, 0);
    void *s1 = (void *)0x51;
    void *p = must_alloc(f.a, 1000, s1);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    CHECK(rs_alloc_empty_cache(f.a) == RANKSNAP_OK);
    const struct {
        rs_action act;
        uint64_t size;
    } want[] = {{RS_ACT_SEGMENT_ALLOC, 2 * MiB}, {RS_ACT_ALLOC, 1000},
                {RS_ACT_FREE_REQUESTED, 1000},   {RS_ACT_FREE_COMPLETED, 1000},
                {RS_ACT_SEGMENT_FREE, 2 * MiB}};
    CHECK_EQ_U64(f.rec.n, 5);
    for (int i = 0; i < 5 && i < f.rec.n; i++) {
        CHECK_EQ_U64(f.rec.ev[i].act, want[i].act);
        CHECK_EQ_U64(f.rec.ev[i].size, want[i].size);
        CHECK_EQ_U64(f.rec.ev[i].addr, u(p));
        CHECK(f.rec.ev[i].stream == s1);
    }
    fx_done(&f);
}

TEST(allocator_works_without_an_observer_and_without_a_config)
{
    rs_backend *b = NULL;
    rs_alloc *a = NULL;
    CHECK(rs_backend_sim_create(GiB, &b) == RANKSNAP_OK);
    CHECK(rs_alloc_create(b, NULL, &a) == RANKSNAP_OK);
    void *p = must_alloc(a, 5000, NULL);
    CHECK(rs_alloc_free(a, p) == RANKSNAP_OK);
    CHECK(must_alloc(a, 5000, NULL) == p);
    rs_alloc_destroy(a);
    CHECK_EQ_U64(rs_backend_sim_used_bytes(b), 0);
    b->ops->destroy(b);
}

TEST(state_lists_segments_by_address_with_blocks_in_address_order)
{
    fixture f;
    fx_init(&f, GiB, 0, 0);
    void *x = must_alloc(f.a, 300, NULL);      /* small segment A          */
    void *big = must_alloc(f.a, 5 * MiB, NULL); /* large segment B, split   */
    void *y = must_alloc(f.a, 700 * KiB, NULL); /* small segment A          */
    void *z = must_alloc(f.a, 2000, NULL);      /* small segment A          */
    CHECK(rs_alloc_free(f.a, y) == RANKSNAP_OK);
    uint32_t x_stack = 0;
    for (int i = 0; i < f.rec.n; i++)
        if (f.rec.ev[i].act == RS_ACT_ALLOC && f.rec.ev[i].addr == u(x)) x_stack = 100 + i;

    rs_alloc_state st;
    CHECK(rs_alloc_state_take(f.a, &st) == RANKSNAP_OK);
    CHECK_EQ_U64(st.n_segments, 2);
    for (size_t i = 0; i + 1 < st.n_segments; i++)
        CHECK(st.segments[i].addr < st.segments[i + 1].addr);
    for (size_t i = 0; i < st.n_segments; i++) {
        const rs_segment_info *s = &st.segments[i];
        uint64_t next = s->addr, alloc = 0;
        for (size_t k = 0; k < s->n_blocks; k++) {
            CHECK_EQ_U64(s->blocks[k].addr, next);
            next += s->blocks[k].size;
            if (s->blocks[k].state == RS_BLOCK_ACTIVE_ALLOCATED) alloc += s->blocks[k].size;
        }
        CHECK_EQ_U64(next, s->addr + s->total_size);
        CHECK_EQ_U64(s->allocated_size, alloc);
        CHECK(s->stack_id >= 100);
    }
    const rs_segment_info *small = st.segments[0].is_small ? &st.segments[0] : &st.segments[1];
    const rs_segment_info *large = st.segments[0].is_small ? &st.segments[1] : &st.segments[0];
    CHECK_EQ_U64(small->addr, u(x));
    CHECK_EQ_U64(small->n_blocks, 4); /* x, y (free), z, remainder */
    if (small->n_blocks == 4) {
        CHECK_EQ_U64(small->blocks[0].state, RS_BLOCK_ACTIVE_ALLOCATED);
        CHECK_EQ_U64(small->blocks[0].requested_size, 300);
        CHECK_EQ_U64(small->blocks[0].size, 512);
        CHECK_EQ_U64(small->blocks[0].stack_id, x_stack);
        CHECK_EQ_U64(small->blocks[1].addr, u(y));
        CHECK_EQ_U64(small->blocks[1].state, RS_BLOCK_INACTIVE);
        CHECK_EQ_U64(small->blocks[1].requested_size, 0);
        CHECK_EQ_U64(small->blocks[1].stack_id, 0);
        CHECK_EQ_U64(small->blocks[2].addr, u(z));
        CHECK_EQ_U64(small->blocks[2].requested_size, 2000);
        CHECK_EQ_U64(small->blocks[3].state, RS_BLOCK_INACTIVE);
    }
    CHECK_EQ_U64(small->allocated_size, 512 + 2048);
    CHECK_EQ_U64(small->requested_size, 300 + 2000);
    CHECK_EQ_U64(large->addr, u(big));
    CHECK_EQ_U64(large->total_size, 20 * MiB);
    CHECK_EQ_U64(large->n_blocks, 2);
    CHECK_EQ_U64(large->active_size, 5 * MiB);
    rs_alloc_state_free(&st);
    CHECK(st.n_segments == 0 && st.segments == NULL);
    fx_done(&f);
}

TEST(destroy_releases_segments_that_still_hold_allocated_blocks)
{
    fixture f;
    fx_init(&f, GiB, 0, 0);
    must_alloc(f.a, 100, NULL);
    must_alloc(f.a, 50 * MiB, NULL);
    CHECK(rs_backend_sim_used_bytes(f.b) > 0);
    fx_done(&f); /* checks the device is empty afterwards */
}


/* ---- the policy against a reference model ---------------------------------------------------- */

/* The policy written the obvious way: every block in one array, best fit by linear scan. */
typedef struct mblock {
    uint64_t addr, size;
    void *stream;
    int small, free, seg;
} mblock;

typedef struct model {
    mblock b[4096];
    int n;
    uint64_t max_split;
} model;

static int model_best_fit(const model *m, void *stream, int small, uint64_t rounded)
{
    int best = -1;
    for (int i = 0; i < m->n; i++) {
        const mblock *x = &m->b[i];
        if (!x->free || x->stream != stream || x->small != small || x->size < rounded) continue;
        if (best < 0 || x->size < m->b[best].size ||
            (x->size == m->b[best].size && x->addr < m->b[best].addr))
            best = i;
    }
    if (best < 0) return -1;
    if (rounded < m->max_split && m->b[best].size >= m->max_split) return -1;
    if (rounded >= m->max_split && m->b[best].size - rounded >= 20 * MiB) return -1;
    return best;
}

/* Allocates `rounded` from block i (splitting per policy); returns the block's address. */
static uint64_t model_take(model *m, int i, uint64_t rounded)
{
    mblock *x = &m->b[i];
    uint64_t rest = x->size - rounded;
    int split = x->small ? rest >= 512 : (rounded < m->max_split && rest > MiB);
    x->free = 0;
    if (split) {
        mblock r = *x;
        r.addr = x->addr + rounded;
        r.size = rest;
        r.free = 1;
        x->size = rounded;
        m->b[m->n++] = r;
    }
    return x->addr;
}

static int model_find(const model *m, uint64_t addr)
{
    for (int i = 0; i < m->n; i++)
        if (m->b[i].addr == addr) return i;
    return -1;
}

static void model_remove(model *m, int i)
{
    m->b[i] = m->b[--m->n];
}

static void model_free(model *m, uint64_t addr)
{
    int i = model_find(m, addr);
    m->b[i].free = 1;
    int j = model_find(m, m->b[i].addr + m->b[i].size);
    if (j >= 0 && m->b[j].free && m->b[j].seg == m->b[i].seg) {
        m->b[i].size += m->b[j].size;
        model_remove(m, j);
        i = model_find(m, addr);
    }
    for (j = 0; j < m->n; j++) {
        if (m->b[j].free && m->b[j].seg == m->b[i].seg &&
            m->b[j].addr + m->b[j].size == m->b[i].addr) {
            m->b[j].size += m->b[i].size;
            model_remove(m, i);
            break;
        }
    }
}

/* empty_cache: segments that are one free block go. */
static void model_empty_cache(model *m, int *n_segments)
{
    for (int i = 0; i < m->n;) {
        int alone = m->b[i].free;
        for (int j = 0; alone && j < m->n; j++)
            if (j != i && m->b[j].seg == m->b[i].seg) alone = 0;
        if (alone) {
            model_remove(m, i);
            (*n_segments)--;
        } else {
            i++;
        }
    }
}

static void random_sequence_against_model(uint64_t max_split, uint64_t seed)
{
    fixture f;
    fx_init(&f, 1ull << 40, 0, max_split);
    static model m;
    memset(&m, 0, sizeof m);
    m.max_split = max_split;
    void *streams[3] = {NULL, (void *)0x10, (void *)0x20};
    uint64_t live[512];
    int n_live = 0, n_segments = 0, next_seg = 0, mismatches = 0;
    uint64_t x = seed;
    for (int op = 0; op < 4000 && mismatches < 5; op++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned r = (unsigned)(x % 100);
        if (r < 55 && n_live < 512) {
            size_t size;
            unsigned cls = (unsigned)((x >> 8) % 10);
            if (cls < 6) size = 1 + (size_t)((x >> 16) % (256 * KiB));
            else if (cls < 8) size = 1 + (size_t)((x >> 16) % MiB);
            else if (cls < 9) size = MiB + 1 + (size_t)((x >> 16) % (15 * MiB));
            else size = 16 * MiB + (size_t)((x >> 16) % (48 * MiB));
            void *stream = streams[(x >> 40) % 3];
            uint64_t rounded = rs_alloc_round_size(size);
            int small = rounded <= MiB;
            int want = model_best_fit(&m, stream, small, rounded);
            f.rec.n = 0;
            void *p = must_alloc(f.a, size, stream);
            uint64_t expect;
            if (want >= 0) {
                expect = model_take(&m, want, rounded);
                if (f.rec.n != 1) mismatches++;
            } else {
                /* A new segment, at the address the device chose. */
                if (!(f.rec.n == 2 && f.rec.ev[0].act == RS_ACT_SEGMENT_ALLOC &&
                      f.rec.ev[0].size == rs_alloc_segment_size(rounded))) {
                    mismatches++;
                    fprintf(stderr, "  op %d: expected a new segment for %zu bytes\n", op, size);
                    continue;
                }
                mblock nb = {f.rec.ev[0].addr, f.rec.ev[0].size, stream, small, 1, next_seg++};
                m.b[m.n++] = nb;
                n_segments++;
                expect = model_take(&m, m.n - 1, rounded);
            }
            if (expect != u(p)) {
                mismatches++;
                fprintf(stderr, "  op %d: %zu bytes on stream %p: got 0x%llx, model 0x%llx\n",
                        op, size, stream, (unsigned long long)u(p), (unsigned long long)expect);
            }
            live[n_live++] = u(p);
        } else if (r < 97 && n_live > 0) {
            int k = (int)((x >> 20) % (uint64_t)n_live);
            CHECK(rs_alloc_free(f.a, (void *)(uintptr_t)live[k]) == RANKSNAP_OK);
            model_free(&m, live[k]);
            live[k] = live[--n_live];
        } else {
            CHECK(rs_alloc_empty_cache(f.a) == RANKSNAP_OK);
            model_empty_cache(&m, &n_segments);
            CHECK_EQ_U64(stats_of(f.a).num_segment_allocs - stats_of(f.a).num_segment_frees,
                         n_segments);
        }
        if (op % 97 == 0) CHECK(rs_alloc_check(f.a));
    }
    CHECK_EQ_U64(mismatches, 0);
    fx_done(&f);
}

TEST(random_sequences_pick_the_blocks_a_reference_best_fit_model_picks)
{
    random_sequence_against_model(UINT64_MAX, 0x1234567887654321ull);
    random_sequence_against_model(UINT64_MAX, 0xdeadbeefcafef00dull);
    random_sequence_against_model(32 * MiB, 0x0badc0ffee0ddf00ull);
}

int main(void)
{
    RUN(rounds_requests_up_to_512_byte_multiples);
    RUN(segment_size_is_2mib_small_20mib_mid_and_rounded_to_2mib_large);
    RUN(one_mib_request_uses_the_small_pool_and_one_byte_more_the_large);
    RUN(new_segments_have_the_policy_sizes);
    RUN(size_zero_gives_null_and_ok_without_touching_stats);
    RUN(small_blocks_split_down_to_the_last_512_bytes);
    RUN(large_block_is_not_split_when_only_1mib_would_remain);
    RUN(large_block_is_split_when_more_than_1mib_remains);
    RUN(request_below_max_split_size_never_takes_an_oversized_block);
    RUN(oversized_request_takes_a_block_wasting_less_than_20mib_unsplit);
    RUN(oversized_request_skips_a_block_20mib_or_more_too_big);
    RUN(without_max_split_size_a_large_cached_block_is_split_for_a_smaller_request);
    RUN(best_fit_chooses_the_smallest_fitting_block_even_at_a_higher_address);
    RUN(best_fit_takes_the_lowest_address_among_equal_sizes);
    RUN(freed_neighbours_coalesce_into_one_releasable_block);
    RUN(free_blocks_of_adjacent_segments_do_not_coalesce);
    RUN(failed_reservation_frees_the_cache_and_retries_once);
    RUN(cached_segment_of_another_stream_is_freed_for_a_retry);
    RUN(memory_limit_caps_reserved_bytes_below_the_device_capacity);
    RUN(oom_reports_request_capacity_free_allocated_and_unallocated_bytes);
    RUN(oom_says_the_segment_it_needed_and_traces_the_rounded_request_as_pytorch);
    RUN(allocator_recovers_after_an_oom);
    RUN(injected_reservation_failures_leave_consistent_state_for_every_n);
    RUN(injected_failure_is_absorbed_by_the_retry);
    RUN(free_of_an_unknown_pointer_is_an_error_naming_it);
    RUN(double_free_is_an_error_and_leaves_state_intact);
    RUN(allocators_sharing_a_block_map_serve_each_others_frees);
    RUN(stats_track_current_values_and_peaks);
    RUN(observer_sees_segment_alloc_alloc_free_requested_free_completed_segment_free);
    RUN(allocator_works_without_an_observer_and_without_a_config);
    RUN(state_lists_segments_by_address_with_blocks_in_address_order);
    RUN(destroy_releases_segments_that_still_hold_allocated_blocks);
    RUN(random_sequences_pick_the_blocks_a_reference_best_fit_model_picks);
    return check_summary();
}
