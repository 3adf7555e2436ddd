/*
 * test_roles_found.c — the roles found from the ranks' communicators (roles_found.c): families of
 * communicators that partition the ranks, the replica family by name, else by its all-reduce
 * calls on each communicator, else the only one; the labels; any number of communicators a rank;
 * and no grouping where the communicators make none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "roles_found.h"

#define W 16
#define MAX_COMMS 32

static rs_rank_comms ranks[W];
static rs_snap_comm comms[W][MAX_COMMS];

static void reset(void)
{
    memset(ranks, 0, sizeof ranks);
    memset(comms, 0, sizeof comms);
    for (int r = 0; r < W; r++) {
        ranks[r].rank = r;
        ranks[r].v = comms[r];
    }
}

static void add(int r, uint64_t id, int size, int index, const char *kind, const char *name,
                uint64_t allreduces)
{
    rs_snap_comm *c = &ranks[r].v[ranks[r].n++];
    memset(c, 0, sizeof *c);
    c->id = id;
    c->size = size;
    c->rank = index;
    snprintf(c->kind, sizeof c->kind, "%s", kind);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->allreduces = allreduces;
}

/* pp=4 x dp=4 in stage-major order: rank = 4 * stage + replica; the dp groups all-reduce
 * `dp_ar` times, the pp groups `pp_ar` times; every rank also in the world and its own. */
static void grid(const char *kind, const char *pp, const char *dp, uint64_t pp_ar, uint64_t dp_ar)
{
    reset();
    for (int r = 0; r < W; r++) {
        add(r, 1, W, r, kind, "", 3); /* neither the world nor a rank alone is a dimension */
        add(r, 1000 + (uint64_t)r, 1, 0, kind, "", 0);
        add(r, 100 + (uint64_t)(r / 4), 4, r % 4, kind, dp, dp_ar);
        add(r, 200 + (uint64_t)(r % 4), 4, r / 4, kind, pp, pp_ar);
    }
}

TEST(unnamed_mpi_groups_the_replicas_that_all_reduce)
{
    grid("mpi", "", "", 0, 8);
    rs_roles r;
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK);
    CHECK(r.n_roles == 4 && r.world_size == W);
    CHECK(rs_roles_of(&r, 0) == 0 && rs_roles_of(&r, 3) == 0 && rs_roles_of(&r, 10) == 2 &&
          rs_roles_of(&r, 15) == 3);
    CHECK(strcmp(r.labels[2], "group 2 (ranks 8-11)") == 0);
    CHECK(strcmp(r.source, "the job's MPI communicators") == 0);
    rs_roles_free(&r);
    /* the other family all-reducing: the peers are then the strided ranks */
    grid("nccl", "", "", 8, 0);
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK);
    CHECK(r.n_roles == 4);
    CHECK(rs_roles_of(&r, 1) == 1 && rs_roles_of(&r, 5) == 1 && rs_roles_of(&r, 13) == 1 &&
          rs_roles_of(&r, 4) == 0);
    CHECK(strcmp(r.labels[1], "group 1 (ranks 1,5,9,13)") == 0);
    CHECK(strcmp(r.source, "the job's NCCL communicators") == 0);
    rs_roles_free(&r);
}

TEST(named_dimensions_win_over_all_reduce_counts)
{
    /* the pp groups all-reduce more (a loss), yet dp is named the replicas' */
    grid("torch", "pp", "dp", 50, 8);
    rs_roles r;
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK);
    CHECK(r.n_roles == 4 && rs_roles_of(&r, 10) == 2 && rs_roles_of(&r, 9) == 2);
    CHECK(strcmp(r.labels[0], "pp=0") == 0 && strcmp(r.labels[3], "pp=3") == 0);
    CHECK(strcmp(r.source, "the job's torch DeviceMesh") == 0);
    rs_roles_free(&r);
}

TEST(a_named_mesh_of_one_replica_gives_each_stage_its_role)
{
    /* a ("pp", "dp") mesh of 2 x 1: pp is the whole job, every dp group one rank */
    reset();
    for (int r = 0; r < 2; r++) {
        add(r, 300, 2, r, "torch", "pp", 0);
        add(r, 310 + (uint64_t)r, 1, 0, "torch", "dp", 0);
    }
    rs_roles r;
    CHECK(rs_roles_found(ranks, 2, 2, &r) == RANKSNAP_OK);
    CHECK(r.n_roles == 2 && rs_roles_of(&r, 0) == 0 && rs_roles_of(&r, 1) == 1);
    CHECK(strcmp(r.labels[0], "pp=0") == 0 && strcmp(r.labels[1], "pp=1") == 0);
    rs_roles_free(&r);
}

