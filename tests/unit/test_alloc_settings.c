/*
 * test_alloc_settings.c — the caching allocator under PyTorch's settings (RANKSNAP_ALLOC_CONF):
 * roundup_power2_divisions, large_segment_size_mb, max_non_split_rounding_mb, the memory fraction,
 * garbage_collection_threshold, the remedies of the slow path in PyTorch's order, and expandable
 * segments on the sim device. Each expectation is what PyTorch 2.11's DeviceCachingAllocator does
 * with the same requests, worked out from its code (c10/cuda/CUDACachingAllocator.cpp) in the
 * comments.
 */
#include <string.h>

#include "alloc_fixture.h"
#include "backend_sim.h"

#define S1 ((void *)(uintptr_t)0x10)
#define S2 ((void *)(uintptr_t)0x20)

static int count_act(const recorder *r, rs_action act)
{
    int n = 0;
    for (int i = 0; i < r->n; i++) n += r->ev[i].act == act;
    return n;
}

/* The i-th event of kind `act`, or NULL. */
static const obs_event *nth_act(const recorder *r, rs_action act, int i)
{
    for (int k = 0; k < r->n; k++)
        if (r->ev[k].act == act && i-- == 0) return &r->ev[k];
    return NULL;
}

TEST(roundup_power2_divisions_round_requests_and_pick_their_pool)
{
    fixture f;
    fx_init_conf(&f, GiB, 0, "roundup_power2_divisions:4");
    /* 1,000,000 B -> 1 MiB: still the small pool, a 2 MiB segment */
    must_alloc(f.a, 1000000, NULL);
    CHECK_EQ_U64(stats_of(f.a).allocated_bytes, MiB);
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 2 * MiB);
    /* 1 MiB + 1 -> 1.25 MiB: the large pool, a 20 MiB segment */
    must_alloc(f.a, MiB + 1, NULL);
    CHECK_EQ_U64(stats_of(f.a).allocated_bytes, MiB + 1310720);
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 22 * MiB);
    /* 300 MiB -> 320 MiB (4 steps of 64 MiB between 256 and 512): a 320 MiB segment */
    must_alloc(f.a, 300 * MiB, NULL);
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 342 * MiB);
    fx_done(&f);
}

TEST(large_segment_size_sets_the_segment_of_mid_sized_requests)
{
    fixture f;
    fx_init_conf(&f, GiB, 0, "large_segment_size_mb:40");
    must_alloc(f.a, 5 * MiB, NULL);
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 40 * MiB);
    /* 10 MiB and above: the request rounded to 2 MiB, as without the setting */
    must_alloc(f.a, 41 * MiB, NULL);
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 82 * MiB);
    fx_done(&f);
}

TEST(max_non_split_rounding_lets_an_oversize_block_serve_a_smaller_request)
{
    /* a cached 200 MiB block and a 150 MiB request, both above max_split_size: PyTorch takes the
     * block when it wastes less than max_non_split_rounding (default 20 MiB) */
    fixture f;
    fx_init_conf(&f, GiB, 0, "max_split_size_mb:128,max_non_split_rounding_mb:64");
    void *p = must_alloc(f.a, 200 * MiB, NULL);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    CHECK(must_alloc(f.a, 150 * MiB, NULL) == p);
    CHECK_EQ_U64(stats_of(f.a).num_segment_allocs, 1);
    fx_done(&f);

    fx_init_conf(&f, GiB, 0, "max_split_size_mb:128");
    p = must_alloc(f.a, 200 * MiB, NULL);
    CHECK(rs_alloc_free(f.a, p) == RANKSNAP_OK);
    CHECK(must_alloc(f.a, 150 * MiB, NULL) != p);
    CHECK_EQ_U64(stats_of(f.a).num_segment_allocs, 2);
    fx_done(&f);
}

