/*
 * test_recorder.c — the event ring, its stream and string tables, and stack capture through it
 * (rank/recorder.c).
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "clock.h"
#include "recorder.h"
#include "symbols.h"

static volatile uint32_t sink;

static rs_recorder *new_recorder(uint64_t capacity, rs_stacks *stacks, int enabled)
{
    rs_recorder *r = NULL;
    CHECK_EQ_U64(rs_recorder_create(capacity, stacks, &r), RANKSNAP_OK);
    if (r) rs_recorder_set_enabled(r, enabled);
    return r;
}

/* noinline and with work after the append, so that its frame is the one a stack starts in. */
__attribute__((noinline)) static uint32_t record_alloc_here(rs_recorder *r, int skip)
{
    uint32_t id = rs_recorder_append(r, RS_ACT_ALLOC, 0x1000, 512, NULL, 1, skip);
    sink = id;
    return id;
}

TEST(create_rejects_a_capacity_of_zero)
{
    rs_recorder *r = NULL;
    CHECK_EQ_U64(rs_recorder_create(0, NULL, &r), RANKSNAP_ERR_INVALID_ARGUMENT);
    CHECK(r == NULL);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "at least 1");
    CHECK_EQ_U64(rs_recorder_create(UINT64_MAX, NULL, &r), RANKSNAP_ERR_INVALID_ARGUMENT);
    CHECK(r == NULL);
    r = new_recorder(1, NULL, 1);
    rs_recorder_append(r, RS_ACT_ALLOC, 1, 2, NULL, 0, 0);
    rs_recorder_append(r, RS_ACT_FREE_REQUESTED, 1, 2, NULL, 0, 0);
    CHECK_EQ_U64(rs_recorder_count(r), 1);
    CHECK_EQ_U64(rs_recorder_at(r, 0)->action, RS_ACT_FREE_REQUESTED);
    rs_recorder_destroy(r);
}

TEST(full_ring_keeps_the_newest_events_in_order_and_counts_the_dropped)
{
    rs_recorder *r = new_recorder(8, NULL, 1);
    CHECK_EQ_U64(rs_recorder_capacity(r), 8);
    for (uint64_t i = 0; i < 20; i++)
        rs_recorder_append(r, RS_ACT_ALLOC, 0x1000 + i, i, NULL, 0, 0);
    CHECK_EQ_U64(rs_recorder_count(r), 8);
    CHECK_EQ_U64(rs_recorder_total(r), 20);
    CHECK_EQ_U64(rs_recorder_dropped(r), 12);
    for (uint64_t i = 0; i < 8; i++) {
        const rs_event *e = rs_recorder_at(r, i);
        CHECK(e != NULL);
        if (e) CHECK_EQ_U64(e->size, 12 + i);
    }
    CHECK(rs_recorder_at(r, 8) == NULL);
    rs_recorder_destroy(r);
}

TEST(partly_filled_ring_returns_events_from_the_first)
{
    rs_recorder *r = new_recorder(8, NULL, 1);
    CHECK(rs_recorder_at(r, 0) == NULL);
    for (uint64_t i = 0; i < 3; i++) rs_recorder_append(r, RS_ACT_STEP, 0, i, NULL, 0, 0);
    CHECK_EQ_U64(rs_recorder_count(r), 3);
    CHECK_EQ_U64(rs_recorder_dropped(r), 0);
    CHECK_EQ_U64(rs_recorder_at(r, 0)->size, 0);
    CHECK_EQ_U64(rs_recorder_at(r, 2)->size, 2);
    CHECK(rs_recorder_at(r, 3) == NULL);
    rs_recorder_destroy(r);
}

TEST(event_carries_time_action_address_size_and_stream)
{
    rs_recorder *r = new_recorder(4, NULL, 1);
    int stream_obj;
    uint64_t before = rs_now_us();
    rs_recorder_append(r, RS_ACT_SEGMENT_ALLOC, 0xabc000, 2u << 20, &stream_obj, 0, 0);
    rs_recorder_append_id(r, RS_ACT_OOM, 123, 1u << 30, NULL, 7);
    uint64_t after = rs_now_us();
    const rs_event *e = rs_recorder_at(r, 0);
    CHECK(e->time_us >= before && e->time_us <= after);
    CHECK_EQ_U64(e->action, RS_ACT_SEGMENT_ALLOC);
    CHECK_EQ_U64(e->addr, 0xabc000);
    CHECK_EQ_U64(e->size, 2u << 20);
    CHECK_EQ_U64(e->stream, 1);
    CHECK_EQ_U64(e->stack_id, 0);
    CHECK_EQ_U64(e->flags, 0);
    e = rs_recorder_at(r, 1);
    CHECK(e->time_us >= rs_recorder_at(r, 0)->time_us && e->time_us <= after);
    CHECK_EQ_U64(e->action, RS_ACT_OOM);
    CHECK_EQ_U64(e->stack_id, 7);
    CHECK_EQ_U64(e->stream, 0);
    rs_recorder_destroy(r);
}

