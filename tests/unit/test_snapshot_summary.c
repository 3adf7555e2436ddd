/*
 * test_snapshot_summary.c — `ranksnap summary` tells a person who this rank was, how much it used
 * at its peak, whether and why it ran out of memory, and which source lines hold the memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "snapshot_fixture.h"
#include "cmd_summary.h"

/* The summary as a string (malloc'ed), or NULL. */
static char *summary_of(const rs_snap *s, const char *path, ranksnap_status *st)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) return NULL;
    *st = rs_cmd_summary_print(out, s, path);
    fclose(out);
    return text;
}

static rs_snap *decoded_fixture(int complete)
{
    fixture f;
    size_t len;
    rs_snap *s = NULL;
    CHECK(fixture_init(&f, 1) == 0);
    f.src.complete = complete;
    char *buf = fixture_encode(&f, &len);
    CHECK(buf != NULL);
    if (buf) CHECK(rs_rsnap_decode(buf, len, "fixture", &s) == RANKSNAP_OK);
    free(buf);
    fixture_free(&f);
    return s;
}

TEST(summary_names_the_rank_device_peaks_and_counts)
{
    rs_snap *s = decoded_fixture(1);
    ranksnap_status st = RANKSNAP_ERR_IO;
    char *text = s ? summary_of(s, "out/rank-00001.rsnap", &st) : NULL;
    CHECK(st == RANKSNAP_OK);
    CHECK_STR_CONTAINS(text, "out/rank-00001.rsnap\n");
    CHECK_STR_CONTAINS(text, "rank        1 of 4 on node07, pid 4242, job job-77");
    CHECK_STR_CONTAINS(text, "device      1: ranksnap-sim, 80.00 GiB");
    CHECK_STR_CONTAINS(text, "backend sim");
    CHECK_STR_CONTAINS(text, "snapshot    complete");
    CHECK_STR_CONTAINS(text, "allocated   peak 30.00 MiB at step 10, now 24.00 MiB");
    CHECK_STR_CONTAINS(text, "reserved    peak 62.00 MiB, now 42.00 MiB");
    CHECK_STR_CONTAINS(text, "active      peak 31.00 MiB");
    CHECK_STR_CONTAINS(text, "limit       16.00 GiB");
    CHECK_STR_CONTAINS(text, "outside     peak 8.00 MiB, at end 6.00 MiB");
    CHECK_STR_CONTAINS(text, "3 allocs, 1 frees, 1 retries, 1 OOMs");
    CHECK_STR_CONTAINS(text, "13 recorded, 0 dropped (history holds 13 of 64)");
    CHECK_STR_CONTAINS(text, "segments    3, live blocks 3 holding 24.00 MiB");
    free(text);
    rs_snap_free(s);
}

TEST(summary_explains_the_oom_with_its_request_state_and_site)
{
    rs_snap *s = decoded_fixture(1);
    ranksnap_status st = RANKSNAP_ERR_IO;
    char *text = s ? summary_of(s, NULL, &st) : NULL;
    CHECK(st == RANKSNAP_OK);
    CHECK_STR_CONTAINS(text, "OUT OF MEMORY at step 11: tried to allocate 3.00 MiB (rounded to "
                             "20.00 MiB)");
    CHECK_STR_CONTAINS(text, "device free 40.00 MiB of 80.00 GiB; allocated 24.00 MiB, reserved "
                             "42.00 MiB, memory limit 16.00 GiB");
    CHECK_STR_CONTAINS(text, "  at alloc_weights (model.c:42) (stream 0x5551000)");
    free(text);
    rs_snap_free(s);
}

TEST(summary_lists_live_sites_by_bytes_including_unresolved_and_missing_stacks)
{
    rs_snap *s = decoded_fixture(0);
    ranksnap_status st = RANKSNAP_ERR_IO;
    char *text = s ? summary_of(s, NULL, &st) : NULL;
    CHECK(st == RANKSNAP_OK);
    CHECK_STR_CONTAINS(text, "INCOMPLETE (written from a crash path)");
    const char *a = text ? strstr(text, "20.00 MiB       1 block   (no stack recorded)") : NULL;
    const char *b = text ? strstr(text, "4.00 MiB       1 block   alloc_weights model.c:42") : NULL;
    /* the unresolved frame with no module says nothing: its caller is the site */
    const char *c = text ? strstr(text, "512 bytes       1 block   forward train.c:12") : NULL;
    CHECK(a && b && c);
    CHECK(a < b && b < c);
    /* the block awaiting its stream event is not live */
    CHECK(text && strstr(text, "build_layer") == NULL);
    free(text);
    rs_snap_free(s);
}

