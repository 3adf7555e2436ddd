/*
 * diff_text.c — owns `ranksnap diff`'s text (diff_text.h): the pairing, the tables of ranks and
 * roles (each measure after, and its change), the sentences of what changed and why, the notes
 * and the gate. Sizes, shares and sites are written as report.txt writes them (report_text.h);
 * every string from a file goes through rs_text_put / rs_text_escape.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "diff_text.h"
#include "errors.h"
#include "report_text.h"
#include "text.h"

/* Rows of the rank table before only the changed ranks are listed. */
#define ALL_ROWS 32
/* Changed ranks listed at most. */
#define MAX_ROWS 64
/* Sites a sentence names; the JSON has them all. */
#define SITES_INLINE 3

static const char *const run_name[2] = {"before", "after"};

/* "+32.00 MiB" into buf; "" for no change. */
static void signed_text(char *buf, size_t n, int64_t d)
{
    char b[32];
    if (d == 0) {
        buf[0] = '\0';
        return;
    }
    rs_text_format_bytes(d < 0 ? (uint64_t)0 - (uint64_t)d : (uint64_t)d, b, sizeof b);
    snprintf(buf, n, "%c%s", d < 0 ? '-' : '+', b);
}

/* One measure's cell: after's value and its change. */
static void cell(char *buf, size_t n, uint64_t before, uint64_t after)
{
    char a[32], d[40];
    rs_text_format_bytes(after, a, sizeof a);
    signed_text(d, sizeof d, rs_diff_delta(before, after));
    snprintf(buf, n, "%s %s", a, d);
}

static void headroom_cell(char *buf, size_t n, const rs_diff_level *b, const rs_diff_level *a)
{
    if (!a->capacity) {
        snprintf(buf, n, "-");
        return;
    }
    char h[32], d[40] = "";
    rs_text_format_bytes(a->headroom > 0 ? (uint64_t)a->headroom : 0, h, sizeof h);
    if (b->capacity) signed_text(d, sizeof d, a->headroom - b->headroom);
    snprintf(buf, n, "%s%s %s", a->headroom < 0 ? "none " : "", a->headroom < 0 ? "" : h, d);
}

void rs_diff_text_name_hit(char *buf, size_t n, const rs_diff_result *r, int on, size_t index)
{
    char esc[96];
    if (on == RS_GATE_ON_JOB) {
        snprintf(buf, n, "the job");
    } else if (on == RS_GATE_ON_ROLE) {
        snprintf(buf, n, "role %s", rs_text_escape(esc, sizeof esc, r->groups[index].key));
    } else {
        const rs_diff_pair *p = &r->pairs[index];
        if (p->side[0].rank == p->side[1].rank)
            snprintf(buf, n, "rank %d", (int)p->side[1].rank);
        else
            snprintf(buf, n, "rank %d (rank %d before)", (int)p->side[1].rank, (int)p->side[0].rank);
    }
}

/* "5 (pp=1, replica 1)": a pair's rank and where it sits. */
static void pair_name(FILE *out, const rs_diff_result *r, const rs_diff_pair *p)
{
    int moved = p->side[0].rank != p->side[1].rank;
    fprintf(out, "rank %d", (int)p->side[1].rank);
    if (p->group < 0 && !moved) return;
    fputs(" (", out);
    if (p->group >= 0) {
        rs_text_put(out, r->groups[p->group].key);
        if (p->replica >= 0) fprintf(out, ", replica %d", (int)p->replica);
    }
    if (moved) fprintf(out, "%srank %d before", p->group >= 0 ? "; " : "", (int)p->side[0].rank);
    fputc(')', out);
}

static void print_ranges(FILE *out, const int32_t *v, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && v[j + 1] == v[j] + 1) j++;
        fprintf(out, i ? ", %d" : "%d", (int)v[i]);
        if (j > i) fprintf(out, "-%d", (int)v[j]);
        i = j + 1;
    }
}

