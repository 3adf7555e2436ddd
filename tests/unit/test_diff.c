/*
 * test_diff.c — two runs compared (diff.c, diff_pair.c, diff_gate.c) from summaries made here:
 * how ranks are paired (by rank, by role and replica index, by number, not at all) and what the
 * pairing says; what changed, since which step, and which sites explain it (added, grown); a
 * role whose median moved explains its ranks; the gate's conditions, parsed and checked.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "diff.h"
#include "diff_gate.h"
#include "roles.h"

#define MIB ((uint64_t)1 << 20)
#define MAX_RANKS 16

/* One run being built: summaries, their sites in full, and a grouping. */
typedef struct run {
    rs_summary sums[MAX_RANKS];
    rs_summary_sites sites[MAX_RANKS];
    rs_site lists[MAX_RANKS][4];
    const rs_summary_sites *site_ptrs[MAX_RANKS];
    rs_roles roles;
    rs_diff_run dr;
} run;

static void site(rs_site *s, const char *function, int line, uint64_t bytes)
{
    memset(s, 0, sizeof *s);
    snprintf(s->function, sizeof s->function, "%s", function);
    snprintf(s->file, sizeof s->file, "train.c");
    s->line = line;
    s->bytes = (int64_t)bytes;
    s->blocks = 1;
}

/* n ranks of `world`, each peaking at `peak` MiB over steps 0-7 (flat after step 0), its bytes
 * at two sites; the grouping `groups` (NULL: none). */
static void make_run(run *r, int n, int world, uint64_t peak, const char *groups)
{
    memset(r, 0, sizeof *r);
    for (int i = 0; i < n; i++) {
        rs_summary *s = &r->sums[i];
        s->rank = i;
        s->world_size = world;
        s->complete = 1;
        s->peak_allocated = peak * MIB;
        s->peak_reserved = s->reserved_at_peak = (peak + 20) * MIB;
        s->device_total = 80 * 1024 * MIB;
        s->n_steps = 8;
        s->step_stride = 1;
        for (int k = 0; k < 8; k++) s->step_peak[k] = peak * MIB;
        site(&r->lists[i][0], "weights", 10, (peak - 40) * MIB);
        site(&r->lists[i][1], "activations", 20, 40 * MIB);
        r->sites[i] = (rs_summary_sites){.ok = 1, .n = 2, .sites = r->lists[i]};
        r->site_ptrs[i] = &r->sites[i];
        s->n_sites = 2;
        memcpy(s->sites, r->lists[i], 2 * sizeof *s->sites);
    }
    if (groups) CHECK(rs_roles_parse(groups, "--groups", &r->roles) == RANKSNAP_OK);
    r->dr = (rs_diff_run){"run", (size_t)n, r->sums, r->site_ptrs, world,
                          groups ? &r->roles : NULL};
}

/* Rank i of r holds `extra` MiB more from step `from` on, at a site of its own (new: added). */
static void grow(run *r, int i, uint64_t extra, int from, int per_step)
{
    rs_summary *s = &r->sums[i];
    for (int k = from; k < 8; k++)
        s->step_peak[k] += (per_step ? (uint64_t)(k - from + 1) : 1) * extra * MIB;
    s->peak_allocated = s->step_peak[7];
    s->peak_reserved = s->reserved_at_peak = s->peak_allocated + 20 * MIB;
    site(&r->lists[i][2], "new_cache", 30, s->peak_allocated - s->step_peak[0]);
    r->sites[i].n = 3;
}

/* Before and after: nb ranks of world wb and na of wa, all at `peak` MiB, with their groupings. */
static void make_runs(run *b, run *a, int nb, int na, uint64_t peak, const char *gb, const char *ga)
{
    make_run(b, nb, nb, peak, gb);
    make_run(a, na, na, peak, ga);
}

static rs_diff_result *diff_of(run *b, run *a)
{
    rs_diff_config cfg;
    rs_diff_config_default(&cfg);
    rs_diff_result *r = NULL;
    CHECK(rs_diff(&b->dr, &a->dr, &cfg, &r) == RANKSNAP_OK);
    return r;
}

/* Frees the result and the runs' groupings. */
static void done(rs_diff_result *r, run *b, run *a)
{
    rs_diff_result_free(r);
    rs_roles_free(&b->roles);
    rs_roles_free(&a->roles);
}

static run B, A; /* large: not on the stack */

