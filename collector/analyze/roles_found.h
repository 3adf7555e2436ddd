/*
 * roles_found.h — the grouping of ranks into roles (roles.h) found from the communicators the
 * ranks belonged to, when none is declared.
 *
 * Communicators of one size that together hold every rank once form a family (a dimension of the
 * job: the pipeline stages' groups, the data-parallel replicas' groups). The replica family is
 * the one named dp (or another name of the replicas, rs_roles_is_replicas), else the one that made the most all-reduce
 * calls (replicas all-reduce their gradients), else the only family; a rank's role is its
 * communicator in that family: the ranks it all-reduces with are its peers.
 */
#ifndef RANKSNAP_ROLES_FOUND_H
#define RANKSNAP_ROLES_FOUND_H

#include <stddef.h>

#include "roles.h"
#include "summary.h"

/* Fills `out` (freed with rs_roles_free) from the communicators of the ranks' summaries. When the
 * communicators make no grouping (none, or none that partitions the `world` ranks) it returns
 * RANKSNAP_OK with out->n_roles 0: the ranks are compared with all ranks. */
ranksnap_status rs_roles_found(const rs_summary *sums, size_t n, int world, rs_roles *out);

#endif
