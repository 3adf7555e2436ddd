/*
 * walk_records.h — the check that a walk's first-pass records (walk.h: the reserved level and
 * step at the peak, the levels and step at the last OOM, each step run's highest allocated
 * level) are what walking every event finds; shared by the walk's own tests and those over the
 * real pickles.
 */
#ifndef RANKSNAP_TEST_WALK_RECORDS_H
#define RANKSNAP_TEST_WALK_RECORDS_H

#include <stdint.h>
#include <stdlib.h>

#include "walk.h"

/* NULL when they agree, or when the levels are not exact (no records to read: the readers walk);
 * else what differs. *exact says which. */
static inline const char *walk_records_differ(const rs_snap *s, int *exact)
{
    rs_walk w;
    *exact = 0;
    if (rs_walk_init(&w, s) != RANKSNAP_OK) return "the walk could not be made";
    const rs_snap_history *h = &s->history;
    const char *bad = NULL;
    *exact = rs_walk_levels_exact(&w);
    uint64_t *peak = malloc((h->count ? h->count : 1) * sizeof *peak);
    if (*exact && peak) {
        int64_t step = -1, peak_step = -1, oom_step = -1;
        uint64_t reserved_at_peak = w.start_reserved, oom_a = 0, oom_r = 0;
        size_t runs = 0;
        rs_walk_change c;
        for (uint64_t i = 0; i < h->count; i++) {
            rs_walk_event(&w, &c);
            if (h->action[i] == RS_ACT_STEP) {
                step = (int64_t)h->size[i];
                peak[runs++] = w.allocated;
            } else if (runs && w.allocated > peak[runs - 1]) {
                peak[runs - 1] = w.allocated;
            }
            if ((int64_t)i == w.peak_event) reserved_at_peak = w.reserved, peak_step = step;
            if ((int64_t)i == w.last_oom) oom_a = w.allocated, oom_r = w.reserved, oom_step = step;
        }
        if (runs != w.n_runs) bad = "the number of step runs";
        for (size_t k = 0, r = 0; !bad && k < h->count; k++) {
            if (h->action[k] != RS_ACT_STEP) continue;
            if (w.run_step[r] != (int64_t)h->size[k] ||
                w.start_allocated + (uint64_t)w.run_peak[r] != peak[r])
                bad = "a step run's step or highest level";
            r++;
        }
        if (!bad && w.peak_event >= 0 &&
            (w.start_reserved + (uint64_t)w.rel_reserved_at_peak != reserved_at_peak ||
             w.peak_step != peak_step))
            bad = "the reserved level or the step at the peak";
        if (!bad && w.last_oom >= 0 &&
            (w.start_allocated + (uint64_t)w.rel_allocated_at_oom != oom_a ||
             w.start_reserved + (uint64_t)w.rel_reserved_at_oom != oom_r || w.oom_step != oom_step))
            bad = "the levels or the step at the last OOM";
    } else if (*exact) {
        bad = "no memory for the check";
    }
    free(peak);
    rs_walk_free(&w);
    return bad;
}

#endif
