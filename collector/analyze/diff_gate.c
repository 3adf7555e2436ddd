/*
 * diff_gate.c — owns `ranksnap diff --fail-on`: parsing the conditions and checking them against
 * every paired rank, every role both runs have and the whole job (diff_gate.h).
 *
 * A pair or role with no data on one side is not checked (the diff says why). A growth from 0
 * bytes is an infinite share. Headroom is checked where after's capacity is known; a condition
 * on headroom where it is known nowhere cannot be checked, and says so rather than pass.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff_gate.h"
#include "errors.h"
#include "options.h"

static const char *const measure_names[] = {"peak", "reserved", "outside", "headroom", "oom"};

const char *rs_diff_gate_measure_name(int measure)
{
    return measure >= 0 && measure <= RS_GATE_OOM ? measure_names[measure] : "?";
}

void rs_diff_gate_free(rs_diff_gate *g)
{
    free(g->c);
    free(g->hits);
    memset(g, 0, sizeof *g);
}

int rs_diff_gate_failed(const rs_diff_gate *g)
{
    return g->checked && g->n_hits > 0;
}

static ranksnap_status bad(const char *cond, const char *why)
{
    return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                    "--fail-on '%s': %s (conditions such as peak>5%%, reserved>1GiB, outside>512MiB, "
                    "headroom<4GiB, headroom<10%% or oom)", cond, why);
}

/* One condition, s[0..n) with the spaces around it trimmed. */
static ranksnap_status parse_one(rs_diff_gate_cond *c, const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s)) s++, n--;
    while (n && isspace((unsigned char)s[n - 1])) n--;
    memset(c, 0, sizeof *c);
    if (n == 0) return bad("", "an empty condition");
    if (n >= sizeof c->text) return bad("...", "a condition longer than 63 characters");
    memcpy(c->text, s, n);
    size_t m = 0;
    while (m < n && isalpha((unsigned char)s[m])) m++;
    c->measure = -1;
    for (int k = 0; k <= RS_GATE_OOM; k++)
        if (strlen(measure_names[k]) == m && !strncmp(s, measure_names[k], m)) c->measure = k;
    if (c->measure < 0) return bad(c->text, "expected a measure: peak, reserved, outside, headroom or oom");
    if (c->measure == RS_GATE_OOM) return m == n ? RANKSNAP_OK : bad(c->text, "oom takes no limit");
    while (m < n && s[m] == ' ') m++;
    char want = c->measure == RS_GATE_HEADROOM ? '<' : '>';
    if (m == n || s[m] != want)
        return bad(c->text, want == '>' ? "expected > and a limit: the growth it must not exceed"
                                        : "expected < and a limit: the headroom it must not fall under");
    m++;
    while (m < n && s[m] == ' ') m++;
    char limit[64];
    snprintf(limit, sizeof limit, "%.*s", (int)(n - m), s + m);
    size_t ln = strlen(limit);
    if (ln && limit[ln - 1] == '%') {
        char *end;
        limit[ln - 1] = '\0';
        c->pct = strtod(limit, &end);
        if (!limit[0] || *end || !isdigit((unsigned char)limit[0]) || !isfinite(c->pct) || c->pct > 1e6)
            return bad(c->text, "expected a percentage such as 5% or 2.5%");
        if (c->measure == RS_GATE_HEADROOM && c->pct > 100)
            return bad(c->text, "a headroom above 100% of the capacity");
        c->is_pct = 1;
        return RANKSNAP_OK;
    }
    if (rs_options_parse_size(limit, &c->bytes) != 0)
        return bad(c->text, "expected a percentage (5%) or a size (1GiB, 512MiB, 1073741824)");
    return RANKSNAP_OK;
}

ranksnap_status rs_diff_gate_parse(rs_diff_gate *g, const char *spec)
{
    const char *p = spec ? spec : "";
    do {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        rs_diff_gate_cond c;
        RS_CHECK(parse_one(&c, p, n));
        rs_diff_gate_cond *grown = realloc(g->c, (g->n + 1) * sizeof *grown);
        if (!grown) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for a --fail-on condition");
        g->c = grown;
        g->c[g->n++] = c;
        p = comma ? comma + 1 : NULL;
    } while (p);
    return RANKSNAP_OK;
}

