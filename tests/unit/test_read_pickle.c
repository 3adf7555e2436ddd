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
 * promises. Step inference is also tested on histories built here, where the answer is known.
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
#include "crafted_inputs.h"
#include "decode.h"
#include "file_read.h"
#include "find_python.h"
#include "snap_check.h"
#include "snap_same.h"
#include "rsnap_decode.h"
#include "site_path.h"
#include "site_rules.h"
#include "sites.h"
#include "step_events.h"
#include "steps_infer.h"
#include "torch_decode.h"
#include "walk.h"
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

/* ---- frames lists met again by their bytes (pickle.c, struct span_memo) -------------------- */

/* A protocol 4 pickle being written with MEMOIZE, its next memo key counted. */
typedef struct pk4 {
    crafted b;
    unsigned next;
} pk4;

static unsigned pk4_memo(pk4 *p)
{
    cr_byte(&p->b, 0x94); /* MEMOIZE */
    return p->next++;
}

static unsigned pk4_str(pk4 *p, const char *s)
{
    pk_str(&p->b, s);
    return pk4_memo(p);
}

static void pk4_get(pk4 *p, unsigned key)
{
    if (key < 256) {
        cr_byte(&p->b, 'h'); /* BINGET */
        cr_byte(&p->b, key);
        return;
    }
    cr_byte(&p->b, 'j'); /* LONG_BINGET */
    for (int i = 0; i < 4; i++) cr_byte(&p->b, (key >> (8 * i)) & 255);
}

/* The string w: written and memoized the first time (its key kept in *key), fetched after. */
static void pk4_word(pk4 *p, unsigned *key, const char *w)
{
    if (*key) pk4_get(p, *key);
    else *key = pk4_str(p, w);
}

/* PROTO 4 and the snapshot's dict, its MARK open for the keys. */
static void pk4_begin(pk4 *p)
{
    cr_byte(&p->b, 0x80);
    cr_byte(&p->b, 4);
    cr_byte(&p->b, '}');
    (void)pk4_memo(p);
    cr_byte(&p->b, '(');
}

/* A memoized list, its MARK open for the items. */
static void pk4_list(pk4 *p)
{
    cr_byte(&p->b, ']');
    (void)pk4_memo(p);
    cr_byte(&p->b, '(');
}

/* SETITEMS of the snapshot's dict and STOP: the pickle's bytes (NULL without memory). */
static unsigned char *pk4_end(pk4 *p, size_t *len)
{
    cr_byte(&p->b, 'u');
    cr_byte(&p->b, '.');
    return cr_done(&p->b, len);
}

/* pk4_begin, then "segments": an empty list (a snapshot taken with nothing reserved). */
static void pk4_begin_no_segments(pk4 *p)
{
    pk4_begin(p);
    pk4_str(p, "segments");
    cr_byte(&p->b, ']');
    (void)pk4_memo(p);
}

/* {"name": "forward", "filename": "model.py", "line": line}; words[0..5) the keys of those
 * strings, 0 before they are written. */
static unsigned pk4_frame(pk4 *p, unsigned *words, unsigned line)
{
    static const char *const w[] = {"name", "forward", "filename", "model.py", "line"};
    cr_byte(&p->b, '}');
    unsigned key = pk4_memo(p);
    cr_byte(&p->b, '(');
    for (int i = 0; i < 5; i++) pk4_word(p, &words[i], w[i]);
    pk_uint(&p->b, line);
    cr_byte(&p->b, 'u');
    return key;
}

/* An alloc entry whose frames are the memo GETs of frames[0..n) (or, when n is 0, new frame
 * dicts of lines 1, 2, 3, their keys put in frames[0..3)); words[5..12) its strings' keys.
 * Returns its frames list's memo key. */
