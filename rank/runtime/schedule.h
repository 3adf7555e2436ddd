/*
 * schedule.h — which steps (or seconds) are recorded.
 *
 * RANKSNAP_STEPS is parsed once: "10:15" records steps 10..14, "10:15,100:105" two ranges,
 * "10:" from step 10 to the end, "" the whole run, "time:30:40" the seconds 30..40 after init on
 * rank 0's clock. Every rank parses the same string and sees the same step numbers, so the
 * decision "record step n?" is the same everywhere without a message; ranges started by a trigger
 * are added at run time with the start step rank 0 chose (coord.c carries it).
 */
#ifndef RANKSNAP_SCHEDULE_H
#define RANKSNAP_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"

#define RS_SCHEDULE_MAX_RANGES 64

typedef struct rs_range {
    int64_t begin; /* first step (or second) recorded */
    int64_t end;   /* one past the last; -1 = open to the end of the run */
} rs_range;

typedef struct rs_schedule {
    int time_based;    /* ranges are seconds since init on rank 0's clock */
    int whole_run;     /* "" : record from init to finalize */
    size_t n;
    rs_range r[RS_SCHEDULE_MAX_RANGES]; /* sorted by begin, not overlapping */
} rs_schedule;

/* Parses `spec`; a bad one is RANKSNAP_ERR_OPTION naming RANKSNAP_STEPS and what was expected. */
ranksnap_status rs_schedule_parse(const char *spec, rs_schedule *out);

/* 1 if step (or second) `x` lies in a range. */
int rs_schedule_contains(const rs_schedule *s, int64_t x);

/* Adds [begin, end) (a triggered range), merging with overlapping ones. */
ranksnap_status rs_schedule_add(rs_schedule *s, int64_t begin, int64_t end);

#endif
