/*
 * torch_decode.h — PyTorch memory snapshots (torch.cuda.memory._dump_snapshot pickles) decoded
 * into rs_snap, so that `ranksnap report` compares them as it compares .rsnap files.
 *
 * The mapping (docs/PYTORCH.md): segments and blocks as they are; one device's trace as the
 * history (segment_map/segment_unmap as segment_alloc/segment_free, `snapshot` entries left out,
 * `oom` as an oom event and the snapshot's OOM record); frames interned into the frame and stack
 * tables; totals replayed from the trace and the final state; and training steps, which PyTorch
 * does not record, inferred from the repeating allocation pattern (steps_infer.h). Errors are
 * RANKSNAP_ERR_FORMAT naming the file, the byte offset and the field, e.g.
 * "snap.pickle: offset 5512: segments[3].blocks[0].state: expected a str, found an int".
 */
#ifndef RANKSNAP_TORCH_DECODE_H
#define RANKSNAP_TORCH_DECODE_H

#include <stddef.h>

#include "ranksnap.h"
#include "snapshot.h"

typedef struct rs_torch_opts {
    int rank;        /* the snapshot's rank (PyTorch does not record one); >= 0 */
    int device;      /* which device's trace and segments; -1: the device the segments are on,
                      * else the longest trace */
    int infer_steps; /* 1: insert RS_ACT_STEP events where the iterations are found */
    int stream;      /* 1: the trace taken as the pickle streams it (pickle.h); 0: read from the
                      * whole value tree, for tests that compare the two ways */
    int read_entries; /* with stream 1: 1: trace entries read from their bytes where they can be
                       * (torch_trace.h); 0: all made as values, for tests that compare */
    size_t *read_count; /* not NULL: set to how many entries were read from their bytes */
} rs_torch_opts;

/* rank 0, device -1, infer_steps 1, stream 1, read_entries 1, read_count NULL. */
void rs_torch_opts_default(rs_torch_opts *o);

/* 1 when `buf` starts like a pickle of protocol 2 to 5 (PROTO 0x80 and the protocol), which no
 * .rsnap file does (its msgpack map would be an empty one, 0x80, followed by more bytes). */
int rs_torch_is_pickle(const void *buf, size_t len);

/* Decodes a PyTorch snapshot pickle; `name` starts every error message. On success *out is a new
 * snapshot (free with rs_snap_free); on failure NULL. */
ranksnap_status rs_torch_decode(const void *buf, size_t len, const char *name,
                                  const rs_torch_opts *opts, rs_snap **out);

/* Reads the whole file and decodes it with the default options and `rank`. */
ranksnap_status rs_torch_decode_file(const char *path, int rank, rs_snap **out);

#endif
