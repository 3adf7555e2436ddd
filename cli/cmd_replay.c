/*
 * cmd_replay.c — `ranksnap replay FILE [--alloc-conf S] [--device-memory SIZE] [--suggest]
 * [--json]`: the original's peaks against ranksnap's allocator replaying the same requests under
 * the trace's own settings (collector/analyze/replay.h), under other settings next to it
 * (what-if), or under each setting worth trying (--suggest, suggest.h).
 *
 * FILE is a .rsnap snapshot, a rank's .ring file, or a PyTorch snapshot pickle: all of them
 * decode to one rs_snap, which is all the replay reads. Exit codes: 0 replayed, 1 the file
 * could not be read or replayed, 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_conf.h"
#include "cli.h"
#include "cmd_replay.h"
#include "decode.h"
#include "options.h"
#include "ranksnap.h"
#include "replay.h"
#include "replay_report.h"
#include "suggest.h"
#include "torch_decode.h"

/* A pickle's rank comes from its name when it has one; the replay needs no step markers, so the
 * decoder is spared inferring them. */
static ranksnap_status load(const char *path, rs_snap **out)
{
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    o.infer_steps = 0;
    (void)rs_decode_rank_from_name(path, &o.rank);
    return rs_decode_file(path, &o, out);
}

#define RS_REPLAY_MAX_DEVICE ((uint64_t)1 << 50)

/* The keys of --alloc-conf, on top of the trace's settings. */
static ranksnap_status what_if_conf(const rs_snap *s, const char *text, rs_alloc_conf *out,
                                    char *why, size_t why_n)
{
    *out = s->allocator.conf;
    if (rs_alloc_conf_parse(out, text, 0, why, why_n) != 0) return RANKSNAP_ERR_INVALID_ARGUMENT;
    return RANKSNAP_OK;
}

typedef struct replay_args {
    const char *path;
    const char *conf;
    const char *device;
    uint64_t device_bytes;
    int json, suggest;
} replay_args;

static int parse_args(const rs_cli_verb *verb, int argc, char **argv, replay_args *x)
{
    const char *a;
    int kind;
    rs_cli_args it;
    memset(x, 0, sizeof *x);
    rs_cli_args_init(&it, argc, argv);
    while ((kind = rs_cli_next(verb, &it, &a)) != RS_CLI_END) {
        if (kind == RS_CLI_HELP) return RS_EXIT_OK;
        if (kind == RS_CLI_OPERAND) {
            if (x->path) return rs_cli_usage_error(verb, "expected one FILE, got '%s' as well", a);
            x->path = a;
            continue;
        }
        int got;
        if (strcmp(a, "--json") == 0) {
            x->json = 1;
        } else if (strcmp(a, "--suggest") == 0) {
            x->suggest = 1;
        } else if ((got = rs_cli_flag_value("--alloc-conf", argc, argv, &it.i, &x->conf)) != 0 ||
                   (got = rs_cli_flag_value("--device-memory", argc, argv, &it.i, &x->device)) != 0) {
            if (got < 0) return rs_cli_usage_error(verb, "%s expects a value", a);
        } else {
            return rs_cli_usage_error(verb, "unknown option '%s'", a);
        }
    }
    if (!x->path) return rs_cli_usage_error(verb, "expected a FILE");
    if (x->suggest && x->conf)
        return rs_cli_usage_error(verb, "--suggest tries the settings itself: drop --alloc-conf '%s'",
                                  x->conf);
    /* below the smallest segment no request could ever be served, and no device comes near a
     * pebibyte: a typo, not a what-if */
    if (x->device && (rs_options_parse_size(x->device, &x->device_bytes) != 0 ||
                      x->device_bytes < RS_CONF_SMALL_BUFFER || x->device_bytes > RS_REPLAY_MAX_DEVICE))
        return rs_cli_usage_error(verb, "--device-memory '%s': expected a size from 2MiB (the "
                                        "allocator's smallest segment) to 1PiB, such as 40GiB or "
                                        "16000MB", x->device);
    if (x->conf) {
        /* checked before the file is read, against PyTorch's defaults: a usage error */
        rs_alloc_conf c;
        char why[256];
        rs_alloc_conf_reset(&c);
        if (rs_alloc_conf_parse(&c, x->conf, 0, why, sizeof why) != 0)
            return rs_cli_usage_error(verb, "--alloc-conf '%s': %s", x->conf, why);
    }
    return -1;
}

