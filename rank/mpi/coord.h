/*
 * coord.h — what the ranks agree on over MPI: clocks, triggers, and the two-phase gather.
 *
 * ranksnap talks over its own duplicate of the job's communicator, with the MPI plugin's PMPI_*
 * calls only (mpi_abi.h), so its messages never match the application's and its calls are never
 * counted by the step-on wrappers. A coordinator without a communicator (no MPI, or no plugin for
 * the process's MPI) is a world of one: every call still works, and the gather hands rank 0 its
 * own data.
 *
 * Clocks: at create, every rank measures its offset to rank 0 with several ping-pongs and keeps
 * the one with the least round trip; the uncertainty is half that round trip.
 *
 * Triggers: rank 0 watches RANKSNAP_DIR/trigger (`ranksnap trigger` creates it) and SIGUSR1, at
 * each step boundary. It picks a start step a few steps ahead and sends it down a binary tree of
 * point-to-point messages; every other rank has a receive posted and tests it at each step, so no
 * rank ever waits for the trigger.
 *
 * Gather: phase 1, every rank sends a fixed-size summary (rs_summary) to rank 0, which waits at
 * most the timeout and names the ranks that did not arrive; phase 2, rank 0 answers each rank it
 * heard from, which then sends its communicators (any number of them: the roles are found from
 * them) and, if rank 0 wants it (all, or the flagged ones and the reference), its full snapshot,
 * in chunks of at most 1 GiB so that messages over 2 GiB work; again bounded by the timeout.
 * Nothing longer than the summary is sent before rank 0 has answered: a send past MPI's eager
 * limit to a rank 0 that gave up could not be cancelled.
 */
#ifndef RANKSNAP_COORD_H
#define RANKSNAP_COORD_H

#include <stddef.h>
#include <stdint.h>

#include "mpi_abi.h"
#include "options.h"
#include "ranksnap.h"

typedef struct rs_coord rs_coord;

/* `mpi_comm` is the address of an MPI_Comm, or NULL for a world of one (which it also is when no
 * MPI plugin serves the process's MPI). */
ranksnap_status rs_coord_create(const void *mpi_comm, rs_coord **out);
/* Frees the duplicate communicator: call before MPI_Finalize. */
void rs_coord_destroy(rs_coord *c);

int rs_coord_rank(const rs_coord *c);
int rs_coord_size(const rs_coord *c);
int64_t rs_coord_clock_offset_us(const rs_coord *c);
int64_t rs_coord_clock_uncertainty_us(const rs_coord *c);

/* At each step boundary. Rank 0 looks for a trigger (file `dir`/trigger, or SIGUSR1) and sends
 * the start step (`step` + `lag`) to the others; the others pick it up when it has arrived.
 * Returns 1 and sets *start when a triggered range is to begin at *start, 0 otherwise. */
int rs_coord_poll_trigger(rs_coord *c, int64_t step, const char *dir, int lag, int64_t *start);

/* For the gather (gather.c): the duplicated communicator (the plugin's), NULL in a world of one
 * and once MPI is finalised; the plugin that serves it; and the next gather's sequence number,
 * which picks its message tags. */
void *rs_coord_comm(const rs_coord *c);
const rs_mpi_ops *rs_coord_mpi(const rs_coord *c);
unsigned rs_coord_next_gather(rs_coord *c);

#endif