/* Hand-built: twelve sites, two of which are two pcs on one line and must count as one. */
TEST(summary_merges_pcs_of_one_line_and_shows_the_top_ten)
{
    static char fn[13][24], file[] = "net.c", unknown[] = "??", mod[] = "/opt/libnet.so";
    rs_snap_frame frames[13];
    rs_snap_stack stacks[13];
    uint32_t idx[13];
    rs_snap_block blocks[13];
    rs_snap_segment seg;
    rs_snap_module module = {mod, 0x7f0000000000, unknown};
    uint64_t streams[1] = {0};
    rs_snap s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < 13; i++) {
        snprintf(fn[i], sizeof fn[i], "layer%02d", i < 12 ? i : 0);
        frames[i] = (rs_snap_frame){0x1000 + (uint64_t)i, 0, fn[i], file, i < 12 ? 100 + i : 100, 0};
        idx[i] = (uint32_t)i;
        stacks[i] = (rs_snap_stack){1, &idx[i]};
        /* site i holds (i + 1) MiB; frame 12 is another pc on layer00's line with 20 MiB */
        uint64_t mib = i < 12 ? (uint64_t)i + 1 : 20;
        blocks[i] = (rs_snap_block){0x10000000ull * (uint64_t)(i + 1), mib << 20, 0, (uint32_t)i + 1,
                                RS_BLOCK_ACTIVE_ALLOCATED};
    }
    seg = (rs_snap_segment){0, 1ull << 30, 0, 0, 0, 0, 0, 0, {0, 0}, 0, 13, blocks};
    s.world_size = 1;
    s.host = unknown;
    s.job = unknown;
    s.backend = unknown;
    s.device.name = unknown;
    s.device.uuid = unknown;
    s.n_streams = 1;
    s.streams = streams;
    s.n_segments = 1;
    s.segments = &seg;
    s.n_stacks = 13;
    s.stacks = stacks;
    s.n_frames = 13;
    s.frames = frames;
    s.n_modules = 1;
    s.modules = &module;

    ranksnap_status st = RANKSNAP_ERR_IO;
    char *text = summary_of(&s, NULL, &st);
    CHECK(st == RANKSNAP_OK);
    const char *first = text ? strstr(text, "21.00 MiB       2 blocks  layer00 net.c:100") : NULL;
    const char *second = text ? strstr(text, "12.00 MiB       1 block   layer11 net.c:111") : NULL;
    CHECK(first && second && first < second);
    CHECK_STR_CONTAINS(text, "  ... and 2 more sites");
    /* 10 shown: layer00 and layer11..layer03; layer02 and layer01 are the two left out */
    CHECK(text && strstr(text, "layer03 net.c:103") != NULL);
    CHECK(text && strstr(text, "layer02") == NULL && strstr(text, "layer01") == NULL);
    free(text);
}

TEST(summary_to_a_full_device_is_an_io_error_naming_the_file)
{
    rs_snap *s = decoded_fixture(1);
    FILE *full = fopen("/dev/full", "w");
    CHECK(full != NULL);
    if (full && s) {
        CHECK(rs_cmd_summary_print(full, s, "rank-00001.rsnap") == RANKSNAP_ERR_IO);
        CHECK_STR_CONTAINS(ranksnap_last_error(), "rank-00001.rsnap: writing the summary failed");
        fclose(full);
    }
    rs_snap_free(s);
}

int main(void)
{
    RUN(summary_names_the_rank_device_peaks_and_counts);
    RUN(summary_explains_the_oom_with_its_request_state_and_site);
    RUN(summary_lists_live_sites_by_bytes_including_unresolved_and_missing_stacks);
    RUN(summary_merges_pcs_of_one_line_and_shows_the_top_ten);
    RUN(summary_to_a_full_device_is_an_io_error_naming_the_file);
    return check_summary();
}
