/*
 * test_report.c — the text and JSON reports say which rank diverged, when, by how much and from
 * where, in words and in a schema; and the whole path works end to end: four processes (fork)
 * run a small training loop through the public API, each writes its snapshot, and the files are
 * read, summarized and compared.
 *
 * Run as `test_report --write DIR [--job JOB] [--ranks 0,1,3] [--world N]` it only writes such
 * snapshots (rank 2's activations 1.5 times larger), for the `ranksnap report` tests in
 * tests/CMakeLists.txt.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "compare.h"
#include "ranksnap.h"
#include "report_json.h"
#include "report_text.h"
#include "synth_snapshot.h"

#define MIB SY_MIB

/* ---- rendering helpers ----------------------------------------------------------------------- */

static char *render_text(const rs_compare_result *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) return NULL;
    CHECK(rs_report_text(m, r) == RANKSNAP_OK);
    fclose(m);
    return text;
}

static char *render_json(const rs_compare_result *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) return NULL;
    CHECK(rs_report_json(m, r) == RANKSNAP_OK);
    fclose(m);
    return text;
}

/* Compares four synthetic ranks; rank `odd` uses `odd_cfg`. */
static rs_compare_result *compare_four(int odd, const train_cfg *odd_cfg)
{
    rs_snap *full[4];
    rs_summary sums[4];
    for (int i = 0; i < 4; i++) {
        train_cfg c = train_default();
        full[i] = synth_train(i, 4, "job-1", i == odd ? odd_cfg : &c);
        rs_summary_of(full[i], &sums[i]);
    }
    rs_compare_result *r = NULL;
    CHECK(rs_compare(sums, (const rs_snap *const *)full, 4, 0, NULL, &r) == RANKSNAP_OK);
    for (int i = 0; i < 4; i++) rs_snap_free(full[i]);
    return r;
}

/* ---- text ------------------------------------------------------------------------------------ */

TEST(text_report_says_which_rank_peaks_above_the_median_from_when_and_where)
{
    train_cfg c = train_default();
    c.act_factor = 1.5;
    rs_compare_result *r = compare_four(2, &c);
    char *t = r ? render_text(r) : NULL;
    CHECK_STR_CONTAINS(t, "ranksnap: 4 of 4 ranks, reference rank 0 (median peak 129.00 MiB)");
    CHECK_STR_CONTAINS(t, "peak allocated");
    CHECK_STR_CONTAINS(t, "fragmentation");
    CHECK_STR_CONTAINS(t, "reference");
    CHECK_STR_CONTAINS(t, "*     2  node02");
    CHECK_STR_CONTAINS(t, "rank 2 peaks 25% above the median (161.00 MiB vs 129.00 MiB) from step "
                          "0, a constant offset: +32.00 MiB at attention_scores (model.c:211)");
    CHECK(t && !strstr(t, "no rank diverges"));
    free(t);
    rs_compare_result_free(r);
}

TEST(text_report_calls_a_growing_rank_a_leak)
{
    train_cfg c = train_default();
    c.leak_from = 3;
    c.leak_bytes = 20 * MIB;
    rs_compare_result *r = compare_four(1, &c);
    char *t = r ? render_text(r) : NULL;
    CHECK_STR_CONTAINS(t, "rank 1 grows +20.00 MiB per step since step 3 (a leak?), peaking 77% "
                          "above the median (228.00 MiB vs 129.00 MiB); at that rate it would fill "
                          "its 80.00 GiB device at step 4121 (4114 steps after step 7): +100.00 MiB "
                          "at keep_for_logging (train.c:57)");
    free(t);
    rs_compare_result_free(r);
}

TEST(text_report_explains_an_oom_with_the_request_and_the_memory_state)
{
    train_cfg c = train_default();
    c.oom_step = 5;
    c.oom_request = (uint64_t)2 << 30;
    rs_compare_result *r = compare_four(3, &c);
    char *t = r ? render_text(r) : NULL;
    CHECK_STR_CONTAINS(t, "rank 3 ran out of memory at step 5: tried to allocate 2.00 GiB with "
                          "819.20 MiB free of 80.00 GiB (allocated 128.00 MiB, reserved 128.00 "
                          "MiB) at train_step (train.c:99)");
    CHECK_STR_CONTAINS(t, "live at that moment:");
    CHECK_STR_CONTAINS(t, "64.00 MiB  attention_scores (model.c:211)");
    CHECK_STR_CONTAINS(t, "no rank diverges beyond 5% of the median");
    free(t);
    rs_compare_result_free(r);
}

/* A framework's error that did not say the request's size (ranksnap_framework_oom): never "0
 * bytes", which no request is. */
