/*
 * cmd_summary.h — the `summary` verb (cmd_summary.c).
 */
#ifndef RANKSNAP_CMD_SUMMARY_H
#define RANKSNAP_CMD_SUMMARY_H

#include <stdio.h>

#include "cli.h"
#include "ranksnap.h"
#include "snapshot.h"

/* Identity, device, peaks, counts, the OOM record if any and the ten allocation sites holding
 * the most live bytes. `path` heads the text (NULL: none). RANKSNAP_ERR_IO if `out` failed. */
ranksnap_status rs_cmd_summary_print(FILE *out, const rs_snap *s, const char *path);

extern const rs_cli_verb rs_cmd_summary;

#endif
