/*
 * test_options.c — RANKSNAP_* parsing, defaults, sizes, per-rank limits, --help-env, warnings.
 *
 * Options are loaded through a table-driven getenv (name=value pairs), so the tests never depend
 * on the environment they run in; only the test of rs_options_load_env sets real variables, and
 * it removes them again.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "log.h"
#include "options.h"
#include "text.h"

/* NULL-terminated list of "NAME=value". */
static const char *table_get(const char *name, void *ctx)
{
    const char *const *kv = ctx;
    size_t n = strlen(name);
    for (; *kv; kv++)
        if (strncmp(*kv, name, n) == 0 && (*kv)[n] == '=') return *kv + n + 1;
    return NULL;
}

static ranksnap_status load1(rs_options *o, const char *kv)
{
    const char *env[] = {kv, NULL};
    return rs_options_load(o, table_get, (void *)env);
}

/* The option `kv` ("NAME=value") is rejected with a message naming it and what was expected. */
static int rejected(const char *kv)
{
    rs_options o;
    ranksnap_status st = load1(&o, kv);
    const char *msg = ranksnap_last_error();
    int ok = st == RANKSNAP_ERR_OPTION && strncmp(msg, kv, strlen(kv)) == 0 &&
             strncmp(msg + strlen(kv), ": expected ", 11) == 0;
    if (!ok) fprintf(stderr, "  %s -> status %d, message \"%s\"\n", kv, (int)st, msg);
    return ok;
}

static uint64_t size_of(const char *s)
{
    uint64_t v = 12345;
    CHECK(rs_options_parse_size(s, &v) == 0);
    return v;
}

static int size_rejected(const char *s)
{
    uint64_t v = 777;
    return rs_options_parse_size(s, &v) == -1 && v == 777;
}

TEST(defaults_match_the_documented_values)
{
    rs_options o;
    rs_options_defaults(&o);
    CHECK(o.disable == 0);
    CHECK(o.backend == RS_BACKEND_AUTO);
    CHECK_EQ_U64(o.memory_limit.default_bytes, 0);
    CHECK(o.memory_limit.n_ranks == 0);
    CHECK_EQ_U64(o.max_split_size, UINT64_MAX);
    CHECK_EQ_U64(o.sim_capacity, 80ull << 30);
    CHECK_EQ_U64(o.max_entries, 100000);
    CHECK(o.stacks == RS_STACKS_NATIVE);
    CHECK(o.stack_depth == 16);
    CHECK(o.record == 1);
    CHECK(o.debug_level == RS_LOG_WARN);
    CHECK(o.debug_subsys == (unsigned)RS_SUB_ALL);
    CHECK(strcmp(o.dir, "ranksnap-out") == 0);
    CHECK(strcmp(o.job, "") == 0);
}

TEST(load_with_nothing_set_gives_the_defaults)
{
    rs_options a, b;
    const char *env[] = {NULL};
    memset(&a, 0xab, sizeof a);
    CHECK(rs_options_load(&a, table_get, (void *)env) == RANKSNAP_OK);
    rs_options_defaults(&b);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
}

TEST(empty_value_is_the_same_as_unset)
{
    rs_options o;
    const char *env[] = {"RANKSNAP_MAX_ENTRIES=", "RANKSNAP_DIR=", "RANKSNAP_BACKEND=", NULL};
    CHECK(rs_options_load(&o, table_get, (void *)env) == RANKSNAP_OK);
    CHECK_EQ_U64(o.max_entries, 100000);
    CHECK(strcmp(o.dir, "ranksnap-out") == 0);
    CHECK(o.backend == RS_BACKEND_AUTO);
}