static unsigned pk4_entry(pk4 *p, unsigned *words, uint64_t addr, unsigned *frames, size_t n)
{
    cr_byte(&p->b, '}');
    (void)pk4_memo(p);
    cr_byte(&p->b, '(');
    pk4_word(p, &words[5], "action");
    pk4_word(p, &words[6], "alloc");
    pk4_word(p, &words[7], "addr");
    pk_uint(&p->b, addr);
    pk4_word(p, &words[8], "size");
    pk_uint(&p->b, 512);
    pk4_word(p, &words[9], "stream");
    pk_uint(&p->b, 0);
    pk4_word(p, &words[10], "time_us");
    pk_uint(&p->b, addr >> 8);
    pk4_word(p, &words[11], "frames");
    cr_byte(&p->b, ']');
    unsigned list = pk4_memo(p);
    cr_byte(&p->b, '(');
    if (n == 0)
        for (unsigned line = 1; line <= 3; line++) frames[line - 1] = pk4_frame(p, words, line);
    for (size_t i = 0; i < n; i++) pk4_get(p, frames[i]);
    cr_byte(&p->b, 'e');
    cr_byte(&p->b, 'u');
    return list;
}

/* A snapshot whose second batch of trace entries writes the same frames-list bytes (GETs of the
 * three frames of lines 1, 2, 3 the first batch made) three times, and between the second and
 * the third gives the first frame's memo key the second frame (BINPUT). `pad` memoized strings
 * come first; *third is the memo key the third frame got. With `grow`, the second entry's
 * frames list gets one more frame (GET, MARK, GET, APPENDS) after it is made. */
static unsigned char *pk4_rebound(unsigned pad, int grow, unsigned *third, size_t *len)
{
    pk4 p = {{NULL, 0, 0, 0}, 0};
    unsigned words[12] = {0}, frames[3];
    pk4_begin_no_segments(&p);
    pk4_str(&p, "pad");
    pk4_list(&p);
    for (unsigned i = 0; i < pad; i++) {
        char t[16];
        snprintf(t, sizeof t, "p%u", i);
        pk4_str(&p, t);
    }
    cr_byte(&p.b, 'e');
    pk4_str(&p, "device_traces");
    pk4_list(&p);
    cr_byte(&p.b, ']');
    (void)pk4_memo(&p);
    cr_byte(&p.b, '('); /* the first batch makes the frames */
    pk4_entry(&p, words, 0x10000, frames, 0);
    cr_byte(&p.b, 'e');
    cr_byte(&p.b, '('); /* the second fetches them */
    pk4_entry(&p, words, 0x20000, frames, 3);
    unsigned second = pk4_entry(&p, words, 0x30000, frames, 3);
    if (grow) {
        pk4_get(&p, second);
        cr_byte(&p.b, '(');
        pk4_get(&p, frames[0]);
        cr_byte(&p.b, 'e');
        cr_byte(&p.b, '0'); /* POP */
    }
    pk4_get(&p, frames[1]); /* memo[frames[0]] = the frame of line 2 */
    cr_byte(&p.b, 'q');
    cr_byte(&p.b, frames[0]);
    cr_byte(&p.b, '0'); /* POP */
    pk4_entry(&p, words, 0x40000, frames, 3);
    cr_byte(&p.b, 'e');
    cr_byte(&p.b, 'e');
    cr_byte(&p.b, 'u');
    cr_byte(&p.b, '.');
    *third = frames[2];
    return cr_done(&p.b, len);
}

static unsigned first_line_of_stack(const rs_snap *s, uint64_t k)
{
    const rs_snap_stack *st = &s->stacks[s->history.stack[k] - 1];
    return st->n_frames ? (unsigned)s->frames[st->frames[0]].line : 0;
}

