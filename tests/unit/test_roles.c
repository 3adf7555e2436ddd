/*
 * test_roles.c — the grouping of ranks into roles (roles.c) and the comparison within each role
 * (compare.c with a grouping): designed differences between roles give no verdict, an outlier
 * within one role is flagged against its role's median, and the role table names the role nearest
 * to running out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compare.h"
#include "roles.h"
#include "synth_snapshot.h"

TEST(parse_gives_each_rank_its_role_in_rank_order)
{
    rs_roles r;
    CHECK(rs_roles_parse("pp=2,tp=2,dp=3", "--groups", &r) == RANKSNAP_OK);
    CHECK(r.world_size == 12 && r.n_roles == 4);
    /* dp innermost: ranks 0-2 are pp=0,tp=0; 3-5 pp=0,tp=1; 6-8 pp=1,tp=0 */
    CHECK(rs_roles_of(&r, 0) == 0 && rs_roles_of(&r, 2) == 0);
    CHECK(rs_roles_of(&r, 3) == 1 && rs_roles_of(&r, 6) == 2 && rs_roles_of(&r, 11) == 3);
    CHECK(strcmp(r.labels[1], "pp=0,tp=1") == 0 && strcmp(r.labels[2], "pp=1,tp=0") == 0);
    CHECK(rs_roles_of(&r, 12) == -1 && rs_roles_of(&r, -1) == -1);
    /* each rank's replica index is its dp coordinate; the key is the label */
    CHECK(rs_roles_replica_of(&r, 0) == 0 && rs_roles_replica_of(&r, 5) == 2 &&
          rs_roles_replica_of(&r, 9) == 0 && rs_roles_replica_of(&r, 12) == -1);
    CHECK(strcmp(r.keys[2], "pp=1,tp=0") == 0 && !r.keys_by_order);
    rs_roles_free(&r);
    /* dp outermost: the replicas are far apart in rank order */
    CHECK(rs_roles_parse("dp=2,pp=2", "x", &r) == RANKSNAP_OK);
    CHECK(rs_roles_of(&r, 0) == 0 && rs_roles_of(&r, 1) == 1 && rs_roles_of(&r, 2) == 0);
    CHECK(rs_roles_replica_of(&r, 1) == 0 && rs_roles_replica_of(&r, 3) == 1);
    rs_roles_free(&r);
}

TEST(parse_refuses_what_is_not_a_grouping)
{
    rs_roles r;
    const char *bad[] = {"", "pp", "pp=", "pp=0,dp=2", "pp=2,pp=2", "pp=2;dp=2", "pp=x", "=4",
                         "a=2,b=2,c=2,d=2,e=2,f=2,g=2", "pp=100000,dp=100000"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(rs_roles_parse(bad[i], "x", &r) == RANKSNAP_ERR_INVALID_ARGUMENT);
        CHECK(r.role_of == NULL);
    }
}

/* The spellings jobs use for the replicas' dimension (upper case, data, data-parallel, torchtitan's
 * dp_shard) make the same roles as dp, and the source says which dimension was taken. */
TEST(parse_takes_the_replicas_in_the_spellings_jobs_use)
{
    const char *same[] = {"PP=2,DP=3", "pp=2,data=3", "pp=2,data-parallel=3", "Pp=2,dp_shard=3",
                          "pp=2,FSDP=3"};
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        rs_roles r;
        CHECK(rs_roles_parse(same[i], "--groups", &r) == RANKSNAP_OK);
        CHECK(r.world_size == 6 && r.n_roles == 2);
        CHECK(rs_roles_of(&r, 2) == 0 && rs_roles_of(&r, 3) == 1);
        CHECK(r.replicas[0] != '\0');
        rs_roles_free(&r);
    }
    rs_roles r;
    CHECK(rs_roles_parse("pp=2,dp=3", "--groups pp=2,dp=3", &r) == RANKSNAP_OK);
    CHECK(strcmp(r.replicas, "dp") == 0);
    rs_roles_free(&r);
    CHECK(rs_roles_parse("pp=2,PP=3", "x", &r) == RANKSNAP_ERR_INVALID_ARGUMENT); /* twice, any case */
}

/* A grouping in which every rank is its own role would compare nobody and report "no rank
 * diverges": refused, naming the fix. */
TEST(parse_refuses_a_grouping_where_no_rank_has_a_peer)
{
    rs_roles r;
    CHECK(rs_roles_parse("pp=4,data4=4", "x", &r) == RANKSNAP_ERR_INVALID_ARGUMENT);
    CHECK(r.role_of == NULL);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "no dimension holds the replicas");
    CHECK_STR_CONTAINS(ranksnap_last_error(), "e.g. pp=4,dp=4");
    CHECK(rs_roles_parse("tp=8", "x", &r) == RANKSNAP_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "e.g. tp=4,dp=2");
    CHECK(rs_roles_parse("pp=4,dp=1", "x", &r) == RANKSNAP_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "the replicas' dimension has size 1");
    /* replicas alone: one role of every rank */
    CHECK(rs_roles_parse("dp=4", "x", &r) == RANKSNAP_OK);
    CHECK(r.n_roles == 1);
    rs_roles_free(&r);
}

