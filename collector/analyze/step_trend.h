/*
 * step_trend.h — how one rank's per-step peaks part from another's (summary.h's step series):
 * the first step where they differ, and whether the difference grows step after step (a leak)
 * or stays a constant offset. The comparison dates a divergent rank against its reference with
 * it (compare.h); `ranksnap diff` dates a rank of one run against the same rank of another
 * (diff.h).
 */
#ifndef RANKSNAP_STEP_TREND_H
#define RANKSNAP_STEP_TREND_H

#include <stdint.h>

#include "summary.h"

typedef struct rs_step_trend {
    int64_t first_step;     /* offset: the first step past the threshold; growth: the step it
                               started; -1 when the series cannot tell */
    int growth;             /* 1: a significant per-step slope */
    double growth_per_step; /* growth: bytes per step of the difference, in its direction */
    double growth_t;        /* growth: the slope's t statistic against the residual noise */
    int64_t last_step;      /* the last step both series have, -1 without a series */
    int n_common;           /* steps both series have */
    uint64_t capacity;      /* r's memory limit, else its device's capacity; 0 unknown */
    int capacity_is_limit;  /* 1: `capacity` is the memory limit */
    int64_t exhaust_step;   /* growth: the step at which r's peak would reach `capacity` at its
                               own rate, -1 when unknown */
} rs_step_trend;

/* The step peak of `s` in the bucket that holds step number `step`, or RS_SUMMARY_NO_DATA. */
uint64_t rs_step_trend_peak_at(const rs_summary *s, int64_t step);

/* r's series against ref's, over the steps both recorded: `sign` +1 when r is above ref, -1
 * below; `dev` the distance of their peaks in bytes; `pct` the share of ref's step peak a step's
 * difference must pass to count (the rules: compare.c's opening comment). */
void rs_step_trend_of(const rs_summary *r, const rs_summary *ref, int sign, uint64_t dev, double pct,
                      rs_step_trend *out);

#endif