TEST(text_report_says_when_the_size_of_the_oom_request_is_not_known)
{
    train_cfg c = train_default();
    c.oom_step = 5;
    c.oom_request = 0;
    rs_compare_result *r = compare_four(3, &c);
    char *t = r ? render_text(r) : NULL;
    CHECK_STR_CONTAINS(t, "rank 3 ran out of memory at step 5: tried to allocate (size not known) with ");
    free(t);
    rs_compare_result_free(r);
}

TEST(text_report_of_identical_ranks_has_no_verdict)
{
    train_cfg c = train_default();
    rs_compare_result *r = compare_four(-1, &c);
    char *t = r ? render_text(r) : NULL;
    CHECK_STR_CONTAINS(t, "no rank diverges beyond 5% of the median\n");
    CHECK(t && !strstr(t, "above the median") && !strstr(t, "out of memory") &&
          !strstr(t, "missing"));
    free(t);
    rs_compare_result_free(r);
}

TEST(text_report_lists_missing_ranks_as_ranges)
{
    rs_summary s[2];
    memset(s, 0, sizeof s);
    s[0].rank = 0;
    s[1].rank = 3;
    s[0].peak_step = s[1].peak_step = -1;
    s[0].complete = s[1].complete = 1;
    rs_compare_result *r = NULL;
    CHECK(rs_compare(s, NULL, 2, 6, NULL, &r) == RANKSNAP_OK);
    char *t = r ? render_text(r) : NULL;
    CHECK_STR_CONTAINS(t, "ranksnap: 2 of 6 ranks");
    CHECK_STR_CONTAINS(t, "missing: ranks 1-2, 4-5 (no data");
    free(t);
    rs_compare_result_free(r);
}

/* ---- JSON ------------------------------------------------------------------------------------ */

TEST(json_report_has_the_schema_fields_with_integer_bytes)
{
    train_cfg c = train_default();
    c.act_factor = 1.5;
    rs_compare_result *r = compare_four(2, &c);
    char *j = r ? render_json(r) : NULL;
    CHECK_STR_CONTAINS(j, "\"world_size\": 4");
    CHECK_STR_CONTAINS(j, "\"reference_rank\": 0");
    CHECK_STR_CONTAINS(j, "\"median_peak_allocated\": 135266304");
    CHECK_STR_CONTAINS(j, "{\"rank\": 2, \"host\": \"node02\", \"job\": \"job-1\", "
                          "\"peak_allocated\": 168820736, \"peak_reserved\": ");
    CHECK_STR_CONTAINS(j, "\"oom\": false, \"complete\": true");
    CHECK_STR_CONTAINS(j, "\"step_peaks\": [{\"step\": 0, \"peak\": 168820736}, {\"step\": 1, ");
    CHECK_STR_CONTAINS(j, "\"missing_ranks\": []");
    CHECK_STR_CONTAINS(j, "\"oom_ranks\": []");
    CHECK_STR_CONTAINS(j, "{\"rank\": 2, \"peak_allocated\": 168820736, \"reference_peak\": "
                          "135266304, \"divergence_pct\": 24.81, \"first_divergent_step\": 0, "
                          "\"pattern\": \"offset\", \"growth_bytes_per_step\": null, "
                          "\"growth_t\": null, \"capacity\": 85899345920, \"exhaust_step\": null, "
                          "\"delta_bytes\": 33554432, \"unattributed_bytes\": 0, "
                          "\"sites\": [{\"function\": \"attention_scores\", \"file\": "
                          "\"src/model.c\", \"line\": 211, \"path\": [{\"function\": "
                          "\"attention_scores\", \"file\": \"src/model.c\", \"line\": 211}], "
                          "\"bytes_delta\": 33554432}");
    CHECK_STR_CONTAINS(j, "\"no_data_ranks\": []");
    CHECK_STR_CONTAINS(j, "\"notes\": []");
    free(j);
    rs_compare_result_free(r);
}

TEST(json_report_of_an_oom_has_request_stack_and_live_sites)
{
    train_cfg c = train_default();
    c.oom_step = 5;
    c.oom_request = (uint64_t)2 << 30;
    rs_compare_result *r = compare_four(3, &c);
    char *j = r ? render_json(r) : NULL;
    CHECK_STR_CONTAINS(j, "{\"rank\": 3, \"requested\": 2147483648, \"step\": 5, ");
    CHECK_STR_CONTAINS(j, "\"stack\": {\"function\": \"train_step\", \"file\": \"src/train.c\", "
                          "\"line\": 99, \"path\": [{\"function\": \"train_step\", \"file\": "
                          "\"src/train.c\", \"line\": 99}]}, \"live_sites\": [{\"function\": ");
    CHECK_STR_CONTAINS(j, "\"oom\": true");
    CHECK_STR_CONTAINS(j, "\"divergent_ranks\": []");
    free(j);
    rs_compare_result_free(r);
}

