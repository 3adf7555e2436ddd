/*
 * test_alloc_conf.c — PYTORCH_CUDA_ALLOC_CONF's syntax and keys (common/alloc_conf.h): what
 * PyTorch 2.11 accepts, what it refuses and with which message, round_size and the segment size
 * under the settings (the worked examples of PyTorch's own arithmetic), the cap, and writing
 * settings back.
 */
#include <string.h>

#include "alloc_conf.h"
#include "check.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

static rs_alloc_conf parsed(const char *text)
{
    rs_alloc_conf c;
    char why[256];
    rs_alloc_conf_reset(&c);
    int rc = rs_alloc_conf_parse(&c, text, 0, why, sizeof why);
    CHECK(rc == 0);
    if (rc != 0) fprintf(stderr, "  \"%s\": %s\n", text, why);
    return c;
}

/* `text` is refused with a message containing `msg`, and the settings are left as they were. */
static int refused(const char *text, const char *msg)
{
    rs_alloc_conf c;
    char why[256];
    rs_alloc_conf_reset(&c);
    c.expandable_segments = 1;
    c.max_split_size = 64 * MiB;
    rs_alloc_conf before = c;
    int rc = rs_alloc_conf_parse(&c, text, 0, why, sizeof why);
    int ok = rc == -1 && strstr(why, msg) && memcmp(&c, &before, sizeof c) == 0;
    if (!ok) fprintf(stderr, "  \"%s\": rc %d, \"%s\", expected \"%s\"\n", text, rc, why, msg);
    return ok;
}

TEST(empty_settings_are_pytorch_defaults)
{
    rs_alloc_conf c = parsed("");
    rs_alloc_conf z;
    memset(&z, 0, sizeof z);
    CHECK(memcmp(&c, &z, sizeof c) == 0);
    CHECK_EQ_U64(rs_alloc_conf_max_split(&c), UINT64_MAX);
    CHECK_EQ_U64(rs_alloc_conf_large_segment(&c), 20 * MiB);
    CHECK_EQ_U64(rs_alloc_conf_max_non_split_rounding(&c), 20 * MiB);
    CHECK(!rs_alloc_conf_cap(&c, 0, 80 * GiB, NULL));
}

TEST(keys_and_values_parse_with_blanks_anywhere)
{
    rs_alloc_conf c = parsed(" max_split_size_mb : 128 , expandable_segments:True,"
                             "garbage_collection_threshold:0.6,max_non_split_rounding_mb:64,"
                             "per_process_memory_fraction:0.5, release_lock_on_cudamalloc:True");
    CHECK_EQ_U64(c.max_split_size, 128 * MiB);
    CHECK(c.expandable_segments == 1);
    CHECK(c.garbage_collection_threshold == 0.6);
    CHECK_EQ_U64(rs_alloc_conf_max_non_split_rounding(&c), 64 * MiB);
    CHECK(c.has_fraction && c.memory_fraction == 0.5);
    CHECK(c.release_lock_on_cudamalloc == 1);
    CHECK(c.given == (RS_CONF_MAX_SPLIT | RS_CONF_EXPANDABLE | RS_CONF_GC_THRESHOLD |
                      RS_CONF_MAX_NON_SPLIT_ROUNDING | RS_CONF_FRACTION | RS_CONF_OTHER));
    CHECK(strcmp(c.text, " max_split_size_mb : 128 , expandable_segments:True,"
                         "garbage_collection_threshold:0.6,max_non_split_rounding_mb:64,"
                         "per_process_memory_fraction:0.5, release_lock_on_cudamalloc:True") == 0);
}

TEST(integers_are_read_as_stoull_reads_them)
{
    CHECK_EQ_U64(parsed("max_split_size_mb:+128").max_split_size, 128 * MiB);
    CHECK_EQ_U64(parsed("max_split_size_mb:200abc").max_split_size, 200 * MiB);
    /* clamped to SIZE_MAX / MiB MiB, which no block reaches: unlimited */
    CHECK_EQ_U64(parsed("max_split_size_mb:18446744073709551615").max_split_size, 0);
    CHECK(refused("max_split_size_mb:abc", "max_split_size_mb: expected an integer, got 'abc'"));
}

