/*
 * test_replay.c — replaying a rank's history through ranksnap's allocator reproduces what the
 * history says, and nothing it does not.
 *
 * A snapshot written by the real runtime (a forked child on the sim backend, recording from its
 * first allocation) was produced by the very policy the replay runs, so the replay must land on
 * its totals exactly: peak reserved and the allocator's peak of block sizes. Hand-built histories
 * check the parts a real ring makes hard to pin down: blocks alive before the history, a ring that
 * dropped events, streams kept apart, frees of blocks that are not alive. The runtime's own
 * snapshots under PyTorch's settings (RANKSNAP_ALLOC_CONF) and under a memory limit, and the real
 * PyTorch 2.11 pickle of a rank that ran out of memory, check that the replay uses the trace's
 * settings and capacity and ends in the same OOM; the what-if and the suggestion run on the latter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "check.h"
#include "export_torch.h"
#include "ranksnap.h"
#include "replay.h"
#include "replay_report.h"
#include "ring_decode.h"
#include "rsnap_decode.h"
#include "runtime_child.h"
#include "scratch_dir.h"
#include "suggest.h"
#include "synth_snapshot.h"
#include "torch_decode.h"

#define MIB ((size_t)1 << 20)

static char tmpdir[256];

/* One rank's allocations, in a child (runtime_child.h): parameters (one of 11 MiB, whose 12 MiB
 * segment keeps an unsplit 1 MiB tail), then steps of activations on two streams with short-lived
 * workspaces, some of it still alive at the dump. */
static int replay_workload(void)
{
    void *side = (void *)(uintptr_t)0x5000;
    void *p[4], *acts[8], *ws, *keep = NULL;
    static const size_t params[4] = {11 * MIB, 6 * MIB, 1000, 700 * 1024};
    int ok = 1;
    for (int i = 0; i < 4 && ok; i++) ok = ranksnap_malloc(&p[i], params[i], NULL) == 0;
    for (int step = 0; step < 5 && ok; step++) {
        ok = ranksnap_step(step) == 0;
        for (int l = 0; l < 8 && ok; l++) {
            size_t sz = (size_t)(l + 1) * 1536 * 1024 + (size_t)step * 4096 + 777;
            ok = ranksnap_malloc(&acts[l], sz, l % 3 == 2 ? side : NULL) == 0 &&
                 ranksnap_malloc(&ws, 200 * 1024 + (size_t)l * 512, NULL) == 0 &&
                 ranksnap_free(ws) == 0;
        }
        for (int l = 8; l-- > 0 && ok;) ok = ranksnap_free(acts[l]) == 0;
        if (ok && step == 3) ok = ranksnap_malloc(&keep, 3 * MIB, side) == 0;
    }
    return ok && ranksnap_free(p[1]) == 0;
}

TEST(replay_of_a_runtime_snapshot_lands_on_its_totals)
{
    char dir[300], path[320];
    snprintf(dir, sizeof dir, "%s/rt", tmpdir);
    mkdir(dir, 0700);
    CHECK(runtime_child_run(dir, replay_workload));
    snprintf(path, sizeof path, "%s/rank-00000.rsnap", dir);
    rs_snap *s = NULL;
    CHECK(rs_rsnap_decode_file(path, &s) == RANKSNAP_OK);
    if (!s) return;
    rs_replay_result r;
    CHECK(rs_replay(s, path, &r) == RANKSNAP_OK);
    CHECK(!r.incomplete && r.inconsistent == 0 && r.preexisting == 0);
    CHECK_EQ_U64(r.events, s->history.count);
    CHECK_EQ_U64(r.allocs, s->totals.num_allocs);
    CHECK_EQ_U64(r.frees, s->totals.num_frees);
    /* Same policy, same requests, same order: the same result. */
    CHECK_EQ_U64(r.ranksnap.peak_reserved, s->totals.reserved_bytes_peak);
    CHECK_EQ_U64(r.original.peak_reserved, s->totals.reserved_bytes_peak);
    CHECK_EQ_U64(r.ranksnap_peak_allocated_blocks, s->totals.allocated_bytes_peak);
    CHECK_EQ_U64(r.original.peak_allocated, r.ranksnap.peak_allocated);
    /* The 11 MiB parameter's block is 12 MiB; it is alive at the end, so the walk counts its
     * exact block size from the state (walk.h), and the counted peak is the allocator's. */
    CHECK_EQ_U64(r.original.peak_allocated, s->totals.allocated_bytes_peak);
    rs_snap_free(s);
}

