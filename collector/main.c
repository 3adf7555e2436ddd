/*
 * main.c — the `ranksnap` command: global flags and a table of verbs.
 *
 * `ranksnap VERB ARGS...` looks VERB up in rs_verbs and calls its function with the arguments
 * after it; a new verb (report, export, replay, trigger, collect) is one function and one row.
 * Exit codes: 0 success, 1 a file or the work on it failed (the others are still processed),
 * 2 a usage error (unknown verb or flag, missing argument), as most Unix tools do.
 */
#include <stdio.h>
#include <string.h>

#include <msgpack.h>

#include "options.h"
#include "ranksnap.h"
#include "read_rsnap.h"
#include "summary.h"

enum { RS_EXIT_OK = 0, RS_EXIT_FAILED = 1, RS_EXIT_USAGE = 2 };

typedef struct rs_verb {
    const char *name;
    const char *args;    /* as shown in the usage line */
    const char *summary; /* one line for `ranksnap --help` */
    int (*run)(const struct rs_verb *verb, int argc, char **argv);
} rs_verb;

static void verb_usage(FILE *out, const rs_verb *verb)
{
    fprintf(out, "usage: ranksnap %s %s\n  %s\n", verb->name, verb->args, verb->summary);
}

/* Prints the failure of `path`, naming the file once whether or not the detail already does. */
static void report_failure(const char *path, ranksnap_status st)
{
    const char *detail = ranksnap_last_error();
    if (!detail[0]) detail = ranksnap_strerror(st);
    if (strstr(detail, path))
        fprintf(stderr, "ranksnap: %s\n", detail);
    else
        fprintf(stderr, "ranksnap: %s: %s\n", path, detail);
}

/* Collects the file operands of a verb that takes no flags yet: "--" ends the flags, "-h" and
 * "--help" print the verb's usage, any other "-x" is a usage error. Returns -1 when the caller
 * should exit with *code. Operands are compacted to the front of argv; their count is returned. */
static int file_operands(const rs_verb *verb, int argc, char **argv, int *code)
{
    int n = 0, flags_done = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!flags_done && a[0] == '-' && a[1] != '\0') {
            if (strcmp(a, "--") == 0) {
                flags_done = 1;
                continue;
            }
            if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
                verb_usage(stdout, verb);
                *code = RS_EXIT_OK;
                return -1;
            }
            fprintf(stderr, "ranksnap %s: unknown option '%s'\n", verb->name, a);
            verb_usage(stderr, verb);
            *code = RS_EXIT_USAGE;
            return -1;
        }
        argv[n++] = argv[i];
    }
    if (n == 0) {
        fprintf(stderr, "ranksnap %s: expected at least one FILE\n", verb->name);
        verb_usage(stderr, verb);
        *code = RS_EXIT_USAGE;
        return -1;
    }
    return n;
}

static int run_summary(const rs_verb *verb, int argc, char **argv)
{
    int code = RS_EXIT_OK;
    int n = file_operands(verb, argc, argv, &code);
    if (n < 0) return code;
    for (int i = 0; i < n; i++) {
        rsn_snapshot *snap = NULL;
        ranksnap_status st = rsn_read_file(argv[i], &snap);
        if (st == RANKSNAP_OK) st = rsn_print_summary(stdout, snap, argv[i]);
        rsn_free(snap);
        if (st != RANKSNAP_OK) {
            report_failure(argv[i], st);
            code = RS_EXIT_FAILED;
        }
    }
    return code;
}

static const rs_verb rs_verbs[] = {
    {"summary", "FILE...", "print identity, totals and peaks of each .rsnap snapshot",
     run_summary},
};

#define RS_N_VERBS (sizeof rs_verbs / sizeof rs_verbs[0])

static void usage(FILE *out)
{
    fprintf(out, "usage: ranksnap [--help | --version | --help-env]\n"
                 "       ranksnap VERB [ARGS...]\n\n"
                 "Compare the GPU memory of the ranks of an MPI job from their ranksnap "
                 "snapshots.\n\nverbs:\n");
    for (size_t i = 0; i < RS_N_VERBS; i++)
        fprintf(out, "  %-10s %-12s %s\n", rs_verbs[i].name, rs_verbs[i].args,
                rs_verbs[i].summary);
    fprintf(out, "\noptions:\n"
                 "  -h, --help     this text (ranksnap VERB --help for a verb)\n"
                 "  -V, --version  versions of ranksnap and msgpack-c\n"
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
        printf("ranksnap %s\nmsgpack-c %s\n", ranksnap_version(), msgpack_version());
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
    for (size_t i = 0; i < RS_N_VERBS; i++)
        if (strcmp(first, rs_verbs[i].name) == 0)
            return rs_verbs[i].run(&rs_verbs[i], argc - 2, argv + 2);
    fprintf(stderr, "ranksnap: unknown verb '%s' (see ranksnap --help)\n", first);
    return RS_EXIT_USAGE;
}