TEST(every_option_accepts_good_values)
{
    rs_options o;
    const char *env[] = {"RANKSNAP_DISABLE=yes",
                         "RANKSNAP_BACKEND=sim",
                         "RANKSNAP_MEMORY_LIMIT=16GiB,2:8GiB",
                         "RANKSNAP_MAX_SPLIT_SIZE=256MiB",
                         "RANKSNAP_SIM_CAPACITY=24GiB",
                         "RANKSNAP_MAX_ENTRIES=1073741824",
                         "RANKSNAP_STACKS=fp",
                         "RANKSNAP_STACK_DEPTH=64",
                         "RANKSNAP_RECORD=off",
                         "RANKSNAP_DEBUG=trace",
                         "RANKSNAP_DEBUG_SUBSYS=INIT,alloc",
                         "RANKSNAP_DIR=/tmp/some where",
                         "RANKSNAP_JOB=train-42",
                         NULL};
    CHECK(rs_options_load(&o, table_get, (void *)env) == RANKSNAP_OK);
    CHECK(o.disable == 1);
    CHECK(o.backend == RS_BACKEND_SIM);
    CHECK_EQ_U64(o.memory_limit.default_bytes, 16ull << 30);
    CHECK(o.memory_limit.n_ranks == 1);
    CHECK_EQ_U64(o.max_split_size, 256ull << 20);
    CHECK_EQ_U64(o.sim_capacity, 24ull << 30);
    CHECK_EQ_U64(o.max_entries, 1ull << 30);
    CHECK(o.stacks == RS_STACKS_FP);
    CHECK(o.stack_depth == 64);
    CHECK(o.record == 0);
    CHECK(o.debug_level == RS_LOG_TRACE);
    CHECK(o.debug_subsys == (RS_SUB_INIT | RS_SUB_ALLOC));
    CHECK(strcmp(o.dir, "/tmp/some where") == 0);
    CHECK(strcmp(o.job, "train-42") == 0);
}

TEST(bool_options_accept_every_spelling_in_any_case)
{
    static const char *const on[] = {"1", "true", "YES", "On", " yes "};
    static const char *const off[] = {"0", "FALSE", "no", "off"};
    char kv[64];
    rs_options o;
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
        snprintf(kv, sizeof kv, "RANKSNAP_DISABLE=%s", on[i]);
        CHECK(load1(&o, kv) == RANKSNAP_OK && o.disable == 1);
        snprintf(kv, sizeof kv, "RANKSNAP_RECORD=%s", on[i]);
        CHECK(load1(&o, kv) == RANKSNAP_OK && o.record == 1);
    }
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
        snprintf(kv, sizeof kv, "RANKSNAP_RECORD=%s", off[i]);
        CHECK(load1(&o, kv) == RANKSNAP_OK && o.record == 0);
    }
}

TEST(enum_options_accept_each_value)
{
    rs_options o;
    CHECK(load1(&o, "RANKSNAP_BACKEND=cuda") == RANKSNAP_OK && o.backend == RS_BACKEND_CUDA);
    CHECK(load1(&o, "RANKSNAP_BACKEND=AUTO") == RANKSNAP_OK && o.backend == RS_BACKEND_AUTO);
    CHECK(load1(&o, "RANKSNAP_STACKS=none") == RANKSNAP_OK && o.stacks == RS_STACKS_NONE);
    CHECK(load1(&o, "RANKSNAP_STACKS=native") == RANKSNAP_OK && o.stacks == RS_STACKS_NATIVE);
    CHECK(load1(&o, "RANKSNAP_DEBUG=NONE") == RANKSNAP_OK && o.debug_level == RS_LOG_NONE);
    CHECK(load1(&o, "RANKSNAP_DEBUG=warn") == RANKSNAP_OK && o.debug_level == RS_LOG_WARN);
    CHECK(load1(&o, "RANKSNAP_DEBUG=Info") == RANKSNAP_OK && o.debug_level == RS_LOG_INFO);
}

TEST(debug_subsys_caret_excludes_the_listed_subsystems)
{
    rs_options o;
    CHECK(load1(&o, "RANKSNAP_DEBUG_SUBSYS=^ALLOC,RECORD") == RANKSNAP_OK);
    CHECK(o.debug_subsys == ((unsigned)RS_SUB_ALL & ~(unsigned)(RS_SUB_ALLOC | RS_SUB_RECORD)));
    CHECK(o.debug_subsys & RS_SUB_INIT);
    CHECK(load1(&o, "RANKSNAP_DEBUG_SUBSYS=^ALL") == RANKSNAP_OK && o.debug_subsys == 0);
    CHECK(load1(&o, "RANKSNAP_DEBUG_SUBSYS=DUMP, MPI") == RANKSNAP_OK);
    CHECK(o.debug_subsys == (RS_SUB_DUMP | RS_SUB_MPI));
    CHECK(load1(&o, "RANKSNAP_DEBUG_SUBSYS=all") == RANKSNAP_OK);
    CHECK(o.debug_subsys == (unsigned)RS_SUB_ALL);
}