TEST(the_same_ranks_pair_by_rank_and_nothing_changed)
{
    make_runs(&B, &A, 4, 4, 200, NULL, NULL);
    rs_diff_result *r = diff_of(&B, &A);
    if (!r) return;
    CHECK(r->paired_by == RS_DIFF_BY_RANK && r->n_pairs == 4 && r->n_changed == 0);
    CHECK_STR_CONTAINS(r->pairing, "both runs have 4 ranks and neither has roles");
    CHECK(!r->job.changed && r->parting_step == -1);
    done(r, &B, &A);
}

TEST(a_rank_that_grew_is_explained_by_the_site_added_and_its_step)
{
    make_runs(&B, &A, 4, 4, 200, NULL, NULL);
    grow(&A, 2, 30, 3, 0);
    rs_diff_result *r = diff_of(&B, &A);
    if (!r) return;
    CHECK(r->n_changed == 1 && r->pairs[2].changed && r->pairs[2].explained);
    const rs_diff_why *w = &r->pairs[2].why;
    CHECK(w->sites_full && w->n_sites >= 1);
    if (w->n_sites) {
        CHECK(strcmp(w->sites[0].cs.site.function, "new_cache") == 0);
        CHECK(w->sites[0].kind == RS_DIFF_SITE_ADDED);
        CHECK_EQ_U64(w->sites[0].cs.site.bytes, 30 * MIB);
    }
    CHECK(w->has_trend && !w->trend.growth && w->trend.first_step == 3);
    CHECK(r->parting_step == 3);
    CHECK(!r->pairs[0].changed && !r->pairs[0].explained);
    done(r, &B, &A);
}

/* 6 MiB on 200 MiB (3%): no change at the default 5%, one at 2% */
TEST(a_change_below_the_threshold_is_none)
{
    make_runs(&B, &A, 4, 4, 200, NULL, NULL);
    grow(&A, 1, 6, 0, 0);
    rs_diff_result *r = diff_of(&B, &A);
    if (!r) return;
    CHECK(r->n_changed == 0 && !r->pairs[1].changed);
    rs_diff_result_free(r);
    rs_diff_config cfg;
    rs_diff_config_default(&cfg);
    cfg.threshold_pct = 2.0;
    r = NULL;
    CHECK(rs_diff(&B.dr, &A.dr, &cfg, &r) == RANKSNAP_OK);
    if (r) CHECK(r->n_changed == 1 && r->pairs[1].changed);
    done(r, &B, &A);
}

TEST(a_leak_is_growth_from_the_step_it_starts)
{
    make_runs(&B, &A, 4, 4, 200, NULL, NULL);
    grow(&A, 1, 16, 2, 1);
    rs_diff_result *r = diff_of(&B, &A);
    if (!r) return;
    const rs_diff_why *w = &r->pairs[1].why;
    CHECK(r->pairs[1].explained && w->has_trend && w->trend.growth);
    CHECK(w->trend.first_step == 2);
    CHECK(fabs(w->trend.growth_per_step - 16.0 * MIB) < 1.0 * MIB);
    done(r, &B, &A);
}

TEST(sixteen_ranks_pair_with_eight_by_role_and_replica_index)
{
    make_runs(&B, &A, 8, 16, 200, "pp=4,dp=2", "pp=4,dp=4");
    rs_diff_result *r = diff_of(&B, &A);
    if (!r) return;
    CHECK(r->paired_by == RS_DIFF_BY_ROLE && r->n_pairs == 8 && r->n_groups == 4);
    CHECK(r->n_unpaired[0] == 0 && r->n_unpaired[1] == 8);
    /* before's rank 3 (pp=1, replica 1) against after's rank 5 (pp=1, replica 1) */
    CHECK(r->pairs[3].side[0].rank == 3 && r->pairs[3].side[1].rank == 5 && r->pairs[3].replica == 1);
    CHECK(strcmp(r->groups[1].key, "pp=1") == 0 && r->groups[1].n_ranks[0] == 2 &&
          r->groups[1].n_ranks[1] == 4);
    CHECK_STR_CONTAINS(r->pairing, "ranks paired by role and replica index: 8 ranks before, 16 after");
    CHECK_STR_CONTAINS(r->pairing, "8 ranks of after have no counterpart: replicas 2-3 of their roles");
    done(r, &B, &A);
}