TEST(a_frames_list_met_again_is_read_again_after_its_memo_keys_change)
{
    /* the third frame's memo key is 101, the APPENDS byte: its BINGET's argument is a false end
     * of the list's bytes, before the real one */
    size_t len = 0;
    unsigned third = 0, pad = 0;
    unsigned char *buf = pk4_rebound(pad, 0, &third, &len);
    CHECK(buf && third < 101);
    free(buf);
    pad = 101 - third;
    buf = pk4_rebound(pad, 0, &third, &len);
    CHECK(buf && third == 101);
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    o.infer_steps = 0;
    rs_snap *streamed = NULL, *tree = NULL;
    CHECK(rs_torch_decode(buf, len, "rebound.pickle", &o, &streamed) == RANKSNAP_OK);
    o.stream = 0;
    CHECK(rs_torch_decode(buf, len, "rebound.pickle", &o, &tree) == RANKSNAP_OK);
    const char *differs = snap_same(streamed, tree);
    if (differs) fprintf(stderr, "     %s differs\n", differs);
    CHECK(differs == NULL);
    const rs_snap_history *h = &streamed->history;
    CHECK(h->count == 4);
    /* entries 1 and 2: lines 1, 2, 3; entry 3, after the BINPUT: lines 2, 2, 3 */
    CHECK(h->stack[1] == h->stack[0] && h->stack[2] == h->stack[0]);
    CHECK(h->stack[3] != h->stack[0]);
    CHECK(first_line_of_stack(streamed, 0) == 1 && first_line_of_stack(streamed, 2) == 1);
    CHECK(first_line_of_stack(streamed, 3) == 2);
    CHECK(streamed->stacks[h->stack[3] - 1].n_frames == 3);
    rs_snap_free(streamed);
    rs_snap_free(tree);
    free(buf);
}

/* Lists of the same bytes are one value in a streamed decode (pickle.c, struct span_memo): one
 * of them grown afterwards would grow all, so the streamed decode refuses it, naming the layout;
 * read from the value tree, the entries keep their own lists. */
TEST(a_shared_frames_list_that_grows_is_refused_when_streamed)
{
    size_t len = 0;
    unsigned third = 0;
    unsigned char *buf = pk4_rebound(0, 1, &third, &len);
    CHECK(buf != NULL);
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    o.infer_steps = 0;
    rs_snap *s = NULL;
    CHECK(rs_torch_decode(buf, len, "grown.pickle", &o, &s) == RANKSNAP_ERR_FORMAT && s == NULL);
    CHECK(strstr(ranksnap_last_error(), "grown.pickle: offset ") != NULL);
    CHECK(strstr(ranksnap_last_error(), "APPENDS adds to a frames list the reader shares") != NULL);
    o.stream = 0;
    CHECK(rs_torch_decode(buf, len, "grown.pickle", &o, &s) == RANKSNAP_OK && s);
    /* the first two entries' lists: lines 1, 2, 3 and 1, 2, 3, 1 */
    CHECK(s && s->history.count == 4 && s->stacks[s->history.stack[1] - 1].n_frames == 3 &&
          s->stacks[s->history.stack[2] - 1].n_frames == 4);
    rs_snap_free(s);
    free(buf);
}

/* Entries are handed to the reader as they are read; a pickle whose batch of entries then ends
 * otherwise than by its APPENDS (here a TUPLE takes them) would leave the reader with entries
 * the value tree does not have: refused when streamed, naming the opcode and the list. */
TEST(a_batch_of_entries_closed_by_another_opcode_is_refused_when_streamed)
{
    pk4 p = {{NULL, 0, 0, 0}, 0};
    unsigned words[12] = {0}, frames[3];
    pk4_begin_no_segments(&p);
    pk4_str(&p, "device_traces");
    pk4_list(&p);
    pk4_list(&p);
    pk4_entry(&p, words, 0x10000, frames, 0);
    pk4_entry(&p, words, 0x20000, frames, 3);
    cr_byte(&p.b, 't'); /* TUPLE: the entries become a tuple, not the list's items */
    cr_byte(&p.b, 'e');
    size_t len = 0;
    unsigned char *buf = pk4_end(&p, &len);
    CHECK(buf != NULL);
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    o.infer_steps = 0;
    rs_snap *s = NULL;
    CHECK(rs_torch_decode(buf, len, "closed.pickle", &o, &s) == RANKSNAP_ERR_FORMAT && s == NULL);
    const char *e = ranksnap_last_error();
    CHECK(strstr(e, "closed.pickle: offset ") != NULL);
    CHECK(strstr(e, "TUPLE closes the MARK of items of device_traces[0] otherwise than by their "
                    "APPENDS") != NULL);
    if (!strstr(e, "TUPLE closes")) fprintf(stderr, "     %s\n", e);
    free(buf);
}

