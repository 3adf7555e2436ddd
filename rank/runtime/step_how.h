/*
 * step_how.h — the words a snapshot says about how a rank's steps were numbered (step_how.c).
 */
#ifndef RANKSNAP_STEP_HOW_H
#define RANKSNAP_STEP_HOW_H

#include "state.h"

/* How this rank's steps were numbered, or why none were found, as the snapshot says it
 * (time.steps_from): rt->step_how, refreshed with the detector's counts as they are now. */
const char *rs_steps_how(rs_runtime *rt);

#endif