/* A table's row, formatted, without the spaces its last column leaves (no newline). */
static void put_row(FILE *out, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void put_row(FILE *out, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (len < 0) len = 0;
    if ((size_t)len >= sizeof line) len = (int)sizeof line - 1;
    while (len > 0 && line[len - 1] == ' ') line[--len] = '\0';
    fputs(line, out);
}

static void print_pair_row(FILE *out, const rs_diff_result *r, const rs_diff_pair *p, int w)
{
    const rs_diff_level *b = &p->side[0], *a = &p->side[1];
    char rank[32], role[72] = "", c[5][64];
    if (b->rank == a->rank)
        snprintf(rank, sizeof rank, "%d", (int)a->rank);
    else
        snprintf(rank, sizeof rank, "%d->%d", (int)b->rank, (int)a->rank);
    if (p->group >= 0) rs_text_escape(role, sizeof role, r->groups[p->group].key);
    cell(c[0], sizeof c[0], b->peak, a->peak);
    cell(c[1], sizeof c[1], b->reserved, a->reserved);
    cell(c[2], sizeof c[2], b->outside, a->outside);
    if (b->fragmentation_known && a->fragmentation_known)
        cell(c[3], sizeof c[3], b->fragmentation, a->fragmentation);
    else
        snprintf(c[3], sizeof c[3], "-");
    headroom_cell(c[4], sizeof c[4], b, a);
    put_row(out, "%c %9s  %-*s  %-24s  %-24s  %-22s  %-22s  %s", p->changed ? '*' : ' ', rank, w,
            role, c[0], c[1], c[2], c[3], c[4]);
    if (!b->has_data || !a->has_data) fprintf(out, "  no data %s", run_name[!a->has_data]);
    if (a->oom) fputs(b->oom ? "  OOM both" : "  OOM after", out);
    else if (b->oom) fputs("  OOM before", out);
    fputc('\n', out);
}

static void print_pairs(FILE *out, const rs_diff_result *r)
{
    int w = 4;
    for (size_t k = 0; k < r->n_groups; k++)
        if ((int)strlen(r->groups[k].key) > w) w = (int)strlen(r->groups[k].key);
    if (w > 24) w = 24;
    fprintf(out, "  %9s  %-*s  %-24s  %-24s  %-22s  %-22s  %s\n", "rank", w, "role",
            "peak allocated", "peak reserved", "outside", "fragmentation", "headroom");
    int all = r->n_pairs <= ALL_ROWS;
    size_t shown = 0;
    for (size_t i = 0; i < r->n_pairs; i++) {
        if (!all && !r->pairs[i].changed) continue;
        if (shown++ == MAX_ROWS) break;
        print_pair_row(out, r, &r->pairs[i], w);
    }
    if (!all) {
        size_t left = r->n_changed > MAX_ROWS ? r->n_changed - MAX_ROWS : 0;
        fprintf(out, "  (%zu of %zu paired ranks changed%s; --json lists every rank)\n",
                r->n_changed, r->n_pairs, left ? ", the first 64 shown" : ", those shown");
    }
    fputs("  each measure: after's value and its change from before\n\n", out);
}

static void print_group_row(FILE *out, const rs_diff_group *g, int w)
{
    char label[72], ranks[32], med[64], max[64], head[64];
    rs_text_escape(label, sizeof label, g->key);
    snprintf(ranks, sizeof ranks, "%zu->%zu", g->n_ranks[0], g->n_ranks[1]);
    cell(med, sizeof med, g->median_peak[0], g->median_peak[1]);
    cell(max, sizeof max, g->side[0].peak, g->side[1].peak);
    headroom_cell(head, sizeof head, &g->side[0], &g->side[1]);
    put_row(out, "%c %-*s  %-8s  %-24s  %-24s  %s", g->changed ? '*' : ' ', w, label, ranks, med, max,
            head);
    fputc('\n', out);
}

static void print_groups(FILE *out, const rs_diff_result *r)
{
    int w = 4;
    for (size_t k = 0; k < r->n_groups; k++)
        if ((int)strlen(r->groups[k].key) > w) w = (int)strlen(r->groups[k].key);
    if (w > 24) w = 24;
    if (r->n_groups) {
        fputs("roles (before: ", out);
        rs_text_put(out, r->roles_source[0]);
        fputs("; after: ", out);
        rs_text_put(out, r->roles_source[1]);
        fputs(")\n", out);
    }
    fprintf(out, "  %-*s  %-8s  %-24s  %-24s  %s\n", w, r->n_groups ? "role" : "", "ranks",
            "median peak", "largest peak", "headroom");
    for (size_t k = 0; k < r->n_groups; k++) print_group_row(out, &r->groups[k], w);
    print_group_row(out, &r->job, w);
    fputc('\n', out);
}

static const char *kind_word(int kind)
{
    static const char *const words[] = {"grown", "shrunk", "added", "removed"};
    return kind >= 0 && kind <= RS_DIFF_SITE_REMOVED ? words[kind] : "changed";
}

static void print_sites(FILE *out, const rs_diff_why *w, int64_t change)
{
    for (size_t i = 0; i < w->n_sites && i < SITES_INLINE; i++) {
        fputs(i ? ", " : ": ", out);
        rs_report_text_signed_bytes(out, w->sites[i].cs.site.bytes);
        fputs(" at ", out);
        rs_report_text_site(out, &w->sites[i].cs);
        fprintf(out, " (%s)", kind_word(w->sites[i].kind));
    }
    if (w->n_sites > SITES_INLINE)
        fprintf(out, ", and %zu more site%s", w->n_sites - SITES_INLINE,
                w->n_sites - SITES_INLINE == 1 ? "" : "s");
    int64_t u = w->unattributed;
    uint64_t au = u < 0 ? (uint64_t)0 - (uint64_t)u : (uint64_t)u;
    uint64_t at = change < 0 ? (uint64_t)0 - (uint64_t)change : (uint64_t)change;
    if (w->n_sites && au && au >= at / 100 && (u < 0) == (change < 0)) {
        fputs("; ", out);
        rs_report_text_signed_bytes(out, u);
        fputs(" not attributed to these sites", out);
    }
}

/* "+32.00 MiB (+9.8%, 328.00 MiB -> 360.00 MiB)" */
static void print_change(FILE *out, uint64_t before, uint64_t after)
{
    rs_report_text_signed_bytes(out, rs_diff_delta(before, after));
    double pct = rs_diff_pct(before, after);
    fputs(" (", out);
    if (isfinite(pct)) {
        fputc(pct < 0 ? '-' : '+', out);
        rs_report_text_pct(out, pct);
        fputs(", ", out);
    }
    rs_report_text_bytes(out, before);
    fputs(" -> ", out);
    rs_report_text_bytes(out, after);
    fputc(')', out);
}

/* " from step 2, a constant offset", " growing +16.00 MiB per step since step 2 (a leak?)", or
 * what the steps cannot tell. */
static void print_trend(FILE *out, const rs_diff_why *w)
{
    if (!w->has_trend) {
        fputs(" (the two runs recorded no step in common: where they part is not known)", out);
        return;
    }
    const rs_step_trend *t = &w->trend;
    if (t->growth) {
        double rate = t->growth_per_step < 0 ? -t->growth_per_step : t->growth_per_step;
        fputs(", growing ", out);
        rs_report_text_signed_bytes(out, rate >= 9.2e18 ? INT64_MAX : (int64_t)(rate + 0.5));
        fprintf(out, " per step since step %" PRId64 " (a leak?)", t->first_step);
    } else if (t->first_step >= 0) {
        fprintf(out, " from step %" PRId64 ", a constant offset", t->first_step);
    } else {
        fputs(", at no one step (no step's peak changed beyond the threshold)", out);
    }
}

/* The other measures that changed: "; reserved +96.00 MiB; outside +1.00 GiB". */
static void print_other_measures(FILE *out, const rs_diff_level *b, const rs_diff_level *a)
{
    if (a->reserved != b->reserved) {
        fputs("; peak reserved ", out);
        rs_report_text_signed_bytes(out, rs_diff_delta(b->reserved, a->reserved));
    }
    if (a->outside != b->outside) {
        fputs("; outside ", out);
        rs_report_text_signed_bytes(out, rs_diff_delta(b->outside, a->outside));
    }
}

static void print_group_why(FILE *out, const rs_diff_result *r, const rs_diff_group *g)
{
    size_t alike = 0;
    for (size_t i = 0; i < r->n_pairs; i++)
        alike += r->pairs[i].group == g - r->groups && r->pairs[i].as_its_role;
    fputs("role ", out);
    rs_text_put(out, g->key);
    fputs(g->median_peak[1] >= g->median_peak[0] ? " grew" : " shrank", out);
    fputs(": median peak ", out);
    print_change(out, g->median_peak[0], g->median_peak[1]);
    print_trend(out, &g->why);
    print_sites(out, &g->why, rs_diff_delta(g->median_peak[0], g->median_peak[1]));
    print_other_measures(out, &g->side[0], &g->side[1]);
    fprintf(out, " (its median rank: %d before, %d after)", (int)g->why.rank[0], (int)g->why.rank[1]);
    if (alike) fprintf(out, "; %zu of its ranks changed alike", alike);
    fputc('\n', out);
}

/* A leak one run's own comparison saw and the other's did not, where the trend against the
 * other run does not say it already. */
static void print_peer_growth(FILE *out, const rs_diff_pair *p)
{
    for (int side = 1; side >= 0; side--) {
        if (!p->peer_growth[side] || p->peer_growth[!side] || (p->why.has_trend && p->why.trend.growth))
            continue;
        double rate = p->peer_growth_per_step[side];
        fprintf(out, "; within %s it grows ", run_name[side]);
        rs_report_text_signed_bytes(out, rate >= 9.2e18 ? INT64_MAX : (int64_t)(rate + 0.5));
        fprintf(out, " per step against its peers since step %" PRId64 " (a leak?), within %s it "
                     "did not", p->peer_growth_since[side], run_name[!side]);
    }
}

static void print_pair_why(FILE *out, const rs_diff_result *r, const rs_diff_pair *p)
{
    const rs_diff_level *b = &p->side[0], *a = &p->side[1];
    pair_name(out, r, p);
    fputs(a->peak >= b->peak ? " peaks higher: " : " peaks lower: ", out);
    print_change(out, b->peak, a->peak);
    print_trend(out, &p->why);
    print_peer_growth(out, p);
    print_sites(out, &p->why, rs_diff_delta(b->peak, a->peak));
    print_other_measures(out, b, a);
    fputc('\n', out);
}

static void print_gate(FILE *out, const rs_diff_result *r, const rs_diff_gate *g)
{
    fprintf(out, "\ngate: %s\n", rs_diff_gate_failed(g) ? "FAILED" : "passed");
    for (size_t ci = 0; ci < g->n; ci++) {
        const rs_diff_gate_cond *c = &g->c[ci];
        fputs("  ", out);
        rs_text_put(out, c->text);
        fputs(c->n_hits ? ": exceeded by " : ": passed", out);
        size_t said = 0;
        for (size_t h = 0; h < g->n_hits; h++) {
            const rs_diff_gate_hit *x = &g->hits[h];
            if (x->cond != ci) continue;
            if (said == 8) {
                fprintf(out, ", and %zu more", c->n_hits - said);
                break;
            }
            char name[160];
            rs_diff_text_name_hit(name, sizeof name, r, x->on, x->index);
            fputs(said++ ? ", " : "", out);
            rs_text_put(out, name);
            if (c->measure == RS_GATE_OOM) continue;
            fputs(" (", out);
            if (c->is_pct && isfinite(x->value)) {
                if (c->measure != RS_GATE_HEADROOM) fputc(x->value < 0 ? '-' : '+', out);
                rs_report_text_pct(out, x->value);
            } else if (c->is_pct) {
                fputs("from 0 bytes", out);
            } else if (c->measure == RS_GATE_HEADROOM) {
                rs_report_text_bytes(out, x->value > 0 ? (uint64_t)x->value : 0);
            } else {
                rs_report_text_signed_bytes(out, x->value >= 9.2e18 ? INT64_MAX : (int64_t)x->value);
            }
            fputc(')', out);
        }
        if (!c->n_hits && c->has_worst && c->measure != RS_GATE_OOM) {
            char name[160];
            rs_diff_text_name_hit(name, sizeof name, r, c->worst_on, c->worst_index);
            fputs(c->measure == RS_GATE_HEADROOM ? " (least: " : " (largest: ", out);
            rs_text_put(out, name);
            fputs(", ", out);
            if (c->is_pct) {
                if (c->measure != RS_GATE_HEADROOM) fputc(c->worst_value < 0 ? '-' : '+', out);
                rs_report_text_pct(out, c->worst_value);
            } else if (c->measure == RS_GATE_HEADROOM) {
                rs_report_text_bytes(out, c->worst_value > 0 ? (uint64_t)c->worst_value : 0);
            } else {
                rs_report_text_signed_bytes(out, (int64_t)c->worst_value);
            }
            fputc(')', out);
        }
        if (c->n_unknown)
            fprintf(out, "; %zu rank%s or role%s of after with no known capacity not checked",
                    c->n_unknown, c->n_unknown == 1 ? "" : "s", c->n_unknown == 1 ? "" : "s");
        fputc('\n', out);
    }
}

ranksnap_status rs_diff_text(FILE *out, const rs_diff_result *r, const rs_diff_gate *gate)
{
    if (!out || !r) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_diff_text: NULL argument");
    fputs("ranksnap diff: before ", out);
    rs_text_put(out, r->source[0]);
    fprintf(out, " (%zu of %d ranks), after ", r->n_ranks[0], r->world[0]);
    rs_text_put(out, r->source[1]);
    fprintf(out, " (%zu of %d ranks)\n", r->n_ranks[1], r->world[1]);
    rs_text_put(out, r->pairing);
    fputs("\n\n", out);
    if (r->n_pairs) print_pairs(out, r);
    print_groups(out, r);
    for (size_t i = 0; i < r->n_pairs; i++) {
        const rs_diff_pair *p = &r->pairs[i];
        if (p->side[1].oom && !p->side[0].oom) {
            pair_name(out, r, p);
            fputs(" ran out of memory after, not before\n", out);
        }
    }
    if (r->job.side[1].oom && !r->job.side[0].oom && r->paired_by == RS_DIFF_NOT_PAIRED)
        fputs("a rank of after ran out of memory; none did before\n", out);
    for (size_t k = 0; k < r->n_groups; k++)
        if (r->groups[k].explained) print_group_why(out, r, &r->groups[k]);
    for (size_t i = 0; i < r->n_pairs; i++)
        if (r->pairs[i].explained) print_pair_why(out, r, &r->pairs[i]);
    if (r->parting_step >= 0) fprintf(out, "the runs part at step %" PRId64 "\n", r->parting_step);
    if (!r->n_changed && !r->job.changed) {
        int roles = 0;
        for (size_t k = 0; k < r->n_groups; k++) roles |= r->groups[k].changed;
        if (!roles)
            fprintf(out, "no rank%s changed beyond %g%% (and 1 MiB) of its peak allocated, peak "
                         "reserved or outside memory\n", r->n_groups ? " or role" : "", r->threshold_pct);
    } else if (r->job.changed && !r->n_pairs) {
        fputs("the job's largest peak ", out);
        print_change(out, r->job.side[0].peak, r->job.side[1].peak);
        fputc('\n', out);
    }
    for (int side = 0; side < 2; side++) {
        if (!r->n_unpaired[side]) continue;
        fprintf(out, "%s: rank%s ", run_name[side], r->n_unpaired[side] == 1 ? "" : "s");
        print_ranges(out, r->unpaired[side], r->n_unpaired[side]);
        fprintf(out, " without a counterpart in %s\n", run_name[!side]);
    }
    for (size_t i = 0; i < r->n_notes; i++) {
        fputs("note: ", out);
        rs_text_put(out, r->notes[i]);
        fputc('\n', out);
    }
    if (gate && gate->n) print_gate(out, r, gate);
    if (ferror(out) || fflush(out) != 0)
        return rs_error(RANKSNAP_ERR_IO, "writing the text of the diff failed: %s", strerror(errno));
    return RANKSNAP_OK;
}