/* buf decoded streamed and as the value tree, steps not inferred: 1 when both decodes succeed. */
static int decode_both(const unsigned char *buf, size_t len, const char *name, rs_snap **streamed,
                       rs_snap **tree)
{
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    o.infer_steps = 0;
    int ok = rs_torch_decode(buf, len, name, &o, streamed) == RANKSNAP_OK;
    o.stream = 0;
    return (rs_torch_decode(buf, len, name, &o, tree) == RANKSNAP_OK) & ok;
}

/* No segments and two device traces, the second the busier: the trace read is the busier one,
 * counted in the entries the pickle streamed (which leave the lists themselves empty). */
TEST(without_segments_the_busiest_streamed_trace_is_the_one_read)
{
    pk4 p = {{NULL, 0, 0, 0}, 0};
    unsigned words[12] = {0}, frames[3];
    pk4_begin(&p);
    pk4_str(&p, "device_traces");
    pk4_list(&p);
    for (int device = 0; device < 2; device++) {
        pk4_list(&p);
        for (int i = 0; i <= 2 * device; i++)
            pk4_entry(&p, words, (uint64_t)(device + 1) << 20 | (uint64_t)(i + 1) << 12, frames, 0);
        cr_byte(&p.b, 'e');
    }
    cr_byte(&p.b, 'e');
    size_t len = 0;
    unsigned char *buf = pk4_end(&p, &len);
    CHECK(buf != NULL);
    rs_snap *streamed = NULL, *tree = NULL;
    CHECK(decode_both(buf, len, "two.pickle", &streamed, &tree));
    CHECK(streamed && streamed->history.count == 3 && streamed->device.index == 1);
    CHECK(tree && tree->history.count == 3 && snap_same(streamed, tree) == NULL);
    rs_snap_free(streamed);
    rs_snap_free(tree);
    free(buf);
}

/* One trace of `head` entries of `head_frames` frames, then `tail` of `tail_frames`: the decoder
 * guesses the trace's length from its first thousand entries (torch_decode.c, streamed_want). */
static unsigned char *trace_of_two_sizes(size_t head, size_t head_frames, size_t tail,
                                         size_t tail_frames, size_t *len)
{
    pk4 p = {{NULL, 0, 0, 0}, 0};
    unsigned words[12] = {0}, made[3], many[64];
    pk4_begin(&p);
    pk4_str(&p, "device_traces");
    pk4_list(&p);
    pk4_list(&p);
    pk4_entry(&p, words, 1 << 12, made, 0); /* makes the three frames */
    for (size_t i = 0; i < 64; i++) many[i] = made[i % 3];
    for (size_t i = 1; i < head + tail; i++)
        pk4_entry(&p, words, (uint64_t)(i + 1) << 12, many, i < head ? head_frames : tail_frames);
    cr_byte(&p.b, 'e');
    cr_byte(&p.b, 'e');
    return pk4_end(&p, len);
}

/* Entries that grow smaller after the first thousand (more than guessed: the columns grow
 * again) or larger (fewer: room left over) are all read, as the tree reads them. */
