/*
 * diff_json.c — owns `ranksnap diff --json` (diff_json.h): the pairing, each pair's and role's
 * measures on both sides and their changes, the explanations with their sites, each run's ranks
 * as report.json writes them, the notes and the gate. Written with fprintf, as report.json is:
 * byte counts and steps are integers, shares rounded to two decimals (null when infinite: a
 * growth from 0 bytes), strings escaped so that any byte sequence parses.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "diff_json.h"
#include "diff_text.h"
#include "errors.h"
#include "json_write.h"
#include "report_json.h"
#include "sat.h"

static const char *const run_name[2] = {"before", "after"};

static void json_int_or_null(FILE *f, int known, int64_t v)
{
    if (known)
        fprintf(f, "%" PRId64, v);
    else
        fputs("null", f);
}

static void json_level(FILE *f, const rs_diff_level *l)
{
    fprintf(f,
            "{\"rank\": %" PRId32 ", \"has_data\": %s, \"peak_allocated\": %" PRIu64
            ", \"peak_reserved\": %" PRIu64 ", \"outside\": %" PRIu64 ", \"fragmentation\": ",
            l->rank, l->has_data ? "true" : "false", l->peak, l->reserved, l->outside);
    json_int_or_null(f, l->fragmentation_known, rs_sat_i64(l->fragmentation));
    fputs(", \"capacity\": ", f);
    json_int_or_null(f, l->capacity != 0, rs_sat_i64(l->capacity));
    fputs(", \"headroom\": ", f);
    json_int_or_null(f, l->capacity != 0, l->headroom);
    fprintf(f, ", \"oom\": %s}", l->oom ? "true" : "false");
}

static void json_change_of(FILE *f, const char *key, uint64_t b, uint64_t a)
{
    fprintf(f, "\"%s\": %" PRId64 ", \"%s_pct\": ", key, rs_diff_delta(b, a), key);
    rs_json_pct(f, rs_diff_pct(b, a));
}

static void json_change(FILE *f, const rs_diff_level *b, const rs_diff_level *a)
{
    fputs("{", f);
    json_change_of(f, "peak_allocated", b->peak, a->peak);
    fputs(", ", f);
    json_change_of(f, "peak_reserved", b->reserved, a->reserved);
    fputs(", ", f);
    json_change_of(f, "outside", b->outside, a->outside);
    fputs(", \"fragmentation\": ", f);
    json_int_or_null(f, b->fragmentation_known && a->fragmentation_known,
                     rs_diff_delta(b->fragmentation, a->fragmentation));
    fputs(", \"headroom\": ", f);
    json_int_or_null(f, b->capacity && a->capacity, a->headroom - b->headroom);
    fputc('}', f);
}

static void json_why(FILE *f, int explained, const rs_diff_why *w)
{
    static const char *const kinds[] = {"grown", "shrunk", "added", "removed"};
    if (!explained) {
        fputs("null", f);
        return;
    }
    const rs_step_trend *t = &w->trend;
    fprintf(f, "{\"before_rank\": %" PRId32 ", \"after_rank\": %" PRId32 ", \"sites_in_full\": %s",
            w->rank[0], w->rank[1], w->sites_full ? "true" : "false");
    fputs(", \"pattern\": ", f);
    fputs(!w->has_trend ? "null" : t->growth ? "\"growth\"" : "\"offset\"", f);
    fputs(", \"first_step\": ", f);
    json_int_or_null(f, w->has_trend && t->first_step >= 0, t->first_step);
    fputs(", \"growth_bytes_per_step\": ", f);
    if (w->has_trend && t->growth)
        rs_json_rate(f, t->growth_per_step);
    else
        fputs("null", f);
    fputs(", \"last_common_step\": ", f);
    json_int_or_null(f, w->has_trend, t->last_step);
    fprintf(f, ", \"unattributed_bytes\": %" PRId64 ", \"sites\": [", w->unattributed);
    for (size_t i = 0; i < w->n_sites; i++) {
        fputs(i ? ", {" : "{", f);
        rs_json_site_fields(f, &w->sites[i].cs);
        fprintf(f, ", \"bytes_delta\": %" PRId64 ", \"change\": \"%s\"}", w->sites[i].cs.site.bytes,
                kinds[w->sites[i].kind]);
    }
    fputs("]}", f);
}

static void json_group(FILE *f, const rs_diff_group *g)
{
    fputs("{\"role\": ", f);
    rs_json_string(f, g->key, RS_JSON_PLAIN);
    for (int side = 0; side < 2; side++) {
        fprintf(f, ", \"label_%s\": ", run_name[side]);
        rs_json_string(f, g->label[side], RS_JSON_PLAIN);
        fprintf(f, ", \"ranks_%s\": %zu, \"median_peak_%s\": %" PRIu64 ", \"median_rank_%s\": ",
                run_name[side], g->n_ranks[side], run_name[side], g->median_peak[side], run_name[side]);
        json_int_or_null(f, g->median_rank[side] >= 0, g->median_rank[side]);
        fprintf(f, ", \"%s\": ", run_name[side]);
        json_level(f, &g->side[side]);
    }
    fprintf(f, ", \"changed\": %s, \"change\": ", g->changed ? "true" : "false");
    json_change(f, &g->side[0], &g->side[1]);
    fputs(", \"median_peak_change\": {", f);
    json_change_of(f, "bytes", g->median_peak[0], g->median_peak[1]);
    fputs("}, \"why\": ", f);
    json_why(f, g->explained, &g->why);
    fputc('}', f);
}

static void json_pair(FILE *f, const rs_diff_result *r, const rs_diff_pair *p)
{
    fprintf(f, "    {\"before_rank\": %" PRId32 ", \"after_rank\": %" PRId32 ", \"role\": ",
            p->side[0].rank, p->side[1].rank);
    if (p->group >= 0)
        rs_json_string(f, r->groups[p->group].key, RS_JSON_PLAIN);
    else
        fputs("null", f);
    fputs(", \"replica\": ", f);
    json_int_or_null(f, p->replica >= 0, p->replica);
    fprintf(f, ", \"changed\": %s, \"as_its_role\": %s, \"before\": ", p->changed ? "true" : "false",
            p->as_its_role ? "true" : "false");
    json_level(f, &p->side[0]);
    fputs(", \"after\": ", f);
    json_level(f, &p->side[1]);
    fputs(", \"change\": ", f);
    json_change(f, &p->side[0], &p->side[1]);
    fputs(", \"grows_against_peers\": {", f);
    for (int side = 0; side < 2; side++) {
        fprintf(f, "%s\"%s\": ", side ? ", " : "", run_name[side]);
        if (!p->peer_growth[side]) {
            fputs("null", f);
            continue;
        }
        fputs("{\"bytes_per_step\": ", f);
        rs_json_rate(f, p->peer_growth_per_step[side]);
        fprintf(f, ", \"since_step\": %" PRId64 "}", p->peer_growth_since[side]);
    }
    fputs("}, \"why\": ", f);
    json_why(f, p->explained, &p->why);
    fputc('}', f);
}

static void json_gate(FILE *f, const rs_diff_result *r, const rs_diff_gate *g)
{
    if (!g || !g->n) {
        fputs("null", f);
        return;
    }
    fprintf(f, "{\"failed\": %s, \"conditions\": [", rs_diff_gate_failed(g) ? "true" : "false");
    static const char *const on_name[] = {"rank", "role", "job"};
    for (size_t ci = 0; ci < g->n; ci++) {
        const rs_diff_gate_cond *c = &g->c[ci];
        fputs(ci ? ",\n    {" : "\n    {", f);
        rs_json_key(f, "condition");
        rs_json_string(f, c->text, RS_JSON_PLAIN);
        fprintf(f, ", \"measure\": \"%s\", \"limit\": ", rs_diff_gate_measure_name(c->measure));
        if (c->measure == RS_GATE_OOM)
            fputs("null", f);
        else if (c->is_pct)
            rs_json_pct(f, c->pct);
        else
            fprintf(f, "%" PRIu64, c->bytes);
        fprintf(f, ", \"limit_is_pct\": %s, \"exceeded\": %s, \"unchecked\": %zu, \"hits\": [",
                c->is_pct ? "true" : "false", c->n_hits ? "true" : "false", c->n_unknown);
        size_t k = 0;
        for (size_t h = 0; h < g->n_hits; h++) {
            const rs_diff_gate_hit *x = &g->hits[h];
            if (x->cond != ci) continue;
            char name[160];
            rs_diff_text_name_hit(name, sizeof name, r, x->on, x->index);
            fprintf(f, "%s{\"on\": \"%s\", \"name\": ", k++ ? ", " : "", on_name[x->on]);
            rs_json_string(f, name, RS_JSON_PLAIN);
            fputs(", \"value\": ", f);
            rs_json_pct(f, x->value);
            fputc('}', f);
        }
        fputs("]}", f);
    }
    fputs("]}", f);
}

ranksnap_status rs_diff_json(FILE *f, const rs_diff_result *r, const rs_diff_gate *gate)
{
    static const char *const by[] = {"rank", "role", "number", "none"};
    if (!f || !r) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_diff_json: NULL argument");
    fputs("{\n", f);
    for (int side = 0; side < 2; side++) {
        fprintf(f, "  \"%s\": {\"source\": ", run_name[side]);
        rs_json_string(f, r->source[side], RS_JSON_PLAIN);
        fprintf(f, ", \"world_size\": %d, \"ranks\": %zu, \"roles_from\": ", r->world[side],
                r->n_ranks[side]);
        if (r->roles_source[side][0])
            rs_json_string(f, r->roles_source[side], RS_JSON_PLAIN);
        else
            fputs("null", f);
        fputs(", \"unpaired_ranks\": [", f);
        for (size_t i = 0; i < r->n_unpaired[side]; i++)
            fprintf(f, "%s%" PRId32, i ? ", " : "", r->unpaired[side][i]);
        fputs("]},\n", f);
    }
    fprintf(f, "  \"paired_by\": \"%s\",\n  \"pairing\": ", by[r->paired_by]);
    rs_json_string(f, r->pairing, RS_JSON_PLAIN);
    fputs(",\n  \"threshold_pct\": ", f);
    rs_json_pct(f, r->threshold_pct);
    fputs(",\n  \"parting_step\": ", f);
    json_int_or_null(f, r->parting_step >= 0, r->parting_step);
    fprintf(f, ",\n  \"changed_ranks\": %zu,\n  \"pairs\": [", r->n_changed);
    for (size_t i = 0; i < r->n_pairs; i++) {
        fputs(i ? ",\n" : "\n", f);
        json_pair(f, r, &r->pairs[i]);
    }
    fputs(r->n_pairs ? "\n  ],\n  \"roles\": [" : "],\n  \"roles\": [", f);
    for (size_t k = 0; k < r->n_groups; k++) {
        fputs(k ? ",\n    " : "\n    ", f);
        json_group(f, &r->groups[k]);
    }
    fputs(r->n_groups ? "\n  ],\n  \"job\": " : "],\n  \"job\": ", f);
    json_group(f, &r->job);
    fputs(",\n  \"runs\": {", f);
    for (int side = 0; side < 2; side++) {
        fprintf(f, "%s\"%s\": [", side ? ",\n    " : "\n    ", run_name[side]);
        for (size_t i = 0; i < r->n_ranks[side]; i++) {
            int32_t k = r->rank_role[side][i];
            fputs(i ? ",\n" : "\n", f);
            rs_report_json_rank(f, &r->ranks[side][i], k >= 0 ? r->role_labels[side][k] : NULL, NULL,
                                !rs_summary_has_data(&r->ranks[side][i]));
        }
        fputs("]", f);
    }
    fputs("},\n  \"notes\": [", f);
    for (size_t i = 0; i < r->n_notes; i++) {
        fputs(i ? ",\n    " : "\n    ", f);
        rs_json_string(f, r->notes[i], RS_JSON_PLAIN);
    }
    fputs(r->n_notes ? "\n  ],\n  \"gate\": " : "],\n  \"gate\": ", f);
    json_gate(f, r, gate);
    fputs("\n}\n", f);
    if (ferror(f) || fflush(f) != 0)
        return rs_error(RANKSNAP_ERR_IO, "writing the JSON of the diff failed: %s", strerror(errno));
    return RANKSNAP_OK;
}
