/*
 * cmd_report.h — the `report` verb (cmd_report.c).
 */
#ifndef RANKSNAP_CMD_REPORT_H
#define RANKSNAP_CMD_REPORT_H

#include "cli.h"

extern const rs_cli_verb rs_cmd_report;

/* `ranksnap report [--json] DIR`, for verbs that end with a report over a directory (collect). */
int rs_cmd_report_dir(const char *dir, int json);

#endif
