/*
 * dump.h — this rank's snapshot on disk (dump.c).
 */
#ifndef RANKSNAP_DUMP_H
#define RANKSNAP_DUMP_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "state.h"

/* Creates RANKSNAP_DIR (0700, with its parents) when missing; refuses a symbolic link, a
 * non-directory and a directory of another user. */
ranksnap_status rs_dump_ensure_dir(const char *dir);
/* RANKSNAP_DIR/rank-RRRRR.rsnap, creating RANKSNAP_DIR if missing. */
ranksnap_status rs_dump_default_path(char *buf, size_t n);
/* Encodes this rank's snapshot into a malloc'ed buffer: state, history and stacks taken at one
 * instant under the allocator lock. `complete` 0 marks one written from a crash path. */
ranksnap_status rs_dump_encode(rs_runtime *rt, int complete, char **out, size_t *out_len);
/* Writes the snapshot to `path` (NULL: the default path); `complete` 0 marks a crash path's,
 * which skips the fsyncs. */
ranksnap_status rs_dump_write(const char *path, int complete);
/* Before an OOM error goes back to the program: RANKSNAP_ON_OOM's dump (and abort). */
void rs_dump_after_oom(rs_runtime *rt);
/* The post-mortem dumper thread's work on a fatal signal (rank/runtime/postmortem.h). */
void rs_dump_on_signal(int sig);

#endif