TEST(per_process_memory_fraction_caps_reserved_bytes_at_its_share_of_the_device)
{
    fixture f;
    fx_init_conf(&f, GiB, 0, "per_process_memory_fraction:0.25");
    CHECK_EQ_U64(rs_alloc_memory_limit(f.a), 256 * MiB);
    must_alloc(f.a, 200 * MiB, NULL);
    void *q = NULL;
    CHECK(rs_alloc_malloc(f.a, 60 * MiB, NULL, &q) == RANKSNAP_ERR_OUT_OF_MEMORY);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "of which 824.00 MiB is free. 256.00 MiB allowed; ");
    /* with RANKSNAP_MEMORY_LIMIT below it, the limit */
    rs_alloc_set_memory_limit(f.a, 128 * MiB);
    CHECK_EQ_U64(rs_alloc_memory_limit(f.a), 128 * MiB);
    CHECK_EQ_U64(stats_of(f.a).memory_limit_bytes, 128 * MiB);
    fx_done(&f);
}

/* Three whole segments of these sizes cached (max_split_size 40 MiB, a device of `capacity`),
 * then a request of 100 MiB; the observer holds what that request did. */
static void cached_then_100mib(fixture *f, uint64_t capacity, const size_t sizes[3], void *p[3])
{
    fx_init_conf(f, capacity, 0, "max_split_size_mb:40");
    for (int i = 0; i < 3; i++) p[i] = must_alloc(f->a, sizes[i], NULL);
    for (int i = 0; i < 3; i++) CHECK(rs_alloc_free(f->a, p[i]) == RANKSNAP_OK);
    f->rec.n = 0;
    must_alloc(f->a, 100 * MiB, NULL);
}

TEST(release_available_frees_only_enough_oversize_segments_largest_first)
{
    /* cached whole segments of 50, 60 and 80 MiB (max_split_size 40 MiB) on a 200 MiB device and
     * a 100 MiB request: no cached block holds it, no room for a new segment; PyTorch frees the
     * oversize blocks below the request from the largest down until they add up to it (80 + 60),
     * keeps the 50, and reserves without waiting for events or counting a retry */
    fixture f;
    void *p[3];
    cached_then_100mib(&f, 200 * MiB, (size_t[]){60 * MiB, 80 * MiB, 50 * MiB}, p);
    void *a = p[0], *b = p[1];
    CHECK_EQ_U64(count_act(&f.rec, RS_ACT_SEGMENT_FREE), 2);
    const obs_event *e0 = nth_act(&f.rec, RS_ACT_SEGMENT_FREE, 0);
    const obs_event *e1 = nth_act(&f.rec, RS_ACT_SEGMENT_FREE, 1);
    CHECK(e0 && e0->addr == u(b) && e0->size == 80 * MiB);
    CHECK(e1 && e1->addr == u(a) && e1->size == 60 * MiB);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.reserved_bytes, 150 * MiB);
    CHECK_EQ_U64(s.num_sync_all_streams, 0);
    CHECK_EQ_U64(s.num_alloc_retries, 0);
    fx_done(&f);
}

TEST(release_available_frees_the_smallest_oversize_segment_that_holds_the_request)
{
    /* cached 60, 80 and 120 MiB; a 100 MiB request would waste 20 MiB of the 120 (not < 20: no
     * reuse); PyTorch frees that one block and keeps the others */
    fixture f;
    void *p[3];
    cached_then_100mib(&f, 300 * MiB, (size_t[]){60 * MiB, 80 * MiB, 120 * MiB}, p);
    void *c = p[2];
    CHECK_EQ_U64(count_act(&f.rec, RS_ACT_SEGMENT_FREE), 1);
    const obs_event *e0 = nth_act(&f.rec, RS_ACT_SEGMENT_FREE, 0);
    CHECK(e0 && e0->addr == u(c));
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 240 * MiB);
    fx_done(&f);
}

