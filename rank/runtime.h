/* runtime.h — what the rest of rank/ (post-mortem, gather, intercept) needs from the
 * process-wide instance of runtime.c beyond the public API. */
#ifndef RANKSNAP_RUNTIME_H
#define RANKSNAP_RUNTIME_H

#include <stddef.h>

#include "ranksnap.h"

/* RANKSNAP_DIR/rank-RRRRR.rsnap, creating RANKSNAP_DIR (0700) if missing. */
ranksnap_status rs_runtime_default_path(char *buf, size_t n);

/* Writes the snapshot; `complete` = 0 marks one written from a crash path. NULL path = the
 * default path above. */
ranksnap_status rs_runtime_dump(const char *path, int complete);

/* pmpi.c: a wrapped collective completed (RANKSNAP_STEP_ON counts them). */
void rs_runtime_collective_done(const char *name);

#endif
