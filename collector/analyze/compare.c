/*
 * compare.c — the verdicts over the ranks of a job: who ran out of memory, whose peak diverges
 * from the median, since which step, growing or constant, and from which allocation sites.
 *
 * The rules, also in docs/FORMAT.md ("How the verdicts are reached"):
 * - ranks with no data: a rank that recorded nothing (no allocation, no OOM; endings.h says why,
 *   as far as its file does) is listed as such and left out of everything below.
 * - median: of peak_allocated (for a rank whose memory was seen only outside the allocator, at the
 *   CUDA driver: the peak of that) plus the private pools' free bytes at that peak
 *   (rs_summary_held: a CUDA graph keeps its pool for its replays, so a rank whose graphs' pools
 *   are larger holds more though its allocated bytes are equal) over the ranks with data that did not run out of memory (an OOM
 *   cuts a rank's history short, so its peak says little about the others'); over every rank
 *   with data when all of them did. With an even count the lower middle, so that the median is
 *   the peak of a real rank; the reference rank is the one of that set nearest the median.
 * - divergence: |peak - median| > max(divergence_pct% of the median, mad_k * 1.4826 * MAD), MAD
 *   being the (lower-middle) median of |peak - median| over the same set. The percentage decides
 *   when most ranks agree (the MAD is then ~0); the MAD guard keeps a job whose ranks are all
 *   spread out from being flagged rank by rank. An OOM rank is flagged only above the median.
 * - the per-step difference against the reference, the first divergent step and growth or
 *   offset: step_trend.c.
 * - sites: live bytes per site (function, file, line) of the rank minus those of the reference,
 *   in full when both ranks' are at hand (made with the summary, rs_summary_of_sites, or else
 *   from the snapshot, rs_site_list_at_peak), from the summaries' top sites otherwise; ordered
 *   by the difference in the direction of the divergence, those in that direction kept (when
 *   none are, the largest differences either way). What the listed sites do not account for of
 *   the peak difference is reported as unattributed. When the rank's pools' free bytes differ
 *   from the reference's in the direction of the divergence, the pool is a site of its own, its
 *   bytes that difference, named by the line that captured the graph where known (pools.h); the
 *   verdict is said as the pools' (by_pools) when they make at least half the difference.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "endings.h"
#include "errors.h"
#include "pools.h"
#include "sat.h"
#include "site_delta.h"
#include "step_trend.h"

/* More missing ranks than this are counted in a note rather than listed one by one. */
#define MAX_MISSING_LISTED 1000000

void rs_compare_config_default(rs_compare_config *c)
{
    c->divergence_pct = 5.0;
    c->mad_k = 3.0;
    c->max_sites = 10;
    c->roles = NULL;
    c->ungrouped = NULL;
}

void rs_compare_result_free(rs_compare_result *r)
{
    if (!r) return;
    free(r->ranks);
    free(r->pools);
    free(r->rank_roles);
    free(r->missing);
    free(r->no_data);
    for (size_t i = 0; i < r->n_oom; i++) free(r->oom[i].live);
    free(r->oom);
    for (size_t i = 0; i < r->n_divergent; i++) free(r->divergent[i].sites);
    free(r->divergent);
    for (size_t i = 0; i < r->n_notes; i++) free(r->notes[i]);
    free(r->notes);
    free(r->roles);
    free(r->role_gap_sites);
    free(r->shared);
    free(r);
}

/* ---- order statistics ---------------------------------------------------------------------- */

static int cmp_u64(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return (a > b) - (a < b);
}

/* Lower-middle median of v[0..n), n > 0; sorts v. */
static uint64_t lower_median(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_u64);
    return v[(n - 1) / 2];
}