TEST(roundup_power2_divisions_single_value_sets_every_interval)
{
    rs_alloc_conf c = parsed("roundup_power2_divisions:4");
    for (unsigned k = 0; k < RS_CONF_INTERVALS; k++) CHECK_EQ_U64(c.roundup_divisions[k], 4);
    CHECK(refused("roundup_power2_divisions:3", "For roundups, the divisions has to be power of 2 "));
    CHECK(refused("roundup_power2_divisions:0", "For roundups, the divisions has to be power of 2 "));
}

TEST(roundup_power2_divisions_list_fills_intervals_as_pytorch)
{
    /* PyTorch's documented example: < 512 MiB no rounding, [512 MiB, 1 GiB) 2, [1, 2) GiB 4,
     * from 2 GiB on 8 */
    rs_alloc_conf c = parsed("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
    static const uint32_t want[RS_CONF_INTERVALS] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 8, 8, 8, 8};
    for (unsigned k = 0; k < RS_CONF_INTERVALS; k++) CHECK_EQ_U64(c.roundup_divisions[k], want[k]);
    /* '>' with no boundary before it leaves the first interval alone */
    c = parsed("roundup_power2_divisions:[>:4]");
    CHECK_EQ_U64(c.roundup_divisions[0], 0);
    for (unsigned k = 1; k < RS_CONF_INTERVALS; k++) CHECK_EQ_U64(c.roundup_divisions[k], 4);
    /* intervals between two boundaries keep 0; a boundary beyond 32 GiB is the last interval */
    c = parsed("roundup_power2_divisions:[2:4,64:8,65536:2]");
    CHECK_EQ_U64(c.roundup_divisions[0], 4);
    CHECK_EQ_U64(c.roundup_divisions[1], 4);
    CHECK_EQ_U64(c.roundup_divisions[2], 0);
    CHECK_EQ_U64(c.roundup_divisions[6], 8);
    CHECK_EQ_U64(c.roundup_divisions[15], 2);
    CHECK(refused("roundup_power2_divisions:[3:4]", "For roundups, the intervals have to be power of 2 "));
    CHECK(refused("roundup_power2_divisions:[256:3]",
                  "For roundups, the divisions has to be power of 2 or 0 to disable roundup "));
    CHECK(refused("roundup_power2_divisions:[256:4", "Expected closing bracket ']'"));
}

TEST(round_size_follows_pytorch_worked_examples)
{
    rs_alloc_conf d4 = parsed("roundup_power2_divisions:4");
    rs_alloc_conf d8 = parsed("roundup_power2_divisions:8");
    rs_alloc_conf none = parsed("");
    CHECK_EQ_U64(rs_alloc_conf_round(&d4, 1000000), 1048576);
    CHECK_EQ_U64(rs_alloc_conf_round(&none, 1000000), 1000448);
    CHECK_EQ_U64(rs_alloc_conf_round(&d4, 5 * MiB + 1), 6 * MiB);
    CHECK_EQ_U64(rs_alloc_conf_round(&none, 5 * MiB + 1), 5 * MiB + 512);
    CHECK_EQ_U64(rs_alloc_conf_round(&d8, 300 * MiB), 320 * MiB);
    CHECK_EQ_U64(rs_alloc_conf_round(&d4, MiB + 1), 1310720);
    /* at most 512 * divisions bytes: plain 512-byte rounding */
    CHECK_EQ_U64(rs_alloc_conf_round(&d4, 1200), 1536);
    /* powers of two and exact steps stay */
    CHECK_EQ_U64(rs_alloc_conf_round(&d4, 64 * MiB), 64 * MiB);
    CHECK_EQ_U64(rs_alloc_conf_round(&d4, 80 * MiB), 80 * MiB);
    CHECK_EQ_U64(rs_alloc_conf_round(&none, 1), 512);
}

