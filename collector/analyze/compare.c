/*
 * compare.c — the verdicts over the ranks of a job: who ran out of memory, whose peak diverges
 * from the median, since which step, growing or constant, and from which allocation sites.
 *
 * The rules, also in docs/FORMAT.md ("report.json"):
 * - median: of peak_allocated over the ranks present; with an even count the lower middle, so
 *   that the median is the peak of a real rank. The reference rank is the non-OOM rank whose peak
 *   is nearest the median (an OOM rank only when every rank OOMed).
 * - divergence: |peak - median| > max(divergence_pct% of the median, mad_k * 1.4826 * MAD), MAD
 *   being the (lower-middle) median of |peak - median|. The percentage decides when most ranks
 *   agree (the MAD is then ~0); the MAD guard keeps a job whose ranks are all spread out (uneven
 *   data, noisy sizes) from being flagged rank by rank.
 * - first divergent step: the first step, aligned with the reference's series by step number,
 *   where the rank's step peak is further from the reference's (in the direction of the
 *   divergence) than divergence_pct% of the reference's step peak and than a noise floor of
 *   min(1 MiB, half the rank's divergence in bytes).
 * - growth or offset: over the steps from the first divergent one on, d = the per-step difference
 *   against the reference. Growth when there are at least two such steps, the last d exceeds the
 *   first by more than 50% of the first, and at least 2/3 of the step-to-step changes of d are
 *   increases; otherwise a constant offset. For growth, the first divergent step is then moved
 *   back over the earlier steps where d was already positive and rising, so that a leak too small
 *   to cross the threshold at once is dated from where it started.
 * - sites: live bytes per site (function, file, line) of the rank minus those of the reference,
 *   from the full snapshots when both are at hand (rs_site_list_at_peak), from the summaries' top
 *   sites otherwise; ordered by the difference in the direction of the divergence, those in that
 *   direction kept (when none are, the largest differences either way).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "errors.h"

#define MIB ((uint64_t)1 << 20)
/* More missing ranks than this are counted in a note rather than listed one by one. */
#define MAX_MISSING_LISTED 1000000

void rs_compare_config_default(rs_compare_config *c)
{
    c->divergence_pct = 5.0;
    c->mad_k = 3.0;
    c->max_sites = 10;
}

ranksnap_status rs_compare_add_note(rs_compare_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (len < 0) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_compare_add_note: bad format");
    char *text = malloc((size_t)len + 1);
    char **notes = text ? realloc(r->notes, (r->n_notes + 1) * sizeof *notes) : NULL;
    if (!notes) {
        free(text);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for a report note");
    }
    va_start(ap, fmt);
    vsnprintf(text, (size_t)len + 1, fmt, ap);
    va_end(ap);
    r->notes = notes;
    r->notes[r->n_notes++] = text;
    return RANKSNAP_OK;
}

