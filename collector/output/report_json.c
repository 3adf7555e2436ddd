/*
 * report_json.c — the comparison for machines: report.json, schema in docs/FORMAT.md
 * ("report.json").
 *
 * Written with fprintf, no JSON library: the document is a fixed shape of objects, arrays, integers
 * and strings. Strings are escaped as RFC 8259 requires (quote, backslash, control characters);
 * they come from snapshots (symbol names, host names, job ids) and need not be valid UTF-8, so
 * every byte sequence that is not well-formed UTF-8 becomes U+FFFD and the output always parses.
 * Byte counts and steps are integers; percentages are rounded to two decimals and written without
 * a fraction when they are whole.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "endings.h"
#include "errors.h"
#include "json_write.h"
#include "report_json.h"
#include "text.h"


static void json_role(FILE *f, const char *label);

/* What the rank's outside bytes are measured against and its device as NVML listed it; only
 * where the file says (older reports stay as they were). */
static void json_device_use(FILE *f, const rs_summary *s)
{
    const char *of = rs_outside_of_name(s->outside_of);
    if (of) fprintf(f, ", \"outside_of\": \"%s\"", of);
    if (s->outside_of == RS_OUTSIDE_DEVICE)
        fprintf(f, ", \"outside_why\": \"%s\"", rs_outside_why_name(s->outside_why));
    uint8_t zero[sizeof s->device_uuid] = {0};
    if (memcmp(s->device_uuid, zero, sizeof zero) != 0) {
        char uuid[48];
        rs_text_uuid_format(s->device_uuid, uuid, sizeof uuid);
        fprintf(f, ", \"device_uuid\": \"%s\"", uuid);
    }
    if (s->device_processes) fprintf(f, ", \"device_processes\": %" PRIu16, s->device_processes);
    /* a rank NVML did not find among them cannot tell which of them are the others */
    if (s->device_processes && s->outside_why != RS_OUTSIDE_WHY_PID_NOT_LISTED)
        fprintf(f, ", \"device_others_bytes\": %" PRIu64 ", \"device_others_unknown\": %" PRIu16,
                (uint64_t)s->device_others_kib * 1024, s->device_others_unknown);
}

/* "shared_devices": the devices more than one process used (shared_devices.h). */
static void json_shared(FILE *f, const rs_compare_result *r)
{
    fputs("  \"shared_devices\": [", f);
    for (size_t k = 0; k < r->n_shared; k++) {
        const rs_shared_device *d = &r->shared[k];
        char uuid[48];
        rs_text_uuid_format(d->uuid, uuid, sizeof uuid);
        fprintf(f, "%s{\"uuid\": \"%s\", \"ranks\": [", k ? ",\n    " : "\n    ", uuid);
        size_t shown = d->n_ranks < RS_SHARED_MAX_RANKS ? d->n_ranks : RS_SHARED_MAX_RANKS;
        for (size_t j = 0; j < shown; j++) fprintf(f, "%s%" PRId32, j ? ", " : "", d->ranks[j]);
        fprintf(f, "], \"n_ranks\": %zu, \"processes\": %" PRIu32 "}", d->n_ranks, d->processes);
    }
    fputs(r->n_shared ? "\n  ],\n" : "],\n", f);
}