TEST(segment_size_follows_the_large_segment_size)
{
    rs_alloc_conf c = parsed("");
    CHECK_EQ_U64(rs_alloc_conf_segment_size(&c, 512), 2 * MiB);
    CHECK_EQ_U64(rs_alloc_conf_segment_size(&c, MiB), 2 * MiB);
    CHECK_EQ_U64(rs_alloc_conf_segment_size(&c, MiB + 512), 20 * MiB);
    CHECK_EQ_U64(rs_alloc_conf_segment_size(&c, 10 * MiB), 10 * MiB);
    CHECK_EQ_U64(rs_alloc_conf_segment_size(&c, 35 * MiB + 1), 36 * MiB);
    c = parsed("large_segment_size_mb:40");
    CHECK_EQ_U64(rs_alloc_conf_segment_size(&c, 5 * MiB), 40 * MiB);
    CHECK_EQ_U64(rs_alloc_conf_max_non_split_rounding(&c), 40 * MiB);
}

TEST(large_segment_size_is_read_first_and_sets_the_minima)
{
    CHECK(refused("max_split_size_mb:30,large_segment_size_mb:40",
                  "CachingAllocator option max_split_size_mb too small, must be >= 40"));
    CHECK(refused("large_segment_size_mb:40,max_non_split_rounding_mb:30",
                  "CachingAllocator option max_non_split_rounding_mb too small, must be >= 40"));
    CHECK(refused("large_segment_size_mb:10", "CachingAllocator option large_segment_size_mb must be > 10 MB"));
    CHECK_EQ_U64(parsed("max_split_size_mb:30,large_segment_size_mb:12").max_split_size, 30 * MiB);
}

TEST(bad_values_get_pytorch_messages)
{
    CHECK(refused("max_split_size_mb:19", "CachingAllocator option max_split_size_mb too small, must be >= 20"));
    CHECK(refused("garbage_collection_threshold:1.0", "garbage_collect_threshold is invalid, set it in (0.0, 1.0)"));
    CHECK(refused("garbage_collection_threshold:0", "garbage_collect_threshold is invalid"));
    CHECK(refused("per_process_memory_fraction:1.5", "per_process_memory_fraction is invalid, set it in [0.0, 1.0]"));
    CHECK(refused("expandable_segments:true",
                  "Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'true'"));
    CHECK(refused("backend:magic", "Unknown allocator backend, options are native and cudaMallocAsync"));
    CHECK(refused("pinned_num_register_threads:3", "Number of register threads has to be power of 2 "));
    CHECK(refused("max_split_size:128", "Unrecognized key 'max_split_size' in CUDA allocator config."));
    CHECK(parsed("expandable_segments:True,").expandable_segments); /* PyTorch allows it too */
    CHECK(refused("expandable_segments", "expandable_segments: expected ':' and a value"));
    CHECK(refused("expandable_segments:True max_split_size_mb:128", "Expected 'True' or 'False'"));
}

TEST(lenient_parse_skips_unknown_keys_and_their_lists)
{
    rs_alloc_conf c;
    char why[256];
    rs_alloc_conf_reset(&c);
    CHECK(rs_alloc_conf_parse(&c, "throw_on_cudamalloc_oom:True,expandable_segments_reserve_by_class:"
                                  "[a:1,b:2],max_split_size_mb:256",
                              RS_CONF_LENIENT, why, sizeof why) == 0);
    CHECK_EQ_U64(c.unknown_keys, 2);
    CHECK_EQ_U64(c.max_split_size, 256 * MiB);
}

TEST(a_parse_applies_only_the_keys_it_names)
{
    rs_alloc_conf c = parsed("max_split_size_mb:128,roundup_power2_divisions:4");
    char why[64];
    CHECK(rs_alloc_conf_parse(&c, "expandable_segments:True", 0, why, sizeof why) == 0);
    CHECK_EQ_U64(c.max_split_size, 128 * MiB);
    CHECK_EQ_U64(c.roundup_divisions[3], 4);
    CHECK(c.expandable_segments);
    CHECK(strcmp(c.text, "expandable_segments:True") == 0);
}

