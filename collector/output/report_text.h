/*
 * report_text.h — the comparison in words: a table of ranks, then the verdicts in plain words
 * (report.txt, and what rank 0 prints at the end of a range).
 */
#ifndef RANKSNAP_REPORT_TEXT_H
#define RANKSNAP_REPORT_TEXT_H

#include <stdio.h>

#include "compare.h"
#include "ranksnap.h"

ranksnap_status rs_report_text(FILE *out, const rs_compare_result *r);

#endif