TEST(release_cached_frees_large_then_small_in_stream_size_address_order)
{
    /* PyTorch's release_blocks walks large_blocks, then small_blocks, each ordered by (stream,
     * size, address) across streams */
    fixture f;
    fx_init_conf(&f, 100 * MiB, 0, "");
    void *s0 = must_alloc(f.a, MiB, NULL), *s1 = must_alloc(f.a, MiB, NULL);
    void *s2 = must_alloc(f.a, MiB, NULL); /* a second small segment */
    void *l20 = must_alloc(f.a, 24 * MiB, S2);
    void *l10a = must_alloc(f.a, 30 * MiB, S1);
    void *l10b = must_alloc(f.a, 26 * MiB, S1);
    void *ps[] = {s0, s1, s2, l20, l10a, l10b};
    for (size_t i = 0; i < 6; i++) CHECK(rs_alloc_free(f.a, ps[i]) == RANKSNAP_OK);
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 84 * MiB);
    f.rec.n = 0;
    must_alloc(f.a, 40 * MiB, NULL);
    uint64_t want[][2] = {{u(l10b), 26 * MiB}, {u(l10a), 30 * MiB}, {u(l20), 24 * MiB},
                          {u(s0), 2 * MiB}, {u(s2), 2 * MiB}};
    CHECK_EQ_U64(count_act(&f.rec, RS_ACT_SEGMENT_FREE), 5);
    for (int i = 0; i < 5; i++) {
        const obs_event *e = nth_act(&f.rec, RS_ACT_SEGMENT_FREE, i);
        CHECK(e && e->addr == want[i][0] && e->size == want[i][1]);
    }
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.num_sync_all_streams, 1);
    CHECK_EQ_U64(s.num_alloc_retries, 1);
    CHECK_EQ_U64(s.reserved_bytes, 40 * MiB);
    fx_done(&f);
}

/* Cached large segments A and B (30 MiB each, default stream) and a 20 MiB one on S1, where A has
 * gone unused for six searches of the large pools and the others for one; then a 35 MiB request,
 * which nothing cached holds. */
static void *gc_scene(fixture *f, void **b_out)
{
    void *a = must_alloc(f->a, 30 * MiB, NULL); /* search 1 */
    void *b = must_alloc(f->a, 30 * MiB, NULL); /* search 2 */
    CHECK(rs_alloc_free(f->a, a) == RANKSNAP_OK); /* A stamped 2 */
    for (int i = 0; i < 5; i++) {                 /* searches 3..7; S1's block stamped 7 */
        void *p = must_alloc(f->a, 2 * MiB, S1);
        CHECK(rs_alloc_free(f->a, p) == RANKSNAP_OK);
    }
    CHECK(rs_alloc_free(f->a, b) == RANKSNAP_OK); /* B stamped 7 */
    f->rec.n = 0;
    must_alloc(f->a, 35 * MiB, NULL);              /* search 8: ages A 6, B 1, S1's 1 */
    *b_out = b;
    return a;
}

TEST(gc_frees_cached_segments_at_least_as_old_as_the_average_over_the_threshold)
{
    /* cap 100 MiB, threshold 0.7: S1's first request (reserved 60 MiB, under 70) collects
     * nothing; at the last one reserved 80 MiB is 10 MiB over 70; the average age is 8/3, so only
     * A goes (30 MiB reclaimed, enough); no synchronisation, no retry */
    fixture f;
    fx_init_conf(&f, GiB, 100 * MiB, "garbage_collection_threshold:0.7");
    void *b = NULL;
    void *a = gc_scene(&f, &b);
    CHECK_EQ_U64(count_act(&f.rec, RS_ACT_SEGMENT_FREE), 1);
    const obs_event *e = nth_act(&f.rec, RS_ACT_SEGMENT_FREE, 0);
    CHECK(e && e->addr == u(a));
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.reserved_bytes, 86 * MiB);
    CHECK_EQ_U64(s.num_sync_all_streams, 0);
    CHECK_EQ_U64(s.num_alloc_retries, 0);
    CHECK(b != NULL);
    fx_done(&f);
}

TEST(gc_does_nothing_without_a_cap_and_the_cache_goes_whole_instead)
{
    /* without a cap there is no GC; under the cap without a threshold, reserving 36 MiB more fails
     * and every cached segment goes (release_cached_blocks) */
    fixture f;
    fx_init_conf(&f, GiB, 0, "garbage_collection_threshold:0.7");
    void *b = NULL;
    gc_scene(&f, &b);
    CHECK_EQ_U64(count_act(&f.rec, RS_ACT_SEGMENT_FREE), 0);
    fx_done(&f);

    fx_init_conf(&f, GiB, 100 * MiB, "");
    gc_scene(&f, &b);
    CHECK_EQ_U64(count_act(&f.rec, RS_ACT_SEGMENT_FREE), 3);
    CHECK_EQ_U64(stats_of(f.a).num_alloc_retries, 1);
    fx_done(&f);
}

