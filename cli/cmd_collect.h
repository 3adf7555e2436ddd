/*
 * cmd_collect.h — the `collect` verb (cmd_collect.c).
 */
#ifndef RANKSNAP_CMD_COLLECT_H
#define RANKSNAP_CMD_COLLECT_H

#include "cli.h"

extern const rs_cli_verb rs_cmd_collect;

#endif