/* Ranks 0, 1 and 3 on one GPU (their files name its UUID), rank 2 on another with a process of
 * another job, ranks 4 and 5 on a third that NVML said nothing of: each device is named shared,
 * with its ranks, what NVML listed and what the others held as each rank saw them; rank 3, whose
 * own use NVML could not give, says so and why (its column n/a); rank 1's older file, which does
 * not say, is said to maybe count the whole device. */
TEST(text_report_names_shared_devices_and_a_rank_whose_own_use_is_not_known)
{
    rs_snap *full[6];
    rs_summary sums[6];
    train_cfg c = train_default();
    static const uint8_t gpu_a[16] = {0xaa, 1}, gpu_b[16] = {0xbb, 2}, gpu_c[16] = {0xcc, 3};
    for (int i = 0; i < 6; i++) {
        full[i] = synth_train(i, 6, "job-1", &c);
        rs_summary_of(full[i], &sums[i]);
        rs_snap_free(full[i]);
        memcpy(sums[i].device_uuid, i == 2 ? gpu_b : i >= 4 ? gpu_c : gpu_a, 16);
        sums[i].outside_of = RS_OUTSIDE_PROCESS;
        sums[i].outside_peak = 96 * MIB;
    }
    sums[0].device_processes = 3;
    sums[0].device_others_kib = 1536 * 1024;
    sums[1].outside_of = RS_OUTSIDE_UNSAID;
    sums[2].device_processes = 2;
    sums[2].device_others_kib = 3072 * 1024;
    sums[3].outside_of = RS_OUTSIDE_DEVICE;
    sums[3].outside_why = RS_OUTSIDE_WHY_PID_NOT_LISTED;
    sums[3].device_processes = 3;
    rs_compare_result *r = NULL;
    CHECK(rs_compare(sums, NULL, 6, 0, NULL, &r) == RANKSNAP_OK);
    char *t = r ? render_text(r) : NULL;
    CHECK_STR_CONTAINS(t, "GPU-aa010000-0000-0000-0000-000000000000 is shared by ranks 0, 1 and 3 "
                          "(NVML listed 3 there); the others held 1.50 GiB as rank 0 saw them\n"
                          "  rank 1's file does not say whose memory its outside counts");
    CHECK_STR_CONTAINS(t, "GPU-bb020000-0000-0000-0000-000000000000 is shared by rank 2 and 1 more "
                          "process (NVML listed 2 there); the others held 3.00 GiB as rank 2 saw "
                          "them; each rank's outside is its own process's\n");
    CHECK_STR_CONTAINS(t, "GPU-cc030000-0000-0000-0000-000000000000 is shared by ranks 4 and 5; "
                          "each rank's outside is its own process's\n");
    CHECK_STR_CONTAINS(t, "rank 3: its own device memory is not known (its pid is not among the "
                          "processes NVML lists on its device");
    CHECK_STR_CONTAINS(t, "      3  node03  ");
    CHECK(t && strstr(strstr(t, "      3  node03  "), "n/a") != NULL);
    char *j = r ? render_json(r) : NULL;
    CHECK_STR_CONTAINS(j, "\"shared_devices\": [\n    {\"uuid\": \"GPU-aa010000-0000-0000-0000-000000000000\", "
                          "\"ranks\": [0, 1, 3], \"n_ranks\": 3, \"processes\": 3},\n    "
                          "{\"uuid\": \"GPU-bb020000-0000-0000-0000-000000000000\", \"ranks\": [2], "
                          "\"n_ranks\": 1, \"processes\": 2},\n    {\"uuid\": "
                          "\"GPU-cc030000-0000-0000-0000-000000000000\", \"ranks\": [4, 5], "
                          "\"n_ranks\": 2, \"processes\": 0}\n  ]");
    CHECK_STR_CONTAINS(j, "\"outside_of\": \"device\", \"outside_why\": \"pid_not_listed\", "
                          "\"device_uuid\": \"GPU-aa010000-0000-0000-0000-000000000000\", "
                          "\"device_processes\": 3}");
    free(t);
    free(j);
    rs_compare_result_free(r);
}

