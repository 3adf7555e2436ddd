/*
 * report_json.h — the comparison as report.json (schema in docs/FORMAT.md).
 */
#ifndef RANKSNAP_REPORT_JSON_H
#define RANKSNAP_REPORT_JSON_H

#include <stdio.h>

#include "compare.h"
#include "ranksnap.h"

ranksnap_status rs_report_json(FILE *out, const rs_compare_result *r);

/* One rank's object of report.json's "ranks" (its summary: peaks, step peaks, private pools,
 * outside memory and its device), with its role's label when `role` is not NULL and its largest
 * private pool when `pool` names one (NULL or function "": none), and why it has no data when
 * `no_data` (endings.h); what `ranksnap diff`'s JSON shows of each side. */
void rs_report_json_rank(FILE *f, const rs_summary *s, const char *role, const rs_site *pool,
                         int no_data);

#endif