static uint64_t abs_diff(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

/* ---- the comparison ------------------------------------------------------------------------ */

/* A rank's details beyond its summary: its sites made with the summary, else its snapshot. */
typedef struct detail {
    const rs_snap *full;
    const rs_summary_sites *sites; /* NULL, or made (ok) */
} detail;

static int detailed(const detail *d)
{
    return d->full || d->sites;
}

/* The sites of a rank (site_delta.h): in full when its details are at hand, else its summary's. */
static ranksnap_status sites_of(const rs_summary *s, const detail *d, rs_site_delta_list *l)
{
    return rs_site_delta_list_of(s, d ? d->full : NULL, d ? d->sites : NULL, l);
}

typedef struct present {
    const rs_summary *sum;
    detail d;
    size_t input;
} present;

/* The rank's largest private pool, named, when its sites or its snapshot are at hand. */
static void pool_of(const present *p, rs_site *out)
{
    if (!p->sum->pools_at_peak) return;
    if (p->d.sites) {
        if (p->d.sites->has_pool) *out = p->d.sites->pool;
    } else if (p->d.full) {
        rs_site_picker pk;
        rs_site_picker_init(&pk, p->d.full);
        (void)rs_pools_site(p->d.full, &pk, out);
        rs_site_picker_free(&pk);
    }
}

static int cmp_present(const void *pa, const void *pb)
{
    const present *a = pa, *b = pb;
    if (a->sum->rank != b->sum->rank) return a->sum->rank < b->sum->rank ? -1 : 1;
    return (a->input > b->input) - (a->input < b->input);
}

static int cmp_divergent(const void *pa, const void *pb)
{
    const rs_compare_divergent *a = pa, *b = pb;
    double x = a->divergence_pct < 0 ? -a->divergence_pct : a->divergence_pct;
    double y = b->divergence_pct < 0 ? -b->divergence_pct : b->divergence_pct;
    if (x != y) return x > y ? -1 : 1;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

static ranksnap_status find_missing(rs_compare_result *r, const present *p, size_t n)
{
    if (r->world_size <= 0) return RANKSNAP_OK;
    size_t in_range = 0;
    for (size_t i = 0; i < n; i++)
        if (p[i].sum->rank >= 0 && p[i].sum->rank < r->world_size) in_range++;
    size_t missing = (size_t)r->world_size - in_range;
    if (missing == 0) return RANKSNAP_OK;
    size_t listed = missing < MAX_MISSING_LISTED ? missing : MAX_MISSING_LISTED;
    r->missing = malloc(listed * sizeof *r->missing);
    if (!r->missing)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory to list %zu missing ranks", listed);
    size_t k = 0;
    for (int32_t rank = 0; rank < r->world_size && r->n_missing < listed; rank++) {
        while (k < n && p[k].sum->rank < rank) k++;
        if (k < n && p[k].sum->rank == rank) continue;
        r->missing[r->n_missing++] = rank;
    }
    if (missing > listed)
        RS_CHECK(rs_compare_add_note(r, "%zu more ranks are missing than the %zu listed",
                                     missing - listed, listed));
    return RANKSNAP_OK;
}

/* "0, 1, 3" into buf: the ranks whose `mark` is set. */
static void rank_list(const present *p, size_t n, const unsigned char *mark, char *buf, size_t cap)
{
    size_t count = 0, used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (!mark[i]) continue;
        if (used + 16 < cap) {
            int w = snprintf(buf + used, cap - used, "%s%d", count ? ", " : "", (int)p[i].sum->rank);
            if (w > 0) used += (size_t)w;
        } else if (used + 4 < cap && buf[used - 1] != '.') {
            used += (size_t)snprintf(buf + used, cap - used, ", ...");
        }
        count++;
    }
}

static uint64_t note_hash(const char *t)
{
    uint64_t h = 1469598103934665603ull;
    for (; *t; t++) h = (h ^ (unsigned char)*t) * 1099511628211ull;
    return h | 1; /* 0: no note */
}

/* How ranks ended, as their files say (endings.h): one note per way, naming its ranks. After one
 * rank dies the launcher ends the others, whose dumper threads then write on its signal: those
 * ranks share one note. Ranks recovered from their rings first, then those that left otherwise,
 * then those that wrote on a signal (no order is a claim of which came first). Each rank's words
 * are hashed once; equal hashes are checked word by word. */
static ranksnap_status add_end_notes(rs_compare_result *r, const present *p, size_t n)
{
    uint64_t *h = calloc(n ? n : 1, sizeof *h);
    unsigned char *mark = calloc(n ? n : 1, 1);
    char note[1024], other[1024], list[512];
    ranksnap_status st = RANKSNAP_OK;
    if (!h || !mark) st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for the notes of %zu ranks", n);
    for (size_t i = 0; i < n && st == RANKSNAP_OK; i++)
        if (rs_endings_note(p[i].sum, 0, note, sizeof note)) h[i] = note_hash(note);
    for (int pass = 0; pass < 3 && st == RANKSNAP_OK; pass++) {
        for (size_t i = 0; i < n && st == RANKSNAP_OK; i++) {
            const rs_summary *s = p[i].sum;
            int order = s->recovered ? 0 : s->complete && !(s->end.flags & RS_END_SIGNAL_MASK) ? 1 : 2;
            if (!h[i] || order != pass) continue;
            rs_endings_note(p[i].sum, 0, note, sizeof note);
            size_t k = 0;
            memset(mark, 0, n);
            for (size_t j = i; j < n; j++) {
                if (h[j] != h[i]) continue;
                if (j > i) {
                    rs_endings_note(p[j].sum, 0, other, sizeof other);
                    if (strcmp(note, other) != 0) continue;
                }
                mark[j] = 1;
                k++;
            }
            for (size_t j = i; j < n; j++)
                if (mark[j]) h[j] = 0; /* said */
            rank_list(p, n, mark, list, sizeof list);
            if (k > 1) rs_endings_note(p[i].sum, 1, note, sizeof note);
            st = rs_compare_add_note(r, "rank%s %s %s", k == 1 ? "" : "s", list, note);
        }
    }
    free(h);
    free(mark);
    return st;
}

static ranksnap_status add_notes(rs_compare_result *r, const present *p, size_t n, const rs_summary *ref)
{
    RS_CHECK(add_end_notes(r, p, n));
    for (size_t i = 0; i < n; i++) {
        const rs_summary *s = p[i].sum;
        if (s->dropped)
            RS_CHECK(rs_compare_add_note(r, "rank %d dropped its %llu oldest events (ring full, "
                                            "RANKSNAP_MAX_ENTRIES): earlier steps and sites are "
                                            "reconstructed from what remains",
                                         s->rank, (unsigned long long)s->dropped));
        if (ref && s != ref && strcmp(s->job, ref->job) != 0)
            RS_CHECK(rs_compare_add_note(r, "rank %d belongs to job %s, rank %d to job %s",
                                         s->rank, s->job[0] ? s->job : "(none)", ref->rank,
                                         ref->job[0] ? ref->job : "(none)"));
        if (s->rank < 0 || s->rank >= r->world_size)
            RS_CHECK(rs_compare_add_note(r, "rank %d is outside the world size %d", s->rank,
                                         r->world_size));
        if (s->comms_unreadable)
            RS_CHECK(rs_compare_add_note(r, "rank %d: the communicators in its file are malformed "
                                            "and were left out, so its role is not known from "
                                            "them; --groups (RANKSNAP_GROUPS) declares the roles",
                                         s->rank));
    }
    return RANKSNAP_OK;
}

static ranksnap_status oom_verdict(rs_compare_result *r, const present *p, const rs_compare_config *cfg,
                                   rs_compare_oom *v)
{
    const rs_summary *s = p->sum;
    memset(v, 0, sizeof *v);
    v->rank = s->rank;
    v->requested = s->oom_requested;
    v->step = s->oom_step;
    v->device_free = s->oom_device_free;
    v->device_total = s->oom_device_total;
    v->allocated = s->oom_allocated;
    v->reserved = s->oom_reserved;
    v->memory_limit = s->oom_memory_limit;
    v->site.site = s->oom_site;
    if (p->d.sites && s->oom) {
        v->site.path = p->d.sites->oom_path;
    } else if (p->d.full && p->d.full->has_oom) {
        rs_site_picker pk;
        rs_site_picker_init(&pk, p->d.full);
        rs_site_pick_path(&pk, p->d.full->oom.stack, &v->site.site, &v->site.path);
        rs_site_picker_free(&pk);
    } else {
        rs_site_path_of_site(&s->oom_site, &v->site.path);
    }
    rs_site_delta_list l;
    RS_CHECK(sites_of(s, &p->d, &l));
    size_t n = l.n > cfg->max_sites ? cfg->max_sites : l.n;
    v->live = malloc((n ? n : 1) * sizeof *v->live);
    if (!v->live) {
        rs_site_delta_list_free(&l);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for the OOM sites of rank %d",
                        s->rank);
    }
    for (size_t i = 0; i < n; i++) rs_site_delta_entry(&l, i, &v->live[i]);
    v->n_live = n;
    rs_site_delta_list_free(&l);
    (void)r;
    return RANKSNAP_OK;
}

