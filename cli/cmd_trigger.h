/*
 * cmd_trigger.h — the `trigger` verb (cmd_trigger.c).
 */
#ifndef RANKSNAP_CMD_TRIGGER_H
#define RANKSNAP_CMD_TRIGGER_H

#include "cli.h"

extern const rs_cli_verb rs_cmd_trigger;

#endif