TEST(every_option_rejects_junk_naming_the_variable_and_what_was_expected)
{
    static const char *const bad[] = {
        "RANKSNAP_DISABLE=2",
        "RANKSNAP_DISABLE=enabled",
        "RANKSNAP_BACKEND=rocm",
        "RANKSNAP_MEMORY_LIMIT=lots",
        "RANKSNAP_MEMORY_LIMIT=-1",
        "RANKSNAP_MAX_SPLIT_SIZE=20971519",
        "RANKSNAP_MAX_SPLIT_SIZE=19MiB",
        "RANKSNAP_MAX_SPLIT_SIZE=big",
        "RANKSNAP_SIM_CAPACITY=0",
        "RANKSNAP_SIM_CAPACITY=80GiBs",
        "RANKSNAP_MAX_ENTRIES=0",
        "RANKSNAP_MAX_ENTRIES=1073741825",
        "RANKSNAP_MAX_ENTRIES=-5",
        "RANKSNAP_MAX_ENTRIES=1e5",
        "RANKSNAP_MAX_ENTRIES=99999999999999999999999",
        "RANKSNAP_STACKS=dwarf",
        "RANKSNAP_STACK_DEPTH=0",
        "RANKSNAP_STACK_DEPTH=65",
        "RANKSNAP_STACK_DEPTH=sixteen",
        "RANKSNAP_RECORD=maybe",
        "RANKSNAP_DEBUG=VERBOSE",
        "RANKSNAP_DEBUG=1",
        "RANKSNAP_DEBUG_SUBSYS=INIT,COLL",
        "RANKSNAP_DEBUG_SUBSYS=^",
        "RANKSNAP_DEBUG_SUBSYS=INIT,,ALLOC",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK(rejected(bad[i]));
}

TEST(memory_limit_error_says_which_forms_are_accepted)
{
    rs_options o;
    CHECK(load1(&o, "RANKSNAP_MEMORY_LIMIT=lots") == RANKSNAP_ERR_OPTION);
    CHECK(strcmp(ranksnap_last_error(),
                 "RANKSNAP_MEMORY_LIMIT=lots: expected a size such as 16GiB, 512MiB or "
                 "1073741824, or rank:size pairs such as 2:8GiB,3:4GiB") == 0);
}

TEST(enum_error_lists_the_allowed_values)
{
    rs_options o;
    CHECK(load1(&o, "RANKSNAP_BACKEND=rocm") == RANKSNAP_ERR_OPTION);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "auto, cuda or sim");
    CHECK(load1(&o, "RANKSNAP_DEBUG=loud") == RANKSNAP_ERR_OPTION);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "NONE, WARN, INFO or TRACE");
    CHECK(load1(&o, "RANKSNAP_STACK_DEPTH=0") == RANKSNAP_ERR_OPTION);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "an integer from 1 to 64");
}

TEST(job_longer_than_its_field_is_rejected)
{
    char kv[RS_JOB_MAX + 64];
    rs_options o;
    int n = snprintf(kv, sizeof kv, "RANKSNAP_JOB=");
    memset(kv + n, 'j', RS_JOB_MAX);
    kv[n + RS_JOB_MAX] = '\0';
    CHECK(load1(&o, kv) == RANKSNAP_ERR_OPTION);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "expected a job id shorter than 256 bytes");
    kv[n + RS_JOB_MAX - 1] = '\0';
    CHECK(load1(&o, kv) == RANKSNAP_OK && strlen(o.job) == RS_JOB_MAX - 1);
}

TEST(dir_longer_than_path_max_is_rejected)
{
    static char kv[RS_PATH_MAX + 64];
    rs_options o;
    int n = snprintf(kv, sizeof kv, "RANKSNAP_DIR=");
    memset(kv + n, 'd', RS_PATH_MAX);
    kv[n + RS_PATH_MAX] = '\0';
    CHECK(load1(&o, kv) == RANKSNAP_ERR_OPTION);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "expected a path shorter than 4096 bytes");
    kv[n + RS_PATH_MAX - 1] = '\0'; /* 4095 bytes fit */
    CHECK(load1(&o, kv) == RANKSNAP_OK && strlen(o.dir) == RS_PATH_MAX - 1);
}

