/*
 * report_json.h — the comparison as report.json (schema in docs/FORMAT.md).
 */
#ifndef RANKSNAP_REPORT_JSON_H
#define RANKSNAP_REPORT_JSON_H

#include <stdio.h>

#include "compare.h"
#include "ranksnap.h"

ranksnap_status rs_report_json(FILE *out, const rs_compare_result *r);

#endif