TEST(json_strings_escape_quotes_controls_and_bytes_that_are_not_utf8)
{
    rs_compare_result r;
    memset(&r, 0, sizeof r);
    r.reference_rank = -1;
    char note[] = "a \"q\" b\\c\nd\te\x01 \xc3\xa9 \xff \xe2\x82 \xed\xa0\x80 \x7f";
    char *notes[1] = {note};
    r.notes = notes;
    r.n_notes = 1;
    r.divergence_pct = 7.5;
    int32_t missing[2] = {1, 2};
    r.missing = missing;
    r.n_missing = 2;
    r.world_size = 3;
    char *j = render_json(&r);
    CHECK_STR_CONTAINS(j, "\"a \\\"q\\\" b\\\\c\\nd\\te\\u0001 \xc3\xa9 \\ufffd \\ufffd\\ufffd "
                          "\\ufffd\\ufffd\\ufffd \x7f\"");
    CHECK_STR_CONTAINS(j, "\"reference_rank\": null");
    CHECK_STR_CONTAINS(j, "\"divergence_threshold_pct\": 7.5,");
    CHECK_STR_CONTAINS(j, "\"missing_ranks\": [1, 2]");
    CHECK_STR_CONTAINS(j, "\"ranks\": [],");
    free(j);
}

/* ---- end to end through the public API ---------------------------------------------------- */

/* The allocation sites. Each leaves a different mark after its call so that the compiler cannot
 * fold the three into one function (gcc's identical code folding at -O2) nor make the call a tail
 * call: each must keep a frame of its own. */
static volatile int last_site;

__attribute__((noinline)) static void *load_weights(size_t n)
{
    void *p = NULL;
    ranksnap_status st = ranksnap_malloc(&p, n, NULL);
    last_site = 1;
    return st == RANKSNAP_OK ? p : NULL;
}

__attribute__((noinline)) static void *layer_activation(size_t n)
{
    void *p = NULL;
    ranksnap_status st = ranksnap_malloc(&p, n, NULL);
    last_site = 2;
    return st == RANKSNAP_OK ? p : NULL;
}

__attribute__((noinline)) static void *matmul_workspace(size_t n)
{
    void *p = NULL;
    ranksnap_status st = ranksnap_malloc(&p, n, NULL);
    last_site = 3;
    return st == RANKSNAP_OK ? p : NULL;
}

/* One rank's life, in a child process: the runtime is a per-process singleton. */
static int run_rank(const char *dir, const char *job, int rank, int world)
{
    char num[16];
    setenv("RANKSNAP_DIR", dir, 1);
    setenv("RANKSNAP_JOB", job, 1);
    setenv("RANKSNAP_BACKEND", "sim", 1);
    setenv("RANKSNAP_REPORT", "0", 1);
    snprintf(num, sizeof num, "%d", rank);
    setenv("RANK", num, 1);
    snprintf(num, sizeof num, "%d", world);
    setenv("WORLD_SIZE", num, 1);
    if (ranksnap_init(NULL) != RANKSNAP_OK) {
        fprintf(stderr, "rank %d: ranksnap_init: %s\n", rank, ranksnap_last_error());
        return 1;
    }
    size_t act = (size_t)(rank == 2 ? 24 : 16) * MIB;
    void *w = load_weights(64 * MIB);
    void *acts[4];
    int ok = w != NULL;
    for (int step = 0; step < 6 && ok; step++) {
        ok = ranksnap_step(step) == RANKSNAP_OK;
        for (int l = 0; l < 4 && ok; l++) {
            acts[l] = layer_activation(act);
            void *ws = matmul_workspace(MIB);
            ok = acts[l] && ws && ranksnap_free(ws) == RANKSNAP_OK;
        }
        for (int l = 4; l-- > 0 && ok;) ok = ranksnap_free(acts[l]) == RANKSNAP_OK;
    }
    if (ok) ok = ranksnap_dump(NULL) == RANKSNAP_OK;
    if (!ok) fprintf(stderr, "rank %d: %s\n", rank, ranksnap_last_error());
    ranksnap_free(w);
    ranksnap_finalize();
    return ok ? 0 : 1;
}

/* Forks one process per listed rank; returns 0 when all of them wrote their snapshot. */
static int write_ranks(const char *dir, const char *job, const int *ranks, int n, int world)
{
    pid_t pids[64];
    int failed = 0;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        return -1;
    }
    fflush(NULL);
    for (int i = 0; i < n && i < 64; i++) {
        pids[i] = fork();
        if (pids[i] == 0) _exit(run_rank(dir, job, ranks[i], world));
        if (pids[i] < 0) failed = 1;
    }
    for (int i = 0; i < n && i < 64; i++) {
        int status = 0;
        if (pids[i] > 0 && (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) ||
                            WEXITSTATUS(status) != 0))
            failed = 1;
    }
    return failed ? -1 : 0;
}