TEST(first_bad_value_stops_the_load)
{
    rs_options o;
    const char *env[] = {"RANKSNAP_BACKEND=sim", "RANKSNAP_STACKS=bogus",
                         "RANKSNAP_STACK_DEPTH=0", NULL};
    CHECK(rs_options_load(&o, table_get, (void *)env) == RANKSNAP_ERR_OPTION);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "RANKSNAP_STACKS=bogus");
}

TEST(max_split_size_follows_pytorch_minimum_of_20mib)
{
    rs_options o;
    CHECK(load1(&o, "RANKSNAP_MAX_SPLIT_SIZE=20MiB") == RANKSNAP_OK);
    CHECK_EQ_U64(o.max_split_size, 20ull << 20);
    CHECK(load1(&o, "RANKSNAP_MAX_SPLIT_SIZE=unlimited") == RANKSNAP_OK);
    CHECK_EQ_U64(o.max_split_size, UINT64_MAX);
    CHECK(load1(&o, "RANKSNAP_MAX_SPLIT_SIZE=20MB") == RANKSNAP_ERR_OPTION); /* 20*10^6 < 20MiB */
    CHECK_STR_CONTAINS(ranksnap_last_error(), "at least 20MiB");
}

TEST(alloc_conf_takes_pytorch_settings_and_falls_back_to_pytorchs_variables)
{
    rs_options o;
    CHECK(load1(&o, "RANKSNAP_ALLOC_CONF=expandable_segments:True,max_split_size_mb:128") ==
          RANKSNAP_OK);
    CHECK(o.alloc_conf.expandable_segments == 1);
    CHECK_EQ_U64(o.alloc_conf.max_split_size, 128ull << 20);
    /* unset: the job's own PYTORCH_CUDA_ALLOC_CONF, else PYTORCH_ALLOC_CONF */
    CHECK(load1(&o, "PYTORCH_CUDA_ALLOC_CONF=roundup_power2_divisions:4") == RANKSNAP_OK);
    CHECK_EQ_U64(o.alloc_conf.roundup_divisions[5], 4);
    CHECK(load1(&o, "PYTORCH_ALLOC_CONF=garbage_collection_threshold:0.6") == RANKSNAP_OK);
    CHECK(o.alloc_conf.garbage_collection_threshold == 0.6);
    const char *both[] = {"RANKSNAP_ALLOC_CONF=expandable_segments:False",
                          "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", NULL};
    CHECK(rs_options_load(&o, table_get, (void *)both) == RANKSNAP_OK);
    CHECK(o.alloc_conf.expandable_segments == 0);
    /* a bad value names the variable it came from and what PyTorch would have said */
    CHECK(load1(&o, "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:10") == RANKSNAP_ERR_OPTION);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:10: expected ");
    CHECK_STR_CONTAINS(ranksnap_last_error(), "max_split_size_mb too small, must be >= 20");
    CHECK(rejected("RANKSNAP_ALLOC_CONF=expandable_segments:yes"));
}

TEST(alloc_conf_from_pytorchs_variable_skips_keys_of_a_newer_pytorch)
{
    /* the job's PyTorch (2.13 knows throw_on_cudamalloc_oom) accepted it: it must not stop the
     * job; set as ranksnap's own option, the same key is PyTorch 2.11's error */
    rs_options o;
    CHECK(load1(&o, "PYTORCH_CUDA_ALLOC_CONF=throw_on_cudamalloc_oom:True,expandable_segments:True") ==
          RANKSNAP_OK);
    CHECK(o.alloc_conf.expandable_segments == 1);
    CHECK_EQ_U64(o.alloc_conf.unknown_keys, 1);
    CHECK(load1(&o, "RANKSNAP_ALLOC_CONF=throw_on_cudamalloc_oom:True") == RANKSNAP_ERR_OPTION);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "Unrecognized key 'throw_on_cudamalloc_oom'");
}