void rs_report_json_rank(FILE *f, const rs_summary *s, const char *role, const rs_site *pool,
                         int no_data)
{
    uint64_t frag = rs_summary_fragmentation(s);
    fprintf(f, "    {\"rank\": %" PRId32 ", ", s->rank);
    json_role(f, role);
    rs_json_key(f, "host");
    rs_json_string(f, s->host, RS_JSON_PLAIN);
    fputs(", ", f);
    rs_json_key(f, "job");
    rs_json_string(f, s->job, RS_JSON_PLAIN);
    if (s->pools_at_peak) { /* only with private pools: other reports stay as they were */
        fprintf(f, ", \"pools_at_peak\": %" PRIu64 ", \"pools_free_at_peak\": %" PRIu64,
                s->pools_at_peak, s->pools_free_at_peak);
        if (pool && pool->function[0]) {
            fputs(", \"largest_pool\": {", f);
            rs_json_frame_fields(f, pool->function, pool->file, pool->line);
            fprintf(f, ", \"bytes\": %" PRId64 "}", pool->bytes);
        }
    }
    if (s->steps_from[0]) { /* only where the file says it: older reports stay as they were */
        fputs(", ", f);
        rs_json_key(f, "steps_from");
        rs_json_string(f, s->steps_from, RS_JSON_PLAIN);
    }
    if (s->recorded_by[0]) { /* only where the file says it */
        fputs(", ", f);
        rs_json_key(f, "recorded_by");
        rs_json_string(f, s->recorded_by, RS_JSON_PLAIN);
    }
    if (s->async_pool) /* only for a rank whose allocator was a stream-ordered pool */
        fprintf(f, ", \"reserved_from\": \"%s\"",
                s->async_pool == RS_SUMMARY_ASYNC_POOL_RESERVED ? "async_pool" : "async_allocated");
    char words[1024];
    if (rs_endings_words(&s->end, words, sizeof words)) { /* only where the file says it */
        fputs(", ", f);
        rs_json_key(f, "ended");
        rs_json_string(f, words, RS_JSON_PLAIN);
    }
    if (no_data && rs_endings_no_data_why(s, words, sizeof words)) {
        fputs(", ", f);
        rs_json_key(f, "no_data_why");
        rs_json_string(f, words, RS_JSON_PLAIN);
    }
    fprintf(f,
            ", \"peak_allocated\": %" PRIu64 ", \"peak_reserved\": %" PRIu64
            ", \"reserved_at_peak\": %" PRIu64 ", \"fragmentation\": %" PRIu64
            ", \"outside_peak\": %" PRIu64 ", \"outside_end\": %" PRIu64
            ", \"peak_step\": %" PRId64 ", \"peak_time_us\": %" PRId64
            ", \"oom\": %s, \"complete\": %s, \"recovered\": %s, \"events\": %" PRIu64
            ", \"dropped\": %" PRIu64
            ", \"step_stride\": %" PRId32 ", \"step_peaks\": [",
            s->peak_allocated, s->peak_reserved, s->reserved_at_peak, frag, s->outside_peak,
            s->outside_end, s->peak_step, s->peak_time_us, s->oom ? "true" : "false",
            s->complete ? "true" : "false", s->recovered ? "true" : "false", s->events, s->dropped,
            s->step_stride);
    int first = 1;
    int n = s->n_steps > RS_SUMMARY_MAX_STEPS ? RS_SUMMARY_MAX_STEPS : s->n_steps;
    for (int k = 0; k < n; k++) {
        if (s->step_peak[k] == RS_SUMMARY_NO_DATA) continue;
        int64_t step = (int64_t)((uint64_t)s->step_first + (uint64_t)k * (uint64_t)s->step_stride);
        fprintf(f, "%s{\"step\": %" PRId64 ", \"peak\": %" PRIu64 "}", first ? "" : ", ", step,
                s->step_peak[k]);
        first = 0;
    }
    fputs("], \"outside_labels\": {", f);
    for (int k = 0; k < s->n_outside_labels && k < RS_SUMMARY_MAX_OUTSIDE_LABELS; k++) {
        fputs(k ? ", " : "", f);
        rs_json_key(f, s->outside_labels[k].label);
        fprintf(f, "%" PRIu64, s->outside_labels[k].bytes);
    }
    fputc('}', f);
    json_device_use(f, s);
    /* only where memory outside the allocator was recorded as it was taken (the driver's) */
    if (s->recorded_outside_peak) {
        fprintf(f, ", \"recorded_outside_peak\": %" PRIu64 ", \"outside_sites\": [",
                s->recorded_outside_peak);
        for (int k = 0; k < s->n_outside_sites && k < RS_SUMMARY_MAX_OUTSIDE_SITES; k++) {
            const rs_site *site = &s->outside_sites[k];
            fputs(k ? ", {" : "{", f);
            rs_json_frame_fields(f, site->function, site->file, site->line);
            rs_json_held(f, site);
            fprintf(f, ", \"bytes\": %" PRId64, site->bytes);
            if (s->outside_site_owners[k][0]) {
                fputs(", \"owner\": ", f);
                rs_json_string(f, s->outside_site_owners[k], RS_JSON_PLAIN);
            }
            fputc('}', f);
        }
        fputc(']', f);
    }
    fputc('}', f);
}

/* The role label of a grouped comparison, NULL when not grouped. */
static const char *role_label(const rs_compare_result *r, int32_t role)
{
    return role >= 0 && (size_t)role < r->n_roles ? r->roles[role].label : NULL;
}

/* `"role": "pp=2", ` in a grouped comparison's verdicts; nothing otherwise. */
static void json_role(FILE *f, const char *label)
{
    if (!label) return;
    rs_json_key(f, "role");
    rs_json_string(f, label, RS_JSON_PLAIN);
    fputs(", ", f);
}