TEST(recording_off_appends_nothing_and_captures_no_stack)
{
    rs_stacks *s = NULL;
    CHECK_EQ_U64(rs_stacks_create(RS_STACKS_NATIVE, 16, &s), RANKSNAP_OK);
    rs_recorder *r = NULL;
    CHECK_EQ_U64(rs_recorder_create(4, s, &r), RANKSNAP_OK);
    CHECK_EQ_U64(rs_recorder_enabled(r), 0); /* off until asked */
    CHECK_EQ_U64(record_alloc_here(r, 0), 0);
    rs_recorder_append_id(r, RS_ACT_STEP, 0, 1, NULL, 0);
    CHECK_EQ_U64(rs_recorder_count(r), 0);
    CHECK_EQ_U64(rs_recorder_total(r), 0);
    CHECK_EQ_U64(rs_stacks_count(s), 0);
    rs_recorder_set_enabled(r, 1);
    CHECK_EQ_U64(rs_recorder_enabled(r), 1);
    CHECK(record_alloc_here(r, 0) != 0);
    rs_recorder_set_enabled(r, 0);
    CHECK_EQ_U64(record_alloc_here(r, 0), 0);
    CHECK_EQ_U64(rs_recorder_count(r), 1);
    rs_recorder_destroy(r);
    rs_stacks_destroy(s);
}

TEST(streams_get_one_index_each_and_null_is_index_0)
{
    rs_recorder *r = new_recorder(16, NULL, 1);
    int a, b;
    CHECK_EQ_U64(rs_recorder_n_streams(r), 1);
    CHECK(rs_recorder_stream(r, 0) == NULL);
    rs_recorder_append(r, RS_ACT_ALLOC, 0, 1, &a, 0, 0);
    rs_recorder_append(r, RS_ACT_ALLOC, 0, 1, NULL, 0, 0);
    rs_recorder_append(r, RS_ACT_ALLOC, 0, 1, &b, 0, 0);
    rs_recorder_append(r, RS_ACT_ALLOC, 0, 1, &a, 0, 0);
    rs_recorder_append(r, RS_ACT_ALLOC, 0, 1, &b, 0, 0);
    CHECK_EQ_U64(rs_recorder_at(r, 0)->stream, 1);
    CHECK_EQ_U64(rs_recorder_at(r, 1)->stream, 0);
    CHECK_EQ_U64(rs_recorder_at(r, 2)->stream, 2);
    CHECK_EQ_U64(rs_recorder_at(r, 3)->stream, 1);
    CHECK_EQ_U64(rs_recorder_at(r, 4)->stream, 2);
    CHECK_EQ_U64(rs_recorder_n_streams(r), 3);
    CHECK(rs_recorder_stream(r, 1) == &a);
    CHECK(rs_recorder_stream(r, 2) == &b);
    CHECK(rs_recorder_stream(r, 3) == NULL);
    CHECK_EQ_U64(rs_recorder_streams_overflowed(r), 0);
    rs_recorder_destroy(r);
}

TEST(streams_beyond_65534_share_the_overflow_index_and_are_counted)
{
    enum { N = 70000 };
    rs_recorder *r = new_recorder(4, NULL, 1);
    char *base = malloc(N);
    CHECK(base != NULL);
    if (!base) return;
    for (size_t i = 0; i < N; i++) rs_recorder_append(r, RS_ACT_ALLOC, 0, 1, base + i, 0, 0);
    CHECK_EQ_U64(rs_recorder_n_streams(r), 65535);
    CHECK_EQ_U64(rs_recorder_streams_overflowed(r), N - 65534);
    CHECK_EQ_U64(rs_recorder_at(r, 3)->stream, RS_STREAM_OTHER);
    CHECK(rs_recorder_stream(r, RS_STREAM_OTHER) == NULL);
    /* Streams seen before the table filled keep their index. */
    rs_recorder_append(r, RS_ACT_ALLOC, 0, 1, base + 65533, 0, 0);
    rs_recorder_append(r, RS_ACT_ALLOC, 0, 1, base, 0, 0);
    CHECK_EQ_U64(rs_recorder_at(r, 2)->stream, 65534);
    CHECK_EQ_U64(rs_recorder_at(r, 3)->stream, 1);
    CHECK(rs_recorder_stream(r, 65534) == base + 65533);
    free(base);
    rs_recorder_destroy(r);
}

