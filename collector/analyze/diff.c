/*
 * diff.c — owns the comparison of two runs (diff.h): each pair's and each role's measures on both
 * sides, what changed beyond the threshold, and why — the sites of the two ranks set against each
 * other (site_delta.h) and the step at which their per-step peaks part (step_trend.h).
 *
 * The rules:
 * - a measure changed when |after - before| exceeds threshold_pct% of before and 1 MiB (runs of
 *   one program differ by a few blocks); a pair or role changed when its peak, reserved or outside
 *   memory did (a role's median peak too). A rank that recorded nothing on one side is not
 *   compared: it is said so.
 * - a role's median and median rank are those of the comparison of the run's own ranks
 *   (compare.h: ranks with data that did not run out of memory), so the diff and the report of
 *   either run name the same median rank.
 * - a changed pair of a changed role is "as its role" when its change is within the threshold of
 *   the role's median change: the role's explanation holds for it and it is not explained again.
 *   The others are explained site by site, the largest changes first, up to max_explained.
 * - an explanation sets after's sites against before's (in full when both ranks' are at hand,
 *   else their summaries' top sites, and a note says so), in the direction of the change; a site
 *   is added (no bytes there before), removed (none after), grown or shrunk. Its step is where
 *   after's per-step peaks part from before's: the first step past the threshold (an offset), or
 *   the start of a per-step growth of the difference (a leak), over the steps both recorded.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "diff.h"
#include "diff_pair.h"
#include "errors.h"
#include "notes.h"
#include "sat.h"

#define MIB ((uint64_t)1 << 20)

void rs_diff_config_default(rs_diff_config *c)
{
    c->threshold_pct = 5.0;
    c->max_sites = 10;
    c->max_explained = 16;
}

double rs_diff_pct(uint64_t before, uint64_t after)
{
    if (before == 0) return after == 0 ? 0.0 : (double)INFINITY;
    return 100.0 * ((double)after - (double)before) / (double)before;
}

static void why_free(rs_diff_why *w)
{
    free(w->sites);
    w->sites = NULL;
    w->n_sites = 0;
}

void rs_diff_result_free(rs_diff_result *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n_pairs; i++) why_free(&r->pairs[i].why);
    free(r->pairs);
    for (size_t k = 0; k < r->n_groups; k++) why_free(&r->groups[k].why);
    free(r->groups);
    why_free(&r->job.why);
    for (int side = 0; side < 2; side++) {
        free(r->unpaired[side]);
        free(r->ranks[side]);
        free(r->rank_role[side]);
        free(r->role_labels[side]);
    }
    for (size_t i = 0; i < r->n_notes; i++) free(r->notes[i]);
    free(r->notes);
    free(r);
}

/* ---- measures ------------------------------------------------------------------------------ */

static void level_of(const rs_summary *s, rs_diff_level *l)
{
    memset(l, 0, sizeof *l);
    l->rank = s->rank;
    l->has_data = rs_summary_has_data(s);
    l->peak = rs_summary_peak(s);
    l->reserved = s->peak_reserved;
    l->outside = s->outside_peak;
    l->fragmentation = rs_summary_fragmentation(s);
    l->fragmentation_known = !s->totals_only;
    l->capacity = rs_summary_capacity(s);
    if (l->capacity) l->headroom = rs_sat_sub_i64(rs_sat_i64(l->capacity), rs_sat_i64(l->peak));
    l->oom = s->oom;
}

/* A role's (the job's) measures: the largest of its ranks', the smallest headroom of those whose
 * capacity is known; `*any` says whether one was folded in yet. */
static void level_fold(rs_diff_level *g, const rs_diff_level *l, int *any)
{
    if (!l->has_data) return;
    if (!*any) {
        *g = *l;
        *any = 1;
        return;
    }
    if (l->peak > g->peak) {
        g->peak = l->peak;
        g->rank = l->rank;
    }
    if (l->reserved > g->reserved) g->reserved = l->reserved;
    if (l->outside > g->outside) g->outside = l->outside;
    if (l->fragmentation > g->fragmentation) g->fragmentation = l->fragmentation;
    g->fragmentation_known &= l->fragmentation_known;
    if (l->capacity && (!g->capacity || l->headroom < g->headroom)) {
        g->capacity = l->capacity;
        g->headroom = l->headroom;
    }
    g->oom |= l->oom;
}

/* A change of d bytes from `base` is one: beyond pct% of base and 1 MiB. */
static int over(uint64_t d, uint64_t base, double pct)
{
    double thr = pct / 100.0 * (double)base;
    return (double)d > (thr > (double)MIB ? thr : (double)MIB);
}

