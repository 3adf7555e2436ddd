/*
 * diff_pair.h — which rank of one run stands against which rank of another (diff.h says the
 * rules), and which roles, with a sentence saying how and on what it was decided.
 */
#ifndef RANKSNAP_DIFF_PAIR_H
#define RANKSNAP_DIFF_PAIR_H

#include <stddef.h>
#include <stdint.h>

#include "diff.h"
#include "ranksnap.h"

typedef struct rs_diff_pairing {
    int paired_by;          /* RS_DIFF_BY_* */
    char text[1536];        /* how, and on what (rs_diff_result.pairing) */
    size_t n;               /* pairs */
    size_t (*at)[2];        /* [n]: each pair's index into before's and after's summaries */
    int32_t *replica;       /* [n]: its index among its role's ranks, -1 when not paired by role */
    int32_t *group;         /* [n]: its role in `roles`, -1 */
    size_t n_roles;         /* roles both runs have (0: roles are not compared) */
    int32_t (*roles)[2];    /* [n_roles]: each run's role index, in before's role order */
    size_t n_unpaired[2];
    int32_t *unpaired[2];   /* rank numbers of each run left without a counterpart */
} rs_diff_pairing;

/* Pairs the ranks and roles of two runs (their summaries in rank order). `out` is freed with
 * rs_diff_pairing_free, on failure too. */
ranksnap_status rs_diff_pair_runs(const rs_diff_run *before, const rs_diff_run *after,
                                  rs_diff_pairing *out);
void rs_diff_pairing_free(rs_diff_pairing *p);

#endif
