/*
 * cmd_diff.h — the `diff` verb (cmd_diff.c).
 */
#ifndef RANKSNAP_CMD_DIFF_H
#define RANKSNAP_CMD_DIFF_H

#include "cli.h"

extern const rs_cli_verb rs_cmd_diff;

#endif
