/*
 * cmd_collect.h — the `collect` verb (cmd_collect.c) and what its MPI half, the ranksnap-collect
 * program (collect_main.c), shares with it.
 */
#ifndef RANKSNAP_CMD_COLLECT_H
#define RANKSNAP_CMD_COLLECT_H

#include "cli.h"

extern const rs_cli_verb rs_cmd_collect;

/* The program `ranksnap collect` becomes, next to the `ranksnap` that runs it. */
#define RS_COLLECT_PROGRAM "ranksnap-collect"

typedef struct rs_collect_args {
    const char *from, *to;
    int json;
} rs_collect_args;

/* Parses collect's arguments (those after the verb). 0 when the command should go on; -1 when
 * it should exit with *code (--help answered, or a usage error printed). */
int rs_collect_parse(const rs_cli_verb *verb, int argc, char **argv, rs_collect_args *a, int *code);

#endif