/* The value a condition compares with its limit for one side pair of levels; 0 when it does not
 * apply (no data, capacity unknown: *unknown set). */
static int value_of(const rs_diff_gate_cond *c, const rs_diff_level *b, const rs_diff_level *a,
                    double *v, int *unknown)
{
    *unknown = 0;
    if (c->measure == RS_GATE_OOM) {
        *v = a->oom;
        return a->has_data;
    }
    if (!a->has_data || (c->measure != RS_GATE_HEADROOM && !b->has_data)) return 0;
    if (c->measure == RS_GATE_HEADROOM) {
        if (!a->capacity) {
            *unknown = 1;
            return 0;
        }
        *v = c->is_pct ? 100.0 * (double)a->headroom / (double)a->capacity : (double)a->headroom;
        return 1;
    }
    uint64_t x = c->measure == RS_GATE_PEAK ? b->peak : c->measure == RS_GATE_RESERVED ? b->reserved : b->outside;
    uint64_t y = c->measure == RS_GATE_PEAK ? a->peak : c->measure == RS_GATE_RESERVED ? a->reserved : a->outside;
    *v = c->is_pct ? rs_diff_pct(x, y) : (double)y - (double)x;
    return 1;
}

static int past(const rs_diff_gate_cond *c, double v)
{
    if (c->measure == RS_GATE_OOM) return v != 0;
    if (c->measure == RS_GATE_HEADROOM) return v < (c->is_pct ? c->pct : (double)c->bytes);
    return v > (c->is_pct ? c->pct : (double)c->bytes);
}

/* Worse: a larger growth, a smaller headroom. */
static int worse(const rs_diff_gate_cond *c, double v, double than)
{
    return c->measure == RS_GATE_HEADROOM ? v < than : v > than;
}

static ranksnap_status check_one(rs_diff_gate *g, size_t ci, int on, size_t index,
                                 const rs_diff_level *b, const rs_diff_level *a)
{
    rs_diff_gate_cond *c = &g->c[ci];
    double v = 0;
    int unknown = 0;
    if (!value_of(c, b, a, &v, &unknown)) {
        c->n_unknown += (size_t)unknown;
        return RANKSNAP_OK;
    }
    if (!c->has_worst || worse(c, v, c->worst_value)) {
        c->has_worst = 1;
        c->worst_on = on;
        c->worst_index = index;
        c->worst_value = v;
    }
    if (!past(c, v)) return RANKSNAP_OK;
    rs_diff_gate_hit *grown = realloc(g->hits, (g->n_hits + 1) * sizeof *grown);
    if (!grown) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for the gate's findings");
    g->hits = grown;
    g->hits[g->n_hits++] = (rs_diff_gate_hit){ci, on, index, v};
    c->n_hits++;
    return RANKSNAP_OK;
}

ranksnap_status rs_diff_gate_check(rs_diff_gate *g, const rs_diff_result *r)
{
    free(g->hits);
    g->hits = NULL;
    g->n_hits = 0;
    for (size_t ci = 0; ci < g->n; ci++) {
        rs_diff_gate_cond *c = &g->c[ci];
        c->n_hits = c->n_unknown = 0;
        c->has_worst = 0;
        for (size_t i = 0; i < r->n_pairs; i++)
            RS_CHECK(check_one(g, ci, RS_GATE_ON_RANK, i, &r->pairs[i].side[0], &r->pairs[i].side[1]));
        for (size_t k = 0; k < r->n_groups; k++)
            RS_CHECK(check_one(g, ci, RS_GATE_ON_ROLE, k, &r->groups[k].side[0], &r->groups[k].side[1]));
        RS_CHECK(check_one(g, ci, RS_GATE_ON_JOB, 0, &r->job.side[0], &r->job.side[1]));
        if (c->measure == RS_GATE_HEADROOM && !c->has_worst)
            return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                            "--fail-on '%s' cannot be checked: no rank of %s records its device's "
                            "capacity or a memory limit (PyTorch's snapshots do not record the "
                            "device's size)", c->text, r->source[RS_DIFF_AFTER]);
    }
    g->checked = 1;
    return RANKSNAP_OK;
}
