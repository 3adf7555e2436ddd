/*
 * snap_check.h — the one check of the promises rs_snap makes to its readers (snapshot.h).
 *
 * Every decoder (.rsnap, .ring, PyTorch pickle) runs it on what it is about to hand out, and the
 * fuzz targets run it on whatever a decoder accepted, so that "decoded without error" also means
 * "safe to walk": every index in range, every state known, every string there, segments and
 * their blocks in address order.
 */
#ifndef RANKSNAP_SNAP_CHECK_H
#define RANKSNAP_SNAP_CHECK_H

#include "ranksnap.h"
#include "snapshot.h"

/* RANKSNAP_OK, or RANKSNAP_ERR_FORMAT with the detail naming `name` (the file) and the first
 * promise broken, e.g. "rank-00001.ring: history event 12 is an annotation of string 3, but
 * there are 0 strings". */
ranksnap_status rs_snap_check(const rs_snap *s, const char *name);

#endif
