/*
 * test_comms.c — the rank's table of communicators (rank/runtime/comms.c): a snapshot lists those
 * alive at a moment of its range (its begin, a step boundary, its end, the dump) and counts the
 * others; a library's communicators made and freed before the range are not listed; frees, a
 * handle used again, all-reduces counted within the range, and any number of communicators.
 *
 * The table is the process's: each test begins a range of its own and frees what it made.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "comms.h"

/* A copy of the table, as a snapshot takes it. */
typedef struct copy {
    rs_snapshot_comm *v;
    size_t n;
    uint64_t left_out; /* the others: not alive while the range recorded */
} copy;

/* The listed communicator of `id` in a fresh copy, NULL when not listed. */
static const rs_snapshot_comm *listed(copy *c, uint64_t id)
{
    free(c->v);
    CHECK(rs_comms_copy(&c->v, &c->n, &c->left_out) == RANKSNAP_OK);
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].id == id) return &c->v[i];
    return NULL;
}

TEST(a_librarys_communicators_freed_before_the_range_are_not_listed)
{
    copy l = {0};
    rs_comms_range_begin();
    listed(&l, 0);
    uint64_t left0 = l.left_out;
    rs_comms_range_end();
    /* before the next range: six pairs made, all-reduced on and freed (handles used again) */
    for (int k = 0; k < 6; k++) {
        rs_comms_add(0x10, 100 + (uint64_t)k, 2, 1, "mpi");
        rs_comms_allreduce(0x10);
        rs_comms_free(0x10);
    }
    rs_comms_add(0x20, 200, 4, 1, "mpi"); /* the job's, alive from here on */
    rs_comms_moment();                    /* a step before the range */
    rs_comms_range_begin();
    rs_comms_allreduce(0x20);
    rs_comms_allreduce(0x20);
    rs_comms_moment();
    for (int k = 0; k < 6; k++) CHECK(!listed(&l, 100 + (uint64_t)k));
    const rs_snapshot_comm *c = listed(&l, 200);
    CHECK(c && c->size == 4 && c->rank == 1 && !strcmp(c->kind, "mpi"));
    CHECK_EQ_U64(c ? c->allreduces : 99, 2);
    CHECK_EQ_U64(l.left_out - left0, 6);
    rs_comms_free(0x20);
    rs_comms_range_end();
    free(l.v);
}

TEST(the_jobs_communicator_freed_before_the_dump_is_listed)
{
    copy l = {0};
    rs_comms_range_begin(); /* the whole run, from init */
    rs_comms_add(0x30, 300, 2, 0, "mpi");
    rs_comms_add(0x31, 301, 2, 0, "mpi"); /* a library's, gone before the first step */
    rs_comms_free(0x31);
    rs_comms_moment(); /* step 0 */
    rs_comms_allreduce(0x30);
    rs_comms_moment(); /* step 1 */
    rs_comms_free(0x30); /* MPI_Comm_free before MPI_Finalize, which dumps */
    rs_comms_moment();
    const rs_snapshot_comm *c = listed(&l, 300);
    CHECK(c != NULL);
    CHECK_EQ_U64(c ? c->allreduces : 99, 1);
    CHECK(!listed(&l, 301));
    /* one made and freed between two steps of the range is short-lived too */
    rs_comms_add(0x32, 302, 2, 0, "mpi");
    rs_comms_free(0x32);
    rs_comms_moment();
    CHECK(!listed(&l, 302));
    rs_comms_range_end();
    free(l.v);
}

TEST(a_handle_used_again_unseen_is_a_new_communicator)
{
    copy l = {0};
    rs_comms_range_begin();
    rs_comms_add(0x40, 400, 2, 0, "nccl");
    rs_comms_allreduce(0x40);
    rs_comms_moment();
    rs_comms_add(0x40, 401, 4, 3, "nccl"); /* its destroy was not seen */
    rs_comms_allreduce(0x40);
    rs_comms_allreduce(0x40);
    CHECK_EQ_U64(rs_comms_id_of(0x40), 401);
    const rs_snapshot_comm *old = listed(&l, 400);
    CHECK_EQ_U64(old ? old->allreduces : 99, 1);
    const rs_snapshot_comm *now = listed(&l, 401);
    CHECK(now && now->size == 4 && now->rank == 3);
    CHECK_EQ_U64(now ? now->allreduces : 99, 2);
    rs_comms_moment();
    rs_comms_free(0x40);
    CHECK_EQ_U64(rs_comms_id_of(0x40), 0);
    rs_comms_allreduce(0x40); /* a freed handle is nobody's */
    now = listed(&l, 401);
    CHECK_EQ_U64(now ? now->allreduces : 99, 2);
    rs_comms_range_end();
    free(l.v);
}

