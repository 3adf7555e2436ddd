/*
 * cmd_collect.c — `ranksnap collect --from DIR --to DIR`: gather node-local snapshots over MPI.
 *
 * For jobs whose RANKSNAP_DIR is node-local (/tmp, a local SSD), run one collector per node:
 *   mpirun -np NODES --map-by ppr:1:node ranksnap collect --from /local/dir --to ./here
 * The gathering is the ranksnap-collect program (collect_main.c), which this verb checks the
 * arguments for and then becomes (exec, same process): only it links Open MPI, whose libraries
 * would otherwise be loaded by every `ranksnap` command (1.5 ms of a 2.6 ms start).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_collect.h"

int rs_collect_parse(const rs_cli_verb *verb, int argc, char **argv, rs_collect_args *a, int *code)
{
    memset(a, 0, sizeof *a);
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            rs_cli_usage(stdout, verb);
            *code = RS_EXIT_OK;
            return -1;
        } else if (!strcmp(argv[i], "--json")) {
            a->json = 1;
        } else if ((!strcmp(argv[i], "--from") || !strcmp(argv[i], "--to")) && i + 1 < argc) {
            if (argv[i][2] == 'f')
                a->from = argv[++i];
            else
                a->to = argv[++i];
        } else {
            *code = rs_cli_usage_error(verb, "unexpected '%s'", argv[i]);
            return -1;
        }
    }
    if (!a->from || !a->to) {
        *code = rs_cli_usage_error(verb, "--from DIR and --to DIR are both needed");
        return -1;
    }
    return 0;
}

static int run_collect(const rs_cli_verb *verb, int argc, char **argv)
{
    rs_collect_args a;
    int code = RS_EXIT_OK;
    if (rs_collect_parse(verb, argc, argv, &a, &code) != 0) return code;
    /* the program beside this executable (the build folder, or the installed bin folder) */
    char self[PATH_MAX], prog[PATH_MAX + sizeof RS_COLLECT_PROGRAM + 1];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || (size_t)n >= sizeof self - 1) {
        fprintf(stderr, "ranksnap collect: cannot find where ranksnap is (/proc/self/exe): %s\n",
                n < 0 ? strerror(errno) : n == 0 ? "empty" : "a path too long");
        return RS_EXIT_FAILED;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) *slash = '\0';
    snprintf(prog, sizeof prog, "%s/%s", slash ? self : ".", RS_COLLECT_PROGRAM);
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args) {
        fprintf(stderr, "ranksnap collect: out of memory\n");
        return RS_EXIT_FAILED;
    }
    args[0] = prog;
    for (int i = 0; i < argc; i++) args[i + 1] = argv[i];
    fflush(NULL);
    execv(prog, args);
    fprintf(stderr, "ranksnap collect: cannot run %s: %s (it is installed beside ranksnap when "
                    "ranksnap is built with MPI)\n", prog, strerror(errno));
    free(args);
    return RS_EXIT_FAILED;
}

const rs_cli_verb rs_cmd_collect = {
    "collect", "--from DIR --to DIR [--json]",
    "under mpirun, one rank per node: gather node-local snapshots to rank 0 and report",
    "  run under mpirun, one rank per node (--map-by ppr:1:node): every rank sends the\n"
    "  rank files of --from (rank-*.rsnap, .ring, and PyTorch jobs' .pickle) to rank 0,\n"
    "  which writes them into --to and prints the report over them (--json: report.json\n"
    "  instead of the text)\n",
    run_collect};