/* The rank's private pools as a site of its divergence: their free bytes at its peak against the
 * reference's, named as its largest pool is (`pool`, function "" when only its summary was at
 * hand), put among the sites by size. */
static ranksnap_status add_pool_site(rs_compare_divergent *v, const rs_summary *s, const rs_summary *ref,
                                     const rs_site *pool, int sign, size_t max_sites)
{
    rs_compare_site c;
    memset(&c, 0, sizeof c);
    if (pool && pool->function[0])
        c.site = *pool;
    else
        snprintf(c.site.function, sizeof c.site.function, "private memory pools");
    c.site.blocks = 0;
    c.site.bytes = rs_sat_sub_i64(rs_sat_i64(s->pools_free_at_peak), rs_sat_i64(ref->pools_free_at_peak));
    rs_site_path_of_site(&c.site, &c.path);
    rs_compare_site *grown = realloc(v->sites, (v->n_sites + 1) * sizeof *grown);
    if (!grown) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for the sites of rank %d", s->rank);
    v->sites = grown;
    size_t at = 0;
    while (at < v->n_sites && (double)sign * (double)v->sites[at].site.bytes >= (double)sign * (double)c.site.bytes)
        at++;
    memmove(&v->sites[at + 1], &v->sites[at], (v->n_sites - at) * sizeof *v->sites);
    v->sites[at] = c;
    v->n_sites++;
    if (v->n_sites > max_sites && max_sites > at) v->n_sites = max_sites;
    return RANKSNAP_OK;
}

