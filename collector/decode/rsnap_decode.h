/*
 * rsnap_decode.h — decoding .rsnap files (docs/FORMAT.md) into rs_snap.
 *
 * Input is untrusted: every size, type and index is checked, nothing is read past the buffer, no
 * allocation is larger than the input could describe. Every failure is RANKSNAP_ERR_FORMAT (or
 * RANKSNAP_ERR_IO for the file itself) with ranksnap_last_error() naming the file and what was
 * wrong, e.g. "rank-00003.rsnap: history.addr has 10 entries, history.count says 12".
 */
#ifndef RANKSNAP_RSNAP_DECODE_H
#define RANKSNAP_RSNAP_DECODE_H

#include <stddef.h>

#include "ranksnap.h"
#include "snapshot.h"

/* Decodes `len` bytes; `name_for_errors` (a path, "rank 3", ...) starts every error message.
 * On success *out is a new snapshot the caller frees with rs_snap_free; on failure *out is NULL. */
ranksnap_status rs_rsnap_decode(const void *buf, size_t len, const char *name_for_errors,
                           rs_snap **out);

/* The same checks of the whole file's structure and of what it reads, but only the identity,
 * devices, settings, time, totals, the OOM record (its stack id not kept) and the communicators
 * are read (rs_snap.totals_only): the history, the segments and the symbol tables, nearly all of
 * a file, are skipped. What a comparison of peaks alone needs, at a third of the decode. */
ranksnap_status rs_rsnap_decode_totals(const void *buf, size_t len, const char *name_for_errors,
                                       rs_snap **out);

/* Whether `len` bytes (at least the first) start as a snapshot does; the error names what they
 * are instead, as rs_rsnap_decode's would. */
ranksnap_status rs_rsnap_check_head(const void *buf, size_t len, const char *name_for_errors);

/* Reads the whole file and decodes it. */
ranksnap_status rs_rsnap_decode_file(const char *path, rs_snap **out);


#endif
