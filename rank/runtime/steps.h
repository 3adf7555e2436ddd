/*
 * steps.h — steps, recorded ranges and annotations (steps.c).
 */
#ifndef RANKSNAP_STEPS_H
#define RANKSNAP_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "state.h"

/* RANKSNAP_STEP_ON: the wrappers (rank/intercept/pmpi.c, nccl.c) report each completed call of a
 * wrapped collective; every N-th call of the configured one is a step boundary, numbered from 0. */
void rs_steps_collective_done(const char *name);

/* The thread that starts and stops time:A:B ranges; stop joins it. */
ranksnap_status rs_steps_timer_start(rs_runtime *rt);
void rs_steps_timer_stop(rs_runtime *rt);

#endif
