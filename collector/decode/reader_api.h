/*
 * reader_api.h — the C API of libranksnap_reader.so, the pickle decoder a rank loads on demand.
 *
 * The preloaded libranksnap.so carries no pickle decoder (docs/ARCHITECTURE.md): a C program's
 * ranks never need one. A PyTorch job's ranks do, at the end of a recorded range, to summarise
 * their own pickle and, on rank 0, to read the ranks' pickles it gathered; the runtime then
 * dlopens this library, which sits next to libranksnap.so (rank/runtime/reader_lib.c). It
 * exports these functions only.
 *
 * The snapshot crosses between the two libraries as the rs_snap of collector/model/snapshot.h,
 * built by the same sources of the same build with the same malloc; the ABI number says so and
 * the runtime refuses a library whose number differs from its own.
 */
#ifndef RANKSNAP_READER_API_H
#define RANKSNAP_READER_API_H

#include <stddef.h>

#include "ranksnap.h"
#include "snapshot.h"

/* Bumped when rs_snap or these signatures change; the size of rs_snap is folded in too. */
#define RS_READER_ABI_VERSION 1
#define RS_READER_ABI ((int)(RS_READER_ABI_VERSION * 100000 + (int)sizeof(rs_snap)))

#define RS_READER_API __attribute__((visibility("default")))

typedef int (*rs_reader_abi_fn)(void);
typedef ranksnap_status (*rs_reader_decode_fn)(const void *buf, size_t len, const char *name,
                                               rs_snap **out);
typedef const char *(*rs_reader_last_error_fn)(void);

/* RS_READER_ABI as this library was built. */
RS_READER_API int ranksnap_reader_abi(void);
/* Decodes a PyTorch snapshot pickle (its "ranksnap" key gives the rank) or a .rsnap, told apart
 * by their first bytes; `name` starts every error message. *out is freed with rs_snap_free. */
RS_READER_API ranksnap_status ranksnap_reader_decode(const void *buf, size_t len, const char *name,
                                                     rs_snap **out);
/* The detail of this thread's last failure in the library (its errors are its own). */
RS_READER_API const char *ranksnap_reader_last_error(void);

#endif
