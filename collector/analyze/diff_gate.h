/*
 * diff_gate.h — the conditions `ranksnap diff --fail-on` stops a pipeline on, and which ranks,
 * roles or jobs of a diff (diff.h) exceed them.
 *
 * A condition is MEASURE OP LIMIT:
 *   peak>5%  reserved>1GiB  outside>512MiB   the growth of a rank's, a role's or the job's peak
 *                                            allocated, peak reserved or outside memory from
 *                                            before to after: a share of before, or bytes
 *   headroom<4GiB  headroom<10%              after's headroom (capacity - peak): bytes, or a
 *                                            share of the capacity
 *   oom                                      a rank of after ran out of memory
 * Sizes as RANKSNAP_MEMORY_LIMIT takes them (16GiB, 512MiB, 1.5GB, 1073741824). Several
 * conditions are given as several flags or separated by commas.
 */
#ifndef RANKSNAP_DIFF_GATE_H
#define RANKSNAP_DIFF_GATE_H

#include <stddef.h>
#include <stdint.h>

#include "diff.h"
#include "ranksnap.h"

enum { RS_GATE_PEAK = 0, RS_GATE_RESERVED, RS_GATE_OUTSIDE, RS_GATE_HEADROOM, RS_GATE_OOM };
/* What a hit is about. */
enum { RS_GATE_ON_RANK = 0, RS_GATE_ON_ROLE, RS_GATE_ON_JOB };

typedef struct rs_diff_gate_cond {
    char text[64];     /* as given, trimmed */
    int measure;       /* RS_GATE_* */
    int is_pct;        /* the limit is a percentage */
    double pct;
    uint64_t bytes;
    /* after rs_diff_gate_check */
    size_t n_hits;     /* ranks, roles and the job past the limit */
    int has_worst;     /* something was measured */
    int worst_on;      /* RS_GATE_ON_*: the largest growth, or the smallest headroom */
    size_t worst_index; /* its pair or role index */
    double worst_value; /* percent or bytes, as the limit */
    size_t n_unknown;  /* headroom: ranks and roles whose capacity is not known */
} rs_diff_gate_cond;

/* One rank, role or job past a condition's limit. */
typedef struct rs_diff_gate_hit {
    size_t cond;
    int on;            /* RS_GATE_ON_* */
    size_t index;      /* its pair (rs_diff_result.pairs) or role (groups); 0 for the job */
    double value;      /* the growth in percent or bytes, or the headroom, as the limit */
} rs_diff_gate_hit;

typedef struct rs_diff_gate {
    size_t n;
    rs_diff_gate_cond *c;
    size_t n_hits;
    rs_diff_gate_hit *hits;
    int checked;       /* rs_diff_gate_check ran */
} rs_diff_gate;

/* Adds the conditions of `spec` (one, or several separated by commas).
 * RANKSNAP_ERR_INVALID_ARGUMENT, with a message that names the condition and what was expected,
 * when one does not parse. */
ranksnap_status rs_diff_gate_parse(rs_diff_gate *g, const char *spec);

/* Checks every condition against `r`. RANKSNAP_ERR_INVALID_ARGUMENT, with a message, when a
 * condition cannot be checked at all (headroom where no capacity of after is known). */
ranksnap_status rs_diff_gate_check(rs_diff_gate *g, const rs_diff_result *r);

/* 1 when a condition was exceeded. */
int rs_diff_gate_failed(const rs_diff_gate *g);

void rs_diff_gate_free(rs_diff_gate *g);

/* "peak", "reserved", ...: the measure's name. */
const char *rs_diff_gate_measure_name(int measure);

#endif