/* The ring lost the allocation of block A and everything before; block B was allocated before
 * the history and is still alive. Both are allocated before the first event is replayed. */
TEST(replay_allocates_blocks_alive_before_the_history_first)
{
    synth y;
    synth_init(&y, 0, 1, "job");
    uint32_t site = synth_site(&y, "f", "f.c", 1);
    uint64_t b = synth_alloc(&y, 8 * SY_MIB, site);  /* 8 MiB, alive throughout */
    uint64_t a = synth_alloc(&y, 4 * SY_MIB, site);  /* freed inside the history */
    (void)b;
    uint64_t dropped = y.s->history.count;
    uint64_t c = synth_alloc(&y, 6 * SY_MIB, site);
    synth_free(&y, a);
    synth_free(&y, c);
    synth_alloc(&y, 2 * SY_MIB, site);
    synth_drop_oldest(&y, dropped);
    rs_snap *s = synth_finish(&y);
    rs_replay_result r;
    CHECK(rs_replay(s, "ring", &r) == RANKSNAP_OK);
    CHECK(r.incomplete);
    CHECK_EQ_U64(r.dropped, dropped);
    CHECK_EQ_U64(r.preexisting, 2);
    CHECK_EQ_U64(r.inconsistent, 0);
    /* 8 + 4 alive at the start, + 6 = 18 MiB before anything is freed. */
    CHECK_EQ_U64(r.original.peak_allocated, 18 * SY_MIB);
    CHECK_EQ_U64(r.ranksnap.peak_allocated, 18 * SY_MIB);
    /* The synth gives each block its own 2 MiB-rounded segment: 8 + 4 + 6 MiB reserved. */
    CHECK_EQ_U64(r.original.peak_reserved, 18 * SY_MIB);
    CHECK(r.ranksnap.peak_reserved >= 18 * SY_MIB);
    rs_snap_free(s);
}

/* Two 1 KiB requests on two streams cannot share a small segment; on one stream they do. */
TEST(replay_keeps_streams_apart)
{
    for (int two = 0; two < 2; two++) {
        synth y;
        synth_init(&y, 0, 1, "job");
        rs_snap *sp = y.s;
        sp->streams = realloc(sp->streams, 2 * sizeof *sp->streams);
        sp->streams[1] = 0x7000;
        sp->n_streams = 2;
        uint32_t site = synth_site(&y, "f", "f.c", 1);
        synth_alloc(&y, 1024, site);
        synth_alloc(&y, 1024, site);
        rs_snap *s = synth_finish(&y);
        for (uint64_t i = 0; i < s->history.count; i++)
            if (s->history.action[i] == RS_ACT_ALLOC && s->history.addr[i] != s->segments[0].addr)
                s->history.stream[i] = two ? 1 : 0;
        rs_replay_result r;
        CHECK(rs_replay(s, "streams", &r) == RANKSNAP_OK);
        CHECK_EQ_U64(r.ranksnap.peak_allocated, 2048);
        CHECK_EQ_U64(r.ranksnap.peak_reserved, (two ? 2 : 1) * RS_SMALL_BUFFER);
        rs_snap_free(s);
    }
}

TEST(replay_counts_frees_of_blocks_that_are_not_alive)
{
    synth y;
    synth_init(&y, 0, 1, "job");
    uint32_t site = synth_site(&y, "f", "f.c", 1);
    uint64_t a = synth_alloc(&y, 4 * SY_MIB, site);
    synth_free(&y, a);
    rs_snap *s = synth_finish(&y);
    /* A second free of the same block, appended as if the history had a hole. */
    rs_snap_history *h = &s->history;
    uint64_t i = h->count - 1;
    h->action[i] = RS_ACT_FREE_REQUESTED; /* was its segment_free */
    rs_replay_result r;
    CHECK(rs_replay(s, "double free", &r) == RANKSNAP_OK);
    CHECK_EQ_U64(r.inconsistent, 1);
    CHECK_EQ_U64(r.frees, 1);
    CHECK_EQ_U64(r.original.peak_allocated, 4 * SY_MIB);
    rs_snap_free(s);
}

