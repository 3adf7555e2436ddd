/*
 * outside_sites.h — memory the program got outside ranksnap's allocators, as the history's
 * outside_alloc / outside_free events show it (outside_sites.c).
 */
#ifndef RANKSNAP_OUTSIDE_SITES_H
#define RANKSNAP_OUTSIDE_SITES_H

#include <stddef.h>
#include <stdint.h>

#include "sites.h"
#include "snapshot.h"

#define RS_OUTSIDE_OWNER_LEN 16

/* The highest level of outside bytes the history reached (live outside allocations, from the
 * first event on; with `async`, of a stream-ordered pool's allocations in a rank recorded
 * natively instead: async_alloc / async_free) and the largest sites then, at most `max` of them,
 * largest first; *n_sites 0 without memory to name them. A history with no such events gives 0.
 * owners[i] (may be NULL) is the library sites[i]'s memory was taken through ("NCCL", "cuBLAS",
 * "cuDNN", "PyTorch"; "" for the program's own driver calls), from the stack's modules: one site
 * and owner per entry. *peak_step (may be NULL): the step of the peak, -1 before any. paths[i]
 * (may be NULL; room for `max`): where sites[i] sits (sites.h), from its stack with the most bytes. */
void rs_outside_sites_at_peak(const rs_snap *s, const rs_site_picker *pk, int async, uint64_t *peak,
                              rs_site *sites, char (*owners)[RS_OUTSIDE_OWNER_LEN], int max,
                              int *n_sites, int64_t *peak_step, rs_site_path *paths);

#endif