static int run_replay(const rs_cli_verb *verb, int argc, char **argv)
{
    replay_args x;
    int code = parse_args(verb, argc, argv, &x);
    if (code >= 0) return code;

    rs_snap *snap = NULL;
    ranksnap_status st = load(x.path, &snap);
    rs_replay_opts o = {NULL, x.device_bytes, 0};
    rs_alloc_conf c;
    char why[256];
    if (st == RANKSNAP_OK && x.conf) {
        st = what_if_conf(snap, x.conf, &c, why, sizeof why);
        if (st != RANKSNAP_OK) {
            rs_snap_free(snap);
            return rs_cli_usage_error(verb, "--alloc-conf '%s' on %s's settings: %s", x.conf,
                                      x.path, why);
        }
        o.conf = &c;
    }
    if (x.suggest) {
        rs_suggest_result *s = malloc(sizeof *s);
        if (!s) st = RANKSNAP_ERR_HOST_MEMORY;
        if (st == RANKSNAP_OK) st = rs_suggest(snap, x.path, &o, s);
        if (st == RANKSNAP_OK) {
            if (x.json)
                rs_replay_report_suggest_json(stdout, x.path, s);
            else
                rs_replay_report_suggest_text(stdout, x.path, s);
        }
        free(s);
    } else if (x.conf || x.device) {
        rs_replay_result base, whatif;
        rs_replay_session *ss = NULL;
        rs_replay_opts bo = {NULL, 0, 0};
        if (st == RANKSNAP_OK) st = rs_replay_open(snap, x.path, &ss);
        if (st == RANKSNAP_OK) st = rs_replay_run(ss, &bo, &base);
        if (st == RANKSNAP_OK) st = rs_replay_run(ss, &o, &whatif);
        rs_replay_close(ss);
        if (st == RANKSNAP_OK) {
            if (x.json)
                rs_replay_report_whatif_json(stdout, x.path, &base, &whatif);
            else
                rs_replay_report_whatif_text(stdout, x.path, &base, &whatif);
        }
    } else {
        rs_replay_result r;
        if (st == RANKSNAP_OK) st = rs_replay(snap, x.path, &r);
        if (st == RANKSNAP_OK) {
            if (x.json)
                rs_replay_report_json(stdout, x.path, &r);
            else
                rs_replay_report_text(stdout, x.path, &r);
        }
    }
    rs_snap_free(snap);
    if (st != RANKSNAP_OK) {
        rs_cli_failure("ranksnap replay", x.path, st);
        return RS_EXIT_FAILED;
    }
    return fflush(stdout) == 0 ? RS_EXIT_OK : RS_EXIT_FAILED;
}

const rs_cli_verb rs_cmd_replay = {
    "replay", "FILE [--alloc-conf SETTINGS] [--device-memory SIZE] [--suggest] [--json]",
    "replay a rank's allocations through ranksnap's allocator: peaks against the original's, "
    "under other allocator settings, and which setting would have avoided its OOM",
    "  replay the allocation history of FILE (a .rsnap, a .ring, or a PyTorch snapshot pickle)\n"
    "  through ranksnap's allocator (PyTorch's policy) on a simulated device, under the trace's\n"
    "  own settings and capacity, and print the original and the replay side by side: peak\n"
    "  allocated, reserved and fragmentation, cudaMalloc/cudaFree calls, and where each ran out\n"
    "  of memory. A PyTorch pickle records no capacity: when it ended in an OOM, the cap is\n"
    "  derived from that OOM (docs/PYTORCH.md).\n\n"
    "  --alloc-conf S       also replay under S, in PYTORCH_CUDA_ALLOC_CONF's syntax, on top of\n"
    "                       the trace's settings: expandable_segments:True, max_split_size_mb:128,\n"
    "                       roundup_power2_divisions:4, garbage_collection_threshold:0.6, ...\n"
    "  --device-memory SIZE also replay on a device of SIZE (40GiB): a smaller card\n"
    "  --suggest            replay under each setting that matters and name the smallest change\n"
    "                       that avoids the OOM (or lowers peak reserved the most)\n"
    "  --json               one JSON object: {\"original\": {...}, \"ranksnap\": {...},\n"
    "                       \"what_if\": {...} | \"tries\": [...], \"suggestion\", ...}\n",
    run_replay};