TEST(deprecated_max_split_size_overrides_the_settings_key)
{
    rs_options o;
    const char *env[] = {"RANKSNAP_ALLOC_CONF=max_split_size_mb:128,expandable_segments:True",
                         "RANKSNAP_MAX_SPLIT_SIZE=256MiB", NULL};
    CHECK(rs_options_load(&o, table_get, (void *)env) == RANKSNAP_OK);
    CHECK_EQ_U64(o.alloc_conf.max_split_size, 256ull << 20);
    CHECK(o.alloc_conf.expandable_segments == 1);
    CHECK(load1(&o, "RANKSNAP_ALLOC_CONF=max_split_size_mb:128") == RANKSNAP_OK);
    CHECK_EQ_U64(o.alloc_conf.max_split_size, 128ull << 20);
}

TEST(memory_limit_forms)
{
    rs_options o;
    CHECK(load1(&o, "RANKSNAP_MEMORY_LIMIT=16GiB") == RANKSNAP_OK);
    CHECK_EQ_U64(o.memory_limit.default_bytes, 16ull << 30);
    CHECK(o.memory_limit.n_ranks == 0);

    CHECK(load1(&o, "RANKSNAP_MEMORY_LIMIT=2:8GiB,3:4GiB") == RANKSNAP_OK);
    CHECK_EQ_U64(o.memory_limit.default_bytes, 0);
    CHECK(o.memory_limit.n_ranks == 2);

    CHECK(load1(&o, "RANKSNAP_MEMORY_LIMIT=none") == RANKSNAP_OK);
    CHECK_EQ_U64(o.memory_limit.default_bytes, 0);
    CHECK(o.memory_limit.n_ranks == 0);
    CHECK(load1(&o, "RANKSNAP_MEMORY_LIMIT=0") == RANKSNAP_OK);
    CHECK_EQ_U64(o.memory_limit.default_bytes, 0);
    CHECK(load1(&o, "RANKSNAP_MEMORY_LIMIT= 16GiB , 2 : 8GiB") == RANKSNAP_OK);
    CHECK_EQ_U64(rs_options_memory_limit_for_rank(&o.memory_limit, 2), 8ull << 30);
}

TEST(memory_limit_per_rank_lookup_falls_back_to_the_default)
{
    rs_options o;
    CHECK(load1(&o, "RANKSNAP_MEMORY_LIMIT=16GiB,2:8GiB,3:4GiB,5:none") == RANKSNAP_OK);
    CHECK_EQ_U64(rs_options_memory_limit_for_rank(&o.memory_limit, 0), 16ull << 30);
    CHECK_EQ_U64(rs_options_memory_limit_for_rank(&o.memory_limit, 2), 8ull << 30);
    CHECK_EQ_U64(rs_options_memory_limit_for_rank(&o.memory_limit, 3), 4ull << 30);
    CHECK_EQ_U64(rs_options_memory_limit_for_rank(&o.memory_limit, 4), 16ull << 30);
    CHECK_EQ_U64(rs_options_memory_limit_for_rank(&o.memory_limit, 5), 0); /* rank 5 uncapped */

    CHECK(load1(&o, "RANKSNAP_MEMORY_LIMIT=2:8GiB") == RANKSNAP_OK);
    CHECK_EQ_U64(rs_options_memory_limit_for_rank(&o.memory_limit, 1), 0);
    CHECK_EQ_U64(rs_options_memory_limit_for_rank(&o.memory_limit, 2), 8ull << 30);
}

TEST(memory_limit_rejects_bad_lists)
{
    CHECK(rejected("RANKSNAP_MEMORY_LIMIT=2:8GiB,2:4GiB"));
    CHECK_STR_CONTAINS(ranksnap_last_error(), "rank 2 appears twice");
    CHECK(rejected("RANKSNAP_MEMORY_LIMIT=-1:8GiB"));
    CHECK_STR_CONTAINS(ranksnap_last_error(), "a rank of 0 or more");
    CHECK(rejected("RANKSNAP_MEMORY_LIMIT=16GiB,8GiB"));
    CHECK(rejected("RANKSNAP_MEMORY_LIMIT=x:8GiB"));
    CHECK(rejected("RANKSNAP_MEMORY_LIMIT=:8GiB"));
    CHECK(rejected("RANKSNAP_MEMORY_LIMIT=2:"));
    CHECK(rejected("RANKSNAP_MEMORY_LIMIT=2:-8GiB"));
    CHECK(rejected("RANKSNAP_MEMORY_LIMIT=2:8GiB:1"));
    CHECK(rejected("RANKSNAP_MEMORY_LIMIT=16GiB,"));
    CHECK(rejected("RANKSNAP_MEMORY_LIMIT=16GiB,,2:8GiB"));
    CHECK(rejected("RANKSNAP_MEMORY_LIMIT=99999999999:1GiB"));
}