TEST(expandable_segments_grow_one_range_by_pages)
{
    fixture f;
    fx_init_conf(&f, GiB, 0, "expandable_segments:True");
    void *x = must_alloc(f.a, 5 * MiB, NULL);
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 20 * MiB); /* one 20 MiB page */
    /* 30 MiB: the 15 MiB free after x and one more page, contiguous */
    void *y = must_alloc(f.a, 30 * MiB, NULL);
    CHECK(u(y) == u(x) + 5 * MiB);
    ranksnap_stats s = stats_of(f.a);
    CHECK_EQ_U64(s.reserved_bytes, 40 * MiB);
    CHECK_EQ_U64(s.num_segment_allocs, 2);
    CHECK_EQ_U64(rs_backend_sim_used_bytes(f.b), 40 * MiB);
    const obs_event *m1 = nth_act(&f.rec, RS_ACT_SEGMENT_ALLOC, 1);
    CHECK(m1 && m1->addr == u(x) + 20 * MiB && m1->size == 20 * MiB);
    /* small requests map 2 MiB pages of a range of their own */
    must_alloc(f.a, 1000, NULL);
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 42 * MiB);
    /* the snapshot shows each run of mapped pages as a segment */
    rs_alloc_state st;
    CHECK(rs_alloc_state_take(f.a, &st) == RANKSNAP_OK);
    CHECK_EQ_U64(st.n_segments, 2);
    uint64_t large = 0;
    for (size_t i = 0; i < st.n_segments; i++)
        if (!st.segments[i].is_small) {
            large = st.segments[i].total_size;
            CHECK_EQ_U64(st.segments[i].n_blocks, 3);
            CHECK_EQ_U64(st.segments[i].allocated_size, 35 * MiB);
        }
    CHECK_EQ_U64(large, 40 * MiB);
    rs_alloc_state_free(&st);
    fx_done(&f);
}

TEST(expandable_segments_unmap_whole_free_pages_and_keep_partial_ones)
{
    fixture f;
    fx_init_conf(&f, GiB, 0, "expandable_segments:True");
    void *x = must_alloc(f.a, 5 * MiB, NULL);
    void *y = must_alloc(f.a, 30 * MiB, NULL);
    CHECK(rs_alloc_free(f.a, y) == RANKSNAP_OK);
    f.rec.n = 0;
    /* free: [5, 40) MiB of the range; whole pages inside it: [20, 40) */
    CHECK(rs_alloc_empty_cache(f.a) == RANKSNAP_OK);
    CHECK_EQ_U64(count_act(&f.rec, RS_ACT_SEGMENT_FREE), 1);
    const obs_event *e = nth_act(&f.rec, RS_ACT_SEGMENT_FREE, 0);
    CHECK(e && e->addr == u(x) + 20 * MiB && e->size == 20 * MiB);
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 20 * MiB);
    CHECK_EQ_U64(stats_of(f.a).num_segment_frees, 1);
    /* everything free: the last page goes, and the range with it */
    CHECK(rs_alloc_free(f.a, x) == RANKSNAP_OK);
    CHECK(rs_alloc_empty_cache(f.a) == RANKSNAP_OK);
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 0);
    CHECK_EQ_U64(rs_backend_sim_used_bytes(f.b), 0);
    rs_alloc_state st;
    CHECK(rs_alloc_state_take(f.a, &st) == RANKSNAP_OK);
    CHECK_EQ_U64(st.n_segments, 0);
    rs_alloc_state_free(&st);
    /* and a new request starts a new range */
    must_alloc(f.a, 5 * MiB, NULL);
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 20 * MiB);
    fx_done(&f);
}

