/*
 * cmd_replay.c — `ranksnap replay FILE [--json]`: the original's peaks against ranksnap's
 * allocator replaying the same requests (collector/analyze/replay.h).
 *
 * FILE is a .rsnap snapshot, a rank's .ring file, or a PyTorch snapshot pickle: all of them
 * decode to one rs_snap, which is all the replay reads. Exit codes: 0 replayed, 1 the file
 * could not be read or replayed, 2 usage.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd_replay.h"
#include "decode.h"
#include "ranksnap.h"
#include "replay.h"
#include "replay_report.h"
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

static int run_replay(const rs_cli_verb *verb, int argc, char **argv)
{
    int json = 0, kind;
    const char *path = NULL, *a;
    rs_cli_args it;
    rs_cli_args_init(&it, argc, argv);
    while ((kind = rs_cli_next(verb, &it, &a)) != RS_CLI_END) {
        if (kind == RS_CLI_HELP) return RS_EXIT_OK;
        if (kind == RS_CLI_OPERAND) {
            if (path) return rs_cli_usage_error(verb, "expected one FILE, got '%s' as well", a);
            path = a;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else {
            return rs_cli_usage_error(verb, "unknown option '%s'", a);
        }
    }
    if (!path) return rs_cli_usage_error(verb, "expected a FILE");

    rs_snap *snap = NULL;
    rs_replay_result r;
    ranksnap_status st = load(path, &snap);
    if (st == RANKSNAP_OK) st = rs_replay(snap, path, &r);
    rs_snap_free(snap);
    if (st != RANKSNAP_OK) {
        rs_cli_failure("ranksnap replay", path, st);
        return RS_EXIT_FAILED;
    }
    if (json)
        rs_replay_report_json(stdout, path, &r);
    else
        rs_replay_report_text(stdout, path, &r);
    return fflush(stdout) == 0 ? RS_EXIT_OK : RS_EXIT_FAILED;
}

const rs_cli_verb rs_cmd_replay = {
    "replay", "FILE [--json]",
    "replay a rank's allocations through ranksnap's allocator: peaks against the original's",
    "  replay the allocation history of FILE (a .rsnap, a .ring, or a PyTorch snapshot pickle)\n"
    "  through ranksnap's allocator on a simulated device, and print peak allocated and peak\n"
    "  reserved of the original and of ranksnap side by side\n\n"
    "  --json   one JSON object: {\"original\": {\"peak_allocated\", \"peak_reserved\"},\n"
    "           \"ranksnap\": {...}, \"events\", \"incomplete\", ...}\n",
    run_replay};
