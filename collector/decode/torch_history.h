/*
 * torch_history.h — a PyTorch snapshot's trace mapped onto rs_snap's history
 * (torch_history.c).
 */
#ifndef RANKSNAP_TORCH_HISTORY_H
#define RANKSNAP_TORCH_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "torch_mapper.h"

void rs_tm_streamed_free(streamed *sd);

ranksnap_status rs_tm_take_entries(void *ctx, rs_pickle_taker *t, const rs_pickle_value *list,
                                    size_t index, const rs_pickle_value *const *items, size_t n);

/* An entry read from its bytes (torch_trace.h) into its list's columns, as take_entries puts
 * one there; 0 leaves it to the machine (and take_entries), which also says what went wrong:
 * an entry that is not read, a list already stopped by an error, no memory. */
int rs_tm_read_entry(void *ctx, rs_pickle_reader *r, const rs_pickle_value *list, size_t index,
                      size_t at);

/* The entries of device_traces[i]: its own, and those the pickle streamed from it. */
size_t rs_tm_trace_len(const mapper *m, const rs_pickle_value *traces, size_t i);

ranksnap_status rs_tm_map_trace(mapper *m, const rs_pickle_value *trace, size_t device);

/* Current values from the final state; peaks, their time and step, and the OOM record from the
 * one history walk (walk.h), which ends at the current values, as every reader's walk does. Trace
 * sizes are requests, rounded there as the allocator rounds blocks. */
ranksnap_status rs_tm_totals(mapper *m);

#endif
