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

/* How every text report writes its pieces (`ranksnap diff`'s too): bytes as PyTorch writes them,
 * a signed change ("+32.00 MiB"), a share ("42%", "5.3%": whole percents once they read that
 * way; the sign is the caller's), and a site as its path with its held note. */
void rs_report_text_bytes(FILE *out, uint64_t b);
void rs_report_text_signed_bytes(FILE *out, int64_t b);
void rs_report_text_pct(FILE *out, double pct);
void rs_report_text_site(FILE *out, const rs_compare_site *s);

#endif
