/*
 * test_replay_gpu_traces.c — the replay against PyTorch's own numbers on real traces recorded on
 * the GPU machine, one per allocator setting (tests/gpu/record_alloc_conf.py writes them; they
 * live in tests/data/alloc_conf.tar.gz, unpacked into the build folder, or in
 * $RS_ALLOC_CONF_TRACES).
 *
 * For each NAME.pickle with its NAME.json: the replay under the trace's own settings, on the
 * device the trace ran on (total_memory; the memory fraction is in the settings), reserves at its
 * peak what torch.cuda.max_memory_reserved() said, within 1%; a trace that ended in an OOM replays
 * to the same OOM at the same request; for oom_defaults, expandable_segments:True avoids the OOM
 * in --suggest's replays exactly when PyTorch's own rerun with it (oom_expandable_segments.json)
 * did not run out of memory, and then --suggest names a change. Until the traces are recorded it says so and exits 77 (skipped).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "replay.h"
#include "suggest.h"
#include "torch_decode.h"

static const char *const names[] = {"defaults",         "expandable_segments",
                                    "roundup_power2_divisions", "max_split_size_mb",
                                    "garbage_collection_threshold", "oom_defaults",
                                    "oom_expandable_segments"};

static char dir[1024];

/* The number after "key": in a small JSON file, or -1 (a value of ours never is). */
static int json_u64(const char *text, const char *key, uint64_t *out)
{
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(text, pat);
    if (!p) return -1;
    p += strlen(pat);
    while (*p == ' ') p++;
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p) return -1;
    *out = v;
    return 0;
}

static int json_true(const char *text, const char *key)
{
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\": true", key);
    return strstr(text, pat) != NULL;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(1 << 16);
    size_t n = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
    fclose(f);
    if (buf) buf[n] = '\0';
    return buf;
}

/* Replays NAME; 0 when its files are not there. */
static int check_trace(const char *name)
{
    char pk[1200], js[1200];
    snprintf(pk, sizeof pk, "%s/%s.pickle", dir, name);
    snprintf(js, sizeof js, "%s/%s.json", dir, name);
    char *meta = read_text(js);
    FILE *f = fopen(pk, "rb");
    if (f) fclose(f);
    if (!meta || !f) {
        printf("  %s: not recorded (%s)\n", name, !meta ? js : pk);
        free(meta);
        return 0;
    }
    uint64_t reserved = 0, total = 0;
    CHECK(json_u64(meta, "max_memory_reserved", &reserved) == 0);
    CHECK(json_u64(meta, "total_memory", &total) == 0);
    int oom = json_true(meta, "oom");
    rs_snap *s = NULL;
    CHECK(rs_torch_decode_file(pk, 0, &s) == RANKSNAP_OK);
    if (s) {
        rs_replay_result r;
        rs_replay_opts o = {NULL, total, 0};
        CHECK(rs_replay_with(s, name, &o, &r) == RANKSNAP_OK);
        double off = reserved ? ((double)r.ranksnap.peak_reserved - (double)reserved) /
                                    (double)reserved * 100.0
                              : 0.0;
        printf("  %s: PyTorch reserved %llu, the trace %llu, the replay %llu (%+.2f%%)%s\n", name,
               (unsigned long long)reserved, (unsigned long long)r.original.peak_reserved,
               (unsigned long long)r.ranksnap.peak_reserved, off, oom ? ", OOM" : "");
        CHECK(off < 1.0 && off > -1.0);
        CHECK(!r.incomplete);
        CHECK_EQ_U64(r.original.ooms > 0, oom);
        if (oom) CHECK(r.ranksnap.ooms > 0 && r.ranksnap.first_oom_event == r.original.first_oom_event);
        if (!oom) CHECK_EQ_U64(r.ranksnap.ooms, 0);
        if (strcmp(name, "oom_defaults") == 0) {
            char js2[1200];
            snprintf(js2, sizeof js2, "%s/oom_expandable_segments.json", dir);
            char *other = read_text(js2);
            rs_suggest_result *g = calloc(1, sizeof *g);
            CHECK(g && rs_suggest(s, name, &o, g) == RANKSNAP_OK);
            /* expandable segments avoid the OOM in the replay exactly when they did on the GPU,
             * and then a change is named (it, or a smaller peak with as few keys) */
            int avoids = -1;
            for (size_t i = 0; g && i < g->n_tries; i++)
                if (strcmp(g->tries[i].change, "expandable_segments:True") == 0)
                    avoids = g->tries[i].r.ranksnap.ooms == 0;
            CHECK(avoids >= 0);
            if (other) CHECK_EQ_U64(avoids, !json_true(other, "oom"));
            if (g && avoids == 1) CHECK(g->best >= 0);
            if (g)
                printf("  oom_defaults --suggest: %s (expandable_segments:True %s)\n",
                       g->best >= 0 ? g->tries[g->best].change : "(nothing helps)",
                       avoids == 1 ? "avoids the OOM" : "does not avoid it");
            free(g);
            free(other);
        }
    }
    rs_snap_free(s);
    free(meta);
    return 1;
}

TEST(replays_of_real_traces_reserve_what_pytorch_reserved)
{
    int found = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) found += check_trace(names[i]);
    if (!found) {
        printf("SKIPPED: no trace recorded in %s yet; record them on the GPU machine with "
               "tests/gpu/record-alloc-conf.sh and copy them there\n", dir);
        exit(77);
    }
}

int main(void)
{
    const char *env = getenv("RS_ALLOC_CONF_TRACES");
    snprintf(dir, sizeof dir, "%s", env && *env ? env : RS_TEST_DATA_DIR "/alloc_conf");
    RUN(replays_of_real_traces_reserve_what_pytorch_reserved);
    return check_summary();
}