TEST(replay_of_an_empty_history_reports_zeros)
{
    synth y;
    synth_init(&y, 0, 1, "job");
    rs_snap *s = synth_finish(&y);
    rs_replay_result r;
    CHECK(rs_replay(s, "empty", &r) == RANKSNAP_OK);
    CHECK(r.events == 0 && r.original.peak_allocated == 0 && r.ranksnap.peak_reserved == 0);
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    rs_replay_report_text(m, "empty", &r);
    fclose(m);
    CHECK_STR_CONTAINS(text, "reserved / allocated");
    free(text);
    rs_snap_free(s);
}

TEST(replay_json_has_both_sides_and_the_completeness)
{
    train_cfg c = train_default();
    rs_snap *s = synth_train(0, 1, "job", &c);
    rs_replay_result r;
    CHECK(rs_replay(s, "train \"x\".rsnap", &r) == RANKSNAP_OK);
    CHECK_EQ_U64(r.original.peak_allocated, s->totals.allocated_bytes_peak);
    CHECK_EQ_U64(r.original.peak_reserved, s->totals.reserved_bytes_peak);
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    rs_replay_report_json(m, "train \"x\".rsnap", &r);
    fclose(m);
    CHECK_STR_CONTAINS(text, "\"file\": \"train \\\"x\\\".rsnap\"");
    CHECK_STR_CONTAINS(text, "\"original\": {\"peak_allocated\": ");
    CHECK_STR_CONTAINS(text, "\"ranksnap\": {\"peak_allocated\": ");
    CHECK_STR_CONTAINS(text, "\"incomplete\": false");
    free(text);
    rs_snap_free(s);
}

/* Through the torch export and the pickle decoder, a rank whose ring lost its oldest events
 * replays to the same numbers as from its own snapshot. */
TEST(replay_of_the_torch_export_matches_the_snapshot)
{
    train_cfg c = train_default();
    c.leak_from = 2;
    c.leak_bytes = 3 * SY_MIB;
    rs_snap *s = synth_train(0, 1, "job", &c);
    /* Forget the first 40 events, as a full ring would have. */
    sy_forget_oldest(&s->history, 40);
    unsigned char *buf = NULL;
    size_t len = 0;
    rs_snap *t = NULL;
    CHECK(rs_export_torch(s, "train", NULL, &buf, &len, NULL) == RANKSNAP_OK);
    CHECK(rs_torch_decode(buf, len, "train.pickle", NULL, &t) == RANKSNAP_OK);
    free(buf);
    rs_replay_result a, b;
    CHECK(rs_replay(s, "train", &a) == RANKSNAP_OK);
    if (t) CHECK(rs_replay(t, "train.pickle", &b) == RANKSNAP_OK);
    if (t) {
        CHECK(a.preexisting > 0);
        CHECK_EQ_U64(b.preexisting, a.preexisting);
        CHECK_EQ_U64(b.allocs, a.allocs);
        CHECK_EQ_U64(b.original.peak_allocated, a.original.peak_allocated);
        CHECK_EQ_U64(b.original.peak_reserved, a.original.peak_reserved);
        CHECK_EQ_U64(b.ranksnap.peak_allocated, a.ranksnap.peak_allocated);
        CHECK_EQ_U64(b.ranksnap.peak_reserved, a.ranksnap.peak_reserved);
        CHECK_EQ_U64(a.original.peak_allocated, a.ranksnap.peak_allocated);
    }
    rs_snap_free(t);
    rs_snap_free(s);
}


/* The workload of replay_workload under each of PyTorch's settings that change placement: the
 * snapshot records them, and the replay, which uses them, lands on the snapshot's totals. */