static ranksnap_status divergent_verdict(rs_compare_result *r, const present *p, const present *ref,
                                         uint64_t median, const rs_site *pool,
                                         const rs_compare_config *cfg, rs_compare_divergent *v)
{
    const rs_summary *s = p->sum;
    memset(v, 0, sizeof *v);
    v->pools_graph = pool && strncmp(pool->function, "CUDA graph pool", 15) == 0;
    v->allocated = rs_summary_peak(s);
    v->reference_allocated = rs_summary_peak(ref->sum);
    v->pools = s->pools_at_peak;
    v->reference_pools = ref->sum->pools_at_peak;
    int sign = rs_summary_held(s) >= median ? 1 : -1;
    uint64_t dev = abs_diff(rs_summary_held(s), median);
    v->rank = s->rank;
    v->peak_allocated = rs_summary_held(s);
    v->reference_peak = rs_summary_held(ref->sum);
    v->divergence_pct = sign * 100.0 * (double)dev / (double)(median ? median : 1);
    rs_step_trend t;
    rs_step_trend_of(s, ref->sum, sign, dev, cfg->divergence_pct, &t);
    v->first_divergent_step = t.first_step;
    v->growth = t.growth;
    v->growth_per_step = t.growth_per_step;
    v->growth_t = t.growth_t;
    v->last_step = t.last_step;
    v->capacity = t.capacity;
    v->capacity_is_limit = t.capacity_is_limit;
    v->exhaust_step = t.exhaust_step;
    v->delta = rs_sat_sub_i64(rs_sat_i64(rs_summary_held(s)), rs_sat_i64(rs_summary_held(ref->sum)));
    /* the pools' free bytes against the reference's, in the direction of the divergence: a site
     * of their own; the verdict is the pools' when they make at least half the difference */
    int64_t pools = rs_sat_sub_i64(rs_sat_i64(s->pools_free_at_peak), rs_sat_i64(ref->sum->pools_free_at_peak));
    int pools_along = sign > 0 ? pools > 0 : pools < 0;
    double share = (double)pools / (double)(v->delta ? v->delta : 1);
    v->by_pools = pools_along && share >= 0.5;

    int both_full = detailed(&p->d) && detailed(&ref->d);
    rs_site_delta_list a, b;
    memset(&b, 0, sizeof b);
    ranksnap_status st = sites_of(s, both_full ? &p->d : NULL, &a);
    if (st == RANKSNAP_OK) st = sites_of(ref->sum, both_full ? &ref->d : NULL, &b);
    if (st == RANKSNAP_OK) st = rs_site_deltas(&a, &b, sign, cfg->max_sites, &v->sites, &v->n_sites);
    rs_site_delta_list_free(&a);
    rs_site_delta_list_free(&b);
    if (st == RANKSNAP_OK && pools_along) st = add_pool_site(v, s, ref->sum, pool, sign, cfg->max_sites);
    int64_t listed = 0;
    for (size_t i = 0; i < v->n_sites; i++) listed = rs_sat_add_i64(listed, v->sites[i].site.bytes);
    v->unattributed = rs_sat_sub_i64(v->delta, listed);
    if (st == RANKSNAP_OK && !both_full)
        st = rs_compare_add_note(r, "the sites of rank %d are the difference of the top %d sites "
                                    "of rank %d and of rank %d (no full snapshot of both)",
                                 s->rank, RS_SUMMARY_MAX_SITES, s->rank, ref->sum->rank);
    return st;
}