void rs_compare_result_free(rs_compare_result *r)
{
    if (!r) return;
    free(r->ranks);
    free(r->missing);
    for (size_t i = 0; i < r->n_oom; i++) free(r->oom[i].live);
    free(r->oom);
    for (size_t i = 0; i < r->n_divergent; i++) free(r->divergent[i].sites);
    free(r->divergent);
    for (size_t i = 0; i < r->n_notes; i++) free(r->notes[i]);
    free(r->notes);
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

/* ---- steps --------------------------------------------------------------------------------- */

/* The step peak of `s` in the bucket that holds step number `step`, or RS_SUMMARY_NO_DATA. */
static uint64_t peak_at_step(const rs_summary *s, int64_t step)
{
    if (s->n_steps <= 0 || s->n_steps > RS_SUMMARY_MAX_STEPS || s->step_stride <= 0 ||
        step < s->step_first)
        return RS_SUMMARY_NO_DATA;
    uint64_t k = ((uint64_t)step - (uint64_t)s->step_first) / (uint64_t)s->step_stride;
    return k < (uint64_t)s->n_steps ? s->step_peak[k] : RS_SUMMARY_NO_DATA;
}

/* First divergent step and growth of `r` against `ref` (rules at the top of the file). `sign` is
 * +1 for a rank above the median, -1 below; `dev` its distance from the median in bytes. */
static void classify_steps(const rs_summary *r, const rs_summary *ref, int sign, uint64_t dev,
                           double pct, rs_compare_divergent *out)
{
    int n = r->n_steps > RS_SUMMARY_MAX_STEPS ? RS_SUMMARY_MAX_STEPS : r->n_steps;
    double d[RS_SUMMARY_MAX_STEPS];
    int64_t step[RS_SUMMARY_MAX_STEPS];
    int m = 0;
    /* The per-step differences where both ranks have data, in step order. */
    for (int k = 0; k < n && r->step_stride > 0; k++) {
        int64_t st = (int64_t)((uint64_t)r->step_first + (uint64_t)k * (uint64_t)r->step_stride);
        uint64_t a = r->step_peak[k], b = peak_at_step(ref, st);
        if (a == RS_SUMMARY_NO_DATA || b == RS_SUMMARY_NO_DATA) continue;
        d[m] = sign * ((double)a - (double)b);
        step[m] = st;
        m++;
    }
    out->first_divergent_step = -1;
    out->growth = 0;
    double floor_bytes = (double)(dev / 2 < MIB ? dev / 2 : MIB);
    int first = -1;
    for (int k = 0; k < m; k++) {
        uint64_t b = peak_at_step(ref, step[k]);
        double thr = pct / 100.0 * (double)b;
        if (thr < floor_bytes) thr = floor_bytes;
        if (d[k] > thr) {
            first = k;
            break;
        }
    }
    if (first < 0) return;
    int count = m - first, rises = 0;
    for (int k = first + 1; k < m; k++)
        if (d[k] > d[k - 1]) rises++;
    if (count >= 2 && d[m - 1] - d[first] > 0.5 * d[first] && 3 * rises >= 2 * (count - 1)) {
        out->growth = 1;
        while (first > 0 && d[first - 1] > 0 && d[first - 1] < d[first]) first--;
    }
    out->first_divergent_step = step[first];
}

/* ---- sites --------------------------------------------------------------------------------- */

static int cmp_site_desc(const void *pa, const void *pb)
{
    const rs_site *a = pa, *b = pb;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    return rs_site_cmp(a, b);
}

static int cmp_site_abs(const void *pa, const void *pb)
{
    const rs_site *a = pa, *b = pb;
    uint64_t x = a->bytes < 0 ? (uint64_t)0 - (uint64_t)a->bytes : (uint64_t)a->bytes;
    uint64_t y = b->bytes < 0 ? (uint64_t)0 - (uint64_t)b->bytes : (uint64_t)b->bytes;
    if (x != y) return x > y ? -1 : 1;
    return rs_site_cmp(a, b);
}

static int cmp_site_key_q(const void *pa, const void *pb)
{
    return rs_site_cmp(pa, pb);
}

static int64_t sat_sub(int64_t a, int64_t b)
{
    if (b < 0 && a > INT64_MAX + b) return INT64_MAX;
    if (b > 0 && a < INT64_MIN + b) return INT64_MIN;
    return a - b;
}

/* rank's sites minus ref's, matched by function + file + line; *out malloc'ed (may be NULL with
 * *n 0). */
static ranksnap_status site_deltas(const rs_site *a, size_t na, const rs_site *b, size_t nb,
                                   int sign, size_t max, rs_site **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    rs_site *v = malloc((na + nb + 1) * sizeof *v);
    if (!v) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu site deltas", na + nb);
    memcpy(v, a, na * sizeof *v);
    for (size_t i = 0; i < nb; i++) {
        v[na + i] = b[i];
        v[na + i].bytes = sat_sub(0, b[i].bytes);
        v[na + i].blocks = 0;
    }
    size_t total = na + nb, m = 0;
    qsort(v, total, sizeof *v, cmp_site_key_q);
    for (size_t i = 0; i < total; i++) {
        if (m > 0 && rs_site_same(&v[m - 1], &v[i])) {
            /* a - (-b) saturates where a + b would overflow */
            v[m - 1].bytes = sat_sub(v[m - 1].bytes, sat_sub(0, v[i].bytes));
            v[m - 1].blocks += v[i].blocks;
        } else {
            v[m++] = v[i];
        }
    }
    size_t keep = 0;
    for (size_t i = 0; i < m; i++)
        if (sign * v[i].bytes > 0) keep++;
    if (keep) {
        /* Sorted by the difference in the direction of the divergence: a rank below the
         * median is explained by the sites where it holds less. */
        if (sign < 0)
            for (size_t i = 0; i < m; i++) v[i].bytes = sat_sub(0, v[i].bytes);
        qsort(v, m, sizeof *v, cmp_site_desc);
        if (sign < 0)
            for (size_t i = 0; i < m; i++) v[i].bytes = sat_sub(0, v[i].bytes);
    } else {
        qsort(v, m, sizeof *v, cmp_site_abs);
        for (size_t i = 0; i < m; i++)
            if (v[i].bytes != 0) keep++;
    }
    *n = keep < max ? keep : max;
    *out = v;
    return RANKSNAP_OK;
}

/* The sites of rank i: its full snapshot's at its peak, else its summary's. */
static ranksnap_status sites_of(const rs_summary *s, const rs_snap *full, rs_site **own,
                                const rs_site **v, size_t *n)
{
    *own = NULL;
    if (full) {
        RS_CHECK(rs_site_list_at_peak(full, own, n));
        *v = *own;
        return RANKSNAP_OK;
    }
    *v = s->sites;
    *n = (size_t)(s->n_sites < 0 ? 0 : s->n_sites > RS_SUMMARY_MAX_SITES ? RS_SUMMARY_MAX_SITES : s->n_sites);
    return RANKSNAP_OK;
}

/* ---- the comparison ------------------------------------------------------------------------ */

typedef struct present {
    const rs_summary *sum;
    const rs_snap *full;
    size_t input;
} present;

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

static ranksnap_status add_notes(rs_compare_result *r, const present *p, size_t n, const rs_summary *ref)
{
    for (size_t i = 0; i < n; i++) {
        const rs_summary *s = p[i].sum;
        if (!s->complete)
            RS_CHECK(rs_compare_add_note(r, "rank %d snapshot is incomplete (written from a crash "
                                            "path): its state may be mid-update",
                                         s->rank));
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
    v->site = s->oom_site;
    rs_site *own;
    const rs_site *sites;
    size_t n;
    RS_CHECK(sites_of(s, p->full, &own, &sites, &n));
    if (n > cfg->max_sites) n = cfg->max_sites;
    v->live = malloc((n ? n : 1) * sizeof *v->live);
    if (!v->live) {
        free(own);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for the OOM sites of rank %d",
                        s->rank);
    }
    memcpy(v->live, sites, n * sizeof *v->live);
    v->n_live = n;
    free(own);
    return RANKSNAP_OK;
}

static ranksnap_status divergent_verdict(rs_compare_result *r, const present *p, const present *ref,
                                         const rs_compare_config *cfg, rs_compare_divergent *v)
{
    const rs_summary *s = p->sum;
    memset(v, 0, sizeof *v);
    int sign = s->peak_allocated >= r->median_peak ? 1 : -1;
    uint64_t dev = abs_diff(s->peak_allocated, r->median_peak);
    v->rank = s->rank;
    v->peak_allocated = s->peak_allocated;
    v->reference_peak = ref->sum->peak_allocated;
    v->divergence_pct = sign * 100.0 * (double)dev /
                        (double)(r->median_peak ? r->median_peak : 1);
    classify_steps(s, ref->sum, sign, dev, cfg->divergence_pct, v);

    int both_full = p->full && ref->full;
    rs_site *own_a = NULL, *own_b = NULL;
    const rs_site *a, *b;
    size_t na, nb;
    ranksnap_status st = sites_of(s, both_full ? p->full : NULL, &own_a, &a, &na);
    if (st == RANKSNAP_OK) st = sites_of(ref->sum, both_full ? ref->full : NULL, &own_b, &b, &nb);
    if (st == RANKSNAP_OK) st = site_deltas(a, na, b, nb, sign, cfg->max_sites, &v->sites, &v->n_sites);
    free(own_a);
    free(own_b);
    if (st == RANKSNAP_OK && !both_full)
        st = rs_compare_add_note(r, "the sites of rank %d are the difference of the top %d sites "
                                    "of rank %d and of rank %d (no full snapshot of both)",
                                 s->rank, RS_SUMMARY_MAX_SITES, s->rank, ref->sum->rank);
    return st;
}

static ranksnap_status compare_present(rs_compare_result *r, present *p, size_t n, const rs_compare_config *cfg)
{
    RS_CHECK(find_missing(r, p, n));
    if (n == 0) return add_notes(r, p, n, NULL);

    uint64_t *v = malloc(n * sizeof *v);
    if (!v) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu peaks", n);
    for (size_t i = 0; i < n; i++) v[i] = p[i].sum->peak_allocated;
    r->median_peak = lower_median(v, n);
    for (size_t i = 0; i < n; i++) v[i] = abs_diff(p[i].sum->peak_allocated, r->median_peak);
    r->mad = lower_median(v, n);
    free(v);

    /* The reference is a real rank: the one nearest the median, preferring one that did not
     * OOM (its history ends normally). */
    size_t ref = n;
    for (int pass = 0; pass < 2 && ref == n; pass++)
        for (size_t i = 0; i < n; i++) {
            if (pass == 0 && p[i].sum->oom) continue;
            if (ref == n || abs_diff(p[i].sum->peak_allocated, r->median_peak) <
                                abs_diff(p[ref].sum->peak_allocated, r->median_peak))
                ref = i;
        }
    r->reference_rank = p[ref].sum->rank;

    double thr = cfg->divergence_pct / 100.0 * (double)r->median_peak;
    double guard = cfg->mad_k * 1.4826 * (double)r->mad;
    if (guard > thr) thr = guard;
    r->threshold = thr >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)thr;

    size_t n_oom = 0, n_div = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i].sum->oom) n_oom++;
        if ((double)abs_diff(p[i].sum->peak_allocated, r->median_peak) > thr) n_div++;
    }
    r->oom = calloc(n_oom ? n_oom : 1, sizeof *r->oom);
    r->divergent = calloc(n_div ? n_div : 1, sizeof *r->divergent);
    if (!r->oom || !r->divergent)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu verdicts", n_oom + n_div);
    for (size_t i = 0; i < n; i++) {
        if (p[i].sum->oom) {
            RS_CHECK(oom_verdict(r, &p[i], cfg, &r->oom[r->n_oom]));
            r->n_oom++;
        }
        if ((double)abs_diff(p[i].sum->peak_allocated, r->median_peak) > thr) {
            RS_CHECK(divergent_verdict(r, &p[i], &p[ref], cfg, &r->divergent[r->n_divergent]));
            r->n_divergent++;
        }
    }
    qsort(r->divergent, r->n_divergent, sizeof *r->divergent, cmp_divergent);
    return add_notes(r, p, n, p[ref].sum);
}

ranksnap_status rs_compare(const rs_summary *sums, const rs_snap *const *full, size_t n,
                            int world_size, const rs_compare_config *cfg, rs_compare_result **out)
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
    r->world_size = world_size;
    for (size_t i = 0; i < n; i++) {
        p[i] = (present){&sums[i], full ? full[i] : NULL, i};
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
        if (!r->ranks) st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu summaries", m);
    }
    if (st == RANKSNAP_OK) {
        for (size_t i = 0; i < m; i++) r->ranks[i] = *p[i].sum;
        r->n_ranks = m;
        st = compare_present(r, p, m, cfg);
    }
    free(p);
    if (st != RANKSNAP_OK) {
        rs_compare_result_free(r);
        return st;
    }
    *out = r;
    return RANKSNAP_OK;
}
