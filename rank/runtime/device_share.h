/*
 * device_share.h — this process's own device memory, and the other processes on its device, as
 * NVML lists them (device_share.c).
 *
 * The CUDA runtime's free and total bytes are the device's: on a device several processes use
 * (two ranks of a small job on one GPU, MPS, a neighbour's job) its used bytes are theirs
 * together. NVML lists each process with a context on the device and what it holds, which is how
 * a rank's own figure is told apart from theirs.
 */
#ifndef RANKSNAP_DEVICE_SHARE_H
#define RANKSNAP_DEVICE_SHARE_H

#include <stddef.h>

#include "snapshot_encode.h"

/* What NVML lists on the device `uuid` ("GPU-…", as the backend names it): `out`; returns
 * RS_OUTSIDE_WHY_UNSAID when this process's own figure is among it (out->own_known), else why not
 * (rs_outside_why: NVML missing or refusing, the process not found under its pid, no figure
 * given), with NVML's own words in why[why_n]. NVML is loaded from `library` at the first call
 * ("none": never), once for the process. Never fails: what is not known is said. */
int rs_device_share_query(const char *library, const char *uuid, rs_device_share *out, char *why,
                          size_t why_n);

#endif
