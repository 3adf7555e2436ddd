/*
 * torch_trace.h — the names PyTorch's snapshot dicts use (their keys, a trace entry's actions),
 * and its trace entries read straight from a pickle's bytes (pickle.h: rs_pickle_stream.read).
 *
 * A snapshot's trace is most of its bytes, and pickle.dump writes every entry as the same run of
 * opcodes: its dict, keys that are memo GETs of strings met before, small ints, a GET of its
 * action's name, a new "N/A", a frames list of GETs of frame dicts. rs_torch_trace_read reads
 * such an entry into a rs_torch_entry without the values, the dict or the lookups by key that
 * the value tree needs; an entry laid out in any other way, or holding a value the tree's reader
 * (torch_decode.c) would refuse or look at more closely, it leaves to the pickle machine, which
 * hands it to that reader as a value. Both ways give the same entry.
 */
#ifndef RANKSNAP_TORCH_TRACE_H
#define RANKSNAP_TORCH_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "pickle.h"

/* The keys the reader uses (0: any other, skipped). */
enum {
    F_OTHER, F_ACTION, F_ADDR, F_SIZE, F_STREAM, F_TIME_US, F_FRAMES, F_DEVICE_FREE, F_NAME,
    F_FILENAME, F_LINE, F_ADDRESS, F_TOTAL_SIZE, F_ALLOCATED_SIZE, F_ACTIVE_SIZE,
    F_REQUESTED_SIZE, F_SEGMENT_TYPE, F_BLOCKS, F_STATE, F_DEVICE, F_SEGMENT_POOL_ID, F_COUNT_
};

/* The key `p[0..n)` names: F_OTHER when none of the above. */
int rs_torch_field(const char *p, size_t n);

/* The name of field `id`, "" for F_OTHER. */
const char *rs_torch_field_name(int id);

/* The event of the action named `p[0..n)` (format.h: RS_ACT_*); -1 for an entry left out
 * ("snapshot", and actions newer than this reader). */
int rs_torch_action(const char *p, size_t n);

/* One trace entry, checked, its stack left for later. */
typedef struct rs_torch_entry {
    uint64_t addr, size, time_us, stream;
    const rs_pickle_value *frames; /* a list or tuple, in the document's memory; NULL: none */
    int action;                    /* -1: an entry left out */
} rs_torch_entry;

/* What the reader learnt of the memo: which keys hold which names. */
typedef struct rs_torch_trace rs_torch_trace;

/* NULL when out of memory. */
rs_torch_trace *rs_torch_trace_new(void);
void rs_torch_trace_free(rs_torch_trace *t);

/* The entry whose EMPTY_DICT is at `at`, read into *e: 1, its MEMOIZEs stored
 * (rs_pickle_read_done); 0 when it is left to the machine, nothing stored. */
int rs_torch_trace_read(rs_torch_trace *t, rs_pickle_reader *r, size_t at, rs_torch_entry *e);

#endif
