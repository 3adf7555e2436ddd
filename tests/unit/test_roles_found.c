/*
 * test_roles_found.c — the roles found from the ranks' communicators (roles_found.c): families of
 * communicators that partition the ranks, the replica family by name, else by its all-reduce
 * calls on each communicator, else the only one; the labels; any number of communicators a rank;
 * what the grouping was based on; and no grouping, with why, where the communicators make none.
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

/* What pairs a role of this job with the same role of a job of another size: its key (the label
 * without the ranks) and each rank's index among the replicas. */
TEST(found_roles_key_and_replica_index_do_not_depend_on_the_ranks)
{
    grid("mpi", "", "", 0, 8);
    rs_roles r;
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK);
    CHECK(strcmp(r.keys[2], "group 2") == 0 && !r.keys_by_order);
    CHECK(rs_roles_replica_of(&r, 8) == 0 && rs_roles_replica_of(&r, 11) == 3);
    CHECK(rs_roles_replica_of(&r, 16) == -1);
    rs_roles_free(&r);
    /* the strided replicas: rank 13 is the fourth of its role */
    grid("nccl", "", "", 8, 0);
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK);
    CHECK(strcmp(r.keys[1], "group 1") == 0);
    CHECK(rs_roles_replica_of(&r, 1) == 0 && rs_roles_replica_of(&r, 13) == 3);
    rs_roles_free(&r);
    /* named: the key is the label */
    grid("torch", "pp", "dp", 50, 8);
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK);
    CHECK(strcmp(r.keys[3], "pp=3") == 0 && !r.keys_by_order);
    rs_roles_free(&r);
    /* one family alone: nothing but the order says which group is which */
    reset();
    for (int k = 0; k < W; k++) add(k, 100 + (uint64_t)(k / 8), 8, k % 8, "mpi", "", 0);
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK);
    CHECK(strcmp(r.keys[1], "group 1") == 0 && r.keys_by_order);
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
    CHECK_STR_EQ(r.basis, "the replicas by their name: 2 communicators of 1 rank named dp; beside "
                          "them 1 communicator of 2 ranks named pp");
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
    CHECK_STR_CONTAINS(r.basis, "the communicators with the most all-reduces: 2 communicators of "
                                "8 ranks (10 all-reduces each)");
    rs_roles_free(&r);
}

TEST(the_basis_says_what_the_roles_came_from)
{
    rs_roles r;
    grid("mpi", "", "", 0, 8);
    for (int k = 0; k < W; k++) ranks[k].left_out = 6;
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK && r.n_roles == 4);
    CHECK_STR_EQ(r.basis, "the replicas, the communicators with the most all-reduces: 4 "
                          "communicators of 4 ranks (8 all-reduces each); beside them 4 "
                          "communicators of 4 ranks (0 all-reduces each); left out: the "
                          "communicators not alive while the range recorded (6 on each rank)");
    rs_roles_free(&r);
    ranks[3].left_out = 9;
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK);
    CHECK_STR_CONTAINS(r.basis, "not alive while the range recorded (up to 9 a rank)");
    rs_roles_free(&r);
    /* a DeviceMesh's all-reduces are not counted: none are said */
    grid("torch", "pp", "dp", 0, 0);
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK && r.n_roles == 4);
    CHECK_STR_EQ(r.basis, "the replicas by their name: 4 communicators of 4 ranks named dp; beside "
                          "them 4 communicators of 4 ranks named pp");
    rs_roles_free(&r);
    reset();
    for (int k = 0; k < W; k++) add(k, 100 + (uint64_t)(k / 8), 8, k % 8, "mpi", "", 0);
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK && r.n_roles == 2);
    CHECK_STR_EQ(r.basis, "the replicas, the only communicators that divide the ranks: 2 "
                          "communicators of 8 ranks (0 all-reduces each)");
    rs_roles_free(&r);
}

TEST(no_grouping_says_why)
{
    rs_roles r;
    /* nothing to go by: nothing to say */
    reset();
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK && r.n_roles == 0);
    CHECK_STR_EQ(r.basis, "");
    /* only communicators that were not alive while the range recorded */
    for (int k = 0; k < W; k++) ranks[k].left_out = 6;
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK && r.n_roles == 0);
    CHECK_STR_EQ(r.basis, "no communicator alive while the range recorded divides the ranks; left "
                          "out: the communicators not alive while the range recorded (6 on each "
                          "rank)");
    /* two families and no all-reduce to tell the replicas */
    grid("mpi", "", "", 0, 0);
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK && r.n_roles == 0);
    CHECK_STR_EQ(r.basis, "2 kinds of communicators divide the ranks (4 communicators of 4 ranks "
                          "(0 all-reduces each); 4 communicators of 4 ranks (0 all-reduces each)) "
                          "and none made more all-reduces than the others: which holds the "
                          "replicas is not known");
    /* a rank that joined late or left early: its file says nothing of the groups it is in */
    grid("mpi", "", "", 0, 8);
    ranks[15].n = 0;
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK && r.n_roles == 0);
    CHECK_STR_CONTAINS(r.basis, "do not hold every rank once");
}

TEST(several_meshes_in_one_job)
{
    /* pp=4 x dp=4, and a second mesh of expert pairs that all-reduce less on each communicator */
    rs_roles r;
    grid("mpi", "", "", 0, 8);
    for (int k = 0; k < W; k++) add(k, 700 + (uint64_t)(k / 2), 2, k % 2, "mpi", "", 2);
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK && r.n_roles == 4);
    CHECK(rs_roles_of(&r, 5) == 1 && rs_roles_of(&r, 6) == 1 && rs_roles_of(&r, 8) == 2);
    CHECK_STR_CONTAINS(r.basis, "beside them 8 communicators of 2 ranks (2 all-reduces each), "
                                "4 communicators of 4 ranks (0 all-reduces each)");
    rs_roles_free(&r);
    /* two meshes of groups of 4 that all-reduce alike: which holds the replicas is not known */
    grid("mpi", "", "", 8, 8);
    CHECK(rs_roles_found(ranks, W, W, &r) == RANKSNAP_OK && r.n_roles == 0);
    CHECK_STR_CONTAINS(r.basis, "which holds the replicas is not known");
}

int main(void)
{
    RUN(unnamed_mpi_groups_the_replicas_that_all_reduce);
    RUN(found_roles_key_and_replica_index_do_not_depend_on_the_ranks);
    RUN(named_dimensions_win_over_all_reduce_counts);
    RUN(a_named_mesh_of_one_replica_gives_each_stage_its_role);
    RUN(a_single_family_is_the_replicas);
    RUN(no_grouping_where_the_communicators_make_none);
    RUN(many_communicators_alive_keep_the_jobs_own);
    RUN(replicas_are_the_family_with_the_most_all_reduces_per_communicator);
    RUN(the_basis_says_what_the_roles_came_from);
    RUN(no_grouping_says_why);
    RUN(several_meshes_in_one_job);
    return check_summary();
}
