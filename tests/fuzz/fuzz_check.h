/*
 * fuzz_check.h — what every fuzz target asks of a decoder's answer: a format error with nothing
 * handed out, or a snapshot that passes the model's one check (collector/model/snap_check.h)
 * and summarises. Anything else aborts, which libFuzzer reports with the input.
 */
#ifndef RANKSNAP_FUZZ_CHECK_H
#define RANKSNAP_FUZZ_CHECK_H

#include <stdlib.h>

#include "snap_check.h"
#include "summary.h"

/* Checks the decoder's status and snapshot, then frees the snapshot. */
static inline void fuzz_check_decoded(ranksnap_status st, rs_snap *s)
{
    if (st == RANKSNAP_OK ? (s == NULL || rs_snap_check(s, "fuzz") != RANKSNAP_OK)
                          : (st != RANKSNAP_ERR_FORMAT || s != NULL))
        abort();
    if (s) {
        rs_summary sum;
        rs_summary_of(s, &sum);
    }
    rs_snap_free(s);
}

#endif