TEST(replay_of_a_runtime_snapshot_under_pytorch_settings_lands_on_its_totals)
{
    static const char *const confs[][2] = {
        {"roundup_power2_divisions:4,max_split_size_mb:24", "0"},
        {"expandable_segments:True", "0"},
        {"max_split_size_mb:20,max_non_split_rounding_mb:40,large_segment_size_mb:12", "0"},
        {"garbage_collection_threshold:0.3", "256MiB"},
    };
    for (size_t k = 0; k < sizeof confs / sizeof confs[0]; k++) {
        char dir[300], path[320];
        snprintf(dir, sizeof dir, "%s/conf%zu", tmpdir, k);
        mkdir(dir, 0700);
        setenv("RANKSNAP_ALLOC_CONF", confs[k][0], 1);
        setenv("RANKSNAP_MEMORY_LIMIT", confs[k][1], 1);
        CHECK(runtime_child_run(dir, replay_workload));
        unsetenv("RANKSNAP_ALLOC_CONF");
        unsetenv("RANKSNAP_MEMORY_LIMIT");
        snprintf(path, sizeof path, "%s/rank-00000.rsnap", dir);
        rs_snap *s = NULL;
        CHECK(rs_rsnap_decode_file(path, &s) == RANKSNAP_OK);
        if (!s) continue;
        char conf[RS_CONF_TEXT_MAX];
        rs_alloc_conf_describe(&s->allocator.conf, NULL, conf, sizeof conf);
        rs_replay_result r;
        CHECK(rs_replay(s, path, &r) == RANKSNAP_OK);
        CHECK_EQ_U64(r.ranksnap.peak_reserved, s->totals.reserved_bytes_peak);
        CHECK_EQ_U64(r.original.peak_reserved, s->totals.reserved_bytes_peak);
        CHECK_EQ_U64(r.ranksnap_peak_allocated_blocks, s->totals.allocated_bytes_peak);
        CHECK_EQ_U64(r.ranksnap.device_allocs, s->totals.num_segment_allocs);
        CHECK_EQ_U64(r.ranksnap.device_frees, s->totals.num_segment_frees);
        CHECK_EQ_U64(r.ranksnap.device_allocs, r.original.device_allocs);
        CHECK_EQ_U64(r.ranksnap.fragmentation, r.original.fragmentation);
        CHECK_EQ_U64(r.ranksnap.ooms, 0);
        if (r.ranksnap.peak_reserved != s->totals.reserved_bytes_peak)
            fprintf(stderr, "  settings \"%s\" (%s)\n", confs[k][0], conf);
        rs_snap_free(s);
    }
}

/* Runs `work` in a child (runtime_child.h) whose folder is tmpdir/SUB, with VAR=VALUE set for it;
 * `path` gets the path of its file FILE. 1 when the child exited 0. */
static int run_child_with(const char *sub, const char *var, const char *value,
                          runtime_workload work, const char *file, char *path, size_t n)
{
    char dir[300];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, sub);
    mkdir(dir, 0700);
    setenv(var, value, 1);
    int ok = runtime_child_run(dir, work);
    unsetenv(var);
    snprintf(path, n, "%s/%s", dir, file);
    return ok;
}

/* replay_workload, then the end a SIGKILL would give: no dump, no finalize, the ring file left. */
static int killed_workload(void)
{
    if (replay_workload()) _exit(0);
    return 0;
}

/* The ring a killed rank leaves carries its settings: recovered, it replays under them, onto the
 * totals the rank had (under PyTorch's defaults it would take another cudaMalloc). */
TEST(replay_of_a_killed_ranks_ring_uses_the_ranks_settings)
{
    char path[320];
    CHECK(run_child_with("ring", "RANKSNAP_ALLOC_CONF",
                         "expandable_segments:True,roundup_power2_divisions:4", killed_workload,
                         "rank-00000.ring", path, sizeof path));
    rs_snap *s = NULL;
    int closed = 1;
    CHECK(rs_ring_decode_file(path, &s, &closed) == RANKSNAP_OK);
    if (!s) return;
    CHECK_EQ_U64(closed, 0);
    CHECK_EQ_U64(s->allocator.conf.expandable_segments, 1);
    CHECK_EQ_U64(s->allocator.conf.roundup_divisions[4], 4);
    rs_replay_result r, d;
    CHECK(rs_replay(s, path, &r) == RANKSNAP_OK);
    CHECK(!r.incomplete);
    CHECK_EQ_U64(r.conf.expandable_segments, 1);
    CHECK_EQ_U64(r.ranksnap.peak_reserved, r.original.peak_reserved);
    CHECK_EQ_U64(r.ranksnap.device_allocs, r.original.device_allocs);
    rs_alloc_conf defaults;
    rs_alloc_conf_reset(&defaults);
    rs_replay_opts o = {&defaults, 0, 0};
    CHECK(rs_replay_with(s, path, &o, &d) == RANKSNAP_OK);
    CHECK(d.ranksnap.device_allocs != r.original.device_allocs);
    rs_snap_free(s);
}

