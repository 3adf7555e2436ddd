/*
 * step_trend.c — owns how one rank's per-step peaks part from another's (step_trend.h).
 *
 * The rules (docs/FORMAT.md, "How the verdicts are reached"):
 * - the per-step difference d[k] = r's step peak minus ref's at the same step, in the direction
 *   `sign`, over the steps both recorded.
 * - growth or offset: growth when d follows a line whose slope is significant against the
 *   step-to-step noise: the best of the lines that start at some step j (flat before, rising
 *   after, at least three points on the rising part) has a positive slope b with a t statistic
 *   of at least GROWTH_T, and fits d better than the best single step change does (a one-time
 *   jump fits a step better than any line). Growth is dated from j and reported as b bytes per
 *   step; with a known capacity (the rank's memory limit, else its device's) the step at which
 *   r's own peak would reach it at its own rate over the same steps is projected. Otherwise the
 *   difference is an offset, dated from the first step where d exceeds pct% of ref's step peak
 *   and a noise floor of min(1 MiB, half the distance `dev`).
 */
#include <math.h>
#include <string.h>

#include "step_trend.h"

#define MIB ((uint64_t)1 << 20)
/* A per-step slope this many standard errors above zero is growth (about a 1% chance for noise
 * with the few degrees of freedom of a short series). */
#define GROWTH_T 4.0

uint64_t rs_step_trend_peak_at(const rs_summary *s, int64_t step)
{
    if (s->n_steps <= 0 || s->n_steps > RS_SUMMARY_MAX_STEPS || s->step_stride <= 0 ||
        step < s->step_first)
        return RS_SUMMARY_NO_DATA;
    uint64_t k = ((uint64_t)step - (uint64_t)s->step_first) / (uint64_t)s->step_stride;
    return k < (uint64_t)s->n_steps ? s->step_peak[k] : RS_SUMMARY_NO_DATA;
}

/* Least squares of y on x over [from, m): slope, intercept and residual sum of squares; *ok 0
 * when x does not vary. */
static void fit_line(const double *x, const double *y, int from, int m, double *slope,
                     double *icept, double *rss, double *sxx, int *ok)
{
    int n = m - from;
    double mx = 0, my = 0;
    for (int k = from; k < m; k++) mx += x[k], my += y[k];
    mx /= n;
    my /= n;
    double xx = 0, xy = 0;
    for (int k = from; k < m; k++) {
        xx += (x[k] - mx) * (x[k] - mx);
        xy += (x[k] - mx) * (y[k] - my);
    }
    *ok = xx > 0;
    *slope = *ok ? xy / xx : 0;
    *icept = my - *slope * mx;
    *sxx = xx;
    double r = 0;
    for (int k = from; k < m; k++) {
        double e = y[k] - (*icept + *slope * x[k]);
        r += e * e;
    }
    *rss = r;
}

/* The residual sum of squares of d around the mean of each side of a split at j (j = 0: no
 * split). */
static double step_rss(const double *d, int m, int j)
{
    double rss = 0;
    for (int side = 0; side < 2; side++) {
        int a = side ? j : 0, b = side ? m : j;
        if (b <= a) continue;
        double mean = 0;
        for (int k = a; k < b; k++) mean += d[k];
        mean /= b - a;
        for (int k = a; k < b; k++) rss += (d[k] - mean) * (d[k] - mean);
    }
    return rss;
}

/* The best line that is flat up to step index j and rises after it (a hinge at x[j]): its j, flat
 * level, slope, t statistic and residual sum of squares. 0 when no j leaves three points on the
 * line. */
static int best_hinge(const double *x, const double *d, int m, int *at, double *flat, double *slope,
                      double *t, double *rss)
{
    double z[RS_SUMMARY_MAX_STEPS];
    int found = 0;
    for (int j = 0; j + 3 <= m; j++) {
        for (int k = 0; k < m; k++) z[k] = x[k] > x[j] ? x[k] - x[j] : 0;
        double b, c, r, sxx;
        int ok;
        fit_line(z, d, 0, m, &b, &c, &r, &sxx, &ok);
        if (!ok) continue;
        if (!found || r < *rss) {
            found = 1;
            *at = j;
            *flat = c;
            *slope = b;
            *rss = r;
            /* the slope's standard error from the residual variance (m - 2 degrees of freedom);
             * no residual at all is an exact line */
            double se = m > 2 ? sqrt(r / (m - 2) / sxx) : 0;
            *t = se > 0 ? b / se : (b > 0 ? INFINITY : 0);
        }
    }
    return found;
}

