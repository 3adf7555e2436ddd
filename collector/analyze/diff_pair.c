/*
 * diff_pair.c — owns pairing the ranks and roles of two runs (diff_pair.h): the roles matched by
 * their keys, the ranks by rank, by role and replica index, or by number, and the sentence that
 * says which and why (the rules: diff.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff_pair.h"
#include "errors.h"

static const char *const run_name[2] = {"before", "after"};

void rs_diff_pairing_free(rs_diff_pairing *p)
{
    if (!p) return;
    free(p->at);
    free(p->replica);
    free(p->group);
    free(p->roles);
    free(p->unpaired[0]);
    free(p->unpaired[1]);
    memset(p, 0, sizeof *p);
}

static int world_of(const rs_diff_run *r)
{
    int w = 0;
    if (r->world_size > 0) return r->world_size;
    for (size_t i = 0; i < r->n; i++)
        if (r->sums[i].world_size > w) w = r->sums[i].world_size;
    return w;
}

static int has_roles(const rs_diff_run *r)
{
    return r->roles && r->roles->n_roles > 0;
}

/* Each of before's roles' match in after by key into map[k]; 1 when every role of either run has
 * its match in the other. */
static int roles_match(const rs_roles *b, const rs_roles *a, int32_t *map)
{
    if (b->n_roles != a->n_roles) return 0;
    for (size_t k = 0; k < b->n_roles; k++) {
        map[k] = -1;
        for (size_t j = 0; j < a->n_roles && map[k] < 0; j++)
            if (!strcmp(b->keys[k], a->keys[j])) map[k] = (int32_t)j;
        if (map[k] < 0) return 0;
    }
    /* keys are unique within a run, so n matches both ways mean the same sets */
    return 1;
}

/* "4 roles from the job's MPI communicators" */
static void say_roles(char *dst, size_t cap, const rs_diff_run *r)
{
    if (!has_roles(r))
        snprintf(dst, cap, "no roles");
    else
        snprintf(dst, cap, "%zu role%s from %s", r->roles->n_roles, r->roles->n_roles == 1 ? "" : "s",
                 r->roles->source);
}

static ranksnap_status alloc_pairs(rs_diff_pairing *p, size_t cap)
{
    p->at = malloc((cap ? cap : 1) * sizeof *p->at);
    p->replica = malloc((cap ? cap : 1) * sizeof *p->replica);
    p->group = malloc((cap ? cap : 1) * sizeof *p->group);
    if (!p->at || !p->replica || !p->group)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory to pair %zu ranks", cap);
    return RANKSNAP_OK;
}

/* The ranks of each run that no pair holds, in rank order. */
static ranksnap_status list_unpaired(rs_diff_pairing *p, const rs_diff_run *const run[2])
{
    for (int side = 0; side < 2; side++) {
        unsigned char *taken = calloc(run[side]->n ? run[side]->n : 1, 1);
        p->unpaired[side] = malloc((run[side]->n ? run[side]->n : 1) * sizeof *p->unpaired[side]);
        if (!taken || !p->unpaired[side]) {
            free(taken);
            return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory to list unpaired ranks");
        }
        for (size_t i = 0; i < p->n; i++) taken[p->at[i][side]] = 1;
        for (size_t i = 0; i < run[side]->n; i++)
            if (!taken[i]) p->unpaired[side][p->n_unpaired[side]++] = run[side]->sums[i].rank;
        free(taken);
    }
    return RANKSNAP_OK;
}

/* By role and replica index: before's rank of role k and replica i against after's rank of the
 * matching role and the same replica. */
