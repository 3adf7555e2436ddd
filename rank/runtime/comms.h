/*
 * comms.h — the communicators this rank belonged to, recorded as the job created them (MPI's
 * splits and creations, NCCL's inits and splits) and written into its snapshot, so that the
 * collector can find the ranks' roles with no grouping declared.
 */
#ifndef RANKSNAP_COMMS_H
#define RANKSNAP_COMMS_H

#include <stddef.h>
#include <stdint.h>

#include "snapshot_encode.h"

/* The communicators kept at most; those created beyond it are not recorded. */
#define RS_COMMS_MAX 64

/* A 64-bit hash of `n` bytes on top of `seed`: ids that every member computes alike. */
uint64_t rs_comms_hash(uint64_t seed, const void *p, size_t n);

/* Records the communicator behind `handle` (an MPI_Comm or ncclComm_t as an integer): `id` the
 * same on every member, `size` members, this rank's index `rank`, `kind` "mpi" or "nccl". A
 * handle used again (the old communicator freed) gets a new entry. Not for the hot path: it
 * takes a lock. */
void rs_comms_add(uint64_t handle, uint64_t id, int32_t size, int32_t rank, const char *kind);

/* One all-reduce on `handle`'s communicator; a handle not recorded is ignored. Lock-free: a
 * scan of the table for the handle and an atomic increment. */
void rs_comms_allreduce(uint64_t handle);

/* The id recorded for `handle`, 0: none. */
uint64_t rs_comms_id_of(uint64_t handle);

/* Copies up to `max` communicators into `out`; returns how many. */
size_t rs_comms_copy(rs_snapshot_comm *out, size_t max);

#endif
