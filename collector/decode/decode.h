/*
 * decode.h — opening a snapshot file of any kind the command reads.
 */
#ifndef RANKSNAP_DECODE_H
#define RANKSNAP_DECODE_H

#include "ranksnap.h"
#include "snapshot.h"
#include "torch_decode.h"

/* Reads a snapshot of any kind: a file named *.ring is a dead rank's ring (ring_decode.h);
 * otherwise the content tells a pickle, which gets `opts` (NULL: the defaults), from a .rsnap
 * file, which keeps its own rank. What the `ranksnap` verbs use to open a file. */
ranksnap_status rs_decode_file(const char *path, const rs_torch_opts *opts, rs_snap **out);
/* The same, also saying whether it was a ring (*is_ring) and whether that ring's rank finalized
 * cleanly (*closed: its .rsnap says more). Either pointer may be NULL. */
ranksnap_status rs_decode_file_ex(const char *path, const rs_torch_opts *opts, rs_snap **out,
                                  int *is_ring, int *closed);
/* rs_decode_file_ex; with `totals_only` a .rsnap is read without its history, segments and
 * symbol tables (rs_rsnap_decode_totals). Pickles and rings are read whole: their peaks are
 * known only from their histories. */
ranksnap_status rs_decode_file_how(const char *path, const rs_torch_opts *opts, int totals_only,
                                   rs_snap **out, int *is_ring, int *closed);
/* Whether the first bytes of `path`'s content (`p`, `len`) are those of a file the command reads:
 * a ring's header for *.ring, else a pickle's or a snapshot's first byte. For a reader that moves
 * files without decoding them (`ranksnap collect`): an error naming the file and what it holds
 * instead, before more than the header is read. */
ranksnap_status rs_decode_check_head(const char *path, const void *p, size_t len);

/* 1 for a path named *.ring. */
int rs_decode_is_ring_path(const char *path);

/* 1 when the file starts like a pickle (rs_torch_is_pickle), 0 otherwise or when it cannot be read
 * (reading it then says why). */
int rs_decode_is_pickle_file(const char *path);

/* The rank number in a file name, as PyTorch users name their dumps: "snapshot_rank3.pickle",
 * "rank-3.pickle", "rank_03.pickle", "oom_rank-3_gpt2.pickle" (the last "rank" followed by an
 * optional '-' or '_' and digits, in the base name, any case). 0 and *rank set when found, -1
 * when the name holds none. */
int rs_decode_rank_from_name(const char *path, int *rank);

#endif
