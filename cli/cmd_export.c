/*
 * cmd_export.c — `ranksnap export --torch FILE -o OUT.pickle` and
 * `ranksnap export --torch --rank R DIR -o OUT.pickle`: one rank for PyTorch's viewer.
 *
 * DIR stands for its rank-RRRRR.rsnap (or, for a rank that died, its rank-RRRRR.ring). The pickle
 * is written atomically (rs_atomic_file_write), so a viewer never opens half of one. Exit codes
 * as everywhere in the command: 0 written, 1 the input could not be read or the output written,
 * 2 usage.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attempt.h"
#include "cli.h"
#include "cmd_export.h"
#include "decode.h"
#include "errors.h"
#include "export_torch.h"
#include "ranksnap.h"
#include "atomic_file.h"

/* Prints why `path` could not be read, naming it once. */
/* Rank r's file in `dir`: rank-RRRRR.rsnap, else its .ring, of the one job that has rank r there.
 * Two jobs sharing a folder each have theirs (the second under rank-RRRRR.job-TAG.*,
 * docs/POSTMORTEM.md): which one to export would be a guess, so -1 with `names` listing them.
 * 0 and *path otherwise (the plain .rsnap name when the folder has none: the reader names it). */
static int pick_rank_file(const char *dir, long r, char *path, size_t n, char *names, size_t nn)
{
    char job[2][256] = {"", ""}, best[2][256] = {"", ""};
    int jobs = 0, more = 0, best_rsnap[2] = {0, 0};
    names[0] = '\0';
    snprintf(path, n, "%s/rank-%05ld.rsnap", dir, r);
    DIR *d = opendir(dir);
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *name = e->d_name, *ext = NULL;
        char tag[256];
        long rank = -1;
        int attempt = 0;
        if (rs_attempt_parse(name, &rank, &attempt, tag, sizeof tag, &ext) != 0 || rank != r ||
            attempt != 0 || strcmp(ext, ".pickle") == 0)
            continue;
        int rsnap = strcmp(ext, ".rsnap") == 0;
        size_t used = strlen(names);
        snprintf(names + used, nn - used, "%s%s", used ? ", " : "", name);
        int k = 0;
        while (k < jobs && strcmp(job[k], tag) != 0) k++;
        if (k == 2) { /* a third job: two already make the answer */
            more = 1;
            continue;
        }
        if (k == jobs) snprintf(job[jobs++], sizeof job[0], "%s", tag);
        if (!best[k][0] || (rsnap && !best_rsnap[k])) {
            snprintf(best[k], sizeof best[k], "%s", name);
            best_rsnap[k] = rsnap;
        }
    }
    closedir(d);
    if (jobs + more > 1) return -1;
    if (jobs == 1) snprintf(path, n, "%s/%s", dir, best[0]);
    return 0;
}

static void read_failure(const char *path, ranksnap_status st)
{
    rs_cli_failure("ranksnap export", path, st);
    /* The commonest mistake: exporting what is already PyTorch's format. */
    if (rs_decode_is_pickle_file(path) == 1)
        fprintf(stderr, "ranksnap export: %s looks like a pickle already; PyTorch's viewer "
                        "opens it as it is\n", path);
}