/* A rank that recorded nothing (summary.h; what its file says of why: endings.h). */
static int no_data(const rs_summary *s)
{
    return !rs_summary_has_data(s);
}

/* The median, MAD, reference and threshold of one group of ranks: all of them, or one role's. */
typedef struct group_stats {
    size_t with_data;
    int use_oom;     /* every rank of the group with data OOMed: they make the median */
    uint64_t median, mad, threshold;
    double thr;
    size_t ref;      /* index into the present ranks, n when none */
} group_stats;

/* The role of p's rank under cfg's grouping: -1 when not grouped or not covered. */
static int32_t role_of(const rs_compare_config *cfg, const present *p)
{
    return cfg->roles ? rs_roles_of(cfg->roles, p->sum->rank) : -1;
}

/* Over the ranks of `role` (-2: all of them); v has room for n values. */
static void group_stats_of(const present *p, size_t n, const rs_compare_config *cfg, int32_t role,
                           uint64_t *v, group_stats *g)
{
    memset(g, 0, sizeof *g);
    g->ref = n;
    size_t healthy = 0;
#define MEMBER(i) (role == -2 || role_of(cfg, &p[i]) == role)
    for (size_t i = 0; i < n; i++) {
        if (!MEMBER(i) || no_data(p[i].sum)) continue;
        g->with_data++;
        if (!p[i].sum->oom) healthy++;
    }
    if (g->with_data == 0) return;
    g->use_oom = healthy == 0;
#define IN_MEDIAN(i) (MEMBER(i) && !no_data(p[i].sum) && (g->use_oom || !p[i].sum->oom))
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (IN_MEDIAN(i)) v[k++] = rs_summary_held(p[i].sum);
    g->median = lower_median(v, k);
    k = 0;
    for (size_t i = 0; i < n; i++)
        if (IN_MEDIAN(i)) v[k++] = abs_diff(rs_summary_held(p[i].sum), g->median);
    g->mad = lower_median(v, k);

    /* The reference is a real rank: the one of the median's set nearest the median. */
    for (size_t i = 0; i < n; i++) {
        if (!IN_MEDIAN(i)) continue;
        if (g->ref == n || abs_diff(rs_summary_held(p[i].sum), g->median) <
                               abs_diff(rs_summary_held(p[g->ref].sum), g->median))
            g->ref = i;
    }
#undef IN_MEDIAN
#undef MEMBER
    double thr = cfg->divergence_pct / 100.0 * (double)g->median;
    double guard = cfg->mad_k * 1.4826 * (double)g->mad;
    if (guard > thr) thr = guard;
    g->thr = thr;
    g->threshold = thr >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)thr;
}