static ranksnap_status pair_by_role(rs_diff_pairing *p, const rs_diff_run *b, const rs_diff_run *a)
{
    const rs_roles *rb = b->roles, *ra = a->roles;
    RS_CHECK(alloc_pairs(p, b->n));
    /* after's index of each (role, replica): roles x the largest replica index + 1 */
    int32_t reps = 0;
    for (size_t j = 0; j < a->n; j++) {
        int32_t x = rs_roles_replica_of(ra, a->sums[j].rank);
        if (x + 1 > reps) reps = x + 1;
    }
    size_t cells = ra->n_roles * (size_t)(reps ? reps : 1);
    int64_t *idx = malloc(cells * sizeof *idx);
    if (!idx) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory to pair %zu ranks", a->n);
    for (size_t c = 0; c < cells; c++) idx[c] = -1;
    for (size_t j = 0; j < a->n; j++) {
        int32_t role = rs_roles_of(ra, a->sums[j].rank), x = rs_roles_replica_of(ra, a->sums[j].rank);
        if (role >= 0 && x >= 0) idx[(size_t)role * (size_t)reps + (size_t)x] = (int64_t)j;
    }
    for (size_t i = 0; i < b->n; i++) {
        int32_t role = rs_roles_of(rb, b->sums[i].rank), x = rs_roles_replica_of(rb, b->sums[i].rank);
        if (role < 0 || x < 0 || x >= reps) continue;
        int32_t ar = p->roles[role][1];
        int64_t j = idx[(size_t)ar * (size_t)reps + (size_t)x];
        if (j < 0) continue;
        p->at[p->n][0] = i;
        p->at[p->n][1] = (size_t)j;
        p->replica[p->n] = x;
        p->group[p->n] = role;
        p->n++;
    }
    free(idx);
    return RANKSNAP_OK;
}

/* By rank number: before's rank r against after's rank r. */
static ranksnap_status pair_by_number(rs_diff_pairing *p, const rs_diff_run *b, const rs_diff_run *a,
                                      int with_roles)
{
    RS_CHECK(alloc_pairs(p, b->n));
    size_t j = 0;
    for (size_t i = 0; i < b->n; i++) {
        while (j < a->n && a->sums[j].rank < b->sums[i].rank) j++;
        if (j == a->n || a->sums[j].rank != b->sums[i].rank) continue;
        p->at[p->n][0] = i;
        p->at[p->n][1] = j;
        p->replica[p->n] = -1;
        p->group[p->n] = with_roles ? rs_roles_of(b->roles, b->sums[i].rank) : -1;
        p->n++;
    }
    return RANKSNAP_OK;
}

/* " (replicas 2-3)" for the unpaired ranks of `side` when they are replicas of their roles, "". */
static void say_replicas(char *dst, size_t cap, const rs_diff_pairing *p, const rs_diff_run *r, int side)
{
    int32_t lo = -1, hi = -1;
    dst[0] = '\0';
    for (size_t i = 0; i < p->n_unpaired[side]; i++) {
        int32_t x = rs_roles_replica_of(r->roles, p->unpaired[side][i]);
        if (x < 0) return;
        if (lo < 0 || x < lo) lo = x;
        if (x > hi) hi = x;
    }
    if (lo < 0) return;
    if (lo == hi)
        snprintf(dst, cap, ": replica %d of its role", (int)lo);
    else
        snprintf(dst, cap, ": replicas %d-%d of their roles", (int)lo, (int)hi);
}

static void say_unpaired(rs_diff_pairing *p, const rs_diff_run *const run[2], int by_role)
{
    for (int side = 0; side < 2; side++) {
        if (!p->n_unpaired[side]) continue;
        char rep[64] = "";
        if (by_role) say_replicas(rep, sizeof rep, p, run[side], side);
        size_t used = strlen(p->text);
        snprintf(p->text + used, sizeof p->text - used, "; %zu rank%s of %s %s no counterpart%s",
                 p->n_unpaired[side], p->n_unpaired[side] == 1 ? "" : "s", run_name[side],
                 p->n_unpaired[side] == 1 ? "has" : "have", rep);
    }
}