static int beyond(uint64_t before, uint64_t after, double pct)
{
    return over(after > before ? after - before : before - after, before, pct);
}

static int level_changed(const rs_diff_level *b, const rs_diff_level *a, double pct)
{
    return b->has_data && a->has_data &&
           (beyond(b->peak, a->peak, pct) || beyond(b->reserved, a->reserved, pct) ||
            beyond(b->outside, a->outside, pct));
}

int64_t rs_diff_delta(uint64_t before, uint64_t after)
{
    return rs_sat_sub_i64(rs_sat_i64(after), rs_sat_i64(before));
}

static uint64_t abs64(int64_t v)
{
    return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

/* ---- explanations -------------------------------------------------------------------------- */

static int list_has(const rs_site_delta_list *l, const rs_site *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (rs_site_same(&l->v[i], s)) return 1;
    return 0;
}

static int cmp_rank_key(const void *key, const void *elem)
{
    int32_t r = *(const int32_t *)key, e = ((const rs_summary *)elem)->rank;
    return (r > e) - (r < e);
}

/* Index of `rank` in a run's summaries (rank order), or run->n. */
static size_t index_of(const rs_diff_run *run, int32_t rank)
{
    const rs_summary *s = run->n ? bsearch(&rank, run->sums, run->n, sizeof *run->sums, cmp_rank_key) : NULL;
    return s ? (size_t)(s - run->sums) : run->n;
}

static const rs_summary_sites *sites_at(const rs_diff_run *run, size_t i)
{
    const rs_summary_sites *s = run->sites ? run->sites[i] : NULL;
    return s && s->ok ? s : NULL;
}

/* Why after's summary at[1] differs from before's at[0]. */
static ranksnap_status explain(const rs_diff_run *const run[2], const size_t at[2],
                               const rs_diff_config *cfg, rs_diff_why *w)
{
    const rs_summary *b = &run[0]->sums[at[0]], *a = &run[1]->sums[at[1]];
    const rs_summary_sites *sb = sites_at(run[0], at[0]), *sa = sites_at(run[1], at[1]);
    memset(w, 0, sizeof *w);
    w->rank[0] = b->rank;
    w->rank[1] = a->rank;
    w->sites_full = sb && sa;
    uint64_t pb = rs_summary_peak(b), pa = rs_summary_peak(a);
    int sign = pa >= pb ? 1 : -1;
    rs_site_delta_list la, lb;
    memset(&lb, 0, sizeof lb);
    ranksnap_status st = rs_site_delta_list_of(a, NULL, w->sites_full ? sa : NULL, &la);
    if (st == RANKSNAP_OK) st = rs_site_delta_list_of(b, NULL, w->sites_full ? sb : NULL, &lb);
    rs_compare_site *v = NULL;
    size_t n = 0;
    if (st == RANKSNAP_OK) st = rs_site_deltas(&la, &lb, sign, cfg->max_sites, &v, &n);
    if (st == RANKSNAP_OK) {
        w->sites = malloc((n ? n : 1) * sizeof *w->sites);
        if (!w->sites) st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu sites", n);
    }
    int64_t listed = 0;
    for (size_t i = 0; st == RANKSNAP_OK && i < n; i++) {
        rs_diff_site *d = &w->sites[i];
        d->cs = v[i];
        d->kind = d->cs.site.bytes > 0 ? RS_DIFF_SITE_GROWN : RS_DIFF_SITE_SHRUNK;
        /* added or removed only where both lists are whole: a top-sites list lacks the rest */
        if (w->sites_full && !list_has(&lb, &d->cs.site)) d->kind = RS_DIFF_SITE_ADDED;
        if (w->sites_full && !list_has(&la, &d->cs.site)) d->kind = RS_DIFF_SITE_REMOVED;
        listed = rs_sat_add_i64(listed, d->cs.site.bytes);
        w->n_sites++;
    }
    free(v);
    rs_site_delta_list_free(&la);
    rs_site_delta_list_free(&lb);
    w->unattributed = rs_sat_sub_i64(rs_diff_delta(pb, pa), listed);
    rs_step_trend_of(a, b, sign, pa > pb ? pa - pb : pb - pa, cfg->threshold_pct, &w->trend);
    w->has_trend = w->trend.n_common > 0;
    return st;
}

/* ---- the comparison ------------------------------------------------------------------------ */

/* Each run compared on its own, for its roles' medians and median ranks (compare.h). */
static ranksnap_status compare_run(const rs_diff_run *run, rs_compare_result **out)
{
    rs_compare_config cfg;
    rs_compare_config_default(&cfg);
    cfg.roles = run->roles && run->roles->n_roles ? run->roles : NULL;
    return rs_compare(run->sums, NULL, run->n, run->world_size, &cfg, out);
}

/* A group's side: its ranks' measures folded, its median from the run's own comparison. */
static void group_side(const rs_diff_run *run, const rs_compare_result *cr, int32_t role,
                       rs_diff_group *g, int side)
{
    int any = 0;
    for (size_t i = 0; i < run->n; i++) {
        if (role >= 0 && rs_roles_of(run->roles, run->sums[i].rank) != role) continue;
        rs_diff_level l;
        level_of(&run->sums[i], &l);
        level_fold(&g->side[side], &l, &any);
        g->n_ranks[side] += l.has_data;
    }
    if (!any) g->side[side].rank = -1;
    if (role >= 0) {
        g->median_peak[side] = cr->roles[role].median_peak;
        g->median_rank[side] = cr->roles[role].reference_rank;
        snprintf(g->label[side], sizeof g->label[side], "%s", run->roles->labels[role]);
    } else {
        g->median_peak[side] = cr->median_peak;
        g->median_rank[side] = cr->reference_rank;
        snprintf(g->label[side], sizeof g->label[side], "all ranks");
    }
}

static ranksnap_status explain_group(const rs_diff_run *const run[2], const rs_diff_config *cfg,
                                     rs_diff_group *g)
{
    g->changed = g->side[0].has_data && g->side[1].has_data &&
                 (beyond(g->median_peak[0], g->median_peak[1], cfg->threshold_pct) ||
                  level_changed(&g->side[0], &g->side[1], cfg->threshold_pct));
    /* a role whose median held still changed by some of its ranks: they are explained */
    if (!g->changed || !beyond(g->median_peak[0], g->median_peak[1], cfg->threshold_pct) ||
        g->median_rank[0] < 0 || g->median_rank[1] < 0)
        return RANKSNAP_OK;
    size_t at[2] = {index_of(run[0], g->median_rank[0]), index_of(run[1], g->median_rank[1])};
    if (at[0] == run[0]->n || at[1] == run[1]->n) return RANKSNAP_OK;
    g->explained = 1;
    return explain(run, at, cfg, &g->why);
}

/* A changed pair and the sizes of its changes, to be ordered: peak first, then reserved and
 * outside memory, then the pair's place. */
typedef struct change_key {
    uint64_t d[3];
    size_t i;
} change_key;

static int cmp_change(const void *pa, const void *pb)
{
    const change_key *a = pa, *b = pb;
    for (int k = 0; k < 3; k++)
        if (a->d[k] != b->d[k]) return a->d[k] > b->d[k] ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

static ranksnap_status explain_pairs(const rs_diff_run *const run[2], const rs_diff_pairing *pg,
                                     const rs_diff_config *cfg, rs_diff_result *r)
{
    change_key *order = malloc((r->n_pairs ? r->n_pairs : 1) * sizeof *order);
    size_t m = 0;
    if (!order) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu pairs", r->n_pairs);
    for (size_t i = 0; i < r->n_pairs; i++) {
        rs_diff_pair *p = &r->pairs[i];
        if (!p->changed) continue;
        const rs_diff_group *g = p->group >= 0 ? &r->groups[p->group] : NULL;
        if (g && g->changed) {
            int64_t own = rs_diff_delta(p->side[0].peak, p->side[1].peak);
            int64_t role = rs_diff_delta(g->median_peak[0], g->median_peak[1]);
            p->as_its_role = !over(abs64(rs_sat_sub_i64(own, role)), p->side[0].peak, cfg->threshold_pct);
        }
        if (p->as_its_role) continue;
        order[m] = (change_key){{abs64(rs_diff_delta(p->side[0].peak, p->side[1].peak)),
                                 abs64(rs_diff_delta(p->side[0].reserved, p->side[1].reserved)),
                                 abs64(rs_diff_delta(p->side[0].outside, p->side[1].outside))}, i};
        m++;
    }
    qsort(order, m, sizeof *order, cmp_change);
    ranksnap_status st = RANKSNAP_OK;
    for (size_t k = 0; k < m && k < cfg->max_explained && st == RANKSNAP_OK; k++) {
        rs_diff_pair *p = &r->pairs[order[k].i];
        p->explained = 1;
        st = explain(run, pg->at[order[k].i], cfg, &p->why);
    }
    if (st == RANKSNAP_OK && m > cfg->max_explained)
        st = rs_notes_add(&r->notes, &r->n_notes, "%zu more ranks changed than the %zu explained site by site (the "
                                 "largest changes); the JSON report lists every rank's measures",
                              m - cfg->max_explained, cfg->max_explained);
    free(order);
    return st;
}

static void earliest(int64_t *step, const rs_diff_why *w)
{
    if (w->has_trend && w->trend.first_step >= 0 && (*step < 0 || w->trend.first_step < *step))
        *step = w->trend.first_step;
}

static ranksnap_status notes_of(rs_diff_result *r)
{
    static const char *const name[2] = {"before", "after"};
    size_t top = 0;
    for (size_t i = 0; i < r->n_pairs; i++) {
        const rs_diff_pair *p = &r->pairs[i];
        for (int side = 0; side < 2; side++)
            if (!p->side[side].has_data)
                RS_CHECK(rs_notes_add(&r->notes, &r->n_notes, "rank %d recorded nothing %s (no allocation, no OOM): "
                                             "its pair is not compared",
                                          (int)p->side[side].rank, name[side]));
        top += p->explained && !p->why.sites_full;
    }
    for (size_t k = 0; k < r->n_groups; k++) top += r->groups[k].explained && !r->groups[k].why.sites_full;
    if (top)
        RS_CHECK(rs_notes_add(&r->notes, &r->n_notes, "%zu explanation%s set%s the two runs' top %d sites against "
                                     "each other (no sites in full of both ranks): a site may be "
                                     "missing from either",
                                  top, top == 1 ? "" : "s", top == 1 ? "s" : "", RS_SUMMARY_MAX_SITES));
    return RANKSNAP_OK;
}

/* The growth against its peers that a run's own comparison found for `rank`, NULL when none. */
static const rs_compare_divergent *grows_in(const rs_compare_result *cr, int32_t rank)
{
    for (size_t i = 0; i < cr->n_divergent; i++)
        if (cr->divergent[i].rank == rank && cr->divergent[i].growth && cr->divergent[i].divergence_pct > 0)
            return &cr->divergent[i];
    return NULL;
}

/* The run's summaries and roles, kept for the reports. */
static ranksnap_status keep_run(const rs_diff_run *run, int side, rs_diff_result *r)
{
    size_t n = run->n, n_roles = run->roles ? run->roles->n_roles : 0;
    r->ranks[side] = malloc((n ? n : 1) * sizeof *r->ranks[side]);
    r->rank_role[side] = malloc((n ? n : 1) * sizeof *r->rank_role[side]);
    r->role_labels[side] = calloc(n_roles ? n_roles : 1, sizeof *r->role_labels[side]);
    if (!r->ranks[side] || !r->rank_role[side] || !r->role_labels[side])
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu summaries", n);
    for (size_t i = 0; i < n; i++) {
        r->ranks[side][i] = run->sums[i];
        r->rank_role[side][i] = n_roles ? rs_roles_of(run->roles, run->sums[i].rank) : -1;
    }
    for (size_t k = 0; k < n_roles; k++)
        memcpy(r->role_labels[side][k], run->roles->labels[k], sizeof r->role_labels[side][k]);
    r->n_role_labels[side] = n_roles;
    return RANKSNAP_OK;
}

static ranksnap_status diff_paired(const rs_diff_run *const run[2], const rs_diff_pairing *pg,
                                   const rs_diff_config *cfg, rs_compare_result *const cr[2],
                                   rs_diff_result *r)
{
    r->pairs = calloc(pg->n ? pg->n : 1, sizeof *r->pairs);
    r->groups = calloc(pg->n_roles ? pg->n_roles : 1, sizeof *r->groups);
    if (!r->pairs || !r->groups) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu pairs", pg->n);
    r->n_pairs = pg->n;
    r->n_groups = pg->n_roles;
    for (size_t k = 0; k < r->n_groups; k++) {
        rs_diff_group *g = &r->groups[k];
        snprintf(g->key, sizeof g->key, "%s", run[0]->roles->keys[pg->roles[k][0]]);
        for (int side = 0; side < 2; side++) group_side(run[side], cr[side], pg->roles[k][side], g, side);
        RS_CHECK(explain_group(run, cfg, g));
    }
    snprintf(r->job.key, sizeof r->job.key, "job");
    for (int side = 0; side < 2; side++) group_side(run[side], cr[side], -1, &r->job, side);
    r->job.changed = r->job.side[0].has_data && r->job.side[1].has_data &&
                     (beyond(r->job.median_peak[0], r->job.median_peak[1], cfg->threshold_pct) ||
                      level_changed(&r->job.side[0], &r->job.side[1], cfg->threshold_pct));
    for (size_t i = 0; i < r->n_pairs; i++) {
        rs_diff_pair *p = &r->pairs[i];
        p->at[0] = pg->at[i][0];
        p->at[1] = pg->at[i][1];
        p->group = pg->group[i];
        p->replica = pg->replica[i];
        for (int side = 0; side < 2; side++) level_of(&run[side]->sums[pg->at[i][side]], &p->side[side]);
        p->changed = level_changed(&p->side[0], &p->side[1], cfg->threshold_pct);
        r->n_changed += p->changed;
        for (int side = 0; side < 2; side++) {
            const rs_compare_divergent *d = grows_in(cr[side], p->side[side].rank);
            p->peer_growth[side] = d != NULL;
            p->peer_growth_per_step[side] = d ? d->growth_per_step : 0;
            p->peer_growth_since[side] = d ? d->first_divergent_step : -1;
        }
    }
    RS_CHECK(explain_pairs(run, pg, cfg, r));
    r->parting_step = -1;
    for (size_t i = 0; i < r->n_pairs; i++)
        if (r->pairs[i].explained) earliest(&r->parting_step, &r->pairs[i].why);
    for (size_t k = 0; k < r->n_groups; k++)
        if (r->groups[k].explained) earliest(&r->parting_step, &r->groups[k].why);
    return notes_of(r);
}

ranksnap_status rs_diff(const rs_diff_run *before, const rs_diff_run *after,
                        const rs_diff_config *cfg, rs_diff_result **out)
{
    if (!before || !after || !out || (before->n && !before->sums) || (after->n && !after->sums))
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_diff: NULL argument");
    *out = NULL;
    rs_diff_config def;
    if (!cfg) {
        rs_diff_config_default(&def);
        cfg = &def;
    }
    if (!(cfg->threshold_pct >= 0) || cfg->threshold_pct > 1e9)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_diff: threshold %g%%", cfg->threshold_pct);
    const rs_diff_run *const run[2] = {before, after};
    rs_diff_result *r = calloc(1, sizeof *r);
    if (!r) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory to compare two runs");
    r->threshold_pct = cfg->threshold_pct;
    r->parting_step = -1;
    rs_diff_pairing pg;
    rs_compare_result *cr[2] = {NULL, NULL};
    ranksnap_status st = rs_diff_pair_runs(before, after, &pg);
    for (int side = 0; side < 2 && st == RANKSNAP_OK; side++) {
        snprintf(r->source[side], sizeof r->source[side], "%s", run[side]->source ? run[side]->source : "");
        if (run[side]->roles && run[side]->roles->n_roles)
            snprintf(r->roles_source[side], sizeof r->roles_source[side], "%s", run[side]->roles->source);
        r->n_ranks[side] = run[side]->n;
        st = keep_run(run[side], side, r);
        if (st == RANKSNAP_OK) st = compare_run(run[side], &cr[side]);
        if (st == RANKSNAP_OK) r->world[side] = cr[side]->world_size;
    }
    if (st == RANKSNAP_OK) {
        r->paired_by = pg.paired_by;
        memcpy(r->pairing, pg.text, sizeof r->pairing);
        for (int side = 0; side < 2; side++) {
            r->n_unpaired[side] = pg.n_unpaired[side];
            r->unpaired[side] = pg.unpaired[side];
            pg.unpaired[side] = NULL;
        }
        st = diff_paired(run, &pg, cfg, cr, r);
    }
    rs_diff_pairing_free(&pg);
    rs_compare_result_free(cr[0]);
    rs_compare_result_free(cr[1]);
    if (st != RANKSNAP_OK) {
        rs_diff_result_free(r);
        return st;
    }
    *out = r;
    return RANKSNAP_OK;
}

int rs_diff_wants_sites(const rs_diff_result *r, int side, int32_t rank)
{
    for (size_t i = 0; i < r->n_pairs; i++)
        if (r->pairs[i].explained && r->pairs[i].why.rank[side] == rank) return 1;
    for (size_t k = 0; k < r->n_groups; k++)
        if (r->groups[k].explained && r->groups[k].why.rank[side] == rank) return 1;
    return 0;
}