/* The sites that make the heaviest role heavier than the lightest, so that a user can move
 * layers between pipeline stages: their reference ranks' sites, one against the other. */
static ranksnap_status role_gap(rs_compare_result *r, const present *p, size_t n,
                                const rs_compare_config *cfg, const group_stats *gs)
{
    r->heavy_role = r->light_role = -1;
    for (size_t k = 0; k < r->n_roles; k++) {
        if (gs[k].ref >= n) continue;
        if (r->heavy_role < 0 || gs[k].median > gs[r->heavy_role].median) r->heavy_role = (int32_t)k;
        if (r->light_role < 0 || gs[k].median < gs[r->light_role].median) r->light_role = (int32_t)k;
    }
    if (r->heavy_role < 0 || r->heavy_role == r->light_role ||
        gs[r->heavy_role].median == gs[r->light_role].median) {
        r->heavy_role = r->light_role = -1;
        return RANKSNAP_OK;
    }
    const present *h = &p[gs[r->heavy_role].ref], *l = &p[gs[r->light_role].ref];
    r->role_gap = rs_sat_sub_i64(rs_sat_i64(gs[r->heavy_role].median), rs_sat_i64(gs[r->light_role].median));
    int both_full = detailed(&h->d) && detailed(&l->d);
    rs_site_delta_list a, b;
    memset(&b, 0, sizeof b);
    ranksnap_status st = sites_of(h->sum, both_full ? &h->d : NULL, &a);
    if (st == RANKSNAP_OK) st = sites_of(l->sum, both_full ? &l->d : NULL, &b);
    if (st == RANKSNAP_OK)
        st = rs_site_deltas(&a, &b, 1, cfg->max_sites, &r->role_gap_sites, &r->n_role_gap_sites);
    rs_site_delta_list_free(&a);
    rs_site_delta_list_free(&b);
    return st;
}

/* One row per role: its median and fullest rank, and the role nearest to running out. */
static ranksnap_status role_rows(rs_compare_result *r, const present *p, size_t n,
                                 const rs_compare_config *cfg, const group_stats *gs)
{
    const rs_roles *ro = cfg->roles;
    snprintf(r->grouping, sizeof r->grouping, "%s", ro->source);
    snprintf(r->grouping_basis, sizeof r->grouping_basis, "%s", ro->basis);
    snprintf(r->replicas, sizeof r->replicas, "%s", ro->replicas);
    r->roles = calloc(ro->n_roles ? ro->n_roles : 1, sizeof *r->roles);
    if (!r->roles) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu roles", ro->n_roles);
    r->n_roles = ro->n_roles;
    r->nearest_role = -1;
    for (size_t k = 0; k < ro->n_roles; k++) {
        rs_compare_role *x = &r->roles[k];
        snprintf(x->label, sizeof x->label, "%s", ro->labels[k]);
        x->n_ranks = gs[k].with_data;
        x->median_peak = gs[k].median;
        x->threshold = gs[k].threshold;
        x->reference_rank = gs[k].ref < n ? p[gs[k].ref].sum->rank : -1;
        x->max_rank = -1;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t k = role_of(cfg, &p[i]);
        if (k < 0 || no_data(p[i].sum)) continue;
        rs_compare_role *x = &r->roles[k];
        const rs_summary *s = p[i].sum;
        if (x->max_rank < 0 || rs_summary_held(s) > x->max_peak) {
            x->max_rank = s->rank;
            x->max_peak = rs_summary_held(s);
            x->capacity = rs_summary_capacity(s);
        }
    }
    int any_capacity = 0;
    for (size_t k = 0; k < r->n_roles; k++) {
        rs_compare_role *x = &r->roles[k];
        if (x->capacity) {
            x->headroom = rs_sat_i64(x->capacity) - rs_sat_i64(x->max_peak);
            any_capacity = 1;
        }
    }
    for (size_t k = 0; k < r->n_roles; k++) {
        const rs_compare_role *x = &r->roles[k];
        if (x->max_rank < 0 || (any_capacity && !x->capacity)) continue;
        if (r->nearest_role < 0) {
            r->nearest_role = (int32_t)k;
            continue;
        }
        const rs_compare_role *b = &r->roles[r->nearest_role];
        if (any_capacity ? x->headroom < b->headroom : x->max_peak > b->max_peak)
            r->nearest_role = (int32_t)k;
    }
    return role_gap(r, p, n, cfg, gs);
}