TEST(a_trace_whose_entries_change_size_is_read_whole_past_the_decoders_guess)
{
    static const size_t cases[][4] = {{1100, 60, 20000, 1}, {1100, 1, 3000, 60}, {1024, 3, 1, 3}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t len = 0;
        unsigned char *buf = trace_of_two_sizes(cases[c][0], cases[c][1], cases[c][2], cases[c][3], &len);
        CHECK(buf != NULL);
        rs_snap *streamed = NULL, *tree = NULL;
        CHECK(decode_both(buf, len, "sizes.pickle", &streamed, &tree));
        uint64_t n = cases[c][0] + cases[c][2];
        CHECK(streamed && streamed->history.count == n);
        CHECK(tree && tree->history.count == n);
        const char *differs = streamed && tree ? snap_same(streamed, tree) : "a decode";
        if (differs) fprintf(stderr, "case %zu: %s differs\n", c, differs);
        CHECK(differs == NULL);
        for (uint64_t i = 0; streamed && i < streamed->history.count && i < n; i++)
            if (streamed->history.addr[i] != (i + 1) << 12) {
                fprintf(stderr, "case %zu: entry %llu out of place\n", c, (unsigned long long)i);
                CHECK(0);
                break;
            }
        rs_snap_free(streamed);
        rs_snap_free(tree);
        free(buf);
    }
}

/* ---- step inference on histories built here ------------------------------------------------ */

typedef struct hist {
    rs_snap *s;
    size_t cap;
    uint64_t next_addr;
} hist;

static void ev(hist *h, unsigned action, uint64_t addr, uint64_t size, uint32_t stack)
{
    rs_snap_history *y = &h->s->history;
    if (y->count == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 256;
        y->time_us = realloc(y->time_us, h->cap * sizeof *y->time_us);
        y->action = realloc(y->action, h->cap);
        y->addr = realloc(y->addr, h->cap * sizeof *y->addr);
        y->size = realloc(y->size, h->cap * sizeof *y->size);
        y->stream = realloc(y->stream, h->cap * sizeof *y->stream);
        y->stack = realloc(y->stack, h->cap * sizeof *y->stack);
        if (!y->time_us || !y->action || !y->addr || !y->size || !y->stream || !y->stack) abort();
    }
    uint64_t i = y->count++;
    y->time_us[i] = 1000 + i;
    y->action[i] = (uint8_t)action;
    y->addr[i] = addr;
    y->size[i] = size;
    y->stream[i] = 0;
    y->stack[i] = stack;
}

static uint64_t alloc(hist *h, uint64_t size, uint32_t stack)
{
    uint64_t a = h->next_addr += 1 << 20;
    ev(h, RS_ACT_ALLOC, a, size, stack);
    return a;
}

static void hist_init(hist *h)
{
    memset(h, 0, sizeof *h);
    h->s = calloc(1, sizeof *h->s);
    h->s->streams = calloc(1, sizeof *h->s->streams);
    h->s->n_streams = 1;
    h->s->world_size = 1;
    h->next_addr = 1 << 30;
}

/* A history of `count` events made by ev(), its columns with room for `room` entries. */
static rs_snap *history_of(uint64_t count, uint64_t room)
{
    hist h;
    hist_init(&h);
    for (uint64_t i = 0; i < count; i++) ev(&h, i % 3 ? RS_ACT_ALLOC : RS_ACT_FREE_COMPLETED, 4096 * i, 512 * (i + 1), (uint32_t)(i % 5));
    rs_snap_history *y = &h.s->history;
    if (room > h.cap) {
        y->time_us = realloc(y->time_us, room * sizeof *y->time_us);
        y->action = realloc(y->action, room);
        y->addr = realloc(y->addr, room * sizeof *y->addr);
        y->size = realloc(y->size, room * sizeof *y->size);
        y->stream = realloc(y->stream, room * sizeof *y->stream);
        y->stack = realloc(y->stack, room * sizeof *y->stack);
        if (!y->time_us || !y->action || !y->addr || !y->size || !y->stream || !y->stack) abort();
    }
    y->room = room;
    return h.s;
}

