/*
 * cli.h — what every verb of the `ranksnap` command shares: its row in the verb table (main.c),
 * the exit codes, flag parsing and how a failure is printed.
 *
 * Exit codes: 0 success, 1 a file or the work on it failed (the others are still processed),
 * 2 a usage error (unknown verb or flag, missing argument), as most Unix tools do.
 */
#ifndef RANKSNAP_CLI_H
#define RANKSNAP_CLI_H

#include <stdio.h>

#include "ranksnap.h"
#include "roles.h"

enum { RS_EXIT_OK = 0, RS_EXIT_FAILED = 1, RS_EXIT_USAGE = 2 };

/* A verb: `ranksnap NAME ARGS...` calls run with the arguments after the verb. */
typedef struct rs_cli_verb {
    const char *name;
    const char *args;    /* as shown in the usage line */
    const char *summary; /* one line for `ranksnap --help` */
    const char *details; /* the flags, for `ranksnap VERB --help`; NULL when there are none */
    int (*run)(const struct rs_cli_verb *verb, int argc, char **argv);
} rs_cli_verb;

/* "usage: ranksnap VERB ARGS\n  SUMMARY\n" and the details. */
void rs_cli_usage(FILE *out, const rs_cli_verb *verb);

/* "ranksnap VERB: MESSAGE" and the usage on stderr; returns RS_EXIT_USAGE. */
int rs_cli_usage_error(const rs_cli_verb *verb, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* `--name VALUE`, `--name=VALUE`, or for a short flag `-o VALUE`, at argv[*i]: 1 matched (value
 * set, *i advanced over it), 0 not this flag, -1 the value is missing. Only long flags take `=`,
 * as in getopt_long. */
int rs_cli_flag_value(const char *name, int argc, char **argv, int *i, const char **value);

/* 0 when `s` is a whole decimal number from lo to hi (*out set); -1 otherwise (empty, trailing
 * characters, out of range, or too long for a long). */
int rs_cli_number(const char *s, long lo, long hi, long *out);

/* Walks a verb's arguments: an operand (anything not starting with '-', "-" itself, everything
 * after "--") or a flag, with "--" consumed and -h/--help answered (usage on stdout). */
enum { RS_CLI_END = 0, RS_CLI_OPERAND, RS_CLI_FLAG, RS_CLI_HELP };
typedef struct rs_cli_args {
    int argc;
    char **argv;
    int i;          /* index of the argument last returned; flags with values advance it */
    int flags_done;
} rs_cli_args;

void rs_cli_args_init(rs_cli_args *a, int argc, char **argv);
/* The next argument in *arg and what it is; RS_CLI_HELP after printing the verb's usage. */
int rs_cli_next(const rs_cli_verb *verb, rs_cli_args *a, const char **arg);

/* Prints "WHO: PATH: DETAIL" for a failure on `path` (ranksnap_last_error, else the status's
 * text), naming the path once whether or not the detail already does. */
void rs_cli_failure(const char *who, const char *path, ranksnap_status st);

/* Collects the file operands of a verb that takes no flags: "--" ends the flags, "-h" and
 * "--help" print the verb's usage, any other "-x" is a usage error. Returns -1 when the caller
 * should exit with *code. Operands are compacted to the front of argv; their count is returned. */
int rs_cli_file_operands(const rs_cli_verb *verb, int argc, char **argv, int *code);

/* A flag without a value that sets *dst to `value` ("--json" 1, "--no-progress" 0). */
typedef struct rs_cli_switch {
    const char *name;
    int *dst;
    int value;
} rs_cli_switch;
/* 1 when `arg` is one of the n switches (its field set), 0 otherwise. */
int rs_cli_switch_of(const char *arg, const rs_cli_switch *sw, size_t n);

/* `--jobs N` at argv[*i] (1 to max threads): 1 matched (*jobs set), 0 not this flag, -1 after a
 * usage error (*code set). */
int rs_cli_jobs_flag(const rs_cli_verb *verb, int argc, char **argv, int *i, int max, int *jobs,
                     int *code);

/* --out DIR: creates DIR (0700) when it does not exist and writes the n files NAMES[k] there
 * atomically from bufs[k]; -1 after saying why on stderr, naming the flag, the folder or the
 * file. */
int rs_cli_write_files(const char *dir, const char *const *names, char *const *bufs,
                       const size_t *lens, int n);

/* The grouping of ranks into roles (roles.h) that `flag` gave as `value`, else RANKSNAP_GROUPS;
 * out->n_roles 0 when neither says one. -1 after saying why on stderr ("WHO: --groups ..."). */
int rs_cli_groups(const char *who, const char *flag, const char *value, rs_roles *out);

#endif