TEST(a_role_whose_median_moved_explains_its_ranks)
{
    make_runs(&B, &A, 8, 8, 200, "pp=2,dp=4", "pp=2,dp=4");
    for (int i = 4; i < 8; i++) grow(&A, i, 40, 0, 0);
    rs_diff_result *r = diff_of(&B, &A);
    if (!r) return;
    CHECK(r->paired_by == RS_DIFF_BY_RANK);
    CHECK(r->groups[1].changed && r->groups[1].explained && !r->groups[0].changed);
    CHECK(r->n_changed == 4);
    for (int i = 4; i < 8; i++) CHECK(r->pairs[i].as_its_role && !r->pairs[i].explained);
    done(r, &B, &A);
}

TEST(roles_that_differ_pair_by_number_and_say_so)
{
    make_runs(&B, &A, 16, 16, 200, "pp=4,dp=4", "pp=2,dp=8");
    rs_diff_result *r = diff_of(&B, &A);
    if (!r) return;
    CHECK(r->paired_by == RS_DIFF_BY_NUMBER && r->n_pairs == 16 && r->n_groups == 0);
    CHECK_STR_CONTAINS(r->pairing, "the roles differ (before: 4 roles from --groups; after: 2 roles");
    done(r, &B, &A);
}

TEST(sizes_and_roles_that_differ_are_not_paired)
{
    make_run(&B, 8, 8, 200, "pp=4,dp=2");
    make_run(&A, 16, 16, 240, "pp=2,dp=8");
    rs_diff_result *r = diff_of(&B, &A);
    if (!r) return;
    CHECK(r->paired_by == RS_DIFF_NOT_PAIRED && r->n_pairs == 0);
    CHECK(r->n_unpaired[0] == 8 && r->n_unpaired[1] == 16);
    CHECK_STR_CONTAINS(r->pairing, "ranks not paired: 8 ranks before and 16 after");
    /* the jobs as a whole still are */
    CHECK(r->job.changed && r->job.side[1].peak == 240 * MIB);
    done(r, &B, &A);
}

TEST(no_roles_and_other_sizes_pair_by_number_and_say_what_was_assumed)
{
    make_runs(&B, &A, 4, 8, 200, NULL, NULL);
    rs_diff_result *r = diff_of(&B, &A);
    if (!r) return;
    CHECK(r->paired_by == RS_DIFF_BY_NUMBER && r->n_pairs == 4 && r->n_unpaired[1] == 4);
    CHECK_STR_CONTAINS(r->pairing, "every rank is taken as a replica of the others");
    CHECK_STR_CONTAINS(r->pairing, "--before-groups");
    done(r, &B, &A);
}

TEST(one_file_each_pairs_them_as_given)
{
    make_run(&B, 1, 4, 200, NULL);
    make_run(&A, 1, 4, 200, NULL);
    A.sums[0].rank = 3;
    rs_diff_result *r = diff_of(&B, &A);
    if (!r) return;
    CHECK(r->n_pairs == 1 && r->pairs[0].side[1].rank == 3);
    CHECK_STR_CONTAINS(r->pairing, "paired as given: rank 0 before against rank 3 after");
    done(r, &B, &A);
}

