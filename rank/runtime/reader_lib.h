/*
 * reader_lib.h — libranksnap_reader.so, the pickle decoder a rank of a PyTorch job loads at the
 * end of a recorded range (reader_api.h says why it is a library of its own).
 */
#ifndef RANKSNAP_READER_LIB_H
#define RANKSNAP_READER_LIB_H

#include <stddef.h>

#include "ranksnap.h"
#include "snapshot.h"

/* Decodes a snapshot's bytes (a PyTorch pickle or a .rsnap) with the reader library, loaded the
 * first time from the folder of libranksnap.so, else from the loader's search path. The
 * signature of rs_gather_decode_fn. RANKSNAP_ERR_UNSUPPORTED naming what was looked for when the
 * library cannot be loaded or is of another build. */
ranksnap_status rs_reader_lib_decode(const char *buf, size_t len, const char *name, rs_snap **out);

#endif
