/*
 * site_delta.c — owns one rank's sites set against another's (site_delta.h): the list each is
 * taken from (in full, or a summary's top sites), and the differences matched site by site.
 */
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "outside_sites.h"
#include "sat.h"
#include "site_delta.h"

static int64_t abs_bytes(int64_t b)
{
    return b < 0 ? (b == INT64_MIN ? INT64_MAX : -b) : b;
}

static int cmp_site_desc(const void *pa, const void *pb)
{
    const rs_compare_site *a = pa, *b = pb;
    /* the sites listed (those in the direction of the divergence) first, a no-stack one too */
    if ((a->site.bytes > 0) != (b->site.bytes > 0)) return a->site.bytes > 0 ? -1 : 1;
    return rs_site_cmp_listing(&a->site, a->site.bytes, &b->site, b->site.bytes);
}

static int cmp_site_abs(const void *pa, const void *pb)
{
    const rs_compare_site *a = pa, *b = pb;
    if ((a->site.bytes != 0) != (b->site.bytes != 0)) return a->site.bytes != 0 ? -1 : 1;
    return rs_site_cmp_listing(&a->site, abs_bytes(a->site.bytes), &b->site, abs_bytes(b->site.bytes));
}

static int cmp_site_key_q(const void *pa, const void *pb)
{
    const rs_compare_site *a = pa, *b = pb;
    int c = rs_site_cmp(&a->site, &b->site);
    /* the rank's own entry (blocks > 0 or bytes >= 0) first, so that its path is kept */
    if (c) return c;
    return (a->site.bytes < 0) - (b->site.bytes < 0);
}

void rs_site_delta_list_free(rs_site_delta_list *l)
{
    free(l->own);
    free(l->own_paths);
    memset(l, 0, sizeof *l);
}

ranksnap_status rs_site_delta_list_of(const rs_summary *s, const rs_snap *full,
                                      const rs_summary_sites *sites, rs_site_delta_list *l)
{
    memset(l, 0, sizeof *l);
    if (rs_summary_outside_only(s)) {
        l->v = s->outside_sites;
        l->n = (size_t)(s->n_outside_sites < 0 ? 0 : s->n_outside_sites > RS_SUMMARY_MAX_OUTSIDE_SITES
                                                         ? RS_SUMMARY_MAX_OUTSIDE_SITES
                                                         : s->n_outside_sites);
        return RANKSNAP_OK;
    }
    if (s->async_pool) { /* the pool's sites at its peak (summary.c), with their paths from the file */
        l->v = s->sites;
        l->paths = sites ? sites->paths : NULL;
        l->n = (size_t)(s->n_sites < 0 ? 0 : s->n_sites > RS_SUMMARY_MAX_SITES ? RS_SUMMARY_MAX_SITES : s->n_sites);
        if (!l->paths && full && l->n) {
            /* the same walk as the summary's: the same sites in the same order */
            rs_site top[RS_SUMMARY_MAX_SITES];
            rs_site_picker pk;
            uint64_t peak = 0;
            int n = 0;
            l->own_paths = calloc(RS_SUMMARY_MAX_SITES, sizeof *l->own_paths);
            if (l->own_paths) {
                rs_site_picker_init(&pk, full);
                rs_outside_sites_at_peak(full, &pk, 1, &peak, top, NULL, RS_SUMMARY_MAX_SITES, &n, NULL, l->own_paths);
                rs_site_picker_free(&pk);
                if ((size_t)n == l->n) l->paths = l->own_paths;
            }
        }
        return RANKSNAP_OK;
    }
    if (sites && sites->ok) {
        l->v = sites->sites;
        l->paths = sites->paths;
        l->n = sites->n;
        return RANKSNAP_OK;
    }
    if (full) {
        RS_CHECK(rs_site_list_at_peak(full, &l->own, &l->own_paths, &l->n));
        l->v = l->own;
        l->paths = l->own_paths;
        return RANKSNAP_OK;
    }
    l->v = s->sites;
    l->n = (size_t)(s->n_sites < 0 ? 0 : s->n_sites > RS_SUMMARY_MAX_SITES ? RS_SUMMARY_MAX_SITES : s->n_sites);
    return RANKSNAP_OK;
}

void rs_site_delta_entry(const rs_site_delta_list *l, size_t i, rs_compare_site *out)
{
    out->site = l->v[i];
    if (l->paths)
        out->path = l->paths[i];
    else
        rs_site_path_of_site(&l->v[i], &out->path);
}

ranksnap_status rs_site_deltas(const rs_site_delta_list *a, const rs_site_delta_list *b, int sign,
                               size_t max, rs_compare_site **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t total = a->n + b->n;
    rs_compare_site *v = malloc((total + 1) * sizeof *v);
    if (!v) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for %zu site deltas", total);
    for (size_t i = 0; i < a->n; i++) rs_site_delta_entry(a, i, &v[i]);
    for (size_t i = 0; i < b->n; i++) {
        rs_site_delta_entry(b, i, &v[a->n + i]);
        v[a->n + i].site.bytes = rs_sat_sub_i64(0, b->v[i].bytes);
        v[a->n + i].site.blocks = 0;
    }
    size_t m = 0;
    qsort(v, total, sizeof *v, cmp_site_key_q);
    for (size_t i = 0; i < total; i++) {
        if (m > 0 && rs_site_same(&v[m - 1].site, &v[i].site)) {
            /* a - (-b) saturates where a + b would overflow */
            v[m - 1].site.bytes = rs_sat_sub_i64(v[m - 1].site.bytes, rs_sat_sub_i64(0, v[i].site.bytes));
            v[m - 1].site.blocks += v[i].site.blocks;
        } else {
            v[m++] = v[i];
        }
    }
    size_t keep = 0;
    for (size_t i = 0; i < m; i++)
        if (sign * v[i].site.bytes > 0) keep++;
    if (keep) {
        /* Sorted by the difference in the direction asked: a rank below the median is explained
         * by the sites where it holds less. */
        if (sign < 0)
            for (size_t i = 0; i < m; i++) v[i].site.bytes = rs_sat_sub_i64(0, v[i].site.bytes);
        qsort(v, m, sizeof *v, cmp_site_desc);
        if (sign < 0)
            for (size_t i = 0; i < m; i++) v[i].site.bytes = rs_sat_sub_i64(0, v[i].site.bytes);
    } else {
        qsort(v, m, sizeof *v, cmp_site_abs);
        for (size_t i = 0; i < m; i++)
            if (v[i].site.bytes != 0) keep++;
    }
    *n = keep < max ? keep : max;
    *out = v;
    return RANKSNAP_OK;
}