TEST(annotation_names_are_stored_once_per_content)
{
    rs_recorder *r = new_recorder(4, NULL, 1);
    char a[] = "forward", b[] = "forward";
    uint32_t ia = rs_recorder_intern_string(r, a);
    uint32_t ib = rs_recorder_intern_string(r, b);
    uint32_t ic = rs_recorder_intern_string(r, "backward");
    CHECK_EQ_U64(ia, 0);
    CHECK_EQ_U64(ib, ia);
    CHECK_EQ_U64(ic, 1);
    CHECK_EQ_U64(rs_recorder_intern_string(r, ""), 2);
    CHECK_EQ_U64(rs_recorder_intern_string(r, NULL), UINT32_MAX);
    CHECK_EQ_U64(rs_recorder_n_strings(r), 3);
    CHECK(strcmp(rs_recorder_string(r, 1), "backward") == 0);
    CHECK(rs_recorder_string(r, 0) != a);
    CHECK(rs_recorder_string(r, 3) == NULL);
    char name[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "range-%d", i);
        CHECK_EQ_U64(rs_recorder_intern_string(r, name), 3 + (uint32_t)i);
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "range-%d", i);
        CHECK_EQ_U64(rs_recorder_intern_string(r, name), 3 + (uint32_t)i);
    }
    CHECK_EQ_U64(rs_recorder_intern_string(r, "forward"), 0);
    CHECK_EQ_U64(rs_recorder_n_strings(r), 1003);
    rs_recorder_destroy(r);
}

TEST(tables_that_cannot_grow_degrade_without_losing_entries)
{
    rs_recorder *r = new_recorder(8, NULL, 1);
    int a, b;
    CHECK_EQ_U64(rs_recorder_intern_string(r, "kept"), 0);
    rs_recorder_append(r, RS_ACT_ALLOC, 0, 1, &a, 0, 0);
    rs_recorder_fail_allocs_after(r, 0);
    char name[32];
    uint32_t failed = 0;
    for (int i = 0; i < 100 && !failed; i++) {
        snprintf(name, sizeof name, "n%d", i);
        if (rs_recorder_intern_string(r, name) == UINT32_MAX) failed = 1;
    }
    CHECK(failed);
    CHECK_EQ_U64(rs_recorder_intern_string(r, "kept"), 0);
    uint64_t before = rs_recorder_n_streams(r);
    char streams[64];
    for (int i = 0; i < 64; i++) rs_recorder_append(r, RS_ACT_ALLOC, 0, 1, streams + i, 0, 0);
    CHECK(rs_recorder_streams_overflowed(r) > 0);
    CHECK_EQ_U64(rs_recorder_at(r, 7)->stream, RS_STREAM_OTHER);
    CHECK_EQ_U64(rs_recorder_n_streams(r), before);
    rs_recorder_append(r, RS_ACT_ALLOC, 0, 1, &b, 0, 0);
    rs_recorder_append(r, RS_ACT_ALLOC, 0, 1, &a, 0, 0);
    CHECK_EQ_U64(rs_recorder_at(r, 7)->stream, 1);
    CHECK_EQ_U64(rs_recorder_count(r), 8);
    rs_recorder_fail_allocs_after(r, UINT64_MAX);
    CHECK(rs_recorder_intern_string(r, "later") != UINT32_MAX);
    rs_recorder_destroy(r);
}

TEST(append_with_stack_starts_at_its_caller_and_skip_leaves_out_more)
{
    rs_stacks *s = NULL;
    CHECK_EQ_U64(rs_stacks_create(RS_STACKS_NATIVE, 16, &s), RANKSNAP_OK);
    rs_recorder *r = new_recorder(16, s, 1);
    CHECK(rs_recorder_stacks(r) == s);
    uint32_t here = record_alloc_here(r, 0);
    uint32_t caller = record_alloc_here(r, 1);
    CHECK(here != 0 && caller != 0 && here != caller);
    CHECK_EQ_U64(rs_recorder_at(r, 0)->stack_id, here);
    CHECK_EQ_U64(rs_recorder_at(r, 1)->stack_id, caller);
    uint32_t no_stack = rs_recorder_append(r, RS_ACT_FREE_REQUESTED, 0x1000, 512, NULL, 0, 0);
    CHECK_EQ_U64(no_stack, 0);
    CHECK_EQ_U64(rs_recorder_at(r, 2)->stack_id, 0);
    int n_here = 0, n_caller = 0;
    const uintptr_t *ph = rs_stacks_get(s, here, &n_here);
    const uintptr_t *pc = rs_stacks_get(s, caller, &n_caller);
    CHECK(ph && pc && n_here >= 2 && n_caller >= 1);
    if (ph && pc && n_here >= 2) CHECK(pc[0] != ph[0]);
    rs_symbols sym;
    CHECK_EQ_U64(rs_symbols_resolve(s, &sym), RANKSNAP_OK);
    if (ph && pc && rs_symbols_have_file_lines()) {
        int li, lj;
        long i = rs_symbols_find(&sym, ph[0], &li);
        long j = rs_symbols_find(&sym, pc[0], &lj);
        CHECK(i >= 0 && j >= 0);
        if (i >= 0) CHECK_STR_CONTAINS(sym.frames[i].function, "record_alloc_here");
        if (j >= 0) CHECK_STR_CONTAINS(sym.frames[j].function, "append_with_stack_starts_at");
    }
    rs_symbols_free(&sym);
    rs_recorder_destroy(r);
    rs_stacks_destroy(s);
}

