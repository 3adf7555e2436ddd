/*
 * roles.h — which ranks of a job are peers: the grouping of the ranks into roles (a pipeline stage,
 * a tensor-parallel rank, ...) whose ranks differ only in their data-parallel index.
 *
 * A grouping is declared as dimensions in the launcher's rank order, outermost first
 * ("pp=4,dp=4": ranks 0-3 are stage 0, ranks 4-7 stage 1, ...). The dimension named dp (or
 * data, fsdp, dp_replicate, dp_shard, ... in any case) is the data-parallel one; every other
 * dimension names the role. A grouping in which no rank has a peer is refused.
 * The comparison (compare.h) takes each rank's median within its role.
 */
#ifndef RANKSNAP_ROLES_H
#define RANKSNAP_ROLES_H

#include <stddef.h>
#include <stdint.h>

#include "ranksnap.h"

#define RS_ROLES_MAX_DIMS 6

typedef struct rs_roles {
    int world_size;            /* the product of the dimensions */
    int n_dims;
    char names[RS_ROLES_MAX_DIMS][16];
    int sizes[RS_ROLES_MAX_DIMS];
    char source[320];          /* where the grouping came from, e.g. "--groups" */
    char basis[512];           /* found ones (roles_found.h): which communicators they were
                                  found from and which were left out; with no roles, why none */
    char replicas[96];         /* the dimensions taken as the replicas, e.g. "dp"; "" when found */
    int32_t *role_of;          /* [world_size]: the role of each rank */
    int32_t *replica_of;       /* [world_size]: each rank's index among the ranks of its role (its
                                  data-parallel coordinate, or its index in its replicas'
                                  communicator), -1 when not covered */
    size_t n_roles;
    char (*labels)[64];        /* [n_roles]: e.g. "pp=2" or "pp=1,tp=0" */
    char (*keys)[64];          /* [n_roles]: the label without the ranks a found role lists, the
                                  same in a job of another size where the role is the same
                                  ("pp=2", "group 2") */
    int keys_by_order;         /* 1: the keys number the roles by their lowest rank (their
                                  communicators name no dimension, and no single other family of
                                  them orders the roles), not by what they are */
} rs_roles;

/* Parses "pp=4,dp=4" into `out` (freed with rs_roles_free); `source` names where it came from. */
ranksnap_status rs_roles_parse(const char *spec, const char *source, rs_roles *out);
void rs_roles_free(rs_roles *r);
/* 1 when a dimension of this name holds the replicas: dp and the other names jobs give it. */
int rs_roles_is_replicas(const char *name);
/* The role of `rank`, -1 when the grouping does not cover it. */
int32_t rs_roles_of(const rs_roles *r, int32_t rank);
/* Its index among the ranks of its role, -1 when the grouping does not cover it. */
int32_t rs_roles_replica_of(const rs_roles *r, int32_t rank);

#endif
