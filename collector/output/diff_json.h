/*
 * diff_json.h — two runs compared (diff.h) for machines: `ranksnap diff --json`, schema in
 * docs/DIFF.md ("The JSON").
 */
#ifndef RANKSNAP_DIFF_JSON_H
#define RANKSNAP_DIFF_JSON_H

#include <stdio.h>

#include "diff.h"
#include "diff_gate.h"
#include "ranksnap.h"

/* `gate` NULL: no --fail-on ("gate": null). */
ranksnap_status rs_diff_json(FILE *out, const rs_diff_result *r, const rs_diff_gate *gate);

#endif
