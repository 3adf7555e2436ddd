/*
 * test_gather.c — the gather (rank/mpi/gather.c) keeps the snapshot the rank decoded for its own
 * summary as rank 0's full snapshot, instead of decoding the same encoding a second time, and
 * hands over every communicator the rank's snapshot lists (taken by the caller with its summary),
 * beside the summary.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "coord.h"
#include "gather.h"
#include "snapshot_fixture.h"
#include "summary.h"

/* How rank 0 reads the other ranks' bytes (none come here: the job is of one rank). */
static ranksnap_status decode_rsnap(const char *buf, size_t len, const char *name, rs_snap **out)
{
    return rs_rsnap_decode(buf, len, name, out);
}

TEST(rank_0_keeps_the_snapshot_its_summary_was_made_from)
{
    fixture f;
    size_t len = 0;
    CHECK(fixture_init(&f, 1) == 0);
    char *buf = fixture_encode(&f, &len);
    rs_snap *self = NULL;
    CHECK(buf && rs_rsnap_decode(buf, len, "self", &self) == RANKSNAP_OK);
    rs_summary mine;
    rs_summary_of(self, &mine);
    rs_coord *c = NULL;
    CHECK(rs_coord_create(NULL, &c) == RANKSNAP_OK);
    rs_gather_result g;
    rs_rank_comms comms;
    CHECK(rs_rank_comms_of(self, &comms) == RANKSNAP_OK);
    CHECK(rs_gather_run(c, decode_rsnap, buf, len, &mine, &comms, self, RS_GATHER_ALL, 5, 5.0,
                        &g) == RANKSNAP_OK);
    CHECK_EQ_U64(g.n, 1);
    CHECK(g.full[0] == self); /* the same snapshot, not a second decode of `buf` */
    CHECK_EQ_U64(g.summaries[0].peak_allocated, mine.peak_allocated);
    rs_gather_result_free(&g); /* frees `self`, which the gather took over */
    rs_coord_destroy(c);
    free(buf);
    fixture_free(&f);
}

TEST(a_rank_whose_snapshot_did_not_decode_still_gathers_its_summary)
{
    rs_summary mine;
    memset(&mine, 0, sizeof mine);
    mine.world_size = 1;
    rs_coord *c = NULL;
    CHECK(rs_coord_create(NULL, &c) == RANKSNAP_OK);
    rs_gather_result g;
    rs_rank_comms comms;
    memset(&comms, 0, sizeof comms);
    CHECK(rs_gather_run(c, decode_rsnap, "", 0, &mine, &comms, NULL, RS_GATHER_ALL, 5, 5.0, &g) ==
          RANKSNAP_OK);
    CHECK_EQ_U64(g.n, 1);
    CHECK(g.full[0] == NULL);
    rs_gather_result_free(&g);
    rs_coord_destroy(c);
}

TEST(every_communicator_of_a_rank_comes_with_its_summary)
{
    /* more than a summary could hold, and the count of those the rank left out */
    enum { N = 10 };
    fixture f;
    size_t len = 0;
    CHECK(fixture_init(&f, 1) == 0);
    rs_snapshot_comm comms[N];
    memset(comms, 0, sizeof comms);
    for (int k = 0; k < N; k++) {
        comms[k].id = 100 + (uint64_t)k;
        comms[k].size = 2;
        comms[k].rank = k % 2;
        strcpy(comms[k].kind, "mpi");
        comms[k].allreduces = (uint64_t)k;
    }
    f.src.comms = comms;
    f.src.n_comms = N;
    f.src.comms_left_out = 6;
    char *buf = fixture_encode(&f, &len);
    rs_snap *self = NULL;
    CHECK(buf && rs_rsnap_decode(buf, len, "self", &self) == RANKSNAP_OK);
    rs_summary mine;
    rs_rank_comms mine_comms;
    memset(&mine_comms, 0, sizeof mine_comms);
    if (self) rs_summary_of(self, &mine);
    CHECK(self && rs_rank_comms_of(self, &mine_comms) == RANKSNAP_OK);
    rs_coord *c = NULL;
    CHECK(rs_coord_create(NULL, &c) == RANKSNAP_OK);
    rs_gather_result g;
    CHECK(self && rs_gather_run(c, decode_rsnap, buf, len, &mine, &mine_comms, self,
                                RS_GATHER_ALL, 5, 5.0, &g) == RANKSNAP_OK);
    CHECK_EQ_U64(mine_comms.n, 0); /* taken over */
    CHECK_EQ_U64(g.n, 1);
    CHECK_EQ_U64(g.comms[0].n, N);
    CHECK_EQ_U64(g.comms[0].left_out, 6);
    CHECK(g.comms[0].n == N && g.comms[0].v[N - 1].id == 100 + N - 1 && g.comms[0].v[N - 1].allreduces == N - 1);
    rs_gather_result_free(&g);
    rs_coord_destroy(c);
    free(buf);
    fixture_free(&f);
}

int main(void)
{
    RUN(rank_0_keeps_the_snapshot_its_summary_was_made_from);
    RUN(a_rank_whose_snapshot_did_not_decode_still_gathers_its_summary);
    RUN(every_communicator_of_a_rank_comes_with_its_summary);
    return check_summary();
}
