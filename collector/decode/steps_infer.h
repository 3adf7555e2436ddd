/*
 * steps_infer.h — training iterations found in a history that has no step markers (PyTorch's
 * snapshots record none), so that per-step peaks, the first divergent step and growth versus
 * offset work on such snapshots as on ours.
 *
 * A training loop allocates the same tensors, from the same lines, in the same order, every
 * iteration. The allocations are turned into tokens (stack id, size); the period P is the lag
 * at which the last few periods of tokens repeat best; the iteration starts at the phase of the
 * period where the allocated level is lowest (after the previous iteration freed its
 * activations and gradients); and every iteration's first allocation is then located by its
 * token near where the period predicts it, walking back to the start of the history and forward
 * to its end, so that a first iteration with extra allocations (optimizer state) or a last one
 * cut short by an OOM still gets its marker. The method, its thresholds and when it gives up are
 * in docs/PYTORCH.md.
 */
#ifndef RANKSNAP_STEPS_INFER_H
#define RANKSNAP_STEPS_INFER_H

#include <stdint.h>

#include "ranksnap.h"
#include "snapshot.h"

typedef struct rs_steps_infer_result {
    int found;          /* 1 when step events were inserted */
    uint64_t period;    /* allocations per iteration */
    double match;       /* share of allocations equal to the one a period later, 0..1 */
    uint64_t n_steps;   /* step events inserted, numbered 0..n_steps-1 */
    char why_not[160];  /* when !found: why, in words */
} rs_steps_infer_result;

/* Inserts an RS_ACT_STEP event (size = step number, time = that of the iteration's first
 * allocation, stream of that allocation) before the first allocation of every iteration found,
 * and sets s->time.ranges to the one range of steps and s->time.current_step to the last. A
 * history that already has step events, or in which no repeating pattern covering at least two
 * iterations is found, is left as it is (found = 0, why_not says why). Fails only for memory. */
ranksnap_status rs_steps_infer(rs_snap *s, rs_steps_infer_result *out);

#endif
