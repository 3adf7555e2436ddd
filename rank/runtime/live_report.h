/*
 * live_report.h — the end of a recorded range (live_report.c).
 */
#ifndef RANKSNAP_LIVE_REPORT_H
#define RANKSNAP_LIVE_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "state.h"

/* At the end of a recorded range (and at finalize for an open one), on every rank at the same
 * step: write this rank's file, gather to rank 0, and report there. */
ranksnap_status rs_live_report_end_of_range(rs_runtime *rt);

#endif
