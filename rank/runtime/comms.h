/*
 * comms.h — the communicators this rank belonged to, recorded as the job created and freed them
 * (MPI's splits and creations, NCCL's inits and splits; their frees, destroys and aborts), and
 * written into its snapshot, so that the collector can find the ranks' roles with no grouping
 * declared.
 *
 * A snapshot lists the communicators alive at one of the moments of its range: the range's
 * begin, each step boundary in it, its end, or the dump (the whole run so far before any range
 * began). A library's communicator made and freed before the range (or between two of its step
 * boundaries) is not listed, only counted: it says nothing of the job's roles. The all-reduces
 * listed are those made while the range recorded.
 */
#ifndef RANKSNAP_COMMS_H
#define RANKSNAP_COMMS_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"
#include "snapshot_encode.h"

/* A 64-bit hash of `n` bytes on top of `seed`: ids that every member computes alike. */
uint64_t rs_comms_hash(uint64_t seed, const void *p, size_t n);

/* Records the communicator behind `handle` (an MPI_Comm or ncclComm_t as an integer): `id` the
 * same on every member, `size` members, this rank's index `rank`, `kind` "mpi" or "nccl". A
 * handle still recorded as alive was freed unseen: that communicator ends here and a new one
 * begins. Not for the hot path: it takes a lock. */
void rs_comms_add(uint64_t handle, uint64_t id, int32_t size, int32_t rank, const char *kind);

/* The communicator behind `handle` is freed (called before the real free, so that a handle the
 * library hands out again at once is not taken for it). A handle not recorded is ignored. */
void rs_comms_free(uint64_t handle);

/* One all-reduce on `handle`'s communicator; a handle not recorded is ignored. Lock-free: a
 * scan of the communicators in use for the handle and an atomic increment. */
void rs_comms_allreduce(uint64_t handle);

/* The id recorded for the live communicator of `handle`, 0: none. */
uint64_t rs_comms_id_of(uint64_t handle);

/* The moments of a range (comms.c): a step boundary or a dump; lock-free. */
void rs_comms_moment(void);
/* A range begins (its first moment) and ends (its last). */
void rs_comms_range_begin(void);
void rs_comms_range_end(void);

/* The communicators of the current (or last) range, in a malloc'ed array (*out NULL when none),
 * and how many others this rank recorded (not alive while the range recorded). */
ranksnap_status rs_comms_copy(rs_snapshot_comm **out, size_t *n, uint64_t *left_out);

#endif
