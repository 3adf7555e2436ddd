/*
 * step_how.c — the words a snapshot (time.steps_from) and the never-reached warning say about how
 * a rank's steps were numbered: the program's own (ranksnap_steps_from: PyTorch's glue says what
 * its steps count), "ranksnap_step", "RANKSNAP_STEP_ON=...", the pattern found from the
 * collectives with its counts, or why none was found and what to set instead. Kept apart from
 * steps.c, which ends ranges and so calls the dump that reads these words.
 */
#include <stdatomic.h>
#include <stdio.h>

#include "step_detect.h"
#include "step_how.h"
#include "steps.h"

/* The detector's counts change with every call: the words are written when read. Skipped,
 * keeping the last words, while a collective's thread feeds the detector. */
const char *rs_steps_how(rs_runtime *rt)
{
    /* the program's own words (ranksnap_steps_from) say what its steps count, or why it has none */
    if (rt->app_how[0] && (rt->step_source == RS_STEPS_APP || rt->step_source == RS_STEPS_NONE))
        return rt->app_how;
    int detected = rt->step_source == RS_STEPS_DETECTED || rt->step_source == RS_STEPS_TENTATIVE;
    int looking = rt->step_source == RS_STEPS_NONE && !rt->step_on_every && !rt->step_detect_off;
    if ((detected || looking) && !atomic_flag_test_and_set_explicit(&rt->step_detect_busy, memory_order_acquire)) {
        char why[sizeof rt->step_how - 16];
        if (detected) rs_step_detect_describe(&rt->step_detect, why, sizeof why);
        else rs_step_detect_explain(&rt->step_detect, why, sizeof why);
        if (detected || rt->step_detect.n > 0)
            snprintf(rt->step_how, sizeof rt->step_how, "%s: %s", detected ? "detected" : "none", why);
        atomic_flag_clear_explicit(&rt->step_detect_busy, memory_order_release);
    }
    return rt->step_how;
}
