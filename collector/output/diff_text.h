/*
 * diff_text.h — two runs compared (diff.h), told to a person: how the ranks were paired, a table
 * of the paired ranks and one of the roles, what changed and why, and the gate (diff_gate.h).
 */
#ifndef RANKSNAP_DIFF_TEXT_H
#define RANKSNAP_DIFF_TEXT_H

#include <stdio.h>

#include "diff.h"
#include "diff_gate.h"
#include "ranksnap.h"

/* `gate` NULL: no --fail-on. */
ranksnap_status rs_diff_text(FILE *out, const rs_diff_result *r, const rs_diff_gate *gate);

/* How the reports name what a gate's hit is about: "rank 5", "rank 5 (rank 3 before)",
 * "role pp=2", "the job". */
void rs_diff_text_name_hit(char *buf, size_t n, const rs_diff_result *r, int on, size_t index);

#endif
