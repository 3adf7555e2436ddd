/*
 * cmd_replay.h — the `replay` verb (cmd_replay.c).
 */
#ifndef RANKSNAP_CMD_REPLAY_H
#define RANKSNAP_CMD_REPLAY_H

#include "cli.h"

extern const rs_cli_verb rs_cmd_replay;

#endif
