/*
 * test_read_pickle.c — PyTorch snapshots read as rs_snap (collector/decode/torch_decode.c) and the
 * training steps inferred from their history (collector/decode/steps_infer.c).
 *
 * The PyTorch-like snapshots are written at test time by tests/data/make_torch_like_pickle.py
 * with Python's own pickle module (protocol 4): four ranks, rank 2 with 1.5 times larger
 * activations, rank 3 running out of memory in step 3, recorded as PyTorch's default
 * stacks="all" records (C++ and Python frames interleaved, the backward pass C++ only); the
 * same with stacks="python" (python/), with a model in an installed package (transformers/),
 * a rank that keeps its output every step (leak/) and a rank out of memory in its first step
 * (oom0/, oom0-python/). Those tests say "skip" without python3.
 * Real snapshots dropped into tests/data (NAME.pickle) are decoded too and must keep the model's
 * promises. Crafted streamed traces: test_streamed_trace.c; step inference on histories built
 * where the answer is known: test_steps_infer.c.
 */
#include <dirent.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "compare.h"
#include "decode.h"
#include "file_read.h"
#include "find_python.h"
#include "snap_check.h"
#include "snap_same.h"
#include "site_path.h"
#include "torch_decode.h"
#include "walk_records.h"

#ifndef RS_TEST_DATA_DIR
#define RS_TEST_DATA_DIR "tests/data"
#endif

static char g_dir[512];   /* where the fixtures were written, "" when python3 is missing */
static const char *g_python;

/* Runs the fixture script with `args` into g_dir; 0 on success. */
static int make_fixture_in(const char *sub, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s/make_torch_like_pickle.py %s%s%s %s", g_python,
             RS_TEST_DATA_DIR, g_dir, sub[0] ? "/" : "", sub, args);
    return system(cmd) == 0 ? 0 : -1;
}

static int make_fixture(const char *args)
{
    return make_fixture_in("", args);
}

static void setup(void)
{
    g_python = find_python();
    if (!g_python) return;
    const char *base = getenv("RANKSNAP_DIR");
    snprintf(g_dir, sizeof g_dir, "%s/torch-like", base && *base ? base : "/tmp/ranksnap-test-read-pickle");
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", g_dir, g_dir);
    if (system(cmd) != 0 || make_fixture("") != 0 ||
        make_fixture("--ranks 1 --steps 2 --layers 1 --big-rank -1 --oom-rank -1 --name tiny.pickle "
                     "--stacks python") != 0 ||
        make_fixture("--ranks 4 --only-rank 3 --oom-name oom_rank-3_gpt2.pickle --protocol 5") != 0 ||
        make_fixture_in("python", "--stacks python") != 0 ||
        make_fixture_in("transformers", "--model transformers") != 0 ||
        make_fixture_in("leak", "--steps 12 --big-rank -1 --oom-rank -1 --leak-rank 1 "
                                "--leak-kib 8192 --act-kib 16384") != 0 ||
        make_fixture_in("oom0", "--layers 8 --oom-step 0") != 0 ||
        make_fixture_in("oom0-python", "--layers 8 --oom-step 0 --stacks python") != 0) {
        fprintf(stderr, "the fixture script failed\n");
        g_dir[0] = '\0';
        CHECK(0);
    }
}

static rs_snap *read_rank(const char *name, int rank)
{
    char path[640];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    o.rank = rank;
    rs_snap *s = NULL;
    ranksnap_status st = rs_decode_file(path, &o, &s);
    if (st != RANKSNAP_OK) fprintf(stderr, "%s: %s\n", path, ranksnap_last_error());
    CHECK(st == RANKSNAP_OK && s != NULL);
    return s;
}

static size_t count_action(const rs_snap *s, unsigned action)
{
    size_t n = 0;
    for (uint64_t i = 0; i < s->history.count; i++) n += s->history.action[i] == action;
    return n;
}