TEST(memory_limit_takes_at_most_rs_max_rank_limits_pairs)
{
    char kv[4096];
    rs_options o;
    int n = snprintf(kv, sizeof kv, "RANKSNAP_MEMORY_LIMIT=");
    for (int r = 0; r < RS_MAX_RANK_LIMITS; r++)
        n += snprintf(kv + n, sizeof kv - (size_t)n, "%s%d:1GiB", r ? "," : "", r);
    CHECK(load1(&o, kv) == RANKSNAP_OK);
    CHECK(o.memory_limit.n_ranks == RS_MAX_RANK_LIMITS);
    CHECK_EQ_U64(rs_options_memory_limit_for_rank(&o.memory_limit, RS_MAX_RANK_LIMITS - 1), 1ull << 30);
    snprintf(kv + n, sizeof kv - (size_t)n, ",%d:1GiB", RS_MAX_RANK_LIMITS);
    CHECK(load1(&o, kv) == RANKSNAP_ERR_OPTION);
    /* the long value is cut, what was expected is kept */
    CHECK_STR_CONTAINS(ranksnap_last_error(), "RANKSNAP_MEMORY_LIMIT=0:1GiB,1:1GiB");
    CHECK_STR_CONTAINS(ranksnap_last_error(), "...: expected at most 64 rank:size pairs");
}

TEST(size_parser_accepts_plain_and_suffixed_sizes)
{
    CHECK_EQ_U64(size_of("0"), 0);
    CHECK_EQ_U64(size_of("512"), 512);
    CHECK_EQ_U64(size_of("4096B"), 4096);
    CHECK_EQ_U64(size_of("1K"), 1024);
    CHECK_EQ_U64(size_of("1kib"), 1024);
    CHECK_EQ_U64(size_of("1KB"), 1000);
    CHECK_EQ_U64(size_of("20MiB"), 20ull << 20);
    CHECK_EQ_U64(size_of("20M"), 20ull << 20);
    CHECK_EQ_U64(size_of("3mb"), 3000000);
    CHECK_EQ_U64(size_of("16GiB"), 16ull << 30);
    CHECK_EQ_U64(size_of("16g"), 16ull << 30);
    CHECK_EQ_U64(size_of("1GB"), 1000000000ull);
    CHECK_EQ_U64(size_of("2TiB"), 2ull << 40);
    CHECK_EQ_U64(size_of("2TB"), 2000000000000ull);
    CHECK_EQ_U64(size_of("12 MiB"), 12ull << 20);
    CHECK_EQ_U64(size_of(" 7 "), 7);
    CHECK_EQ_U64(size_of("18446744073709551615"), UINT64_MAX);
}

TEST(size_parser_rounds_fractions_down_to_whole_bytes)
{
    CHECK_EQ_U64(size_of("1.5GiB"), 3ull << 29);
    CHECK_EQ_U64(size_of("1.5GB"), 1500000000ull);
    CHECK_EQ_U64(size_of("0.5KiB"), 512);
    CHECK_EQ_U64(size_of("0.3KiB"), 307);   /* 307.2 */
    CHECK_EQ_U64(size_of("1.5"), 1);        /* bytes */
    CHECK_EQ_U64(size_of("0.999999999999999999999999K"), 1023);
    CHECK_EQ_U64(size_of("15.9999999999999999999TiB"), (16ull << 40) - 1);
    CHECK_EQ_U64(size_of("18446744073709551.615KB"), UINT64_MAX);
    CHECK_EQ_U64(size_of("17179869183.99999999999999999G"), UINT64_MAX);
}