TEST(gate_conditions_parse_and_bad_ones_are_refused_by_name)
{
    rs_diff_gate g;
    memset(&g, 0, sizeof g);
    CHECK(rs_diff_gate_parse(&g, "peak>5%") == RANKSNAP_OK);
    CHECK(rs_diff_gate_parse(&g, " reserved > 1GiB , headroom<10%,oom") == RANKSNAP_OK);
    CHECK(rs_diff_gate_parse(&g, "outside>512MiB") == RANKSNAP_OK);
    CHECK(g.n == 5);
    CHECK(g.c[0].measure == RS_GATE_PEAK && g.c[0].is_pct && g.c[0].pct == 5.0);
    CHECK(g.c[1].measure == RS_GATE_RESERVED && !g.c[1].is_pct && g.c[1].bytes == 1024 * MIB);
    CHECK(g.c[2].measure == RS_GATE_HEADROOM && g.c[2].is_pct && g.c[2].pct == 10.0);
    CHECK(g.c[3].measure == RS_GATE_OOM && g.c[4].bytes == 512 * MIB);
    const char *bad[] = {"peek>5%", "peak<5%", "headroom>4GiB", "peak>", "peak>x%", "oom>1", "",
                         "peak>5%,", "peak>5 apples", "headroom<200%", "peak>-5%"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(rs_diff_gate_parse(&g, bad[i]) == RANKSNAP_ERR_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(ranksnap_last_error(), "--fail-on '");
    }
    CHECK_STR_CONTAINS((rs_diff_gate_parse(&g, "peek>5%"), ranksnap_last_error()), "expected a measure");
    rs_diff_gate_free(&g);
}

TEST(gate_fails_past_its_limit_and_passes_below_it)
{
    make_runs(&B, &A, 4, 4, 200, NULL, NULL);
    grow(&A, 2, 40, 0, 0); /* +20% */
    rs_diff_result *r = diff_of(&B, &A);
    if (!r) return;
    const char *conds[] = {"peak>5%", "peak>50%", "peak>32MiB", "peak>1GiB", "headroom<80GiB", "oom"};
    const int fails[] = {1, 0, 1, 0, 1, 0};
    for (size_t i = 0; i < sizeof conds / sizeof *conds; i++) {
        rs_diff_gate g;
        memset(&g, 0, sizeof g);
        CHECK(rs_diff_gate_parse(&g, conds[i]) == RANKSNAP_OK);
        CHECK(rs_diff_gate_check(&g, r) == RANKSNAP_OK);
        if (rs_diff_gate_failed(&g) != fails[i]) fprintf(stderr, "  condition %s\n", conds[i]);
        CHECK(rs_diff_gate_failed(&g) == fails[i]);
        if (i == 0) {
            /* rank 2 and the job (its largest peak) */
            CHECK(g.n_hits == 2 && g.hits[0].on == RS_GATE_ON_RANK && g.hits[0].index == 2);
            CHECK(fabs(g.hits[0].value - 20.0) < 0.01);
        }
        if (i == 1) CHECK(g.c[0].has_worst && fabs(g.c[0].worst_value - 20.0) < 0.01);
        rs_diff_gate_free(&g);
    }
    done(r, &B, &A);
}

TEST(gate_on_headroom_without_a_known_capacity_cannot_be_checked)
{
    make_runs(&B, &A, 4, 4, 200, NULL, NULL);
    for (int i = 0; i < 4; i++) A.sums[i].device_total = 0; /* as PyTorch's pickles */
    rs_diff_result *r = diff_of(&B, &A);
    if (!r) return;
    rs_diff_gate g;
    memset(&g, 0, sizeof g);
    CHECK(rs_diff_gate_parse(&g, "headroom<4GiB") == RANKSNAP_OK);
    CHECK(rs_diff_gate_check(&g, r) == RANKSNAP_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "cannot be checked");
    CHECK(!rs_diff_gate_failed(&g));
    rs_diff_gate_free(&g);
    done(r, &B, &A);
}

TEST(gate_on_oom_fails_when_a_rank_of_after_ran_out)
{
    make_runs(&B, &A, 4, 4, 200, NULL, NULL);
    A.sums[3].oom = 1;
    rs_diff_result *r = diff_of(&B, &A);
    if (!r) return;
    rs_diff_gate g;
    memset(&g, 0, sizeof g);
    CHECK(rs_diff_gate_parse(&g, "oom") == RANKSNAP_OK);
    CHECK(rs_diff_gate_check(&g, r) == RANKSNAP_OK && rs_diff_gate_failed(&g));
    CHECK(g.n_hits >= 1 && g.hits[0].on == RS_GATE_ON_RANK && g.hits[0].index == 3);
    rs_diff_gate_free(&g);
    done(r, &B, &A);
}

int main(void)
{
    RUN(the_same_ranks_pair_by_rank_and_nothing_changed);
    RUN(a_rank_that_grew_is_explained_by_the_site_added_and_its_step);
    RUN(a_change_below_the_threshold_is_none);
    RUN(a_leak_is_growth_from_the_step_it_starts);
    RUN(sixteen_ranks_pair_with_eight_by_role_and_replica_index);
    RUN(a_role_whose_median_moved_explains_its_ranks);
    RUN(roles_that_differ_pair_by_number_and_say_so);
    RUN(sizes_and_roles_that_differ_are_not_paired);
    RUN(no_roles_and_other_sizes_pair_by_number_and_say_what_was_assumed);
    RUN(one_file_each_pairs_them_as_given);
    RUN(gate_conditions_parse_and_bad_ones_are_refused_by_name);
    RUN(gate_fails_past_its_limit_and_passes_below_it);
    RUN(gate_on_headroom_without_a_known_capacity_cannot_be_checked);
    RUN(gate_on_oom_fails_when_a_rank_of_after_ran_out);
    return check_summary();
}
