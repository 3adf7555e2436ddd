/*
 * test_crafted_inputs.c — the decoders on inputs made to hurt them (crafted_inputs.h): keys aimed
 * at their hash tables, sizes that overflow every sum, annotations pointing into nothing. Each
 * decodes (or fails with a format error) into a snapshot that passes the model's one check
 * (collector/model/snap_check.h) and summarises; the sanitizer build (CI) runs them under
 * ASan/UBSan, where an overflow of a signed sum aborts. How long they take is measured by
 * tests/bench/crafted_bench.c, never asserted here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "crafted_inputs.h"
#include "pickle.h"
#include "report_text.h"
#include "ring_decode.h"
#include "snap_check.h"
#include "summary.h"
#include "torch_decode.h"

/* Decodes as a ring (1) or a pickle (0); the snapshot (checked and summarised) or NULL. */
static rs_snap *decode(const unsigned char *buf, size_t len, int ring)
{
    rs_snap *s = NULL;
    CHECK(buf != NULL);
    if (!buf) return NULL;
    ranksnap_status st = ring ? rs_ring_decode(buf, len, "crafted", &s)
                              : rs_torch_decode(buf, len, "crafted", NULL, &s);
    if (st != RANKSNAP_OK) fprintf(stderr, "decode: %s\n", ranksnap_last_error());
    CHECK(st == RANKSNAP_OK && s != NULL);
    if (!s) return NULL;
    CHECK(rs_snap_check(s, "crafted") == RANKSNAP_OK);
    rs_summary sum;
    rs_summary_of(s, &sum);
    CHECK(sum.peak_reserved >= sum.reserved_at_peak || sum.peak_reserved == 0);
    return s;
}

TEST(ring_of_100000_frees_at_addresses_one_slot_apart_decodes_every_free)
{
    size_t len = 0;
    unsigned char *buf = crafted_ring_frees(100000, &len);
    rs_snap *s = decode(buf, len, 1);
    if (s) {
        CHECK_EQ_U64(s->totals.num_frees, 100000);
        /* each free was completed at once: both events come back */
        CHECK_EQ_U64(s->history.count, 200000);
        /* alive before the history, freed in it: the level starts at their sum and ends at 0 */
        CHECK_EQ_U64(s->totals.allocated_bytes_peak, 100000ull * 512);
        CHECK_EQ_U64(s->totals.allocated_bytes_current, 0);
    }
    rs_snap_free(s);
    free(buf);
}

TEST(ring_whose_sizes_overflow_every_sum_saturates_instead_of_wrapping)
{
    size_t len = 0;
    unsigned char *buf = crafted_ring_overflow(&len);
    rs_snap *s = decode(buf, len, 1);
    if (s) {
        /* 20 allocations of 2^62 and a peak of 2^64 - 1 at the last step: the most a level can
         * say (2^63 - 1, where the walk's signed levels saturate), never a wrapped small number */
        CHECK(s->totals.allocated_bytes_peak >= (uint64_t)INT64_MAX);
        CHECK(s->totals.reserved_bytes_peak >= s->totals.reserved_bytes_current);
        CHECK(s->has_oom);
        /* the text report of it renders */
        rs_summary sum;
        rs_summary_of(s, &sum);
        rs_compare_result *r = NULL;
        CHECK(rs_compare(&sum, (const rs_snap *const *)&s, 1, 1, NULL, &r) == RANKSNAP_OK);
        char *text = NULL;
        size_t n = 0;
        FILE *m = open_memstream(&text, &n);
        CHECK(m && r && rs_report_text(m, r) == RANKSNAP_OK);
        if (m) fclose(m);
        CHECK_STR_CONTAINS(text, "rank 0 ran out of memory");
        free(text);
        rs_compare_result_free(r);
    }
    rs_snap_free(s);
    free(buf);
}

TEST(ring_annotations_are_left_out_since_their_names_died_with_the_process)
{
    size_t len = 0;
    unsigned char *buf = crafted_ring_annotations(&len);
    rs_snap *s = decode(buf, len, 1);
    if (s) {
        CHECK_EQ_U64(s->n_strings, 0);
        CHECK_EQ_U64(s->history.count, 1);
        CHECK(s->history.action[0] == RS_ACT_ALLOC);
    }
    rs_snap_free(s);
    free(buf);
}