/* Raises its activations until the 64 MiB limit refuses one, then frees and stops. */
static int oom_workload(void)
{
    void *p[32];
    int n = 0, oom = 0;
    for (; n < 32; n++) {
        ranksnap_step(n);
        if (ranksnap_malloc(&p[n], (size_t)(n + 1) * 3 * MIB + 4096, NULL) != 0) {
            oom = 1;
            break;
        }
    }
    for (int i = 0; i < n; i++) ranksnap_free(p[i]);
    return oom;
}

TEST(replay_of_a_runtime_oom_ends_in_the_same_oom_under_the_recorded_limit)
{
    char path[320];
    CHECK(run_child_with("oom", "RANKSNAP_MEMORY_LIMIT", "64MiB", oom_workload, "rank-00000.rsnap",
                         path, sizeof path));
    rs_snap *s = NULL;
    CHECK(rs_rsnap_decode_file(path, &s) == RANKSNAP_OK);
    if (!s) return;
    rs_replay_result r;
    CHECK(rs_replay(s, path, &r) == RANKSNAP_OK);
    CHECK_EQ_U64(r.original.ooms, 1);
    CHECK_EQ_U64(r.ranksnap.ooms, 1);
    CHECK(r.ranksnap.first_oom_event == r.original.first_oom_event);
    /* the oom event carries the rounded request, as PyTorch's */
    CHECK_EQ_U64(r.original.first_oom_request, 6 * 3 * MIB + 4096); /* 20+14+16 MiB, +20 > 64 */
    CHECK(r.device.has_cap && !r.device.cap_derived);
    CHECK_EQ_U64(r.device.cap, 64 * MIB);
    rs_snap_free(s);
}

static rs_snap *pytorch_oom_pickle(void)
{
    rs_snap *s = NULL;
    CHECK(rs_torch_decode_file(RS_TEST_DATA_DIR "/oom_rank-3_gpt2.pickle", 3, &s) == RANKSNAP_OK);
    return s;
}

/* PyTorch 2.11 ran a GPT-2 rank under set_per_process_memory_fraction until a 36 MiB segment did
 * not fit; the pickle records neither the device nor the fraction. */
TEST(replay_of_pytorchs_oom_pickle_ends_in_the_same_oom_at_the_same_request)
{
    rs_snap *s = pytorch_oom_pickle();
    if (!s) return;
    rs_replay_result r;
    CHECK(rs_replay(s, "oom_rank-3_gpt2.pickle", &r) == RANKSNAP_OK);
    CHECK_EQ_U64(r.original.ooms, 1);
    CHECK(r.ranksnap.ooms >= 1);
    CHECK(r.ranksnap.first_oom_event == r.original.first_oom_event);
    CHECK_EQ_U64(r.ranksnap.first_oom_request, 37748736);
    /* the cap derived from the OOM: the trace's highest reserved level, below the level at the
     * OOM plus the 36 MiB segment; PyTorch's own cap (1.2e9 bytes) lies in between */
    CHECK(r.device.cap_derived && r.device.has_cap);
    CHECK_EQ_U64(r.device.cap, r.original.peak_reserved);
    CHECK(r.device.cap <= 1200000000ull && 1200000000ull < r.device.cap_below);
    /* PyTorch's own numbers, to the byte and to the call */
    CHECK_EQ_U64(r.ranksnap.peak_reserved, r.original.peak_reserved);
    CHECK_EQ_U64(r.ranksnap.fragmentation, r.original.fragmentation);
    CHECK_EQ_U64(r.ranksnap.device_allocs, r.original.device_allocs);
    CHECK_EQ_U64(r.ranksnap.device_frees, r.original.device_frees);
    rs_snap_free(s);
}