TEST(four_processes_through_the_public_api_flag_the_rank_with_larger_activations)
{
    char dir[] = "/tmp/ranksnap-report-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    int ranks[4] = {0, 1, 2, 3};
    CHECK(write_ranks(dir, "job-e2e", ranks, 4, 4) == 0);
    rs_snap *full[4] = {NULL, NULL, NULL, NULL};
    rs_summary sums[4];
    int n = 0;
    for (int i = 0; i < 4; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/rank-%05d.rsnap", dir, i);
        if (rs_rsnap_decode_file(path, &full[n]) == RANKSNAP_OK) {
            rs_summary_of(full[n], &sums[n]);
            n++;
        } else {
            fprintf(stderr, "%s\n", ranksnap_last_error());
        }
        unlink(path);
    }
    rmdir(dir);
    CHECK_EQ_U64(n, 4);
    rs_compare_result *r = NULL;
    if (n == 4)
        CHECK(rs_compare(sums, (const rs_snap *const *)full, 4, 0, NULL, &r) ==
              RANKSNAP_OK);
    CHECK(r && r->n_divergent == 1 && r->n_oom == 0 && r->n_missing == 0);
    if (r && r->n_divergent == 1) {
        const rs_compare_divergent *d = &r->divergent[0];
        CHECK_EQ_U64(d->rank, 2);
        CHECK_EQ_U64(d->first_divergent_step, 0);
        CHECK_EQ_U64(d->growth, 0);
        CHECK(d->n_sites >= 1);
        if (d->n_sites >= 1) {
            CHECK(strcmp(d->sites[0].site.function, "layer_activation") == 0);
            CHECK_EQ_U64(d->sites[0].site.bytes, 32 * MIB);
            CHECK(strstr(d->sites[0].site.file, "test_report.c") != NULL);
            CHECK(d->sites[0].site.line > 0);
        }
        /* Every rank recorded every step. */
        for (int i = 0; i < 4; i++) CHECK_EQ_U64(r->ranks[i].n_steps, 6);
        CHECK_EQ_U64(r->ranks[0].step_peak[3], (64 + 64 + 1) * MIB);
        CHECK_EQ_U64(r->ranks[2].step_peak[3], (64 + 96 + 1) * MIB);
    }
    char *t = r ? render_text(r) : NULL;
    CHECK_STR_CONTAINS(t, "rank 2 peaks 25% above the median");
    CHECK_STR_CONTAINS(t, "layer_activation (test_report.c:");
    free(t);
    rs_compare_result_free(r);
    for (int i = 0; i < n; i++) rs_snap_free(full[i]);
}

static int writer_main(int argc, char **argv)
{
    const char *dir = NULL, *job = "job-A";
    int ranks[64], n = 0, world = 4;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--write") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--job") == 0 && i + 1 < argc)
            job = argv[++i];
        else if (strcmp(argv[i], "--world") == 0 && i + 1 < argc)
            world = atoi(argv[++i]);
        else if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc)
            for (char *p = argv[++i]; *p && n < 64;) {
                char *end;
                ranks[n++] = (int)strtol(p, &end, 10);
                p = *end == ',' ? end + 1 : end + strlen(end);
            }
        else {
            fprintf(stderr, "usage: %s --write DIR [--job JOB] [--ranks 0,1,3] [--world N]\n",
                    argv[0]);
            return 2;
        }
    }
    if (!dir) return 2;
    if (n == 0)
        for (n = 0; n < world && n < 64; n++) ranks[n] = n;
    return write_ranks(dir, job, ranks, n, world) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc > 1) return writer_main(argc, argv);
    RUN(text_report_says_which_rank_peaks_above_the_median_from_when_and_where);
    RUN(text_report_calls_a_growing_rank_a_leak);
    RUN(text_report_explains_an_oom_with_the_request_and_the_memory_state);
    RUN(text_report_says_when_the_size_of_the_oom_request_is_not_known);
    RUN(text_report_of_identical_ranks_has_no_verdict);
    RUN(text_report_lists_missing_ranks_as_ranges);
    RUN(json_report_has_the_schema_fields_with_integer_bytes);
    RUN(json_report_of_an_oom_has_request_stack_and_live_sites);
    RUN(text_report_names_shared_devices_and_a_rank_whose_own_use_is_not_known);
    RUN(json_strings_escape_quotes_controls_and_bytes_that_are_not_utf8);
    RUN(four_processes_through_the_public_api_flag_the_rank_with_larger_activations);
    return check_summary();
}