ranksnap_status rs_diff_pair_runs(const rs_diff_run *before, const rs_diff_run *after,
                                  rs_diff_pairing *out)
{
    memset(out, 0, sizeof *out);
    const rs_diff_run *const run[2] = {before, after};
    int wb = world_of(before), wa = world_of(after);
    char rb[360], ra[360];
    say_roles(rb, sizeof rb, before);
    say_roles(ra, sizeof ra, after);
    if (before->n == 1 && after->n == 1 && before->sums[0].rank != after->sums[0].rank) {
        /* one file each: the user paired them by giving them */
        RS_CHECK(alloc_pairs(out, 1));
        out->at[0][0] = out->at[0][1] = 0;
        out->replica[0] = out->group[0] = -1;
        out->n = 1;
        out->paired_by = RS_DIFF_BY_NUMBER;
        snprintf(out->text, sizeof out->text, "one rank each, paired as given: rank %d before "
                 "against rank %d after", (int)before->sums[0].rank, (int)after->sums[0].rank);
        return list_unpaired(out, run);
    }
    int both = has_roles(before) && has_roles(after);
    int matched = 0;
    if (both) {
        out->roles = malloc(before->roles->n_roles * sizeof *out->roles);
        if (!out->roles) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory to pair roles");
        int32_t *map = malloc(before->roles->n_roles * sizeof *map);
        if (!map) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory to pair roles");
        matched = roles_match(before->roles, after->roles, map);
        for (size_t k = 0; matched && k < before->roles->n_roles; k++) {
            out->roles[k][0] = (int32_t)k;
            out->roles[k][1] = map[k];
        }
        free(map);
        if (matched) out->n_roles = before->roles->n_roles;
    }
    ranksnap_status st;
    if (matched) {
        st = pair_by_role(out, before, after);
        if (st != RANKSNAP_OK) return st;
        RS_CHECK(list_unpaired(out, run));
        int same = wb == wa && !out->n_unpaired[0] && !out->n_unpaired[1];
        for (size_t i = 0; same && i < out->n; i++)
            same = before->sums[out->at[i][0]].rank == after->sums[out->at[i][1]].rank;
        out->paired_by = same ? RS_DIFF_BY_RANK : RS_DIFF_BY_ROLE;
        if (same)
            snprintf(out->text, sizeof out->text,
                     "ranks paired by rank: both runs have the same %d ranks in the same %zu roles "
                     "(before: %s; after: %s)", wb, out->n_roles, before->roles->source,
                     after->roles->source);
        else
            snprintf(out->text, sizeof out->text,
                     "ranks paired by role and replica index: %d ranks before, %d after, in the same "
                     "%zu roles (before: %s; after: %s)", wb, wa, out->n_roles,
                     before->roles->source, after->roles->source);
        say_unpaired(out, run, 1);
        if (before->roles->keys_by_order || after->roles->keys_by_order) {
            size_t used = strlen(out->text);
            snprintf(out->text + used, sizeof out->text - used,
                     "; the roles' communicators name no dimension, so the roles are told apart by "
                     "the order of their lowest ranks: declare them with --before-groups and "
                     "--after-groups where that order differs between the runs");
        }
        return RANKSNAP_OK;
    }
    if (wb == wa || (!has_roles(before) && !has_roles(after))) {
        RS_CHECK(pair_by_number(out, before, after, 0));
        RS_CHECK(list_unpaired(out, run));
        int none = !has_roles(before) && !has_roles(after);
        out->paired_by = none && wb == wa ? RS_DIFF_BY_RANK : RS_DIFF_BY_NUMBER;
        if (none) {
            if (wb == wa)
                snprintf(out->text, sizeof out->text,
                         "ranks paired by rank: both runs have %d ranks and neither has roles", wb);
            else
                snprintf(out->text, sizeof out->text,
                         "ranks paired by rank number: %d ranks before, %d after, and neither run "
                         "has roles, so every rank is taken as a replica of the others; if the ranks "
                         "have roles, declare them with --before-groups and --after-groups", wb, wa);
        } else {
            snprintf(out->text, sizeof out->text,
                     "ranks paired by rank number (%d ranks each): the roles differ (before: %s; "
                     "after: %s), so roles are not compared; --before-groups and --after-groups "
                     "declare them", wb, rb, ra);
        }
        say_unpaired(out, run, 0);
        return RANKSNAP_OK;
    }
    out->paired_by = RS_DIFF_NOT_PAIRED;
    RS_CHECK(alloc_pairs(out, 0));
    RS_CHECK(list_unpaired(out, run));
    snprintf(out->text, sizeof out->text,
             "ranks not paired: %d ranks before and %d after, and their roles do not match "
             "(before: %s; after: %s), so only the jobs as a whole are compared; --before-groups "
             "and --after-groups declare the roles", wb, wa, rb, ra);
    return RANKSNAP_OK;
}