static ranksnap_status compare_present(rs_compare_result *r, present *p, size_t n, const rs_compare_config *cfg)
{
    RS_CHECK(find_missing(r, p, n));
    r->no_data = malloc((n ? n : 1) * sizeof *r->no_data);
    uint64_t *v = malloc((n ? n : 1) * sizeof *v);
    size_t n_groups = cfg->roles ? cfg->roles->n_roles : 0;
    group_stats *gs = calloc(n_groups ? n_groups : 1, sizeof *gs);
    if (!r->no_data || !v || !gs) {
        free(v);
        free(gs);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu peaks", n);
    }
    for (size_t i = 0; i < n; i++)
        if (no_data(p[i].sum)) r->no_data[r->n_no_data++] = p[i].sum->rank;
    group_stats world;
    group_stats_of(p, n, cfg, -2, v, &world);
    for (size_t k = 0; k < n_groups; k++) group_stats_of(p, n, cfg, (int32_t)k, v, &gs[k]);
    free(v);
    ranksnap_status st = cfg->roles ? role_rows(r, p, n, cfg, gs) : RANKSNAP_OK;
    if (st != RANKSNAP_OK || world.with_data == 0) {
        free(gs);
        return st != RANKSNAP_OK ? st : add_notes(r, p, n, NULL);
    }
    r->median_peak = world.median;
    for (size_t i = 0; i < n; i++)
        if (!no_data(p[i].sum) && p[i].sum->pools_free_at_peak) r->by_held = 1;
    r->mad = world.mad;
    r->reference_rank = p[world.ref].sum->rank;
    r->threshold = world.threshold;

    /* Each rank against its own group: its role's when grouped, else all ranks. An OOM rank's
     * history ends early: only a peak above the median says something. */
#define GROUP(i) (role_of(cfg, &p[i]) >= 0 ? &gs[role_of(cfg, &p[i])] : &world)
#define DIVERGES(i)                                                                                    (!no_data(p[i].sum) && (double)abs_diff(rs_summary_held(p[i].sum), GROUP(i)->median) > GROUP(i)->thr &&      (!p[i].sum->oom || GROUP(i)->use_oom || rs_summary_held(p[i].sum) > GROUP(i)->median))
    size_t n_oom = 0, n_div = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i].sum->oom) n_oom++;
        if (DIVERGES(i)) n_div++;
    }
    r->oom = calloc(n_oom ? n_oom : 1, sizeof *r->oom);
    r->divergent = calloc(n_div ? n_div : 1, sizeof *r->divergent);
    if (!r->oom || !r->divergent) {
        free(gs);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu verdicts", n_oom + n_div);
    }
    for (size_t i = 0; i < n && st == RANKSNAP_OK; i++) {
        if (p[i].sum->oom) {
            st = oom_verdict(r, &p[i], cfg, &r->oom[r->n_oom]);
            r->oom[r->n_oom++].role = role_of(cfg, &p[i]);
        }
        if (st == RANKSNAP_OK && DIVERGES(i)) {
            const group_stats *g = GROUP(i);
            st = divergent_verdict(r, &p[i], &p[g->ref], g->median, &r->pools[i], cfg,
                                   &r->divergent[r->n_divergent]);
            r->divergent[r->n_divergent++].role = role_of(cfg, &p[i]);
        }
    }