static void json_roles(FILE *f, const rs_compare_result *r)
{
    fputs("  \"grouping\": ", f);
    rs_json_string(f, r->grouping, RS_JSON_PLAIN);
    if (r->grouping_basis[0]) {
        fputs(",\n  \"grouping_basis\": ", f);
        rs_json_string(f, r->grouping_basis, RS_JSON_PLAIN);
    }
    if (r->replicas[0]) {
        fputs(",\n  \"replicas\": ", f);
        rs_json_string(f, r->replicas, RS_JSON_PLAIN);
    }
    fputs(",\n  \"nearest_role\": ", f);
    if (r->nearest_role >= 0)
        rs_json_string(f, r->roles[r->nearest_role].label, RS_JSON_PLAIN);
    else
        fputs("null", f);
    fputs(",\n  \"roles\": [", f);
    for (size_t k = 0; k < r->n_roles; k++) {
        const rs_compare_role *x = &r->roles[k];
        fputs(k ? ",\n    {" : "\n    {", f);
        rs_json_key(f, "role");
        rs_json_string(f, x->label, RS_JSON_PLAIN);
        fprintf(f, ", \"ranks\": %zu, \"median_peak\": %" PRIu64 ", \"threshold_bytes\": %" PRIu64
                   ", \"reference_rank\": %" PRId32 ", \"max_rank\": %" PRId32
                   ", \"max_peak\": %" PRIu64 ", \"capacity\": %" PRIu64 ", \"headroom\": ",
                x->n_ranks, x->median_peak, x->threshold, x->reference_rank, x->max_rank,
                x->max_peak, x->capacity);
        if (x->capacity)
            fprintf(f, "%" PRId64 "}", x->headroom);
        else
            fputs("null}", f);
    }
    fputs(r->n_roles ? "\n  ],\n" : "],\n", f);
    /* what makes the heaviest role heavier than the lightest */
    fputs("  \"role_gap\": ", f);
    if (r->heavy_role < 0) {
        fputs("null,\n", f);
        return;
    }
    fputs("{\"heavy\": ", f);
    rs_json_string(f, r->roles[r->heavy_role].label, RS_JSON_PLAIN);
    fputs(", \"light\": ", f);
    rs_json_string(f, r->roles[r->light_role].label, RS_JSON_PLAIN);
    fprintf(f, ", \"delta_bytes\": %" PRId64 ", \"sites\": [", r->role_gap);
    for (size_t i = 0; i < r->n_role_gap_sites; i++) {
        fputs(i ? ", {" : "{", f);
        rs_json_site_fields(f, &r->role_gap_sites[i]);
        fprintf(f, ", \"bytes_delta\": %" PRId64 "}", r->role_gap_sites[i].site.bytes);
    }
    fputs("]},\n", f);
}

static void json_oom(FILE *f, const char *role, const rs_compare_oom *v)
{
    fputs("    {", f);
    json_role(f, role);
    fprintf(f,
            "\"rank\": %" PRId32 ", \"requested\": %" PRIu64 ", \"step\": %" PRId64
            ", \"device_free\": %" PRIu64 ", \"device_total\": %" PRIu64
            ", \"allocated\": %" PRIu64 ", \"reserved\": %" PRIu64 ", \"memory_limit\": %" PRIu64
            ", \"stack\": {",
            v->rank, v->requested, v->step, v->device_free, v->device_total, v->allocated,
            v->reserved, v->memory_limit);
    rs_json_site_fields(f, &v->site);
    fputs("}, \"live_sites\": [", f);
    for (size_t i = 0; i < v->n_live; i++) {
        fputs(i ? ", {" : "{", f);
        rs_json_site_fields(f, &v->live[i]);
        fprintf(f, ", \"bytes\": %" PRId64 ", \"blocks\": %" PRId32 "}", v->live[i].site.bytes,
                v->live[i].site.blocks);
    }
    fputs("]}", f);
}