TEST(size_parser_rejects_junk_negative_and_overflow)
{
    CHECK(size_rejected(""));
    CHECK(size_rejected("   "));
    CHECK(size_rejected("-1"));
    CHECK(size_rejected("+1"));
    CHECK(size_rejected("1e9"));
    CHECK(size_rejected("GiB"));
    CHECK(size_rejected("12 MiB x"));
    CHECK(size_rejected("12MiBB"));
    CHECK(size_rejected("1.GiB"));
    CHECK(size_rejected(".5GiB"));
    CHECK(size_rejected("1,5GiB"));
    CHECK(size_rejected("1 2"));
    CHECK(size_rejected("0x10"));
    CHECK(size_rejected("18446744073709551616"));
    CHECK(size_rejected("16777216TiB"));            /* 2^64 */
    CHECK(size_rejected("18446744073709551615.5K")); /* overflows in the multiplication */
    CHECK(size_rejected("18446744073709551.9KB")); /* whole fits, whole + part does not */
    CHECK(rs_options_parse_size(NULL, NULL) == -1);
}

TEST(format_bytes_matches_pytorch_format_size)
{
    char buf[64];
    rs_text_format_bytes(0, buf, sizeof buf);
    CHECK(strcmp(buf, "0 bytes") == 0);
    rs_text_format_bytes(20, buf, sizeof buf);
    CHECK(strcmp(buf, "20 bytes") == 0);
    rs_text_format_bytes(1024, buf, sizeof buf);
    CHECK(strcmp(buf, "1024 bytes") == 0);
    rs_text_format_bytes(1025, buf, sizeof buf);
    CHECK(strcmp(buf, "1.00 KiB") == 0);
    rs_text_format_bytes(512 * 1024, buf, sizeof buf);
    CHECK(strcmp(buf, "512.00 KiB") == 0);
    rs_text_format_bytes(1 << 20, buf, sizeof buf);
    CHECK(strcmp(buf, "1024.00 KiB") == 0);
    rs_text_format_bytes(20ull << 20, buf, sizeof buf);
    CHECK(strcmp(buf, "20.00 MiB") == 0);
    rs_text_format_bytes(2ull << 30, buf, sizeof buf);
    CHECK(strcmp(buf, "2.00 GiB") == 0);
    rs_text_format_bytes(3ull << 29, buf, sizeof buf);
    CHECK(strcmp(buf, "1.50 GiB") == 0);
    rs_text_format_bytes(UINT64_MAX, buf, sizeof buf);
    CHECK(strcmp(buf, "17179869184.00 GiB") == 0);
    rs_text_format_bytes(2ull << 30, buf, 5); /* truncated, still terminated */
    CHECK(strcmp(buf, "2.00") == 0);
}

TEST(help_lists_every_option_with_type_and_default)
{
    static const char *const names[] = {
        "RANKSNAP_DISABLE",      "RANKSNAP_BACKEND",     "RANKSNAP_MEMORY_LIMIT",
        "RANKSNAP_MAX_SPLIT_SIZE", "RANKSNAP_SIM_CAPACITY", "RANKSNAP_MAX_ENTRIES",
        "RANKSNAP_STACKS",       "RANKSNAP_STACK_DEPTH", "RANKSNAP_RECORD",
        "RANKSNAP_DEBUG",        "RANKSNAP_DEBUG_SUBSYS", "RANKSNAP_DIR",
        "RANKSNAP_JOB"};
    char buf[8192];
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f) return;
    rs_options_print_help(f);
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        CHECK_STR_CONTAINS(buf, names[i]);
        CHECK(rs_options_is_known(names[i]));
    }
    CHECK_STR_CONTAINS(buf, "auto|cuda|sim");
    CHECK_STR_CONTAINS(buf, "NONE|WARN|INFO|TRACE");
    CHECK_STR_CONTAINS(buf, "default: 80GiB");
    CHECK_STR_CONTAINS(buf, "default: ranksnap-out");
}

TEST(closest_option_suggests_names_within_two_edits)
{
    CHECK(rs_options_closest("RANKSNAP_MEMORY_LIMT") != NULL);
    CHECK_STR_CONTAINS(rs_options_closest("RANKSNAP_MEMORY_LIMT"), "RANKSNAP_MEMORY_LIMIT");
    CHECK_STR_CONTAINS(rs_options_closest("RANKSNAP_debug"), "RANKSNAP_DEBUG");
    CHECK_STR_CONTAINS(rs_options_closest("RANKSNAP_STACK_DEPHT"), "RANKSNAP_STACK_DEPTH");
    CHECK(rs_options_closest("RANKSNAP_SOMETHING_ELSE") == NULL);
    CHECK(!rs_options_is_known("RANKSNAP_MEMORY_LIMT"));
}