TEST(all_reduces_are_counted_within_the_range)
{
    copy l = {0};
    rs_comms_add(0x50, 500, 2, 0, "mpi");
    for (int k = 0; k < 5; k++) rs_comms_allreduce(0x50); /* set-up, before the range */
    rs_comms_range_begin();
    for (int k = 0; k < 3; k++) rs_comms_allreduce(0x50);
    rs_comms_range_end();
    rs_comms_allreduce(0x50); /* after it */
    rs_comms_add(0x51, 501, 2, 0, "mpi"); /* made after the range: not of it */
    rs_comms_moment();
    const rs_snapshot_comm *c = listed(&l, 500);
    CHECK_EQ_U64(c ? c->allreduces : 99, 3);
    CHECK(!listed(&l, 501));
    rs_comms_free(0x50);
    rs_comms_free(0x51);
    free(l.v);
}

TEST(any_number_of_communicators_is_listed)
{
    /* more than a chunk of the table, a few freed and their slots used again meanwhile */
    enum { N = 300 };
    copy l = {0};
    rs_comms_range_begin();
    for (uint64_t k = 0; k < N; k++) {
        rs_comms_add(0x1000 + k, 10000 + k, 2, 0, "mpi");
        if (k % 50 == 0) {
            rs_comms_add(0x9000 + k, 90000 + k, 2, 0, "mpi");
            rs_comms_free(0x9000 + k);
        }
    }
    rs_comms_allreduce(0x1000 + N - 1);
    rs_comms_moment();
    listed(&l, 0);
    size_t mine = 0;
    for (size_t i = 0; i < l.n; i++) mine += l.v[i].id >= 10000 && l.v[i].id < 10000 + N;
    CHECK_EQ_U64(mine, N);
    const rs_snapshot_comm *last = listed(&l, 10000 + N - 1);
    CHECK_EQ_U64(last ? last->allreduces : 99, 1);
    for (uint64_t k = 0; k < N; k++) rs_comms_free(0x1000 + k);
    rs_comms_range_end();
    free(l.v);
}

TEST(all_reduces_on_many_communicators_each_count_on_their_own)
{
    /* a thread's recent handles are kept apart (the counter's cache): interleaved calls on handles
     * the cache may map to one entry, among hundreds alive, and a slot freed and taken by another
     * communicator while a thread still remembers it */
    enum { N = 300 };
    copy l = {0};
    rs_comms_range_begin();
    for (uint64_t k = 0; k < N; k++) rs_comms_add(0x7000 + 16 * k, 70000 + k, 2, 0, "mpi");
    for (int round = 0; round < 5; round++)
        for (uint64_t k = 0; k < N; k += 7) {
            rs_comms_allreduce(0x7000 + 16 * k);
            if (k % 2) rs_comms_allreduce(0x7000 + 16 * k);
        }
    rs_comms_moment();
    int wrong = 0;
    for (uint64_t k = 0; k < N; k++) {
        const rs_snapshot_comm *c = listed(&l, 70000 + k);
        uint64_t want = k % 7 ? 0 : k % 2 ? 10 : 5;
        wrong += !c || c->allreduces != want;
    }
    CHECK_EQ_U64(wrong, 0);
    rs_comms_range_end();
    for (uint64_t k = 0; k < N; k++) rs_comms_free(0x7000 + 16 * k);
    /* between ranges: freed slots are free again; one is taken by another handle */
    rs_comms_add(0x6000, 600, 2, 0, "mpi");
    rs_comms_allreduce(0x6000);
    rs_comms_free(0x6000);
    rs_comms_add(0x6010, 601, 2, 0, "mpi");
    rs_comms_range_begin();
    rs_comms_allreduce(0x6000); /* freed: nobody's, though this thread counted on it */
    rs_comms_allreduce(0x6010);
    const rs_snapshot_comm *c = listed(&l, 601);
    CHECK_EQ_U64(c ? c->allreduces : 99, 1);
    rs_comms_range_end();
    rs_comms_free(0x6010);
    free(l.v);
}

int main(void)
{
    RUN(a_librarys_communicators_freed_before_the_range_are_not_listed);
    RUN(the_jobs_communicator_freed_before_the_dump_is_listed);
    RUN(a_handle_used_again_unseen_is_a_new_communicator);
    RUN(all_reduces_are_counted_within_the_range);
    RUN(any_number_of_communicators_is_listed);
    RUN(all_reduces_on_many_communicators_each_count_on_their_own);
    return check_summary();
}
