/*
 * steps.h — steps, recorded ranges and annotations (steps.c).
 */
#ifndef RANKSNAP_STEPS_H
#define RANKSNAP_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "state.h"

/* Who numbers a rank's steps (rs_runtime.step_source). */
typedef enum rs_step_source {
    RS_STEPS_NONE = 0,  /* nothing yet */
    RS_STEPS_APP,       /* the program: ranksnap_step (and PyTorch's glue) */
    RS_STEPS_STEP_ON,   /* RANKSNAP_STEP_ON=NAME:N */
    RS_STEPS_DETECTED,  /* the period of the collectives (step_detect.c) */
    RS_STEPS_TENTATIVE  /* a short period guessed before it can be confirmed (step_detect.c):
                         * a range opened on it is kept only once the pattern found agrees */
} rs_step_source;

/* The wrappers (rank/intercept/pmpi.c, nccl.c) report each completed collective with its count,
 * datatype and root or op (0 where the call has none). RANKSNAP_STEP_ON=NAME:N makes every N-th
 * call of NAME a step boundary, numbered from 0; without it, steps are found from the calls'
 * period until the program calls ranksnap_step (RANKSNAP_STEP_ON=none: never). */
void rs_steps_collective_done(const char *name, uint64_t count, uint64_t datatype, uint64_t extra);

/* Where the last range ends when closed at step `at`: `at`, or one past the highest step the
 * range saw when the numbers went back, never before its beginning. Allocator lock held. */
int64_t rs_steps_range_end(const rs_runtime *rt, int64_t at);

/* The thread that starts and stops time:A:B ranges; stop joins it. */
ranksnap_status rs_steps_timer_start(rs_runtime *rt);
void rs_steps_timer_stop(rs_runtime *rt);

#endif
