/*
 * cmd_export.h — the `export` verb (cmd_export.c).
 */
#ifndef RANKSNAP_CMD_EXPORT_H
#define RANKSNAP_CMD_EXPORT_H

#include "cli.h"

extern const rs_cli_verb rs_cmd_export;

#endif