TEST(expandable_best_fit_passes_over_a_block_that_could_grow)
{
    /* one 20 MiB page: x [0,8) y [8,12) z [12,17), tail free [17,20) before unmapped space; y
     * freed. A 3 MiB request fits the 3 MiB tail best, but the tail could grow: PyTorch takes
     * y's 4 MiB instead */
    fixture f;
    fx_init_conf(&f, GiB, 0, "expandable_segments:True");
    void *x = must_alloc(f.a, 8 * MiB, NULL);
    void *y = must_alloc(f.a, 4 * MiB, NULL);
    void *z = must_alloc(f.a, 5 * MiB, NULL);
    CHECK(u(z) == u(x) + 12 * MiB);
    CHECK(rs_alloc_free(f.a, y) == RANKSNAP_OK);
    CHECK(must_alloc(f.a, 3 * MiB, NULL) == y);
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 20 * MiB);
    fx_done(&f);
}

TEST(expandable_segments_check_the_cap_against_the_segment_size)
{
    /* PyTorch compares alloc_size (20 MiB for a 5 MiB request) with the cap, even though the
     * mapping would have needed less: a cap of 30 MiB refuses the second page */
    fixture f;
    fx_init_conf(&f, GiB, 30 * MiB, "expandable_segments:True");
    must_alloc(f.a, 18 * MiB, NULL);
    void *q = NULL;
    CHECK(rs_alloc_malloc(f.a, 5 * MiB, NULL, &q) == RANKSNAP_ERR_OUT_OF_MEMORY);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "Tried to allocate 20.00 MiB.");
    CHECK_EQ_U64(stats_of(f.a).reserved_bytes, 20 * MiB);
    fx_done(&f);
}

TEST(expandable_segments_map_nothing_when_the_device_is_full)
{
    fixture f;
    fx_init_conf(&f, 40 * MiB, 0, "expandable_segments:True");
    must_alloc(f.a, 30 * MiB, NULL); /* two pages */
    void *q = NULL;
    CHECK(rs_alloc_malloc(f.a, 15 * MiB, NULL, &q) == RANKSNAP_ERR_OUT_OF_MEMORY);
    CHECK_EQ_U64(rs_backend_sim_used_bytes(f.b), 40 * MiB);
    fx_done(&f);
    /* a map that fails leaves nothing mapped; the retry after freeing the cache maps again */
    fx_init_conf(&f, GiB, 0, "expandable_segments:True");
    rs_backend_sim_fail_reserve_after(f.b, 1);
    must_alloc(f.a, 5 * MiB, NULL);
    CHECK_EQ_U64(stats_of(f.a).num_alloc_retries, 1);
    CHECK_EQ_U64(stats_of(f.a).num_segment_allocs, 1);
    CHECK_EQ_U64(rs_backend_sim_used_bytes(f.b), 20 * MiB);
    fx_done(&f);
}

int main(void)
{
    RUN(roundup_power2_divisions_round_requests_and_pick_their_pool);
    RUN(large_segment_size_sets_the_segment_of_mid_sized_requests);
    RUN(max_non_split_rounding_lets_an_oversize_block_serve_a_smaller_request);
    RUN(per_process_memory_fraction_caps_reserved_bytes_at_its_share_of_the_device);
    RUN(release_available_frees_only_enough_oversize_segments_largest_first);
    RUN(release_available_frees_the_smallest_oversize_segment_that_holds_the_request);
    RUN(release_cached_frees_large_then_small_in_stream_size_address_order);
    RUN(gc_frees_cached_segments_at_least_as_old_as_the_average_over_the_threshold);
    RUN(gc_does_nothing_without_a_cap_and_the_cache_goes_whole_instead);
    RUN(expandable_segments_grow_one_range_by_pages);
    RUN(expandable_segments_unmap_whole_free_pages_and_keep_partial_ones);
    RUN(expandable_best_fit_passes_over_a_block_that_could_grow);
    RUN(expandable_segments_check_the_cap_against_the_segment_size);
    RUN(expandable_segments_map_nothing_when_the_device_is_full);
    return check_summary();
}
