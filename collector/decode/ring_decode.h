/* ring_decode.h — recovering a rank from the ring file it left behind (ring_decode.c). */
#ifndef RANKSNAP_RING_DECODE_H
#define RANKSNAP_RING_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "snapshot.h"

/* `len` bytes of a ring file; errors start with `name`. The result has complete = 0. */
ranksnap_status rs_ring_decode(const void *buf, size_t len, const char *name, rs_snap **out);
/* The header's checks, which need its bytes only; *need = the bytes the header describes. */
ranksnap_status rs_ring_header_need(const void *buf, size_t len, const char *name, uint64_t *need);
/* Reads and decodes `path`; *closed (may be NULL) tells whether the rank finalized cleanly. */
ranksnap_status rs_ring_decode_file(const char *path, rs_snap **out, int *closed);

#endif