/* Step events put in where the decoder left room are where they go in new columns: the same
 * history, for events before the first entry, between entries (several before one), after the
 * last, and none; with too little room, new columns. */
TEST(step_events_in_the_columns_room_are_those_of_new_columns)
{
    static const uint64_t befores[][6] = {
        {0, 0, 3, 7, 7, 20}, {20, 20, 20, 20, 20, 20}, {0, 1, 2, 3, 4, 5}, {5, 9, 9, 9, 13, 19},
    };
    for (size_t c = 0; c < sizeof befores / sizeof befores[0]; c++) {
        for (size_t n = 0; n <= 6; n++) {
            rs_step_event e[6];
            for (size_t k = 0; k < n; k++)
                e[k] = (rs_step_event){befores[c][k], (int64_t)(100 + k), 50000 + k, 0};
            rs_snap *copied = history_of(20, 0), *in_place = history_of(20, 20 + n),
                    *short_room = history_of(20, 20 + n - (n > 0));
            CHECK(rs_step_events_insert(copied, e, n) == RANKSNAP_OK);
            CHECK(rs_step_events_insert(in_place, e, n) == RANKSNAP_OK);
            CHECK(rs_step_events_insert(short_room, e, n) == RANKSNAP_OK);
            const rs_snap_history *a = &copied->history;
            for (int w = 0; w < 2; w++) {
                const rs_snap_history *b = w ? &short_room->history : &in_place->history;
                CHECK_EQ_U64(a->count, 20 + n);
                CHECK_EQ_U64(b->count, a->count);
                int same = b->count == a->count && b->capacity == a->capacity;
                for (uint64_t i = 0; same && i < a->count; i++)
                    same = a->time_us[i] == b->time_us[i] && a->action[i] == b->action[i] &&
                           a->addr[i] == b->addr[i] && a->size[i] == b->size[i] &&
                           a->stream[i] == b->stream[i] && a->stack[i] == b->stack[i];
                if (!same) fprintf(stderr, "case %zu, %zu events: the histories differ\n", c, n);
                CHECK(same);
            }
            /* the step events themselves, in order, before the entries they were given */
            uint64_t steps = 0, seen = 0;
            for (uint64_t i = 0; i < a->count; i++) {
                if (a->action[i] != RS_ACT_STEP) {
                    seen++;
                    continue;
                }
                CHECK_EQ_U64(a->size[i], 100 + steps);
                CHECK_EQ_U64(seen, befores[c][steps]);
                steps++;
            }
            CHECK_EQ_U64(steps, n);
            rs_snap_free(copied);
            rs_snap_free(in_place);
            rs_snap_free(short_room);
        }
    }
}

/* A training loop: `prelude` parameter allocations, then per iteration an input, `layers` pairs
 * of activations from the same two stacks, a backward pass that frees them and allocates
 * gradients, and in iteration 0 only `extra` optimizer-state allocations; `leak` keeps one
 * allocation per iteration alive; `cut` stops the last iteration after that many layers. */
static void training(hist *h, int prelude, int iterations, int layers, int extra, int leak,
                     int cut, uint64_t *starts)
{
    for (int i = 0; i < prelude; i++) alloc(h, 4096 * (uint64_t)(i + 1), 1);
    uint64_t grads[64];
    int n_grads = 0;
    for (int it = 0; it < iterations; it++) {
        for (int g = 0; g < n_grads; g++) ev(h, RS_ACT_FREE_REQUESTED, grads[g], 8192, 6);
        n_grads = 0;
        if (starts) starts[it] = h->s->history.count;
        uint64_t x = alloc(h, 1 << 20, 2), acts[128];
        int n = 0;
        int last = it == iterations - 1 && cut >= 0;
        for (int l = 0; l < layers && !(last && l == cut); l++) {
            acts[n++] = alloc(h, 3 << 20, 3);
            acts[n++] = alloc(h, 1 << 20, 4);
        }
        if (last && cut >= 0) return;
        if (leak) alloc(h, 1 << 16, 5);
        for (int l = 0; l < layers; l++) {
            grads[n_grads++] = alloc(h, 8192, 6);
            ev(h, RS_ACT_FREE_REQUESTED, acts[--n], 1 << 20, 4);
            ev(h, RS_ACT_FREE_REQUESTED, acts[--n], 3 << 20, 3);
        }
        ev(h, RS_ACT_FREE_REQUESTED, x, 1 << 20, 2);
        if (it == 0)
            for (int e = 0; e < extra; e++) alloc(h, 16384, 7);
        uint64_t t = alloc(h, 4096, 8);
        ev(h, RS_ACT_FREE_REQUESTED, t, 4096, 8);
    }
}