#define NEED_FIXTURES()                                                                            \
    do {                                                                                           \
        if (!g_dir[0]) {                                                                           \
            printf("skip: no python3 to write the PyTorch-like fixtures\n");                      \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* ---- mapping ------------------------------------------------------------------------------- */

TEST(a_torch_snapshot_maps_onto_segments_history_and_interned_stacks)
{
    NEED_FIXTURES();
    rs_snap *s = read_rank("snapshot_rank0.pickle", 0);
    if (!s) return;
    CHECK(rs_snap_check(s, "decoded") == RANKSNAP_OK);
    CHECK(s->rank == 0 && s->world_size == 1 && s->complete);
    CHECK(strcmp(s->backend, "torch") == 0);
    CHECK(strcmp(s->device.name, "unknown (PyTorch snapshot)") == 0);
    CHECK(s->n_segments > 0 && s->n_streams == 1);
    for (size_t i = 1; i < s->n_segments; i++) CHECK(s->segments[i - 1].addr < s->segments[i].addr);
    /* 159 allocations, each with its free_requested and free_completed unless alive at the end;
     * the `snapshot` entry is left out. */
    CHECK_EQ_U64(count_action(s, RS_ACT_ALLOC), 159);
    CHECK_EQ_U64(count_action(s, RS_ACT_FREE_REQUESTED), count_action(s, RS_ACT_FREE_COMPLETED));
    CHECK(count_action(s, RS_ACT_SEGMENT_ALLOC) > 0);
    CHECK_EQ_U64(count_action(s, RS_ACT_OOM), 0);
    CHECK(!s->has_oom);
    /* A dozen distinct stacks and a hundred frames (PyTorch's C++ and Python), however many
     * events carry them. */
    CHECK(s->n_stacks >= 8 && s->n_stacks <= 16);
    CHECK(s->n_frames >= 60 && s->n_frames <= 160);
    /* Totals: current from the state, peaks from the replay. */
    uint64_t live = 0, reserved = 0;
    for (size_t i = 0; i < s->n_segments; i++) {
        reserved += s->segments[i].total_size;
        for (size_t k = 0; k < s->segments[i].n_blocks; k++)
            if (s->segments[i].blocks[k].state == RS_BLOCK_ACTIVE_ALLOCATED)
                live += s->segments[i].blocks[k].size;
    }
    CHECK_EQ_U64(s->totals.allocated_bytes_current, live);
    CHECK_EQ_U64(s->totals.reserved_bytes_current, reserved);
    CHECK(s->totals.allocated_bytes_peak > live);
    CHECK_EQ_U64(s->totals.num_allocs, 159);
    CHECK(s->totals.peak_step >= 1); /* the optimizer state exists from step 1 on */
    CHECK(s->allocator.max_split_size == UINT64_MAX); /* SIZE_MAX in the pickle */
    rs_snap_free(s);
}

TEST(an_oom_entry_marks_the_rank_oom_with_the_request_and_its_site)
{
    NEED_FIXTURES();
    rs_snap *s = read_rank("snapshot_rank3.pickle", 3);
    if (!s) return;
    CHECK(rs_snap_check(s, "decoded") == RANKSNAP_OK);
    CHECK(s->rank == 3 && s->world_size == 4);
    CHECK(s->has_oom);
    CHECK_EQ_U64(s->oom.requested, (uint64_t)16 << 30);
    CHECK(s->oom.device_free > 0 && s->oom.device_free < ((uint64_t)4 << 30));
    CHECK(s->oom.allocated > 0 && s->oom.reserved >= s->oom.allocated);
    CHECK(s->oom.step == 3);
    rs_site site;
    rs_site_of_stack(s, s->oom.stack, &site);
    CHECK(strcmp(site.function, "forward") == 0 && strstr(site.file, "model.py") && site.line == 36);
    CHECK_EQ_U64(s->totals.num_ooms, 1);
    rs_snap_free(s);
}

TEST(sites_are_user_frames_unless_all_frames_is_asked)
{
    NEED_FIXTURES();
    for (int all = 0; all < 2; all++) {
        rs_snap *s = read_rank("snapshot_rank0.pickle", 0);
        if (!s) return;
        CHECK(rs_site_rules_set("", all) == RANKSNAP_OK);
        /* The first activation of the forward pass: linear.py inside torch, called from
         * model.py:31. */
        uint32_t stack = 0;
        for (uint64_t i = 0; i < s->history.count && !stack; i++)
            if (s->history.action[i] == RS_ACT_ALLOC && s->history.size[i] == 3 * 1536 * 1024)
                stack = s->history.stack[i];
        CHECK(stack != 0);
        rs_site site;
        rs_site_of_stack(s, stack, &site);
        if (!all)
            CHECK(strcmp(site.function, "forward") == 0 && strstr(site.file, "model.py") &&
                  site.line == 31);
        else
            CHECK(strcmp(site.function, "torch::unwind::unwind()") == 0);
        rs_snap_free(s);
    }
    CHECK(rs_site_rules_set("", 0) == RANKSNAP_OK);
}

/* fn on every stack's site in `s` and its path, formatted. */
static void each_site(const rs_snap *s, void (*fn)(const rs_site *, const char *path, void *),
                      void *ctx)
{
    for (uint32_t id = 1; id <= s->n_stacks; id++) {
        rs_site site;
        char buf[1024];
        site_path_of(s, id, &site, buf, sizeof buf);
        fn(&site, buf, ctx);
    }
}

/* A site of PyTorch's own machinery or a name left mangled: what the user must never be shown. */
static void no_machinery(const rs_site *site, const char *path, void *ctx)
{
    int *bad = ctx;
    int py = strstr(site->file, ".py") != NULL;
    int label = !site->file[0] && (strstr(site->function, "Backward") ||
                                   strcmp(site->function, "AccumulateGrad") == 0 ||
                                   strncmp(site->function, "aten::", 6) == 0);
    if ((!py && !label && strcmp(site->function, "(no stack)") != 0) || strstr(site->file, "/torch/") ||
        strstr(path, "gather_with_cpp") || strstr(path, "_Z")) {
        fprintf(stderr, "machinery as a site: %s\n", path);
        (*bad)++;
    }
}

TEST(stacks_all_sites_are_user_python_lines_or_autograd_nodes_never_torch_machinery)
{
    NEED_FIXTURES();
    for (int r = 0; r < 4; r++) {
        char name[64];
        snprintf(name, sizeof name, "snapshot_rank%d.pickle", r);
        rs_snap *s = read_rank(name, r);
        if (!s) return;
        int bad = 0;
        each_site(s, no_machinery, &bad);
        CHECK(bad == 0);
        rs_snap_free(s);
    }
}

static uint32_t stack_of_size(const rs_snap *s, uint64_t size)
{
    for (uint64_t i = 0; i < s->history.count; i++)
        if (s->history.action[i] == RS_ACT_ALLOC && s->history.size[i] == size) return s->history.stack[i];
    return 0;
}

/* The site and path of the first allocation of `size` bytes in rank 0 of fixture `name`; 0 when
 * the fixture cannot be read. */
static int first_alloc_site(const char *name, uint64_t size, rs_site *site, char *buf, size_t n)
{
    rs_snap *s = read_rank(name, 0);
    if (!s) return 0;
    site_path_of(s, stack_of_size(s, size), site, buf, n);
    rs_snap_free(s);
    return 1;
}

TEST(a_forward_site_is_the_model_line_with_the_operator_it_ran)
{
    NEED_FIXTURES();
    rs_site site;
    char buf[1024];
    if (!first_alloc_site("snapshot_rank0.pickle", 4 * 1536 * 1024, &site, buf, sizeof buf)) return;
    CHECK(strcmp(site.function, "forward") == 0 && site.line == 36);
    CHECK_STR_CONTAINS(buf, "forward (model.py:36) \xe2\x86\x92 aten::linear");
}

TEST(backward_allocations_are_named_by_their_autograd_node_and_operator)
{
    NEED_FIXTURES();
    rs_snap *s = read_rank("snapshot_rank0.pickle", 0);
    if (!s) return;
    rs_site site;
    char buf[1024];
    /* the backward pass's 4 * act temporaries come after the forward's mlp output of the same size */
    uint32_t bwd = 0;
    for (uint64_t i = 0; i < s->history.count; i++)
        if (s->history.action[i] == RS_ACT_ALLOC && s->history.size[i] == 4 * 1536 * 1024 &&
            s->history.stack[i] != stack_of_size(s, 4 * 1536 * 1024))
            bwd = s->history.stack[i];
    CHECK(bwd != 0);
    site_path_of(s, bwd, &site, buf, sizeof buf);
    CHECK(strcmp(site.function, "AddmmBackward0") == 0 && !site.file[0] && site.line == 0);
    CHECK(strcmp(buf, "AddmmBackward0 \xe2\x86\x92 aten::mm") == 0);
    /* the gradients: AccumulateGrad (its _apply_impl helper is no node) */
    site_path_of(s, stack_of_size(s, 512 * 1024), &site, buf, sizeof buf);
    CHECK(strcmp(site.function, "__init__") == 0); /* the first 512 KiB: a parameter */
    uint32_t grad = 0;
    for (uint64_t i = 0; i < s->history.count && !grad; i++)
        if (s->history.action[i] == RS_ACT_ALLOC && s->history.stack[i] != stack_of_size(s, 512 * 1024) &&
            (s->history.size[i] - 512 * 1024) % 4096 == 0 && s->history.size[i] < 600 * 1024) {
            rs_site g;
            site_path_of(s, s->history.stack[i], &g, buf, sizeof buf);
            if (strcmp(g.function, "AccumulateGrad") == 0) grad = s->history.stack[i];
        }
    CHECK(grad != 0);
    CHECK(strcmp(buf, "AccumulateGrad \xe2\x86\x92 aten::new_empty_strided") == 0);
    rs_snap_free(s);
}

TEST(a_package_model_line_is_shown_under_the_users_line)
{
    NEED_FIXTURES();
    rs_site site;
    char buf[1024];
    if (!first_alloc_site("transformers/snapshot_rank0.pickle", 3 * 1536 * 1024, &site, buf, sizeof buf))
        return;
    /* the site is the model's line; the user's line above it says which call of theirs */
    CHECK(strcmp(site.function, "forward") == 0 && site.line == 212 && strstr(site.file, "modeling_gpt2.py"));
    CHECK(strcmp(buf, "train_step (train.py:41) \xe2\x86\x92 forward "
                      "(transformers/models/gpt2/modeling_gpt2.py:212) \xe2\x86\x92 aten::linear") == 0);
}

/* The comparison of the four ranks of fixture folder `sub` ("" the default one). */
static rs_compare_result *compare_dir(const char *sub, int ranks, rs_snap **full)
{
    rs_summary sums[4];
    for (int r = 0; r < ranks; r++) {
        char name[96];
        snprintf(name, sizeof name, "%s%ssnapshot_rank%d.pickle", sub, sub[0] ? "/" : "", r);
        full[r] = read_rank(name, r);
        if (!full[r]) return NULL;
        rs_summary_of(full[r], &sums[r]);
    }
    rs_compare_result *res = NULL;
    CHECK(rs_compare(sums, (const rs_snap *const *)full, (size_t)ranks, 0, NULL, &res) == RANKSNAP_OK);
    return res;
}

TEST(python_only_stacks_name_the_same_divergent_site_as_stacks_all)
{
    NEED_FIXTURES();
    rs_snap *full[4] = {NULL};
    rs_compare_result *res = compare_dir("python", 4, full);
    CHECK(res && res->n_divergent == 1 && res->n_oom == 1);
    if (res && res->n_divergent == 1 && res->divergent[0].n_sites > 0) {
        const rs_site *top = &res->divergent[0].sites[0].site;
        CHECK(res->divergent[0].rank == 2);
        CHECK(strcmp(top->function, "forward") == 0 && strstr(top->file, "model.py") && top->line == 36);
    }
    if (res && res->n_oom == 1) CHECK(res->oom[0].step == 3 && res->oom[0].site.site.line == 36);
    rs_compare_result_free(res);
    for (int r = 0; r < 4; r++) rs_snap_free(full[r]);
}

TEST(a_leak_by_appending_outputs_is_growth_of_its_size_per_step_since_step_0)
{
    NEED_FIXTURES();
    rs_snap *full[4] = {NULL};
    rs_compare_result *res = compare_dir("leak", 4, full);
    CHECK(res && res->n_divergent == 1);
    if (res && res->n_divergent == 1) {
        const rs_compare_divergent *d = &res->divergent[0];
        CHECK(d->rank == 1 && d->growth && d->first_divergent_step == 0);
        CHECK(d->growth_per_step > 7.9 * 1048576 && d->growth_per_step < 8.1 * 1048576);
        /* PyTorch records no device capacity: nothing to project */
        CHECK(d->capacity == 0 && d->exhaust_step == -1);
        CHECK(d->n_sites > 0 && strcmp(d->sites[0].site.function, "train_step") == 0 &&
              d->sites[0].site.line == 44);
    }
    rs_compare_result_free(res);
    for (int r = 0; r < 4; r++) rs_snap_free(full[r]);
}

TEST(an_oom_in_the_first_step_is_at_step_0_with_either_kind_of_stack)
{
    NEED_FIXTURES();
    static const char *const dirs[] = {"oom0", "oom0-python"};
    for (int k = 0; k < 2; k++) {
        char name[96];
        snprintf(name, sizeof name, "%s/snapshot_rank3.pickle", dirs[k]);
        rs_snap *s = read_rank(name, 3);
        if (!s) return;
        CHECK(s->has_oom && s->oom.step == 0);
        rs_site site;
        rs_site_of_stack(s, s->oom.stack, &site);
        CHECK(strcmp(site.function, "forward") == 0 && site.line == 36);
        rs_snap_free(s);
    }
}

TEST(the_comparison_names_the_divergent_rank_and_the_oom_rank)
{
    NEED_FIXTURES();
    rs_summary sums[4];
    rs_snap *full[4] = {NULL};
    for (int r = 0; r < 4; r++) {
        char name[64];
        snprintf(name, sizeof name, "snapshot_rank%d.pickle", r);
        full[r] = read_rank(name, r);
        if (!full[r]) return;
        rs_summary_of(full[r], &sums[r]);
        CHECK(sums[r].n_steps == (r == 3 ? 4 : 5));
    }
    rs_compare_result *res = NULL;
    CHECK(rs_compare(sums, (const rs_snap *const *)full, 4, 0, NULL, &res) == RANKSNAP_OK);
    if (res) {
        CHECK(res->world_size == 4 && res->n_missing == 0);
        CHECK(res->n_oom == 1 && res->oom[0].rank == 3 && res->oom[0].step == 3);
        CHECK(res->n_oom == 1 && res->oom[0].requested == (uint64_t)16 << 30);
        CHECK(res->n_divergent == 1 && res->divergent[0].rank == 2);
        if (res->n_divergent == 1) {
            const rs_compare_divergent *d = &res->divergent[0];
            CHECK(d->first_divergent_step == 0 && !d->growth);
            CHECK(d->n_sites > 0 && strcmp(d->sites[0].site.function, "forward") == 0 &&
                  strstr(d->sites[0].site.file, "model.py") && d->sites[0].site.line == 36);
        }
    }
    rs_compare_result_free(res);
    for (int r = 0; r < 4; r++) rs_snap_free(full[r]);
}

TEST(rank_numbers_come_from_common_file_names)
{
    static const struct {
        const char *path;
        int rank;
    } ok[] = {{"snapshot_rank3.pickle", 3}, {"rank-3.pickle", 3}, {"rank_03.pickle", 3},
              {"oom_rank-3_gpt2.pickle", 3}, {"/runs/rank-9/snapshot_rank12.pickle", 12},
              {"RANK7.pickle", 7}, {"snap_rank1_rank2.pickle", 2}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int r = -1;
        CHECK(rs_decode_rank_from_name(ok[i].path, &r) == 0 && r == ok[i].rank);
    }
    static const char *const none[] = {"snapshot.pickle", "ranking.pickle", "/rank3/snap.pickle",
                                       "rank-99999999999.pickle"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        int r = -1;
        CHECK(rs_decode_rank_from_name(none[i], &r) == -1);
    }
}

TEST(pickles_and_rsnap_files_are_told_apart_by_content)
{
    CHECK(rs_torch_is_pickle("\x80\x04\x95", 3));
    CHECK(rs_torch_is_pickle("\x80\x02}", 3));
    CHECK(!rs_torch_is_pickle("\x80\x06", 2));
    CHECK(!rs_torch_is_pickle("\x80", 1));
    CHECK(!rs_torch_is_pickle("\xde\x00\x14", 3)); /* a msgpack map of 20 keys */
    CHECK(!rs_torch_is_pickle("\x8f", 1));
    NEED_FIXTURES();
    char path[640];
    snprintf(path, sizeof path, "%s/oom_rank-3_gpt2.pickle", g_dir);
    CHECK(rs_decode_is_pickle_file(path) == 1);
    rs_snap *s = NULL;
    CHECK(rs_torch_decode_file(path, 3, &s) == RANKSNAP_OK && s && s->has_oom && s->rank == 3);
    rs_snap_free(s);
}

/* A pickle written by Python from a dict literal, for the error cases. */
static ranksnap_status decode_python(const char *literal, rs_snap **out)
{
    char cmd[2048], path[640];
    snprintf(path, sizeof path, "%s/case.pickle", g_dir);
    snprintf(cmd, sizeof cmd, "%s -c 'import pickle; pickle.dump(%s, open(\"%s\", \"wb\"), protocol=4)'",
             g_python, literal, path);
    CHECK(system(cmd) == 0);
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    return rs_decode_file(path, &o, out);
}

TEST(wrong_fields_are_format_errors_naming_the_field_and_offset)
{
    NEED_FIXTURES();
    static const struct {
        const char *literal;
        const char *want;
    } cases[] = {
        {"[1, 2]", "offset 11: expected a dict at the top (torch.cuda.memory._snapshot()), found a list"},
        {"{\"x\": 1}", "neither segments nor device_traces: not a PyTorch memory snapshot"},
        {"{\"segments\": [{\"address\": 1, \"total_size\": 2, \"blocks\": [{\"size\": 1, \"state\": 5}]}]}",
         "segments[0].blocks[0].state: expected a str, found an int"},
        {"{\"segments\": [{\"address\": 1, \"total_size\": 2, \"blocks\": [{\"size\": 1, \"state\": \"busy\"}]}]}",
         "segments[0].blocks[0].state: expected active_allocated, active_pending_free (or "
         "active_awaiting_free) or inactive"},
        {"{\"segments\": [{\"total_size\": 2, \"blocks\": []}]}", "segments[0].address: missing"},
        {"{\"segments\": [{\"address\": -1, \"total_size\": 2, \"blocks\": []}]}",
         "segments[0].address: expected a non-negative integer, found -1"},
        {"{\"segments\": [{\"address\": 2**70, \"total_size\": 2, \"blocks\": []}]}",
         "segments[0].address: expected an integer of at most 64 bits, found a wider one"},
        {"{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 1, \"size\": \"big\"}]]}",
         "device_traces[0][0].size: expected an int, found a str"},
        {"{\"segments\": [], \"device_traces\": [[{\"addr\": 1}]]}", "device_traces[0][0].action: missing"},
        {"{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"frames\": [{\"name\": 1}]}]]}",
         "device_traces[0][0].frames[0].name: expected a str, found an int"},
        {"{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"frames\": [3]}]]}",
         "device_traces[0][0].frames[0]: expected a dict, found an int"},
        {"{\"segments\": [], \"device_traces\": {}}", "device_traces: expected a list, found a dict"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rs_snap *s = NULL;
        ranksnap_status st = decode_python(cases[i].literal, &s);
        CHECK(st == RANKSNAP_ERR_FORMAT && s == NULL);
        CHECK_STR_CONTAINS(ranksnap_last_error(), "case.pickle: offset ");
        CHECK_STR_CONTAINS(ranksnap_last_error(), cases[i].want);
        rs_snap_free(s);
    }
    /* What newer PyTorch versions may add is skipped, not refused. */
    rs_snap *s = NULL;
    CHECK(decode_python("{\"segments\": [], \"device_traces\": [[{\"action\": \"user_defined\"}, "
                        "{\"action\": \"snapshot\"}, {\"action\": \"alloc\", \"addr\": 4096, "
                        "\"size\": 100, \"frames\": None, \"new_field\": (1, 2)}]], "
                        "\"new_top_level\": {1: 2}}",
                        &s) == RANKSNAP_OK);
    CHECK(s && s->history.count == 1 && rs_snap_check(s, "decoded") == RANKSNAP_OK);
    rs_snap_free(s);
    /* Block states as PyTorch's C++ and its docstrings name them; a stream handle above
     * INT64_MAX, which PyTorch writes as a negative int64. */
    s = NULL;
    CHECK(decode_python("{\"segments\": [{\"address\": 4096, \"total_size\": 2097152, \"stream\": -8, "
                        "\"blocks\": [{\"size\": 512, \"state\": \"active_pending_free\"}, "
                        "{\"size\": 512, \"state\": \"active_awaiting_free\"}, "
                        "{\"size\": 2096128, \"state\": \"inactive\"}]}]}",
                        &s) == RANKSNAP_OK);
    CHECK(s && s->n_segments == 1 && s->segments[0].n_blocks == 3);
    if (s && s->n_segments == 1 && s->segments[0].n_blocks == 3) {
        CHECK(s->segments[0].blocks[0].state == RS_BLOCK_ACTIVE_AWAITING_FREE);
        CHECK(s->segments[0].blocks[1].state == RS_BLOCK_ACTIVE_AWAITING_FREE);
        CHECK(s->segments[0].blocks[1].addr == 4096 + 512); /* no address: blocks tile the segment */
        CHECK(s->streams[s->segments[0].stream] == (uint64_t)-8);
        CHECK(s->totals.active_bytes_current == 1024 && s->totals.allocated_bytes_current == 0);
    }
    rs_snap_free(s);
}

/* The pickle Python writes from `literal` decoded three ways (its entries read from their bytes,
 * made as values, and from the value tree): the first two must succeed alike or fail with the
 * same message, and agree with the tree where it succeeds too. The first's status; *n_read its
 * entries read from their bytes. */
static ranksnap_status decode_three_ways(const char *literal, size_t *n_read)
{
    char cmd[4096], path[640];
    snprintf(path, sizeof path, "%s/case3.pickle", g_dir);
    snprintf(cmd, sizeof cmd, "%s -c 'import pickle; pickle.dump(%s, open(\"%s\", \"wb\"), protocol=4)'",
             g_python, literal, path);
    CHECK(system(cmd) == 0);
    char *buf = NULL, msg[2][512];
    size_t len = 0;
    CHECK(rs_file_read(path, 0, &buf, &len) == RANKSNAP_OK);
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    rs_snap *s[3] = {NULL, NULL, NULL};
    ranksnap_status st[3];
    o.read_count = n_read;
    st[0] = rs_torch_decode(buf, len, "case3", &o, &s[0]);
    snprintf(msg[0], sizeof msg[0], "%s", st[0] == RANKSNAP_OK ? "" : ranksnap_last_error());
    o.read_count = NULL;
    o.read_entries = 0;
    st[1] = rs_torch_decode(buf, len, "case3", &o, &s[1]);
    snprintf(msg[1], sizeof msg[1], "%s", st[1] == RANKSNAP_OK ? "" : ranksnap_last_error());
    o.stream = 0;
    st[2] = rs_torch_decode(buf, len, "case3", &o, &s[2]);
    CHECK(st[0] == st[1]);
    CHECK(strcmp(msg[0], msg[1]) == 0);
    if (st[0] == RANKSNAP_OK && st[1] == RANKSNAP_OK) {
        const char *d = snap_same(s[0], s[1]);
        CHECK(d == NULL);
        if (d) fprintf(stderr, "     %s: %s differs\n", literal, d);
    }
    if (st[0] == RANKSNAP_OK && st[2] == RANKSNAP_OK) CHECK(snap_same(s[0], s[2]) == NULL);
    if (strcmp(msg[0], msg[1]) != 0) fprintf(stderr, "     %s\n     %s\n", msg[0], msg[1]);
    for (int i = 0; i < 3; i++) rs_snap_free(s[i]);
    free(buf);
    return st[0];
}

/* Entries PyTorch does not write but a pickle may hold: each read from its bytes as the value
 * tree's reader reads it, or left to that reader, which accepts or refuses it as before. */
TEST(unusual_trace_entries_decode_alike_read_from_their_bytes_or_made_as_values)
{
    NEED_FIXTURES();
    /* three entries of one shape, their keys then GETs, and the case's entry last */
    static const char head[] =
        "{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 4096, "
        "\"size\": 512, \"stream\": 0, \"time_us\": 1, \"frames\": [f, g]}, "
        "{\"action\": \"free_requested\", \"addr\": 4096, \"size\": 512, \"stream\": 0, "
        "\"time_us\": 2, \"frames\": [g]}, {\"action\": \"free_completed\", \"addr\": 4096, "
        "\"size\": 512, \"stream\": 0, \"time_us\": 3, \"frames\": [f, g]}, ";
    static const struct {
        const char *entry;
        int ok;   /* whether the decode succeeds */
        int read; /* whether the bytes' reader reads the last entry */
    } cases[] = {
        {"{\"action\": \"alloc\", \"addr\": 8192, \"size\": 64, \"stream\": -8, \"time_us\": 4, "
         "\"frames\": [g, f]}", 1, 1},                                          /* a negative stream */
        {"{\"action\": \"alloc\", \"addr\": 8192, \"size\": True, \"frames\": []}", 1, 0}, /* a bool */
        {"{\"action\": \"alloc\", \"addr\": 2**64 - 1, \"size\": 64}", 1, 0}, /* LONG1 of 9 bytes */
        {"{\"action\": \"alloc\", \"addr\": -4096, \"size\": 64}", 0, 0},
        {"{\"action\": \"alloc\", \"addr\": 8192, \"size\": 64, \"time_us\": 1.5}", 0, 0},
        {"{\"action\": \"alloc\", \"addr\": 8192, \"size\": \"64\"}", 0, 0},
        {"{\"action\": \"alloc\", \"addr\": 8192, \"size\": 64, \"frames\": None}", 1, 1},
        {"{\"action\": \"alloc\", \"addr\": 8192, \"size\": 64, \"frames\": (f,)}", 1, 0},
        {"{\"action\": \"alloc\", \"addr\": 8192, \"size\": 64, \"frames\": 7}", 0, 0},
        {"{\"action\": \"alloc\", \"addr\": 8192, \"size\": 64, \"frames\": [\"x\"]}", 0, 0},
        {"{\"action\": \"oom\", \"device_free\": 1024, \"addr\": -5, \"size\": 64}", 1, 1},
        {"{\"action\": \"oom\", \"device_free\": -1, \"size\": 64}", 0, 0},
        {"{\"action\": \"snapshot\", \"addr\": -1, \"size\": \"x\", \"frames\": 3}", 1, 1},
        {"{\"action\": 5, \"addr\": 8192}", 0, 0},
        {"{\"addr\": 8192, \"size\": 64}", 0, 0},
        {"{1: 2, \"action\": \"alloc\", \"addr\": 8192, \"size\": 64}", 1, 0}, /* an int key */
        {"{\"action\": \"alloc\", \"addr\": 8192, \"size\": 64, \"extra\": (1, 2)}", 1, 0},
        {"{\"action\": \"alloc\", \"addr\": 8192, \"size\": 64, \"extra\": None, "
         "\"more\": \"N/A\", \"user_metadata\": \"\"}", 1, 1},
        {"{\"action\": \"segment_map\", \"addr\": 8192, \"size\": 2**63 - 1}", 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char literal[2048];
        snprintf(literal, sizeof literal,
                 "(lambda f, g: %s%s]]})({\"filename\": \"a.py\", \"line\": 3, \"name\": \"f\"}, "
                 "{\"filename\": \"b.py\", \"line\": 9, \"name\": \"g\"})",
                 head, cases[i].entry);
        size_t n_read = 0;
        ranksnap_status st = decode_three_ways(literal, &n_read);
        CHECK((st == RANKSNAP_OK) == cases[i].ok);
        /* the first entry has new frame dicts (the machine's, handed over before the next);
         * the second and third are read from their bytes */
        if (cases[i].ok) CHECK(n_read == 2 + (size_t)cases[i].read);
        if ((st == RANKSNAP_OK) != cases[i].ok || (cases[i].ok && n_read != 2 + (size_t)cases[i].read))
            fprintf(stderr, "     case %zu: %s, %zu read\n", i, ranksnap_strerror(st), n_read);
    }
}

/* A real trace with one byte changed, at places spread over it, to bytes that make opcodes and
 * values PyTorch never writes there: both ways of reading the entries succeed alike, to the same
 * snapshot, or both fail. (Their messages may name different places: the bytes' reader takes an
 * entry when it ends, the machine when the next one starts.) */
TEST(mutated_real_traces_decode_alike_read_from_their_bytes_or_made_as_values)
{
    char *buf = NULL;
    size_t len = 0;
    CHECK(rs_file_read(RS_TEST_DATA_DIR "/oom_rank-3_gpt2.pickle", 0, &buf, &len) == RANKSNAP_OK);
    if (!buf) return;
    const char *at = memmem(buf, len, "device_traces", 13);
    CHECK(at != NULL);
    if (!at) {
        free(buf);
        return;
    }
    static const unsigned char bytes[] = {0x00, 0xff, 0x95, 0x88, 0x4e, 0x94, 0x75, 0x65,
                                          0x68, 0x8a, 0x4a, 0x8c, 0x7d, 0x5d, 0x28, 0x6a,
                                          0x4b, 0x61, 0x85, 0x29, 0x30, 0x02, 0x80, 0x01};
    size_t from = (size_t)(at - buf), span = len - from;
    int tried = 0, ok = 0, differ = 0;
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    o.infer_steps = 0;
    for (size_t k = 0; k < 2400; k++) {
        size_t pos = from + (k * 7919u) % span;
        unsigned char was = (unsigned char)buf[pos], now = bytes[k % sizeof bytes];
        if (was == now) continue;
        buf[pos] = (char)now;
        rs_snap *a = NULL, *b = NULL;
        char msg[512];
        o.read_entries = 1;
        ranksnap_status sa = rs_torch_decode(buf, len, "mutated", &o, &a);
        snprintf(msg, sizeof msg, "%s", sa == RANKSNAP_OK ? "" : ranksnap_last_error());
        o.read_entries = 0;
        ranksnap_status sb = rs_torch_decode(buf, len, "mutated", &o, &b);
        const char *mb = sb == RANKSNAP_OK ? "" : ranksnap_last_error();
        int same = sa == sb && (sa != RANKSNAP_OK || !snap_same(a, b));
        if (!same && differ++ < 3)
            fprintf(stderr, "     byte %zu: 0x%02x -> 0x%02x: %s | %s\n", pos, was, now, msg, mb);
        tried++;
        ok += sa == RANKSNAP_OK;
        rs_snap_free(a);
        rs_snap_free(b);
        buf[pos] = (char)was;
    }
    printf("     %d mutations, %d decoded\n", tried, ok);
    CHECK(tried > 2000 && differ == 0);
    free(buf);
}

TEST(damaged_snapshots_decode_or_fail_cleanly)
{
    NEED_FIXTURES();
    char path[640];
    snprintf(path, sizeof path, "%s/tiny.pickle", g_dir);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f) return;
    static unsigned char buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    CHECK(len > 1000 && len < sizeof buf);
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    size_t ok = 0, failed = 0, bad = 0;
    /* Every byte replaced (by 0x00, 0xff or EMPTY_LIST in turn), then every 7th truncation. */
    static const unsigned char subst[] = {0x00, 0xff, 0x5d};
    for (size_t i = 0; i < len; i++) {
        for (size_t k = i % sizeof subst; k == i % sizeof subst; k++) {
            unsigned char *copy = malloc(len);
            memcpy(copy, buf, len);
            copy[i] = subst[k];
            rs_snap *s = NULL;
            ranksnap_status st = rs_torch_decode(copy, len, "damaged.pickle", &o, &s);
            if (st == RANKSNAP_OK && s && rs_snap_check(s, "decoded") == RANKSNAP_OK)
                ok++;
            else if (st == RANKSNAP_ERR_FORMAT && !s &&
                     strncmp(ranksnap_last_error(), "damaged.pickle: offset ", 23) == 0)
                failed++;
            else if (bad++ < 5)
                fprintf(stderr, "byte %zu = 0x%02x: %s\n", i, subst[k], ranksnap_last_error());
            rs_snap_free(s);
            free(copy);
        }
    }
    for (size_t cut = 0; cut < len; cut += 7) {
        unsigned char *copy = malloc(cut ? cut : 1);
        memcpy(copy, buf, cut);
        rs_snap *s = NULL;
        if (rs_torch_decode(copy, cut, "cut.pickle", &o, &s) != RANKSNAP_ERR_FORMAT || s) bad++;
        rs_snap_free(s);
        free(copy);
    }
    CHECK(bad == 0);
    CHECK(ok > 0 && failed > 0);
}

TEST(real_snapshots_in_tests_data_keep_the_model_promises)
{
    /* PyTorch snapshots made on a GPU machine go to tests/data (NAME.pickle): each must decode. */
    DIR *d = opendir(RS_TEST_DATA_DIR);
    if (!d) return;
    struct dirent *e;
    int seen = 0;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 8 || strcmp(e->d_name + n - 7, ".pickle") != 0) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", RS_TEST_DATA_DIR, e->d_name);
        rs_snap *s = NULL;
        ranksnap_status st = rs_decode_file(path, NULL, &s);
        if (st != RANKSNAP_OK) fprintf(stderr, "%s\n", ranksnap_last_error());
        CHECK(st == RANKSNAP_OK && s && rs_snap_check(s, "decoded") == RANKSNAP_OK);
        rs_summary sum;
        if (s) rs_summary_of(s, &sum);
        rs_snap_free(s);
        seen++;
    }
    closedir(d);
    printf("     %d snapshot%s in %s\n", seen, seen == 1 ? "" : "s", RS_TEST_DATA_DIR);
}

/* Every real snapshot, decoded three times: streamed with the entries read from their bytes
 * (torch_trace.h, the fast path), streamed with every entry made as values by the general
 * machine (read_entries 0), and from the whole value tree, opcode by opcode (stream 0). */
static int g_alike_seen, g_alike_bad;
static uint64_t g_alike_read, g_alike_events;

/* Every real snapshot, in tests/data and in the archives the build unpacked, given to `fn`. */
static void (*g_each_pickle)(const char *path);

static int each_pickle_visit(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    size_t n = strlen(path);
    if (type == FTW_F && n >= 8 && strcmp(path + n - 7, ".pickle") == 0) g_each_pickle(path);
    return 0;
}

static void each_real_pickle(void (*fn)(const char *path))
{
    g_each_pickle = fn;
    (void)nftw(RS_TEST_DATA_DIR, each_pickle_visit, 16, FTW_PHYS);
    (void)nftw(RS_TEST_UNPACKED_DIR, each_pickle_visit, 16, FTW_PHYS);
}

static void decode_alike(const char *path)
{
    char *buf = NULL;
    size_t len = 0;
    if (rs_file_read(path, 0, &buf, &len) != RANKSNAP_OK) {
        fprintf(stderr, "%s\n", ranksnap_last_error());
        g_alike_bad++;
        return;
    }
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    rs_snap *read = NULL, *streamed = NULL, *tree = NULL;
    size_t n_read = 0;
    o.read_count = &n_read;
    ranksnap_status a = rs_torch_decode(buf, len, path, &o, &read);
    o.read_count = NULL;
    o.read_entries = 0;
    ranksnap_status b = rs_torch_decode(buf, len, path, &o, &streamed);
    o.stream = 0;
    ranksnap_status c = rs_torch_decode(buf, len, path, &o, &tree);
    const char *differs = a != RANKSNAP_OK || b != RANKSNAP_OK || c != RANKSNAP_OK ? "the decode"
                          : snap_same(read, tree)                                    ? snap_same(read, tree)
                                                                                     : snap_same(streamed, tree);
    if (differs) {
        fprintf(stderr, "%s: %s differs between the streamed decodes and the tree's\n", path, differs);
        g_alike_bad++;
    }
    /* the bytes' reader is the one PyTorch's own entries go to (all but those with a frame dict
     * met for the first time, and those a FRAME opcode cuts) */
    uint64_t events = read ? read->history.count : 0;
    if (events >= 1000 && n_read < events - events / 10) {
        fprintf(stderr, "%s: %zu of %llu entries read from their bytes\n", path, n_read,
                (unsigned long long)events);
        g_alike_bad++;
    }
    g_alike_seen++;
    g_alike_read += n_read;
    g_alike_events += events;
    rs_snap_free(read);
    rs_snap_free(streamed);
    rs_snap_free(tree);
    free(buf);
}

TEST(real_snapshots_decode_alike_streamed_and_from_the_value_tree)
{
    g_alike_seen = g_alike_bad = 0;
    g_alike_read = g_alike_events = 0;
    each_real_pickle(decode_alike);
    printf("     %d real snapshots, %llu of their %llu events read from their bytes\n", g_alike_seen,
           (unsigned long long)g_alike_read, (unsigned long long)g_alike_events);
    CHECK(g_alike_seen >= 4); /* tests/data's own */
    CHECK(g_alike_bad == 0);
}

/* ---- the decoder's walk, kept for the next ones (walk.h: rs_walk_keep) ------------------------ */

/* A real pickle decoded with the default options; NULL for the broken ones of the archives. */
static rs_snap *real_snapshot(const char *path)
{
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    rs_snap *s = NULL;
    return rs_decode_file(path, &o, &s) == RANKSNAP_OK ? s : NULL;
}

/* A walk copied from the one the decoder kept and a walk built anew agree at the start and after
 * every event, on every real pickle of the archives that has a trace. */
static int g_walks_seen, g_walks_bad;

static void walks_alike(const char *path)
{
    rs_snap *s = real_snapshot(path);
    if (!s) return;
    int bad = !s->walk;
    rs_walk copied, built;
    struct rs_walk *kept = s->walk;
    bad |= rs_walk_init(&copied, s) != RANKSNAP_OK;
    s->walk = NULL;
    bad |= rs_walk_init(&built, s) != RANKSNAP_OK;
    s->walk = kept;
    bad |= copied.start_allocated != built.start_allocated ||
           copied.start_reserved != built.start_reserved ||
           copied.peak_allocated != built.peak_allocated || copied.peak_event != built.peak_event ||
           copied.last_oom != built.last_oom || copied.n_start_live != built.n_start_live ||
           copied.n_slots != built.n_slots ||
           memcmp(copied.slots, built.slots, built.n_slots * sizeof *built.slots) != 0;
    for (uint64_t i = 0; !bad && i < s->history.count; i++) {
        rs_walk_change a, b;
        rs_walk_event(&copied, &a);
        rs_walk_event(&built, &b);
        bad |= a.d_allocated != b.d_allocated || a.d_reserved != b.d_reserved ||
               (a.block ? rs_walk_index(&copied, a.block) : SIZE_MAX) !=
                   (b.block ? rs_walk_index(&built, b.block) : SIZE_MAX) ||
               a.replaced_size != b.replaced_size || a.inconsistent != b.inconsistent;
    }
    bad |= copied.allocated != built.allocated || copied.reserved != built.reserved;
    if (bad) fprintf(stderr, "%s: the kept walk's copy differs from a walk built anew\n", path);
    g_walks_bad += bad;
    g_walks_seen++;
    rs_walk_free(&copied);
    rs_walk_free(&built);
    rs_snap_free(s);
}

TEST(a_walk_copied_from_the_decoders_is_the_walk_built_anew)
{
    g_walks_seen = g_walks_bad = 0;
    each_real_pickle(walks_alike);
    printf("     %d real snapshots\n", g_walks_seen);
    CHECK(g_walks_seen >= 4);
    CHECK(g_walks_bad == 0);
}

/* The walk's first-pass records (walk.h), which the decoder's totals and the summary's step
 * series read in place of walks of their own, are what a walk of every event finds, on every
 * real pickle of the archives; and all of them have exact levels (none stops at 0 on the way). */
static int g_records_seen, g_records_bad, g_records_walked;

static void records_alike(const char *path)
{
    rs_snap *s = real_snapshot(path);
    if (!s) return;
    int exact = 0;
    const char *bad = walk_records_differ(s, &exact);
    if (bad) fprintf(stderr, "%s: %s differs from the walk's\n", path, bad);
    g_records_bad += bad != NULL;
    g_records_walked += !exact;
    g_records_seen++;
    rs_snap_free(s);
}

TEST(the_walks_first_pass_records_are_what_a_walk_finds_on_the_real_pickles)
{
    g_records_seen = g_records_bad = g_records_walked = 0;
    each_real_pickle(records_alike);
    printf("     %d real snapshots, %d of them walked (levels not exact)\n", g_records_seen,
           g_records_walked);
    CHECK(g_records_seen >= 4);
    CHECK(g_records_bad == 0);
    CHECK(g_records_walked == 0);
}

/* ---- the sites made with the summary (summary.h: rs_summary_of_sites) ------------------------ */

/* On every real pickle of the archives (OOM ranks among them): the sites made with the summary
 * are, site for site and path for path, those rs_site_list_at_peak finds in the snapshot, and the
 * OOM's path is the one its stack gives. */
static int g_sites_seen, g_sites_bad, g_sites_oom;

static void sites_alike(const char *path)
{
    rs_snap *s = real_snapshot(path);
    if (!s) return;
    rs_summary sum, plain;
    rs_summary_sites made;
    rs_summary_of_sites(s, &sum, &made);
    rs_summary_of(s, &plain);
    rs_site *v = NULL;
    rs_site_path *paths = NULL;
    size_t n = 0;
    int bad = !made.ok || rs_site_list_at_peak(s, &v, &paths, &n) != RANKSNAP_OK ||
              memcmp(&sum, &plain, sizeof sum) != 0 || made.n != n ||
              (n && (memcmp(made.sites, v, n * sizeof *v) != 0 ||
                     memcmp(made.paths, paths, n * sizeof *paths) != 0));
    if (s->has_oom) {
        rs_site_picker pk;
        rs_site oom;
        rs_site_path oom_path;
        rs_site_picker_init(&pk, s);
        rs_site_pick_path(&pk, s->oom.stack, &oom, &oom_path);
        rs_site_picker_free(&pk);
        bad |= memcmp(&oom_path, &made.oom_path, sizeof oom_path) != 0 || !rs_site_same(&oom, &sum.oom_site);
        g_sites_oom++;
    }
    if (bad) fprintf(stderr, "%s: the sites made with the summary differ from the snapshot's\n", path);
    g_sites_bad += bad;
    g_sites_seen++;
    free(v);
    free(paths);
    rs_summary_sites_free(&made);
    rs_snap_free(s);
}

TEST(the_sites_made_with_the_summary_are_the_snapshots_sites_at_its_peak)
{
    g_sites_seen = g_sites_bad = g_sites_oom = 0;
    each_real_pickle(sites_alike);
    printf("     %d real snapshots, %d with an OOM\n", g_sites_seen, g_sites_oom);
    CHECK(g_sites_seen >= 4);
    CHECK(g_sites_oom >= 1);
    CHECK(g_sites_bad == 0);
}

/* The glue's "communicators" (docs/PYTORCH.md): every field kept, an id above INT64_MAX included,
 * a name longer than the model keeps cut; a snapshot without them has none; a wrong one is an
 * error naming the field. */
TEST(communicators_in_the_ranksnap_key_become_the_ranks_communicators)
{
    NEED_FIXTURES();
    rs_snap *s = NULL;
    CHECK(decode_python("{\"segments\": [], \"device_traces\": [[]], \"ranksnap\": {\"rank\": 3, "
                        "\"world_size\": 4, \"communicators\": [{\"id\": 2**64 - 5, \"size\": 2, "
                        "\"rank\": 1, \"kind\": \"torch\", \"name\": \"pp\", \"allreduces\": 0}, "
                        "{\"id\": 77, \"size\": 3, \"rank\": 2, \"kind\": \"torch\", "
                        "\"name\": \"dp_replicate_and_shard\", \"allreduces\": 12}]}}",
                        &s) == RANKSNAP_OK);
    CHECK(s && s->n_comms == 2);
    if (s && s->n_comms == 2) {
        CHECK_EQ_U64(s->comms[0].id, UINT64_MAX - 4);
        CHECK(s->comms[0].size == 2 && s->comms[0].rank == 1);
        CHECK(strcmp(s->comms[0].kind, "torch") == 0 && strcmp(s->comms[0].name, "pp") == 0);
        CHECK_EQ_U64(s->comms[0].allreduces, 0);
        CHECK_EQ_U64(s->comms[1].id, 77);
        CHECK(s->comms[1].size == 3 && s->comms[1].rank == 2);
        CHECK(strcmp(s->comms[1].name, "dp_replicate_an") == 0);
        CHECK_EQ_U64(s->comms[1].allreduces, 12);
    }
    rs_snap_free(s);
    s = NULL;
    CHECK(decode_python("{\"segments\": [], \"device_traces\": [[]], \"ranksnap\": {\"rank\": 1}}",
                        &s) == RANKSNAP_OK);
    CHECK(s && s->n_comms == 0 && s->comms == NULL);
    rs_snap_free(s);
    static const struct {
        const char *comms;
        const char *want;
    } bad[] = {
        {"{}", "ranksnap.communicators: expected a list, found a dict"},
        {"[3]", "ranksnap.communicators: expected dicts, found an int"},
        {"[{\"size\": 2, \"rank\": 0}]", "ranksnap.communicators.id: expected a non-negative integer"},
        {"[{\"id\": -1, \"size\": 2, \"rank\": 0}]", "ranksnap.communicators.id: expected a non-negative"},
        {"[{\"id\": 1, \"size\": 2, \"rank\": 2}]", "ranksnap.communicators: expected a size from 1 and a rank below it"},
        {"[{\"id\": 1, \"size\": 2}]", "ranksnap.communicators: expected a size from 1 and a rank below it"},
        {"[{\"id\": 1, \"size\": 2, \"rank\": 0, \"name\": 5}]", "ranksnap.communicators.name: expected a str"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char lit[512];
        snprintf(lit, sizeof lit, "{\"segments\": [], \"device_traces\": [[]], \"ranksnap\": "
                 "{\"rank\": 0, \"communicators\": %s}}", bad[i].comms);
        s = NULL;
        /* the rank is read; only its communicators are left out, with the reason */
        CHECK(decode_python(lit, &s) == RANKSNAP_OK && s != NULL);
        CHECK(s && s->n_comms == 0 && s->comms == NULL);
        CHECK_STR_CONTAINS(s ? s->comms_error : NULL, bad[i].want);
        rs_snap_free(s);
    }
}

int main(void)
{
    setup();
    RUN(a_torch_snapshot_maps_onto_segments_history_and_interned_stacks);
    RUN(an_oom_entry_marks_the_rank_oom_with_the_request_and_its_site);
    RUN(sites_are_user_frames_unless_all_frames_is_asked);
    RUN(stacks_all_sites_are_user_python_lines_or_autograd_nodes_never_torch_machinery);
    RUN(a_forward_site_is_the_model_line_with_the_operator_it_ran);
    RUN(backward_allocations_are_named_by_their_autograd_node_and_operator);
    RUN(a_package_model_line_is_shown_under_the_users_line);
    RUN(python_only_stacks_name_the_same_divergent_site_as_stacks_all);
    RUN(a_leak_by_appending_outputs_is_growth_of_its_size_per_step_since_step_0);
    RUN(an_oom_in_the_first_step_is_at_step_0_with_either_kind_of_stack);
    RUN(the_comparison_names_the_divergent_rank_and_the_oom_rank);
    RUN(rank_numbers_come_from_common_file_names);
    RUN(pickles_and_rsnap_files_are_told_apart_by_content);
    RUN(wrong_fields_are_format_errors_naming_the_field_and_offset);
    RUN(communicators_in_the_ranksnap_key_become_the_ranks_communicators);
    RUN(unusual_trace_entries_decode_alike_read_from_their_bytes_or_made_as_values);
    RUN(mutated_real_traces_decode_alike_read_from_their_bytes_or_made_as_values);
    RUN(damaged_snapshots_decode_or_fail_cleanly);
    RUN(real_snapshots_in_tests_data_keep_the_model_promises);
    RUN(real_snapshots_decode_alike_streamed_and_from_the_value_tree);
    RUN(a_walk_copied_from_the_decoders_is_the_walk_built_anew);
    RUN(the_walks_first_pass_records_are_what_a_walk_finds_on_the_real_pickles);
    RUN(the_sites_made_with_the_summary_are_the_snapshots_sites_at_its_peak);
    return check_summary();
}