void rs_step_trend_of(const rs_summary *r, const rs_summary *ref, int sign, uint64_t dev, double pct,
                      rs_step_trend *out)
{
    int n = r->n_steps > RS_SUMMARY_MAX_STEPS ? RS_SUMMARY_MAX_STEPS : r->n_steps;
    double d[RS_SUMMARY_MAX_STEPS], x[RS_SUMMARY_MAX_STEPS], own[RS_SUMMARY_MAX_STEPS];
    int64_t step[RS_SUMMARY_MAX_STEPS];
    int m = 0;
    /* The per-step differences where both ranks have data, in step order. */
    for (int k = 0; k < n && r->step_stride > 0; k++) {
        int64_t st = (int64_t)((uint64_t)r->step_first + (uint64_t)k * (uint64_t)r->step_stride);
        uint64_t a = r->step_peak[k], b = rs_step_trend_peak_at(ref, st);
        if (a == RS_SUMMARY_NO_DATA || b == RS_SUMMARY_NO_DATA) continue;
        d[m] = sign * ((double)a - (double)b);
        x[m] = (double)st;
        own[m] = (double)a;
        step[m] = st;
        m++;
    }
    memset(out, 0, sizeof *out);
    out->first_step = -1;
    out->exhaust_step = -1;
    out->last_step = m ? step[m - 1] : -1;
    out->n_common = m;
    out->capacity = r->memory_limit ? r->memory_limit : r->device_total;
    out->capacity_is_limit = r->memory_limit != 0;
    double floor_bytes = (double)(dev / 2 < MIB ? dev / 2 : MIB);
    for (int k = 0; k < m; k++) {
        uint64_t b = rs_step_trend_peak_at(ref, step[k]);
        double thr = pct / 100.0 * (double)b;
        if (thr < floor_bytes) thr = floor_bytes;
        if (d[k] > thr) {
            out->first_step = step[k];
            break;
        }
    }

    int j = 0;
    double flat = 0, slope = 0, tstat = 0, line_rss = 0;
    if (m < 3 || !best_hinge(x, d, m, &j, &flat, &slope, &tstat, &line_rss)) return;
    double jump_rss = step_rss(d, m, 0);
    for (int k = 1; k < m; k++) {
        double rss = step_rss(d, m, k);
        if (rss < jump_rss) jump_rss = rss;
    }
    if (!(slope > 0) || tstat < GROWTH_T || !(line_rss < jump_rss)) return;
    out->growth = 1;
    out->growth_per_step = slope;
    out->growth_t = tstat;
    /* Dated from the first step that rises above the flat part by half a step's growth; with no
     * flat part seen (j = 0), above no difference at all: a leak of every step is "since step 0". */
    double base = j > 0 ? flat : 0;
    int start = j;
    while (start < m - 1 && !(d[start] - base > slope / 2)) start++;
    out->first_step = step[start];
    /* the rate over the rising part alone: the flat part before it bends the hinge's line */
    double rate_d, icept_d, rss_d, sxx_d;
    int ok_d;
    fit_line(x, d, start, m, &rate_d, &icept_d, &rss_d, &sxx_d, &ok_d);
    if (ok_d && rate_d > 0) out->growth_per_step = rate_d;
    if (!out->capacity) return;
    /* The rank's own rate over the same steps (the reference may move too); the difference's
     * when its own does not rise. */
    double own_slope, own_icept, own_rss, own_sxx;
    int ok;
    fit_line(x, own, j, m, &own_slope, &own_icept, &own_rss, &own_sxx, &ok);
    double rate = ok && own_slope > 0 ? own_slope : slope * sign;
    if (!(rate > 0)) return;
    double left = (double)out->capacity - own[m - 1];
    double steps = left <= 0 ? 0 : ceil(left / rate);
    out->exhaust_step = steps > 1e15 ? -1 : step[m - 1] + (int64_t)steps;
}