TEST(a_single_family_is_the_replicas)
{
    reset();
    for (int r = 0; r < W; r++) add(r, 100 + (uint64_t)(r / 8), 8, r % 8, "mpi", "", 0);
    rs_roles r;
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK);
    CHECK(r.n_roles == 2 && rs_roles_of(&r, 7) == 0 && rs_roles_of(&r, 8) == 1);
    CHECK(strcmp(r.labels[1], "group 1 (ranks 8-15)") == 0);
    rs_roles_free(&r);
}

TEST(no_grouping_where_the_communicators_make_none)
{
    rs_roles r;
    /* none at all */
    reset();
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK && r.n_roles == 0 && !r.role_of);
    /* the world and ranks alone only */
    for (int k = 0; k < W; k++) {
        add(k, 1, W, k, "mpi", "", 4);
        add(k, 50 + (uint64_t)k, 1, 0, "mpi", "", 0);
    }
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK && r.n_roles == 0);
    /* one group of 4 that leaves the other ranks out: nothing partitions the world */
    reset();
    for (int k = 0; k < 4; k++) add(k, 7, 4, k, "mpi", "", 9);
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK && r.n_roles == 0);
    /* two unnamed families, neither all-reducing: which ranks are replicas is not known */
    grid("mpi", "", "", 0, 0);
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK && r.n_roles == 0);
    /* a rank missing: its groups are incomplete, no family covers the world */
    grid("mpi", "", "", 0, 8);
    CHECK(rs_roles_found(ranks, W - 1, W, &r) == RANKSNAP_OK && r.n_roles == 0);
    /* members that disagree on their index */
    grid("mpi", "", "", 0, 8);
    comms[5][2].rank = 0;
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK && r.n_roles == 0);
}

/* Each rank: the world and itself, `lib` families of pairs that a library made and still has
 * (alive, no all-reduce in the range), then the job's own pp=4 x dp=4 at the end of its list. */
static void grid_after_library(int lib)
{
    reset();
    for (int r = 0; r < W; r++) {
        add(r, 1, W, r, "mpi", "", 3);
        add(r, 1000 + (uint64_t)r, 1, 0, "mpi", "", 0);
        for (int k = 0; k < lib; k++) {
            int peer = r ^ (1 << (k % 4));
            int lo = r < peer ? r : peer;
            add(r, 5000 + 100 * (uint64_t)k + (uint64_t)lo, 2, r == lo ? 0 : 1, "mpi", "", 0);
        }
        add(r, 200 + (uint64_t)(r % 4), 4, r / 4, "mpi", "", 0);
        add(r, 100 + (uint64_t)(r / 4), 4, r % 4, "mpi", "", 8);
    }
}

TEST(many_communicators_alive_keep_the_jobs_own)
{
    /* 12 a rank, the job's last: none is dropped for the number of them */
    grid_after_library(8);
    rs_roles r;
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK);
    CHECK(r.n_roles == 4);
    CHECK(rs_roles_of(&r, 0) == 0 && rs_roles_of(&r, 3) == 0 && rs_roles_of(&r, 9) == 2 &&
          rs_roles_of(&r, 15) == 3);
    CHECK_STR_CONTAINS(r.n_roles == 4 ? r.labels[2] : "", "(ranks 8-11)");
    rs_roles_free(&r);
}

TEST(replicas_are_the_family_with_the_most_all_reduces_per_communicator)
{
    /* pp=2 x dp=8: two dp groups of 8 with 10 all-reduces each, eight pp pairs with 3 each (a
     * loss or tied embeddings): more calls in all, fewer on each communicator */
    reset();
    for (int r = 0; r < W; r++) {
        add(r, 100 + (uint64_t)(r / 8), 8, r % 8, "mpi", "", 10);
        add(r, 200 + (uint64_t)(r % 8), 2, r / 8, "mpi", "", 3);
    }
    rs_roles r;
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK);
    CHECK(r.n_roles == 2 && rs_roles_of(&r, 7) == 0 && rs_roles_of(&r, 8) == 1);
    rs_roles_free(&r);
}

int main(void)
{
    RUN(unnamed_mpi_groups_the_replicas_that_all_reduce);
    RUN(named_dimensions_win_over_all_reduce_counts);
    RUN(a_named_mesh_of_one_replica_gives_each_stage_its_role);
    RUN(a_single_family_is_the_replicas);
    RUN(no_grouping_where_the_communicators_make_none);
    RUN(many_communicators_alive_keep_the_jobs_own);
    RUN(replicas_are_the_family_with_the_most_all_reduces_per_communicator);
    return check_summary();
}
