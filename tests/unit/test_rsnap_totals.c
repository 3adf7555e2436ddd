/*
 * test_rsnap_totals.c — the .rsnap decoder's totals-only read (rs_rsnap_decode_totals), the fast
 * path `ranksnap diff` reads large jobs with, against the whole decode: the same identity,
 * totals, OOM record and communicators, the same summary peaks; no history, segments or stacks;
 * and the same refusals of a file that is not right (truncated, newer, trailing bytes, a field
 * of the wrong type).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rsnap_decode.h"
#include "snapshot_fixture.h"
#include "summary.h"

static void same_head(const rs_snap *a, const rs_snap *t)
{
    CHECK(t->totals_only && !a->totals_only);
    CHECK(a->version == t->version && a->rank == t->rank && a->world_size == t->world_size);
    CHECK(strcmp(a->host, t->host) == 0 && strcmp(a->job, t->job) == 0 && a->complete == t->complete);
    CHECK(a->device.total_bytes == t->device.total_bytes && a->n_devices == t->n_devices);
    CHECK(memcmp(&a->time.clock_offset_us, &t->time.clock_offset_us, sizeof a->time.clock_offset_us) == 0);
    CHECK(a->totals.allocated_bytes_peak == t->totals.allocated_bytes_peak);
    CHECK(a->totals.reserved_bytes_peak == t->totals.reserved_bytes_peak);
    CHECK(a->totals.outside_bytes_peak == t->totals.outside_bytes_peak);
    CHECK(a->totals.memory_limit_bytes == t->totals.memory_limit_bytes);
    CHECK(a->totals.n_outside_labels == t->totals.n_outside_labels);
    CHECK(a->has_oom == t->has_oom && a->oom.requested == t->oom.requested &&
          a->oom.step == t->oom.step && a->oom.device_free == t->oom.device_free);
    CHECK(a->n_comms == t->n_comms);
    if (a->n_comms == t->n_comms && a->n_comms)
        CHECK(memcmp(a->comms, t->comms, a->n_comms * sizeof *a->comms) == 0);
    /* what it leaves out */
    CHECK(t->history.count == 0 && t->n_segments == 0 && t->n_stacks == 0 && t->n_frames == 0);
    CHECK(t->oom.stack == 0);
}

TEST(totals_only_reads_what_the_whole_decode_reads_of_the_peaks)
{
    fixture f;
    size_t len = 0;
    char *buf = fixture_encoded(&f, &len);
    CHECK(buf != NULL);
    rs_snap *a = NULL, *t = NULL;
    CHECK(rs_rsnap_decode(buf, len, "fixture", &a) == RANKSNAP_OK);
    CHECK(rs_rsnap_decode_totals(buf, len, "fixture", &t) == RANKSNAP_OK);
    if (a && t) {
        same_head(a, t);
        CHECK(a->history.count > 0 && a->n_stacks > 0);
        rs_summary sa, st;
        rs_summary_of(a, &sa);
        rs_summary_of(t, &st);
        CHECK(st.totals_only && !sa.totals_only);
        CHECK_EQ_U64(st.peak_allocated, sa.peak_allocated);
        CHECK_EQ_U64(st.peak_reserved, sa.peak_reserved);
        CHECK_EQ_U64(st.outside_peak, sa.outside_peak);
        CHECK(st.rank == sa.rank && st.oom == sa.oom && t->n_comms == a->n_comms);
        CHECK(st.n_steps == 0 && st.n_sites == 0 && sa.n_steps > 0);
    }
    rs_snap_free(a);
    rs_snap_free(t);
    free(buf);
    fixture_free(&f);
}

/* every cut of the file, a newer version, trailing bytes and a mistyped totals field: refused by
 * both reads, with the same message */
TEST(totals_only_refuses_what_the_whole_decode_refuses)
{
    fixture f;
    size_t len = 0;
    char *buf = fixture_encoded(&f, &len);
    CHECK(buf != NULL);
    if (!buf) return;
    char msg[1024];
    size_t refused = 0;
    for (size_t cut = 0; cut < len; cut += 1 + cut / 16) {
        rs_snap *a = NULL, *t = NULL;
        ranksnap_status sa = rs_rsnap_decode(buf, cut, "cut", &a);
        snprintf(msg, sizeof msg, "%s", ranksnap_last_error());
        ranksnap_status st = rs_rsnap_decode_totals(buf, cut, "cut", &t);
        CHECK(sa != RANKSNAP_OK && st == sa && a == NULL && t == NULL);
        CHECK(strcmp(msg, ranksnap_last_error()) == 0);
        refused++;
    }
    CHECK(refused > 16);
    char *more = malloc(len + 1);
    memcpy(more, buf, len);
    more[len] = 0;
    rs_snap *t = NULL;
    CHECK(rs_rsnap_decode_totals(more, len + 1, "more", &t) == RANKSNAP_ERR_FORMAT);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "trailing data");
    /* "version": 1 as the encoder writes it, made 2 */
    char *v = memmem(more, len, "\xa7version\x01", 9);
    CHECK(v != NULL);
    if (v) {
        v[8] = 2;
        CHECK(rs_rsnap_decode_totals(more, len, "newer", &t) == RANKSNAP_ERR_FORMAT);
        CHECK_STR_CONTAINS(ranksnap_last_error(), "version 2 is newer than this reader");
        v[8] = 1;
    }
    /* "num_ooms": a uint made a string */
    char *k = memmem(more, len, "\xa8num_ooms", 9);
    CHECK(k != NULL);
    if (k) {
        unsigned char old = (unsigned char)k[9];
        k[9] = (char)0xa1; /* a one-byte string in place of the count */
        rs_snap *a = NULL;
        ranksnap_status sa = rs_rsnap_decode(more, len, "typed", &a);
        snprintf(msg, sizeof msg, "%s", ranksnap_last_error());
        CHECK(sa == RANKSNAP_ERR_FORMAT && rs_rsnap_decode_totals(more, len, "typed", &t) == sa);
        CHECK(strcmp(msg, ranksnap_last_error()) == 0);
        k[9] = (char)old;
    }
    free(more);
    free(buf);
    fixture_free(&f);
}

int main(void)
{
    RUN(totals_only_reads_what_the_whole_decode_reads_of_the_peaks);
    RUN(totals_only_refuses_what_the_whole_decode_refuses);
    return check_summary();
}
