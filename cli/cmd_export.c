/*
 * cmd_export.c — `ranksnap export --torch FILE -o OUT.pickle` and
 * `ranksnap export --torch --rank R DIR -o OUT.pickle`: one rank for PyTorch's viewer.
 *
 * DIR stands for its rank-RRRRR.rsnap (or, for a rank that died, its rank-RRRRR.ring). The pickle
 * is written atomically (rs_atomic_file_write), so a viewer never opens half of one. Exit codes
 * as everywhere in the command: 0 written, 1 the input could not be read or the output written,
 * 2 usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "export_torch.h"
#include "ranksnap.h"
#include "ring_decode.h"
#include "rsnap_decode.h"
#include "atomic_file.h"

static const char export_usage[] =
    "usage: ranksnap export --torch FILE -o OUT.pickle\n"
    "       ranksnap export --torch --rank R DIR -o OUT.pickle\n"
    "  write one rank as a PyTorch memory snapshot, for pytorch.org/memory_viz and\n"
    "  torch/cuda/_memory_viz.py (mapping: docs/PYTORCH.md)\n\n"
    "  FILE             a .rsnap snapshot (or a rank's .ring file)\n"
    "  --rank R DIR     rank R's snapshot in DIR: rank-RRRRR.rsnap, else rank-RRRRR.ring\n"
    "  --torch          PyTorch's pickle format (the only export format)\n"
    "  -o, --output OUT the pickle to write\n"
    "  --all-frames     keep ranksnap's own innermost frames on every stack\n";

static int usage_error(const char *fmt, const char *arg)
{
    fputs("ranksnap export: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n", stderr);
    fputs(export_usage, stderr);
    return 2;
}

/* `--name VALUE`, `--name=VALUE` or `-o VALUE` at argv[*i]: 1 matched (value set, *i advanced),
 * 0 not this flag, -1 the value is missing. Only long flags take `=`, as in getopt_long. */
static int flag_value(const char *name, int argc, char **argv, int *i, const char **value)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] == '=' && name[1] == '-') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0') return 0;
    if (*i + 1 >= argc) return -1;
    *value = argv[++*i];
    return 1;
}

static int is_ring_path(const char *path)
{
    size_t n = strlen(path);
    return n > 5 && strcmp(path + n - 5, ".ring") == 0;
}

/* Prints why `path` could not be read, naming it once. */
static void read_failure(const char *path, ranksnap_status st)
{
    const char *detail = ranksnap_last_error();
    if (!detail[0]) detail = ranksnap_strerror(st);
    if (strstr(detail, path))
        fprintf(stderr, "ranksnap export: %s\n", detail);
    else
        fprintf(stderr, "ranksnap export: %s: %s\n", path, detail);
    /* The commonest mistake: exporting what is already PyTorch's format. */
    FILE *f = fopen(path, "rb");
    if (f) {
        int c = fgetc(f);
        fclose(f);
        if (c == 0x80)
            fprintf(stderr, "ranksnap export: %s looks like a pickle already; PyTorch's viewer "
                            "opens it as it is\n", path);
    }
}

int rs_cmd_export(int argc, char **argv)
{
    int torch = 0, all_frames = 0, flags_done = 0;
    const char *rank_arg = NULL, *out = NULL, *operand = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (flags_done || a[0] != '-' || a[1] == '\0') {
            if (operand) return usage_error("expected one FILE or DIR, got '%s' as well", a);
            operand = a;
            continue;
        }
        int got;
        if (strcmp(a, "--") == 0) {
            flags_done = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(export_usage, stdout);
            return 0;
        } else if (strcmp(a, "--torch") == 0) {
            torch = 1;
        } else if (strcmp(a, "--all-frames") == 0) {
            all_frames = 1;
        } else if ((got = flag_value("--rank", argc, argv, &i, &rank_arg)) != 0 ||
                   (got = flag_value("--output", argc, argv, &i, &out)) != 0 ||
                   (got = flag_value("-o", argc, argv, &i, &out)) != 0) {
            if (got < 0) return usage_error("%s expects a value", a);
        } else {
            return usage_error("unknown option '%s'", a);
        }
    }
    if (!torch)
        return usage_error("%s", "expected --torch (PyTorch's memory snapshot pickle, the only "
                                 "export format)");
    if (!operand) return usage_error("%s", "expected a FILE, or --rank R and a DIR");
    if (!out || !*out) return usage_error("%s", "expected -o OUT.pickle");

    struct stat sb;
    int is_dir = stat(operand, &sb) == 0 && S_ISDIR(sb.st_mode);
    char path[4200];
    if (rank_arg) {
        char *end = NULL;
        errno = 0;
        long r = strtol(rank_arg, &end, 10);
        if (!*rank_arg || *end || errno || r < 0 || r > 99999)
            return usage_error("--rank '%s': expected a rank number from 0 to 99999", rank_arg);
        if (!is_dir)
            return usage_error("--rank picks rank-RRRRR.rsnap in a DIR, but '%s' is not a "
                               "directory (give a FILE without --rank)", operand);
        snprintf(path, sizeof path, "%s/rank-%05ld.rsnap", operand, r);
        if (stat(path, &sb) != 0) {
            char ring[4200];
            snprintf(ring, sizeof ring, "%s/rank-%05ld.ring", operand, r);
            if (stat(ring, &sb) == 0) memcpy(path, ring, sizeof path);
        }
    } else {
        if (is_dir)
            return usage_error("'%s' is a directory: pass --rank R to pick its rank-RRRRR.rsnap",
                               operand);
        snprintf(path, sizeof path, "%s", operand);
    }

    rs_snap *snap = NULL;
    int closed = 0;
    ranksnap_status st = is_ring_path(path) ? rs_ring_decode_file(path, &snap, &closed)
                                            : rs_rsnap_decode_file(path, &snap);
    if (st != RANKSNAP_OK) {
        read_failure(path, st);
        return 1;
    }
    rs_export_torch_options opt = {all_frames};
    rs_export_torch_info info;
    unsigned char *buf = NULL;
    size_t len = 0;
    st = rs_export_torch(snap, path, &opt, &buf, &len, &info);
    size_t n_segments = snap->n_segments;
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
           out, rank, n_segments, (unsigned long long)info.trace_entries,
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