/* 8 ranks, pp=2 x dp=4: stage 0 holds twice the activations of stage 1 by design. */
static rs_compare_result *two_stages(train_cfg *cfg, rs_snap **full, rs_summary *sums,
                                     const rs_roles *roles)
{
    for (int i = 0; i < 8; i++) {
        full[i] = synth_train(i, 8, "job-1", &cfg[i]);
        rs_summary_of(full[i], &sums[i]);
    }
    rs_compare_config c;
    rs_compare_config_default(&c);
    c.roles = roles;
    rs_compare_result *r = NULL;
    CHECK(rs_compare(sums, (const rs_snap *const *)full, 8, 0, &c, &r) == RANKSNAP_OK);
    return r;
}

TEST(each_rank_is_compared_with_its_role)
{
    train_cfg cfg[8];
    rs_snap *full[8];
    rs_summary sums[8];
    for (int i = 0; i < 8; i++) {
        cfg[i] = train_default();
        cfg[i].act_factor = i < 4 ? 2.0 : 1.0;
    }
    cfg[5].act_factor = 1.3; /* one replica of stage 1 */
    rs_roles roles;
    CHECK(rs_roles_parse("pp=2,dp=4", "--groups pp=2,dp=4", &roles) == RANKSNAP_OK);
    rs_compare_result *r = two_stages(cfg, full, sums, &roles);
    CHECK(r && r->n_divergent == 1);
    if (r && r->n_divergent == 1) {
        CHECK(r->divergent[0].rank == 5 && r->divergent[0].role == 1);
        CHECK(r->divergent[0].divergence_pct > 0 && r->divergent[0].n_sites > 0);
        CHECK(r->divergent[0].sites[0].site.bytes > 0);
    }
    CHECK(r && r->n_roles == 2 && strcmp(r->roles[0].label, "pp=0") == 0);
    CHECK(r && r->roles[0].max_peak > r->roles[1].max_peak && r->roles[0].n_ranks == 4);
    CHECK(r && r->roles[1].max_rank == 5);
    CHECK(r && r->nearest_role == 0 && strcmp(r->grouping, "--groups pp=2,dp=4") == 0);
    rs_compare_result_free(r);
    for (int i = 0; i < 8; i++) rs_snap_free(full[i]);

    /* without the grouping, the same ranks: the outlier of stage 1 is not what is flagged alone */
    r = two_stages(cfg, full, sums, NULL);
    CHECK(r && r->n_roles == 0 && r->nearest_role == -1);
    int only_5 = r && r->n_divergent == 1 && r->divergent[0].rank == 5;
    CHECK(!only_5);
    for (size_t i = 0; r && i < r->n_divergent; i++) CHECK(r->divergent[i].role == -1);
    rs_compare_result_free(r);
    for (int i = 0; i < 8; i++) rs_snap_free(full[i]);
    rs_roles_free(&roles);
}

/* The words of how a rank's steps were numbered are cut to the summary's field without losing
 * the setting they end with: the report must show the exact RANKSNAP_STEP_ON to use. */
TEST(summary_keeps_the_step_on_setting_of_a_long_steps_from)
{
    train_cfg cfg = {4, 2, 1 << 20, 1 << 20, 1.0, -1, 0, -1, 0, -1, 0};
    rs_snap *s = synth_train(0, 1, "job-1", &cfg);
    const char *want = "; try RANKSNAP_STEP_ON=ncclReduceScatter:48";
    s->time.steps_from = strdup("none: a pattern of 1 calls held over 3 of 123456789 calls (128 needed) "
                                "while the rank looked; try RANKSNAP_STEP_ON=ncclReduceScatter:48");
    rs_summary sum;
    rs_summary_of(s, &sum);
    size_t n = strlen(sum.steps_from), w = strlen(want);
    CHECK(n < sizeof sum.steps_from && n > w);
    CHECK(n > w && strcmp(sum.steps_from + n - w, want) == 0);
    CHECK(strncmp(sum.steps_from, "none: a pattern of 1 calls", 26) == 0);
    CHECK_STR_CONTAINS(sum.steps_from, "...; try");
    rs_snap_free(s);
}

int main(void)
{
    RUN(parse_gives_each_rank_its_role_in_rank_order);
    RUN(parse_refuses_what_is_not_a_grouping);
    RUN(parse_takes_the_replicas_in_the_spellings_jobs_use);
    RUN(parse_refuses_a_grouping_where_no_rank_has_a_peer);
    RUN(each_rank_is_compared_with_its_role);
    RUN(summary_keeps_the_step_on_setting_of_a_long_steps_from);
    return check_summary();
}
