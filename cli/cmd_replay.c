/*
 * cmd_replay.c — `ranksnap replay FILE [--json]`: the original's peaks against ranksnap's
 * allocator replaying the same requests (collector/replay.h).
 *
 * FILE is a .rsnap snapshot, a rank's .ring file, or a PyTorch snapshot pickle: all of them
 * decode to one rs_snap, which is all the replay reads. Exit codes: 0 replayed, 1 the file
 * could not be read or replayed, 2 usage.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "decode.h"
#include "ranksnap.h"
#include "replay.h"
#include "replay_report.h"
#include "ring_decode.h"
#include "rsnap_decode.h"
#include "torch_decode.h"

static const char replay_usage[] =
    "usage: ranksnap replay FILE [--json]\n"
    "  replay the allocation history of FILE (a .rsnap, a .ring, or a PyTorch snapshot pickle)\n"
    "  through ranksnap's allocator on a simulated device, and print peak allocated and peak\n"
    "  reserved of the original and of ranksnap side by side\n\n"
    "  --json   one JSON object: {\"original\": {\"peak_allocated\", \"peak_reserved\"},\n"
    "           \"ranksnap\": {...}, \"events\", \"incomplete\", ...}\n";

static int usage_error(const char *fmt, const char *arg)
{
    fputs("ranksnap replay: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n", stderr);
    fputs(replay_usage, stderr);
    return 2;
}

static int is_ring_path(const char *path)
{
    size_t n = strlen(path);
    return n > 5 && strcmp(path + n - 5, ".ring") == 0;
}

/* A pickle's rank comes from its name when it has one; the replay needs no step markers, so the
 * decoder is spared inferring them. */
static ranksnap_status load(const char *path, rs_snap **out)
{
    int closed = 0;
    if (is_ring_path(path)) return rs_ring_decode_file(path, out, &closed);
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    o.infer_steps = 0;
    (void)rs_decode_rank_from_name(path, &o.rank);
    return rs_decode_file(path, &o, out);
}

int rs_cmd_replay(int argc, char **argv)
{
    int json = 0, flags_done = 0;
    const char *path = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (flags_done || a[0] != '-' || a[1] == '\0') {
            if (path) return usage_error("expected one FILE, got '%s' as well", a);
            path = a;
        } else if (strcmp(a, "--") == 0) {
            flags_done = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(replay_usage, stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else {
            return usage_error("unknown option '%s'", a);
        }
    }
    if (!path) return usage_error("%s", "expected a FILE");

    rs_snap *snap = NULL;
    rs_replay_result r;
    ranksnap_status st = load(path, &snap);
    if (st == RANKSNAP_OK) st = rs_replay(snap, path, &r);
    rs_snap_free(snap);
    if (st != RANKSNAP_OK) {
        const char *detail = ranksnap_last_error();
        if (!detail[0]) detail = ranksnap_strerror(st);
        if (strstr(detail, path))
            fprintf(stderr, "ranksnap replay: %s\n", detail);
        else
            fprintf(stderr, "ranksnap replay: %s: %s\n", path, detail);
        return 1;
    }
    if (json)
        rs_replay_report_json(stdout, path, &r);
    else
        rs_replay_report_text(stdout, path, &r);
    return fflush(stdout) == 0 ? 0 : 1;
}