/* The step events' positions: each must sit where an iteration starts. */
static int steps_at(const rs_snap *s, const uint64_t *starts, int n)
{
    int k = 0, good = 1;
    for (uint64_t i = 0; i < s->history.count; i++) {
        if (s->history.action[i] != RS_ACT_STEP) continue;
        /* after insertion, the k-th iteration start moved by the k step events before it */
        if (k >= n || s->history.size[i] != (uint64_t)k || i != starts[k] + (uint64_t)k) good = 0;
        k++;
    }
    return good && k == n;
}

TEST(step_inference_finds_every_iteration_of_a_periodic_trace)
{
    static const struct {
        int prelude, iterations, layers, extra, leak, cut;
    } cases[] = {
        {10, 6, 4, 0, 0, -1},  /* regular */
        {10, 6, 4, 16, 0, -1}, /* a first iteration with optimizer state, 16 more allocations */
        {0, 2, 3, 0, 0, -1},   /* just two iterations */
        {5, 8, 6, 12, 1, -1},  /* a leak: the level grows, the pattern does not change */
        {5, 5, 6, 12, 0, 3},   /* the last iteration stops halfway (an OOM) */
        {3, 200, 12, 30, 0, -1}, /* long */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        hist h;
        hist_init(&h);
        uint64_t starts[256];
        training(&h, cases[c].prelude, cases[c].iterations, cases[c].layers, cases[c].extra,
                 cases[c].leak, cases[c].cut, starts);
        rs_steps_infer_result f;
        CHECK(rs_steps_infer(h.s, &f) == RANKSNAP_OK);
        if (!f.found) fprintf(stderr, "case %zu: %s\n", c, f.why_not);
        CHECK(f.found && f.n_steps == (uint64_t)cases[c].iterations);
        CHECK(steps_at(h.s, starts, cases[c].iterations));
        CHECK(h.s->time.n_ranges == 1 && h.s->time.ranges[0].begin == 0 &&
              h.s->time.ranges[0].end == cases[c].iterations);
        CHECK(h.s->time.current_step == cases[c].iterations - 1);
        rs_snap_free(h.s);
    }
}

