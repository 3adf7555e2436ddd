/*
 * replay_bench.c — how long the replay takes on a long trace: a 1,000,000-event history (the
 * runtime's own, sim backend) replayed under five allocator settings, and --suggest on it.
 *
 * The trace: a training loop of 48 "layers" whose batch changes every step (the pattern that
 * fragments cudaMalloc'ed segments), each layer keeping an activation until the backward pass and
 * using short-lived workspaces, recorded whole (RANKSNAP_MAX_ENTRIES) and dumped to a .rsnap,
 * which is decoded once (timed apart). Prints one line per setting: the replay's time, events per
 * second, and its peak reserved; `--events N` changes the length, `--json` prints JSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc_conf.h"
#include "ranksnap.h"
#include "replay.h"
#include "rsnap_decode.h"
#include "suggest.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Steps until the ring holds about `events` events (3 per allocation: alloc, free_requested,
 * free_completed; the segments' are few). */
static int workload(uint64_t events)
{
    enum { LAYERS = 48 };
    void *act[LAYERS];
    uint64_t done = 0;
    for (int step = 0; done < events; step++) {
        if (ranksnap_step(step) != RANKSNAP_OK) return 0;
        size_t batch = 16 + (size_t)(step % 5) * 3;
        for (int l = 0; l < LAYERS; l++) {
            void *ws;
            size_t a = batch * (96 * 1024 + (size_t)(l % 7) * 8192) + 1000;
            if (ranksnap_malloc(&act[l], a, NULL) != RANKSNAP_OK) return 0;
            if (ranksnap_malloc(&ws, batch * 40000 + (size_t)l * 512, NULL) != RANKSNAP_OK)
                return 0;
            if (ranksnap_free(ws) != RANKSNAP_OK) return 0;
        }
        for (int l = LAYERS; l-- > 0;) {
            void *g;
            if (ranksnap_malloc(&g, batch * 64 * 1024 + 333, NULL) != RANKSNAP_OK) return 0;
            if (ranksnap_free(g) != RANKSNAP_OK || ranksnap_free(act[l]) != RANKSNAP_OK) return 0;
        }
        done += LAYERS * 3 * 3;
    }
    return 1;
}

int main(int argc, char **argv)
{
    uint64_t events = 1000000;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--events") == 0 && i + 1 < argc)
            events = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--json") == 0)
            json = 1;
    }
    char dir[] = "/tmp/replay_bench.XXXXXX", path[64], entries[32];
    if (!mkdtemp(dir)) return 1;
    snprintf(path, sizeof path, "%s/rank-00000.rsnap", dir);
    snprintf(entries, sizeof entries, "%llu", (unsigned long long)events + 1000);
    setenv("RANKSNAP_DIR", dir, 1);
    setenv("RANKSNAP_BACKEND", "sim", 1);
    setenv("RANKSNAP_REPORT", "0", 1);
    setenv("RANKSNAP_WRITE", "none", 1); /* the dump below is the only file */
    setenv("RANKSNAP_RING", "memory", 1);
    setenv("RANKSNAP_STACKS", "none", 1);
    setenv("RANKSNAP_MAX_ENTRIES", entries, 1);
    if (ranksnap_init(NULL) != RANKSNAP_OK || !workload(events) ||
        ranksnap_dump(path) != RANKSNAP_OK) {
        fprintf(stderr, "replay_bench: %s\n", ranksnap_last_error());
        return 1;
    }
    ranksnap_finalize();

    double t0 = now_s();
    rs_snap *s = NULL;
    if (rs_rsnap_decode_file(path, &s) != RANKSNAP_OK) {
        fprintf(stderr, "replay_bench: %s\n", ranksnap_last_error());
        return 1;
    }
    double t_decode = now_s() - t0;
    /* a cap for the garbage collector: 1.3 times what the trace reserved */
    s->allocator.memory_limit = s->totals.reserved_bytes_peak / 10 * 13;

    static const char *const confs[] = {"", "expandable_segments:True", "roundup_power2_divisions:4",
                                        "max_split_size_mb:20", "garbage_collection_threshold:0.6"};
    rs_replay_session *ss = NULL;
    t0 = now_s();
    if (rs_replay_open(s, path, &ss) != RANKSNAP_OK) return 1;
    double t_open = now_s() - t0, t_all = 0;
    if (json)
        printf("{\"events\": %llu, \"decode_s\": %.4f, \"open_s\": %.4f, \"replays\": [",
               (unsigned long long)s->history.count, t_decode, t_open);
    else
        printf("replay of %llu events (decode %.3f s, walk table %.3f s)\n%-34s %9s %14s %14s\n",
               (unsigned long long)s->history.count, t_decode, t_open, "settings", "seconds",
               "events/s", "peak reserved");
    for (size_t k = 0; k < sizeof confs / sizeof confs[0]; k++) {
        rs_alloc_conf c = s->allocator.conf;
        char why[128];
        if (rs_alloc_conf_parse(&c, confs[k], 0, why, sizeof why) != 0) return 1;
        rs_replay_opts o = {&c, 0, 0};
        rs_replay_result r;
        t0 = now_s();
        if (rs_replay_run(ss, &o, &r) != RANKSNAP_OK) {
            fprintf(stderr, "replay_bench: %s\n", ranksnap_last_error());
            return 1;
        }
        double t = now_s() - t0;
        t_all += t;
        if (json)
            printf("%s{\"settings\": \"%s\", \"seconds\": %.4f, \"peak_reserved\": %llu}",
                   k ? ", " : "", confs[k], t, (unsigned long long)r.ranksnap.peak_reserved);
        else
            printf("%-34s %9.3f %14.0f %14llu\n", confs[k][0] ? confs[k] : "(the trace's own)", t,
                   (double)s->history.count / t, (unsigned long long)r.ranksnap.peak_reserved);
    }
    rs_replay_close(ss);
    rs_suggest_result *g = malloc(sizeof *g);
    t0 = now_s();
    if (!g || rs_suggest(s, path, NULL, g) != RANKSNAP_OK) return 1;
    double t_suggest = now_s() - t0;
    if (json)
        printf("], \"five_settings_s\": %.4f, \"suggest_s\": %.4f, \"suggest_replays\": %zu}\n",
               t_all, t_suggest, g->n_tries + 1);
    else
        printf("five settings: %.3f s; --suggest (%zu replays, opening included): %.3f s\n", t_all,
               g->n_tries + 1, t_suggest);
    free(g);
    rs_snap_free(s);
    unlink(path);
    rmdir(dir);
    return 0;
}
