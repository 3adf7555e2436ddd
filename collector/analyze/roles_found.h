/*
 * roles_found.h — the grouping of ranks into roles (roles.h) found from the communicators the
 * ranks belonged to, when none is declared.
 *
 * A rank's file lists the communicators alive while its range recorded (a library's short-lived
 * ones, freed before it, are only counted). Communicators of one size that together hold every
 * rank once form a family (a dimension of the job: the pipeline stages' groups, the
 * data-parallel replicas' groups). The replica family is the one named dp (or another name of
 * the replicas, rs_roles_is_replicas), else the one whose communicators made the most all-reduce
 * calls each (replicas all-reduce their gradients), else the only family; a rank's role is its
 * communicator in that family: the ranks it all-reduces with are its peers. What the grouping
 * was based on, or why there is none, is said in rs_roles.basis.
 */
#ifndef RANKSNAP_ROLES_FOUND_H
#define RANKSNAP_ROLES_FOUND_H

#include <stddef.h>
#include <stdint.h>

#include "compare.h"
#include "roles.h"
#include "snapshot.h"

/* One rank's communicators as its file lists them: what rank 0 gathers, beside the summary, to
 * find the roles (any number of them: they do not travel in the fixed-size summary). */
typedef struct rs_rank_comms {
    int32_t rank;
    size_t n;
    rs_snap_comm *v;   /* malloc'ed */
    uint64_t left_out; /* rs_snap.comms_left_out */
} rs_rank_comms;

/* A copy of `s`'s communicators (freed with rs_rank_comms_free). */
ranksnap_status rs_rank_comms_of(const rs_snap *s, rs_rank_comms *out);
void rs_rank_comms_free(rs_rank_comms *c);

/* Fills `out` (freed with rs_roles_free) from the communicators of `n` ranks of a job of `world`.
 * When the communicators make no grouping it returns RANKSNAP_OK with out->n_roles 0 (the ranks
 * are compared with all ranks) and out->basis saying why, or "" when the ranks had none to go
 * by. */
ranksnap_status rs_roles_found(const rs_rank_comms *ranks, size_t n, int world, rs_roles *out);

/* With no grouping declared: the roles found (rs_roles_found, into *found, which the caller frees
 * with rs_roles_free after the comparison) become cfg->roles, or, when there are none, why not
 * becomes cfg->ungrouped, which the report says. */
void rs_roles_found_apply(rs_compare_config *cfg, const rs_rank_comms *ranks, size_t n, int world,
                          rs_roles *found);

#endif
