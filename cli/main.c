/*
 * main.c — the `ranksnap` command: global flags and the table of verbs.
 *
 * `ranksnap VERB ARGS...` looks VERB up in rs_verbs and calls its row's function with the
 * arguments after it; a verb is one cmd_*.c file and one row here (cli.h).
 */
#include <stdio.h>
#include <string.h>

#include <msgpack.h>

#include "cli.h"
#include "cmd_collect.h"
#include "cmd_diff.h"
#include "cmd_export.h"
#include "cmd_replay.h"
#include "cmd_report.h"
#include "cmd_summary.h"
#include "cmd_trigger.h"
#include "file_map.h"
#include "options.h"
#include "ranksnap.h"

static const rs_cli_verb *const rs_verbs[] = {&rs_cmd_summary, &rs_cmd_report, &rs_cmd_diff,
                                              &rs_cmd_trigger, &rs_cmd_collect, &rs_cmd_export,
                                              &rs_cmd_replay};

#define RS_N_VERBS (sizeof rs_verbs / sizeof rs_verbs[0])

static void usage(FILE *out)
{
    fprintf(out, "usage: ranksnap [--help | --version | --help-env]\n"
                 "       ranksnap VERB [ARGS...]\n\n"
                 "Compare the GPU memory of the ranks of an MPI job from their ranksnap "
                 "snapshots.\n\nverbs:\n");
    for (size_t i = 0; i < RS_N_VERBS; i++)
        fprintf(out, "  %-8s %s\n  %-8s   %s\n", rs_verbs[i]->name, rs_verbs[i]->args, "",
                rs_verbs[i]->summary);
    fprintf(out, "\noptions:\n"
                 "  -h, --help     this text (ranksnap VERB --help for a verb)\n"
                 "  -V, --version  the versions of ranksnap and of the msgpack-c it was built with\n"
                 "  --help-env     the RANKSNAP_* environment variables a rank reads\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return RS_EXIT_USAGE;
    }
    const char *first = argv[1];
    if (strcmp(first, "-h") == 0 || strcmp(first, "--help") == 0) {
        usage(stdout);
        return RS_EXIT_OK;
    }
    if (strcmp(first, "-V") == 0 || strcmp(first, "--version") == 0) {
        /* the headers' version: the command uses msgpack-c's inline code only, so it does not
         * load libmsgpackc (CMakeLists.txt, --as-needed) */
        printf("ranksnap %s\nmsgpack-c %s\n", ranksnap_version(), MSGPACK_VERSION);
        return RS_EXIT_OK;
    }
    if (strcmp(first, "--help-env") == 0) {
        rs_options_print_help(stdout);
        return RS_EXIT_OK;
    }
    if (first[0] == '-') {
        fprintf(stderr, "ranksnap: unknown option '%s' (see ranksnap --help)\n", first);
        return RS_EXIT_USAGE;
    }
    /* Every verb maps its input files instead of reading them: a decoder that refuses a file's
     * first bytes has touched one page of it, whatever its size. When it fails, files are read. */
    (void)rs_file_map_enable();
    for (size_t i = 0; i < RS_N_VERBS; i++)
        if (strcmp(first, rs_verbs[i]->name) == 0)
            return rs_verbs[i]->run(rs_verbs[i], argc - 2, argv + 2);
    fprintf(stderr, "ranksnap: unknown verb '%s' (see ranksnap --help)\n", first);
    return RS_EXIT_USAGE;
}