TEST(every_truncation_and_torn_header_of_a_crafted_ring_fails_cleanly)
{
    size_t len = 0;
    unsigned char *buf = crafted_ring_overflow(&len);
    CHECK(buf != NULL);
    if (!buf) return;
    int bad = 0;
    for (size_t cut = 0; cut < len; cut += 61) {
        rs_snap *s = NULL;
        ranksnap_status st = rs_ring_decode(buf, cut, "cut", &s);
        bad += !(st == RANKSNAP_ERR_FORMAT && s == NULL);
        rs_snap_free(s);
    }
    /* the header's counts and sizes, each byte flipped to every value that matters */
    rs_ring_header *h = (rs_ring_header *)buf;
    unsigned char *fields[] = {(unsigned char *)&h->capacity, (unsigned char *)&h->max_segments,
                               (unsigned char *)&h->n_streams, (unsigned char *)&h->rank,
                               (unsigned char *)&h->world_size, (unsigned char *)&h->total,
                               (unsigned char *)&h->step_total};
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        for (int byte = 0; byte < 8; byte++) {
            unsigned char keep = fields[f][byte];
            for (int v = 0; v < 256; v += 51) {
                fields[f][byte] = (unsigned char)v;
                rs_snap *s = NULL;
                ranksnap_status st = rs_ring_decode(buf, len, "torn", &s);
                bad += st == RANKSNAP_OK ? rs_snap_check(s, "torn") != RANKSNAP_OK
                                         : !(st == RANKSNAP_ERR_FORMAT && s == NULL);
                rs_snap_free(s);
            }
            fields[f][byte] = keep;
        }
    }
    CHECK_EQ_U64(bad, 0);
    free(buf);
}

TEST(pickle_of_allocations_at_addresses_aimed_at_the_address_hash_decodes)
{
    size_t len = 0;
    unsigned char *buf = crafted_pickle_addresses(20000, &len);
    rs_snap *s = decode(buf, len, 0);
    if (s) CHECK_EQ_U64(s->totals.num_allocs, 20000);
    rs_snap_free(s);
    free(buf);
}

TEST(pickle_of_streams_aimed_at_the_stream_table_decodes_every_stream)
{
    size_t len = 0;
    unsigned char *buf = crafted_pickle_streams(20000, &len);
    rs_snap *s = decode(buf, len, 0);
    if (s) CHECK_EQ_U64(s->n_streams, 20000);
    rs_snap_free(s);
    free(buf);
}

TEST(pickle_of_lines_aimed_at_the_frame_cache_decodes_every_frame)
{
    size_t len = 0;
    unsigned char *buf = crafted_pickle_lines(2000, 12, &len);
    rs_snap *s = decode(buf, len, 0);
    if (s) {
        CHECK_EQ_U64(s->n_frames, 2000);
        CHECK_EQ_U64(s->n_stacks, 2000);
    }
    rs_snap_free(s);
    free(buf);
}

TEST(pickle_memo_keys_aimed_at_the_memo_table_decode)
{
    size_t len = 0;
    unsigned char *buf = crafted_pickle_memo(20000, &len);
    CHECK(buf != NULL);
    rs_pickle_doc *doc = NULL;
    CHECK(buf && rs_pickle_decode(buf, len, "crafted", &doc) == RANKSNAP_OK && doc);
    rs_pickle_free(doc);
    /* not a snapshot: refused as one, cleanly */
    rs_snap *s = NULL;
    CHECK(buf && rs_torch_decode(buf, len, "crafted", NULL, &s) == RANKSNAP_ERR_FORMAT && !s);
    free(buf);
}

int main(void)
{
    RUN(ring_of_100000_frees_at_addresses_one_slot_apart_decodes_every_free);
    RUN(ring_whose_sizes_overflow_every_sum_saturates_instead_of_wrapping);
    RUN(ring_annotations_are_left_out_since_their_names_died_with_the_process);
    RUN(every_truncation_and_torn_header_of_a_crafted_ring_fails_cleanly);
    RUN(pickle_of_allocations_at_addresses_aimed_at_the_address_hash_decodes);
    RUN(pickle_of_streams_aimed_at_the_stream_table_decodes_every_stream);
    RUN(pickle_of_lines_aimed_at_the_frame_cache_decodes_every_frame);
    RUN(pickle_memo_keys_aimed_at_the_memo_table_decode);
    return check_summary();
}