TEST(what_if_on_a_smaller_device_runs_out_of_memory_earlier)
{
    rs_snap *s = pytorch_oom_pickle();
    if (!s) return;
    rs_replay_result r;
    rs_replay_opts o = {NULL, 512 * MIB, 0};
    CHECK(rs_replay_with(s, "oom", &o, &r) == RANKSNAP_OK);
    CHECK(!r.device.cap_derived && !r.device.has_cap);
    CHECK_EQ_U64(r.device.memory, 512 * MIB);
    CHECK(r.ranksnap.ooms > 0 && r.ranksnap.first_oom_event < r.original.first_oom_event);
    CHECK(r.ranksnap.peak_reserved <= 512 * MIB);
    rs_snap_free(s);
}

TEST(suggest_names_expandable_segments_for_pytorchs_oom_pickle)
{
    rs_snap *s = pytorch_oom_pickle();
    if (!s) return;
    rs_suggest_result *g = calloc(1, sizeof *g);
    CHECK(rs_suggest(s, "oom", NULL, g) == RANKSNAP_OK);
    CHECK(g->base_oom);
    CHECK(g->best >= 0);
    if (g->best >= 0) {
        CHECK(strcmp(g->tries[g->best].change, "expandable_segments:True") == 0);
        CHECK_EQ_U64(g->tries[g->best].r.ranksnap.ooms, 0);
    }
    char sentence[512];
    rs_suggest_sentence(g, sentence, sizeof sentence);
    CHECK_STR_CONTAINS(sentence, "expandable_segments:True would not have run out of memory");
    char note[640];
    CHECK(rs_suggest_note(s, "oom", note, sizeof note) == RANKSNAP_OK);
    CHECK_STR_CONTAINS(note, "rank 3: expandable_segments:True would not have run out of memory");
    free(g);
    rs_snap_free(s);
}

TEST(what_if_report_shows_three_columns_and_where_each_ran_out)
{
    rs_snap *s = pytorch_oom_pickle();
    if (!s) return;
    rs_replay_result base, w;
    rs_alloc_conf c = s->allocator.conf;
    char why[128];
    CHECK(rs_alloc_conf_parse(&c, "expandable_segments:True", 0, why, sizeof why) == 0);
    rs_replay_opts o = {&c, 0, 0};
    CHECK(rs_replay(s, "oom", &base) == RANKSNAP_OK);
    CHECK(rs_replay_with(s, "oom", &o, &w) == RANKSNAP_OK);
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    rs_replay_report_whatif_text(m, "oom", &base, &w);
    fclose(m);
    CHECK_STR_CONTAINS(text, "what-if: expandable_segments:True\n");
    CHECK_STR_CONTAINS(text, "original           replayed            what-if");
    CHECK_STR_CONTAINS(text, "the replay runs out of memory at the original's request (event ");
    CHECK_STR_CONTAINS(text, "the what-if serves every request, the original's failed one");
    free(text);
    rs_snap_free(s);
}

int main(void)
{
    if (scratch_dir_make(tmpdir, sizeof tmpdir, "test_replay") != 0) return 1;
    RUN(replay_of_a_runtime_snapshot_lands_on_its_totals);
    RUN(replay_allocates_blocks_alive_before_the_history_first);
    RUN(replay_keeps_streams_apart);
    RUN(replay_counts_frees_of_blocks_that_are_not_alive);
    RUN(replay_of_an_empty_history_reports_zeros);
    RUN(replay_json_has_both_sides_and_the_completeness);
    RUN(replay_of_the_torch_export_matches_the_snapshot);
    RUN(replay_of_a_runtime_snapshot_under_pytorch_settings_lands_on_its_totals);
    RUN(replay_of_a_killed_ranks_ring_uses_the_ranks_settings);
    RUN(replay_of_a_runtime_oom_ends_in_the_same_oom_under_the_recorded_limit);
    RUN(replay_of_pytorchs_oom_pickle_ends_in_the_same_oom_at_the_same_request);
    RUN(what_if_on_a_smaller_device_runs_out_of_memory_earlier);
    RUN(suggest_names_expandable_segments_for_pytorchs_oom_pickle);
    RUN(what_if_report_shows_three_columns_and_where_each_ran_out);
    return scratch_dir_done(tmpdir, check_summary());
}