TEST(step_inference_leaves_out_what_it_cannot_tell)
{
    /* One iteration: nothing repeats. */
    hist h;
    hist_init(&h);
    training(&h, 10, 1, 4, 0, 0, -1, NULL);
    uint64_t before = h.s->history.count;
    rs_steps_infer_result f;
    CHECK(rs_steps_infer(h.s, &f) == RANKSNAP_OK);
    CHECK(!f.found && f.why_not[0] && h.s->history.count == before);
    rs_snap_free(h.s);

    /* Sizes and stacks that follow no pattern. */
    hist_init(&h);
    uint64_t x = 12345;
    for (int i = 0; i < 2000; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        alloc(&h, (x >> 33) % 100000, (uint32_t)((x >> 20) % 50));
    }
    CHECK(rs_steps_infer(h.s, &f) == RANKSNAP_OK);
    CHECK(!f.found && strstr(f.why_not, "repeats") != NULL);
    CHECK_EQ_U64(count_action(h.s, RS_ACT_STEP), 0);
    rs_snap_free(h.s);

    /* A history with step events of its own keeps them. */
    hist_init(&h);
    training(&h, 2, 4, 2, 0, 0, -1, NULL);
    ev(&h, RS_ACT_STEP, 0, 9, 0);
    CHECK(rs_steps_infer(h.s, &f) == RANKSNAP_OK);
    CHECK(!f.found && count_action(h.s, RS_ACT_STEP) == 1);
    rs_snap_free(h.s);

    /* Nothing at all. */
    hist_init(&h);
    CHECK(rs_steps_infer(h.s, &f) == RANKSNAP_OK && !f.found);
    rs_snap_free(h.s);

    /* The layers of one pass repeat, but each keeps its activations: no steps. */
    hist_init(&h);
    training(&h, 10, 1, 40, 0, 0, 30, NULL);
    CHECK(rs_steps_infer(h.s, &f) == RANKSNAP_OK);
    CHECK(!f.found && strstr(f.why_not, "layers of one pass") != NULL);
    CHECK_EQ_U64(count_action(h.s, RS_ACT_STEP), 0);
    rs_snap_free(h.s);
}

TEST(an_oom_in_the_first_pass_is_in_step_0_not_in_a_layer_counted_as_a_step)
{
    /* the forward pass of the first iteration runs out of memory at its 30th of 40 layers */
    hist h;
    hist_init(&h);
    training(&h, 10, 1, 40, 0, 0, 30, NULL);
    ev(&h, RS_ACT_OOM, 1 << 20, (uint64_t)1 << 34, 3);
    rs_steps_infer_result f;
    CHECK(rs_steps_infer(h.s, &f) == RANKSNAP_OK);
    CHECK(f.found && f.n_steps == 1);
    CHECK_EQ_U64(count_action(h.s, RS_ACT_STEP), 1);
    /* the OOM comes after the one step marker, which comes after the parameters */
    uint64_t step_at = 0, oom_at = 0;
    for (uint64_t i = 0; i < h.s->history.count; i++) {
        if (h.s->history.action[i] == RS_ACT_STEP) step_at = i;
        if (h.s->history.action[i] == RS_ACT_OOM) oom_at = i;
    }
    CHECK(step_at >= 10 && step_at < oom_at);
    rs_snap_free(h.s);
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
    RUN(unusual_trace_entries_decode_alike_read_from_their_bytes_or_made_as_values);
    RUN(mutated_real_traces_decode_alike_read_from_their_bytes_or_made_as_values);
    RUN(damaged_snapshots_decode_or_fail_cleanly);
    RUN(real_snapshots_in_tests_data_keep_the_model_promises);
    RUN(real_snapshots_decode_alike_streamed_and_from_the_value_tree);
    RUN(a_walk_copied_from_the_decoders_is_the_walk_built_anew);
    RUN(the_walks_first_pass_records_are_what_a_walk_finds_on_the_real_pickles);
    RUN(the_sites_made_with_the_summary_are_the_snapshots_sites_at_its_peak);
    RUN(a_frames_list_met_again_is_read_again_after_its_memo_keys_change);
    RUN(a_shared_frames_list_that_grows_is_refused_when_streamed);
    RUN(a_batch_of_entries_closed_by_another_opcode_is_refused_when_streamed);
    RUN(without_segments_the_busiest_streamed_trace_is_the_one_read);
    RUN(a_trace_whose_entries_change_size_is_read_whole_past_the_decoders_guess);
    RUN(step_events_in_the_columns_room_are_those_of_new_columns);
    RUN(step_inference_finds_every_iteration_of_a_periodic_trace);
    RUN(step_inference_leaves_out_what_it_cannot_tell);
    RUN(an_oom_in_the_first_pass_is_in_step_0_not_in_a_layer_counted_as_a_step);
    return check_summary();
}