TEST(recorder_without_stacks_or_with_mode_none_records_stack_id_0)
{
    rs_recorder *r = new_recorder(4, NULL, 1);
    CHECK_EQ_U64(record_alloc_here(r, 0), 0);
    CHECK_EQ_U64(rs_recorder_count(r), 1);
    CHECK(rs_recorder_stacks(r) == NULL);
    rs_recorder_destroy(r);
    rs_stacks *s = NULL;
    CHECK_EQ_U64(rs_stacks_create(RS_STACKS_NONE, 16, &s), RANKSNAP_OK);
    r = new_recorder(4, s, 1);
    CHECK_EQ_U64(record_alloc_here(r, 0), 0);
    CHECK_EQ_U64(rs_recorder_at(r, 0)->stack_id, 0);
    CHECK_EQ_U64(rs_stacks_count(s), 0);
    rs_recorder_destroy(r);
    rs_stacks_destroy(s);
}

TEST(clear_empties_the_ring_and_keeps_stream_and_string_indices)
{
    rs_recorder *r = new_recorder(4, NULL, 1);
    int a;
    for (int i = 0; i < 6; i++) rs_recorder_append(r, RS_ACT_ALLOC, 0, 1, &a, 0, 0);
    CHECK_EQ_U64(rs_recorder_intern_string(r, "fwd"), 0);
    rs_recorder_clear(r);
    CHECK_EQ_U64(rs_recorder_count(r), 0);
    CHECK_EQ_U64(rs_recorder_total(r), 0);
    CHECK_EQ_U64(rs_recorder_dropped(r), 0);
    CHECK(rs_recorder_at(r, 0) == NULL);
    CHECK_EQ_U64(rs_recorder_n_streams(r), 2);
    CHECK_EQ_U64(rs_recorder_n_strings(r), 1);
    rs_recorder_append(r, RS_ACT_ALLOC, 7, 1, &a, 0, 0);
    CHECK_EQ_U64(rs_recorder_count(r), 1);
    CHECK_EQ_U64(rs_recorder_at(r, 0)->addr, 7);
    CHECK_EQ_U64(rs_recorder_at(r, 0)->stream, 1);
    CHECK_EQ_U64(rs_recorder_intern_string(r, "fwd"), 0);
    rs_recorder_destroy(r);
}

TEST(memory_is_at_most_64_bytes_per_event_before_stacks)
{
    enum { CAP = 100000 };
    CHECK_EQ_U64(sizeof(rs_event), 32);
    rs_recorder *r = new_recorder(CAP, NULL, 1);
    size_t empty = rs_recorder_memory_bytes(r);
    CHECK(empty >= (size_t)CAP * sizeof(rs_event));
    char streams[256];
    char name[32];
    for (int i = 0; i < 256; i++) {
        rs_recorder_append(r, RS_ACT_ALLOC, 0, 1, streams + i, 0, 0);
        snprintf(name, sizeof name, "annotation-%d", i);
        rs_recorder_intern_string(r, name);
    }
    for (int i = 0; i < 2 * CAP; i++) rs_recorder_append(r, RS_ACT_ALLOC, 0, 1, NULL, 0, 0);
    size_t full = rs_recorder_memory_bytes(r);
    CHECK(full > empty); /* the tables are counted */
    CHECK(full <= (size_t)CAP * 64);
    rs_recorder_destroy(r);
}

int main(void)
{
    RUN(create_rejects_a_capacity_of_zero);
    RUN(full_ring_keeps_the_newest_events_in_order_and_counts_the_dropped);
    RUN(partly_filled_ring_returns_events_from_the_first);
    RUN(event_carries_time_action_address_size_and_stream);
    RUN(recording_off_appends_nothing_and_captures_no_stack);
    RUN(streams_get_one_index_each_and_null_is_index_0);
    RUN(streams_beyond_65534_share_the_overflow_index_and_are_counted);
    RUN(annotation_names_are_stored_once_per_content);
    RUN(tables_that_cannot_grow_degrade_without_losing_entries);
    RUN(append_with_stack_starts_at_its_caller_and_skip_leaves_out_more);
    RUN(recorder_without_stacks_or_with_mode_none_records_stack_id_0);
    RUN(clear_empties_the_ring_and_keeps_stream_and_string_indices);
    RUN(memory_is_at_most_64_bytes_per_event_before_stacks);
    return check_summary();
}