#undef DIVERGES
#undef GROUP
    free(gs);
    if (st != RANKSNAP_OK) return st;
    qsort(r->divergent, r->n_divergent, sizeof *r->divergent, cmp_divergent);
    return add_notes(r, p, n, p[world.ref].sum);
}

ranksnap_status rs_compare(const rs_summary *sums, const rs_snap *const *full, size_t n,
                            int world_size, const rs_compare_config *cfg, rs_compare_result **out)
{
    return rs_compare_ex(sums, full, NULL, n, world_size, cfg, out);
}

ranksnap_status rs_compare_ex(const rs_summary *sums, const rs_snap *const *full,
                              const rs_summary_sites *const *sites, size_t n, int world_size,
                              const rs_compare_config *cfg, rs_compare_result **out)
{
    if (!out || (n && !sums))
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_compare: NULL argument");
    *out = NULL;
    rs_compare_config def;
    if (!cfg) {
        rs_compare_config_default(&def);
        cfg = &def;
    }
    if (!isfinite(cfg->divergence_pct) || cfg->divergence_pct < 0 || !isfinite(cfg->mad_k) ||
        cfg->mad_k < 0)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                        "rs_compare: divergence %g%% and MAD factor %g must be finite and >= 0",
                        cfg->divergence_pct, cfg->mad_k);

    rs_compare_result *r = calloc(1, sizeof *r);
    present *p = malloc((n ? n : 1) * sizeof *p);
    if (!r || !p) {
        free(r);
        free(p);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory to compare %zu ranks", n);
    }
    r->divergence_pct = cfg->divergence_pct;
    r->reference_rank = -1;
    r->nearest_role = -1;
    r->heavy_role = r->light_role = -1;
    r->world_size = world_size;
    for (size_t i = 0; i < n; i++) {
        const rs_summary_sites *ss = sites && sites[i] && sites[i]->ok ? sites[i] : NULL;
        p[i] = (present){&sums[i], {full ? full[i] : NULL, ss}, i};
        if (world_size <= 0 && sums[i].world_size > r->world_size)
            r->world_size = sums[i].world_size;
    }
    qsort(p, n, sizeof *p, cmp_present);

    /* One summary per rank: a second one of the same rank is named and left out. */
    ranksnap_status st = RANKSNAP_OK;
    size_t m = 0;
    for (size_t i = 0; i < n && st == RANKSNAP_OK; i++) {
        if (m > 0 && p[m - 1].sum->rank == p[i].sum->rank)
            st = rs_compare_add_note(r, "rank %d was given twice; its second summary is ignored",
                                     p[i].sum->rank);
        else
            p[m++] = p[i];
    }
    if (st == RANKSNAP_OK) {
        r->ranks = malloc((m ? m : 1) * sizeof *r->ranks);
        r->pools = calloc(m ? m : 1, sizeof *r->pools);
        if (cfg->roles) r->rank_roles = malloc((m ? m : 1) * sizeof *r->rank_roles);
        if (!r->ranks || !r->pools || (cfg->roles && !r->rank_roles))
            st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu summaries", m);
    }
    if (st == RANKSNAP_OK) {
        for (size_t i = 0; i < m; i++) r->ranks[i] = *p[i].sum;
        for (size_t i = 0; i < m; i++) pool_of(&p[i], &r->pools[i]);
        for (size_t i = 0; r->rank_roles && i < m; i++) r->rank_roles[i] = role_of(cfg, &p[i]);
        r->n_ranks = m;
        st = compare_present(r, p, m, cfg);
    }
    if (st == RANKSNAP_OK && !cfg->roles && cfg->ungrouped && cfg->ungrouped[0])
        st = rs_compare_add_note(r, "ranks not grouped into roles: %s; --groups (RANKSNAP_GROUPS) "
                                    "declares them", cfg->ungrouped);
    if (st == RANKSNAP_OK) st = rs_shared_devices_find(r->ranks, r->n_ranks, &r->shared, &r->n_shared);
    free(p);
    if (st != RANKSNAP_OK) {
        rs_compare_result_free(r);
        return st;
    }
    *out = r;
    return RANKSNAP_OK;
}