static int run_export(const rs_cli_verb *verb, int argc, char **argv)
{
    int torch = 0, all_frames = 0, kind;
    const char *rank_arg = NULL, *out = NULL, *operand = NULL, *a;
    rs_cli_args it;
    rs_cli_args_init(&it, argc, argv);
    while ((kind = rs_cli_next(verb, &it, &a)) != RS_CLI_END) {
        if (kind == RS_CLI_HELP) return RS_EXIT_OK;
        if (kind == RS_CLI_OPERAND) {
            if (operand)
                return rs_cli_usage_error(verb, "expected one FILE or DIR, got '%s' as well", a);
            operand = a;
            continue;
        }
        int got;
        if (strcmp(a, "--torch") == 0) {
            torch = 1;
        } else if (strcmp(a, "--all-frames") == 0) {
            all_frames = 1;
        } else if ((got = rs_cli_flag_value("--rank", argc, argv, &it.i, &rank_arg)) != 0 ||
                   (got = rs_cli_flag_value("--output", argc, argv, &it.i, &out)) != 0 ||
                   (got = rs_cli_flag_value("-o", argc, argv, &it.i, &out)) != 0) {
            if (got < 0) return rs_cli_usage_error(verb, "%s expects a value", a);
        } else {
            return rs_cli_usage_error(verb, "unknown option '%s'", a);
        }
    }
    if (!torch)
        return rs_cli_usage_error(verb, "%s", "expected --torch (PyTorch's memory snapshot pickle, the only "
                                 "export format)");
    if (!operand) return rs_cli_usage_error(verb, "%s", "expected a FILE, or --rank R and a DIR");
    if (!out || !*out) return rs_cli_usage_error(verb, "%s", "expected -o OUT.pickle");

    struct stat sb;
    int is_dir = stat(operand, &sb) == 0 && S_ISDIR(sb.st_mode);
    char path[4200];
    if (rank_arg) {
        long r = 0;
        if (rs_cli_number(rank_arg, 0, 99999, &r) != 0)
            return rs_cli_usage_error(verb, "--rank '%s': expected a rank number from 0 to 99999", rank_arg);
        if (!is_dir)
            return rs_cli_usage_error(verb, "--rank picks rank-RRRRR.rsnap in a DIR, but '%s' is not a "
                               "directory (give a FILE without --rank)", operand);
        char names[1024];
        if (pick_rank_file(operand, r, path, sizeof path, names, sizeof names) != 0) {
            fprintf(stderr, "ranksnap export: %s holds rank %ld of more than one job (%s): give the "
                            "FILE to export\n", operand, r, names);
            return 1;
        }
    } else {
        if (is_dir)
            return rs_cli_usage_error(verb, "'%s' is a directory: pass --rank R to pick its rank-RRRRR.rsnap",
                               operand);
        snprintf(path, sizeof path, "%s", operand);
    }

    rs_snap *snap = NULL;
    ranksnap_status st = rs_decode_is_pickle_file(path) == 1
                             ? rs_error(RANKSNAP_ERR_FORMAT, "%s: not a ranksnap snapshot", path)
                             : rs_decode_file(path, NULL, &snap);
    if (st != RANKSNAP_OK) {
        read_failure(path, st);
        return 1;
    }
    rs_export_torch_options opt = {all_frames};
    rs_export_torch_info info;
    unsigned char *buf = NULL;
    size_t len = 0;
    st = rs_export_torch(snap, path, &opt, &buf, &len, &info);
    int rank = snap->rank;
    rs_snap_free(snap);
    if (st == RANKSNAP_OK) st = rs_atomic_file_write(out, buf, len);
    free(buf);
    if (st != RANKSNAP_OK) {
        fprintf(stderr, "ranksnap export: %s\n", ranksnap_last_error()[0] ? ranksnap_last_error()
                                                                           : ranksnap_strerror(st));
        return 1;
    }
    printf("wrote %s: rank %d, %zu segments, %llu trace entries (%llu allocations), %llu "
           "annotations, %zu bytes\n",
           out, rank, (size_t)info.segments, (unsigned long long)info.trace_entries,
           (unsigned long long)info.allocs, (unsigned long long)info.annotations, len);
    if (info.left_out)
        printf("left out %llu events that do not fit the blocks and segments alive at their "
               "moment (the history has gaps), so that the viewer can replay the rest\n",
               (unsigned long long)info.left_out);
    if (info.unknown_actions)
        printf("left out %llu events of actions PyTorch has no name for\n",
               (unsigned long long)info.unknown_actions);
    return 0;
}

const rs_cli_verb rs_cmd_export = {
    "export", "--torch FILE|--rank R DIR -o OUT.pickle",
    "write one rank as a PyTorch memory snapshot for pytorch.org/memory_viz",
    "  write one rank as a PyTorch memory snapshot, for pytorch.org/memory_viz and\n"
    "  torch/cuda/_memory_viz.py (mapping: docs/PYTORCH.md)\n\n"
    "  FILE             a .rsnap snapshot (or a rank's .ring file)\n"
    "  --rank R DIR     rank R's snapshot in DIR: rank-RRRRR.rsnap, else rank-RRRRR.ring\n"
    "  --torch          PyTorch's pickle format (the only export format)\n"
    "  -o, --output OUT the pickle to write\n"
    "  --all-frames     keep ranksnap's own innermost frames on every stack\n",
    run_export};
