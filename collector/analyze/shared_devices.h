/*
 * shared_devices.h — the devices more than one process used, from the ranks' summaries
 * (shared_devices.c).
 *
 * Two ranks on one GPU (a small job, MPS) name the same device UUID; a device NVML listed other
 * processes on is shared too, whoever they are. Each rank's outside figure is its own process's
 * (or says it is not); this is what the reports add so that a reader knows the device's memory
 * was not the rank's alone, and with whom it was shared.
 */
#ifndef RANKSNAP_SHARED_DEVICES_H
#define RANKSNAP_SHARED_DEVICES_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "summary.h"

/* Ranks named per shared device; more are counted. */
#define RS_SHARED_MAX_RANKS 16

typedef struct rs_shared_device {
    uint8_t uuid[16];
    size_t n_ranks;                       /* of the summaries given, on this device */
    int32_t ranks[RS_SHARED_MAX_RANKS];   /* the first of them, in the summaries' order */
    uint32_t processes;                   /* the most processes any of them saw NVML list there,
                                             itself included; 0: none listed */
} rs_shared_device;

/* The devices of sums[0..n) used by several of them or, as NVML listed, by more processes than
 * the one rank: *out (malloc'ed, NULL when none) and *n_out, in the order of their first rank. */
ranksnap_status rs_shared_devices_find(const rs_summary *sums, size_t n, rs_shared_device **out,
                                       size_t *n_out);

#endif
