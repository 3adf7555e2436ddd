/*
 * rsnap_scan.h — the .rsnap decoder's first pass (rsnap_scan.c): the msgpack structure checked
 * and its maps noted, and the errors every pass reports.
 */
#ifndef RANKSNAP_RSNAP_SCAN_H
#define RANKSNAP_RSNAP_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "rsnap_state.h"

ranksnap_status rs_rd_fail(const dec *d, const char *fmt, ...) RS_PRINTF(2, 3);

ranksnap_status rs_rd_no_memory(const dec *d, const char *what, size_t n);

/* For "the top level is ...". */
const char *rs_rd_type_of_byte(unsigned char b);

/* For "field 'x' must be ..., not ...". */
const char *rs_rd_type_name(unsigned char b);

/* Big-endian length prefix of `n` bytes at *pos. */
int rs_rd_read_be(const dec *d, size_t *pos, unsigned n, uint64_t *v);

/* Sets *end to one past the top-level object. `pending` counts the objects still to read, each
 * of which needs at least one byte: a count beyond the remaining bytes is a truncation (or a
 * lie) caught before anything is allocated for it. */
ranksnap_status rs_rd_scan(dec *d, size_t *end);

#endif