TEST(describe_writes_back_what_differs_and_parses_to_the_same)
{
    rs_alloc_conf c = parsed("expandable_segments:True,max_split_size_mb:128,"
                             "roundup_power2_divisions:[256:1,>:4],large_segment_size_mb:40,"
                             "garbage_collection_threshold:0.75,per_process_memory_fraction:0.25");
    char buf[512];
    rs_alloc_conf_describe(&c, NULL, buf, sizeof buf);
    rs_alloc_conf back = parsed(buf);
    CHECK_EQ_U64(back.max_split_size, c.max_split_size);
    CHECK_EQ_U64(back.large_segment_size, c.large_segment_size);
    CHECK(back.expandable_segments && back.garbage_collection_threshold == 0.75);
    CHECK(back.has_fraction && back.memory_fraction == 0.25);
    CHECK(memcmp(back.roundup_divisions, c.roundup_divisions, sizeof c.roundup_divisions) == 0);
    /* against a base: only the change */
    rs_alloc_conf base = parsed("max_split_size_mb:128");
    rs_alloc_conf more = base;
    more.expandable_segments = 1;
    rs_alloc_conf_describe(&more, &base, buf, sizeof buf);
    CHECK(strcmp(buf, "expandable_segments:True") == 0);
    rs_alloc_conf_describe(&base, &base, buf, sizeof buf);
    CHECK(strcmp(buf, "") == 0);
    rs_alloc_conf d8 = parsed("roundup_power2_divisions:8");
    rs_alloc_conf_describe(&d8, NULL, buf, sizeof buf);
    CHECK(strcmp(buf, "roundup_power2_divisions:8") == 0);
}

TEST(cap_is_the_lower_of_the_limit_and_the_fraction_truncated)
{
    rs_alloc_conf c = parsed("per_process_memory_fraction:0.3");
    uint64_t cap = 0;
    uint64_t total = 85520809984ull; /* an H100's totalGlobalMem */
    CHECK(rs_alloc_conf_cap(&c, 0, total, &cap) == 1);
    CHECK_EQ_U64(cap, (uint64_t)(0.3 * (double)total));
    CHECK(rs_alloc_conf_cap(&c, 16 * GiB, total, &cap) == 1);
    CHECK_EQ_U64(cap, 16 * GiB);
    CHECK(rs_alloc_conf_cap(&c, 40 * GiB, total, &cap) == 1);
    CHECK_EQ_U64(cap, (uint64_t)(0.3 * (double)total));
    /* 1.0 is no cap at all; 0 is a cap of nothing */
    rs_alloc_conf one = parsed("per_process_memory_fraction:1.0");
    rs_alloc_conf zero = parsed("per_process_memory_fraction:0");
    CHECK(rs_alloc_conf_cap(&one, 0, total, &cap) == 0);
    CHECK(rs_alloc_conf_cap(&zero, 0, total, &cap) == 1);
    CHECK_EQ_U64(cap, 0);
}

int main(void)
{
    RUN(empty_settings_are_pytorch_defaults);
    RUN(keys_and_values_parse_with_blanks_anywhere);
    RUN(integers_are_read_as_stoull_reads_them);
    RUN(roundup_power2_divisions_single_value_sets_every_interval);
    RUN(roundup_power2_divisions_list_fills_intervals_as_pytorch);
    RUN(round_size_follows_pytorch_worked_examples);
    RUN(segment_size_follows_the_large_segment_size);
    RUN(large_segment_size_is_read_first_and_sets_the_minima);
    RUN(bad_values_get_pytorch_messages);
    RUN(lenient_parse_skips_unknown_keys_and_their_lists);
    RUN(a_parse_applies_only_the_keys_it_names);
    RUN(describe_writes_back_what_differs_and_parses_to_the_same);
    RUN(cap_is_the_lower_of_the_limit_and_the_fraction_truncated);
    return check_summary();
}