static void json_divergent(FILE *f, const char *role, const rs_compare_divergent *d)
{
    fputs("    {", f);
    json_role(f, role);
    fprintf(f,
            "\"rank\": %" PRId32 ", \"peak_allocated\": %" PRIu64
            ", \"reference_peak\": %" PRIu64 ", \"divergence_pct\": ",
            d->rank, d->peak_allocated, d->reference_peak);
    rs_json_pct(f, d->divergence_pct);
    fputs(", \"first_divergent_step\": ", f);
    if (d->first_divergent_step >= 0)
        fprintf(f, "%" PRId64, d->first_divergent_step);
    else
        fputs("null", f);
    fprintf(f, ", \"pattern\": \"%s\", \"growth_bytes_per_step\": ", d->growth ? "growth" : "offset");
    if (d->growth)
        rs_json_rate(f, d->growth_per_step);
    else
        fputs("null", f);
    fputs(", \"growth_t\": ", f);
    if (d->growth)
        rs_json_pct(f, d->growth_t);
    else
        fputs("null", f);
    fprintf(f, ", \"capacity\": %" PRIu64 ", \"exhaust_step\": ", d->capacity);
    if (d->growth && d->exhaust_step >= 0)
        fprintf(f, "%" PRId64, d->exhaust_step);
    else
        fputs("null", f);
    if (d->by_pools)
        fprintf(f,
                ", \"by_pools\": {\"graph\": %s, \"pools_at_peak\": %" PRIu64
                ", \"reference_pools_at_peak\": %" PRIu64 ", \"peak_allocated\": %" PRIu64
                ", \"reference_peak_allocated\": %" PRIu64 "}",
                d->pools_graph ? "true" : "false", d->pools, d->reference_pools, d->allocated,
                d->reference_allocated);
    fprintf(f, ", \"delta_bytes\": %" PRId64 ", \"unattributed_bytes\": %" PRId64 ", \"sites\": [",
            d->delta, d->unattributed);
    for (size_t i = 0; i < d->n_sites; i++) {
        fputs(i ? ", {" : "{", f);
        rs_json_site_fields(f, &d->sites[i]);
        fprintf(f, ", \"bytes_delta\": %" PRId64 "}", d->sites[i].site.bytes);
    }
    fputs("]}", f);
}

ranksnap_status rs_report_json(FILE *f, const rs_compare_result *r)
{
    if (!f || !r) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_report_json: NULL argument");
    fprintf(f, "{\n  \"world_size\": %d,\n  \"reference_rank\": ", r->world_size);
    if (r->reference_rank >= 0)
        fprintf(f, "%" PRId32, r->reference_rank);
    else
        fputs("null", f);
    fprintf(f, ",\n  \"median_peak_allocated\": %" PRIu64 ",\n  \"mad\": %" PRIu64,
            r->median_peak, r->mad);
    if (r->by_held) fputs(",\n  \"compared_by\": \"peak_allocated + pools_free_at_peak\"", f);
    fputs(",\n  \"divergence_threshold_pct\": ", f);
    rs_json_pct(f, r->divergence_pct);
    fprintf(f, ",\n  \"divergence_threshold_bytes\": %" PRIu64 ",\n  \"ranks\": [", r->threshold);
    for (size_t i = 0; i < r->n_ranks; i++) {
        fputs(i ? ",\n" : "\n", f);
        int no_data = 0;
        for (size_t k = 0; k < r->n_no_data && !no_data; k++) no_data = r->no_data[k] == r->ranks[i].rank;
        rs_report_json_rank(f, &r->ranks[i], r->rank_roles ? role_label(r, r->rank_roles[i]) : NULL,
                            r->pools ? &r->pools[i] : NULL, no_data);
    }
    fputs(r->n_ranks ? "\n  ],\n  \"missing_ranks\": [" : "],\n  \"missing_ranks\": [", f);
    for (size_t i = 0; i < r->n_missing; i++)
        fprintf(f, "%s%" PRId32, i ? ", " : "", r->missing[i]);
    fputs("],\n  \"no_data_ranks\": [", f);
    for (size_t i = 0; i < r->n_no_data; i++)
        fprintf(f, "%s%" PRId32, i ? ", " : "", r->no_data[i]);
    fputs("],\n  \"oom_ranks\": [", f);
    for (size_t i = 0; i < r->n_oom; i++) {
        fputs(i ? ",\n" : "\n", f);
        json_oom(f, role_label(r, r->oom[i].role), &r->oom[i]);
    }
    fputs(r->n_oom ? "\n  ],\n  \"divergent_ranks\": [" : "],\n  \"divergent_ranks\": [", f);
    for (size_t i = 0; i < r->n_divergent; i++) {
        fputs(i ? ",\n" : "\n", f);
        json_divergent(f, role_label(r, r->divergent[i].role), &r->divergent[i]);
    }
    fputs(r->n_divergent ? "\n  ],\n" : "],\n", f);
    if (r->n_roles) json_roles(f, r);
    json_shared(f, r);
    fputs("  \"notes\": [", f);
    for (size_t i = 0; i < r->n_notes; i++) {
        fputs(i ? ",\n    " : "\n    ", f);
        rs_json_string(f, r->notes[i], RS_JSON_PLAIN);
    }
    fputs(r->n_notes ? "\n  ]\n}\n" : "]\n}\n", f);
    if (ferror(f) || fflush(f) != 0)
        return rs_error(RANKSNAP_ERR_IO, "writing the JSON report failed: %s", strerror(errno));
    return RANKSNAP_OK;
}
