/*
 * report.h — the comparison in words: the text report (a table of ranks, then the verdicts in
 * plain words) and the JSON report (schema in docs/FORMAT.md). report_html.h draws it.
 */
#ifndef RANKSNAP_REPORT_H
#define RANKSNAP_REPORT_H

#include <stdio.h>

#include "compare.h"
#include "ranksnap.h"

/* The text report (a table of ranks, then the verdicts in plain words) and the JSON report
 * (schema in docs/FORMAT.md). */
ranksnap_status rs_report_text(FILE *out, const rs_compare_result *r);
ranksnap_status rs_report_json(FILE *out, const rs_compare_result *r);

#endif