/* Runs rs_options_load_env with stderr sent to a file and returns what was written there. */
static ranksnap_status load_env_capturing(rs_options *o, char *buf, size_t n)
{
    FILE *f = tmpfile();
    int saved = dup(STDERR_FILENO);
    buf[0] = '\0';
    if (!f || saved < 0) return RANKSNAP_ERR_IO;
    dup2(fileno(f), STDERR_FILENO);
    ranksnap_status st = rs_options_load_env(o);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(f);
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = '\0';
    fclose(f);
    return st;
}

TEST(load_env_reads_the_environment_and_warns_about_unknown_names)
{
    char err[4096];
    rs_options o;
    setenv("RANKSNAP_STACK_DEPTH", "7", 1);
    setenv("RANKSNAP_MEMORY_LIMT", "8GiB", 1);
    setenv("RANKSNAP_ZZZZZZZZZZ", "1", 1);
    CHECK(load_env_capturing(&o, err, sizeof err) == RANKSNAP_OK);
    CHECK(o.stack_depth == 7);
    CHECK_STR_CONTAINS(err, "RANKSNAP_MEMORY_LIMT is not a ranksnap option (did you mean "
                            "RANKSNAP_MEMORY_LIMIT?)");
    CHECK_STR_CONTAINS(err, "RANKSNAP_ZZZZZZZZZZ is not a ranksnap option (see ranksnap "
                            "--help-env)");

    setenv("RANKSNAP_DEBUG", "NONE", 1); /* the user asked for silence */
    CHECK(load_env_capturing(&o, err, sizeof err) == RANKSNAP_OK);
    CHECK(strcmp(err, "") == 0);

    setenv("RANKSNAP_STACK_DEPTH", "deep", 1);
    CHECK(load_env_capturing(&o, err, sizeof err) == RANKSNAP_ERR_OPTION);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "RANKSNAP_STACK_DEPTH=deep: expected");

    unsetenv("RANKSNAP_STACK_DEPTH");
    unsetenv("RANKSNAP_MEMORY_LIMT");
    unsetenv("RANKSNAP_ZZZZZZZZZZ");
    unsetenv("RANKSNAP_DEBUG");
}

int main(void)
{
    RUN(defaults_match_the_documented_values);
    RUN(load_with_nothing_set_gives_the_defaults);
    RUN(empty_value_is_the_same_as_unset);
    RUN(every_option_accepts_good_values);
    RUN(bool_options_accept_every_spelling_in_any_case);
    RUN(enum_options_accept_each_value);
    RUN(debug_subsys_caret_excludes_the_listed_subsystems);
    RUN(every_option_rejects_junk_naming_the_variable_and_what_was_expected);
    RUN(memory_limit_error_says_which_forms_are_accepted);
    RUN(enum_error_lists_the_allowed_values);
    RUN(dir_longer_than_path_max_is_rejected);
    RUN(job_longer_than_its_field_is_rejected);
    RUN(first_bad_value_stops_the_load);
    RUN(max_split_size_follows_pytorch_minimum_of_20mib);
    RUN(alloc_conf_takes_pytorch_settings_and_falls_back_to_pytorchs_variables);
    RUN(alloc_conf_from_pytorchs_variable_skips_keys_of_a_newer_pytorch);
    RUN(deprecated_max_split_size_overrides_the_settings_key);
    RUN(memory_limit_forms);
    RUN(memory_limit_per_rank_lookup_falls_back_to_the_default);
    RUN(memory_limit_rejects_bad_lists);
    RUN(memory_limit_takes_at_most_rs_max_rank_limits_pairs);
    RUN(size_parser_accepts_plain_and_suffixed_sizes);
    RUN(size_parser_rounds_fractions_down_to_whole_bytes);
    RUN(size_parser_rejects_junk_negative_and_overflow);
    RUN(format_bytes_matches_pytorch_format_size);
    RUN(help_lists_every_option_with_type_and_default);
    RUN(closest_option_suggests_names_within_two_edits);
    RUN(load_env_reads_the_environment_and_warns_about_unknown_names);
    return check_summary();
}
