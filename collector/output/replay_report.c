/*
 * replay_report.c — a replay's result for people (text) and for machines (JSON): the original,
 * the replay under the trace's own settings, a what-if, and the suggestion, side by side.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "json_write.h"
#include "replay_report.h"
#include "text.h"

/* ---- text ---------------------------------------------------------------------------------- */

typedef struct column {
    const char *title;
    const rs_replay_side *side;
} column;

static void row_bytes(FILE *out, const char *label, const column *c, size_t n, size_t field)
{
    fprintf(out, "%-26s", label);
    for (size_t i = 0; i < n; i++) {
        char b[32];
        rs_text_format_bytes(*(const uint64_t *)((const char *)c[i].side + field), b, sizeof b);
        fprintf(out, " %18s", b);
    }
    fputc('\n', out);
}

static void row_count(FILE *out, const char *label, const column *c, size_t n, size_t field)
{
    fprintf(out, "%-26s", label);
    for (size_t i = 0; i < n; i++)
        fprintf(out, " %18" PRIu64, *(const uint64_t *)((const char *)c[i].side + field));
    fputc('\n', out);
}

static void oom_cell(char *buf, size_t n, const rs_replay_side *s)
{
    if (!s->ooms)
        snprintf(buf, n, "no");
    else if (s->ooms == 1)
        snprintf(buf, n, "at event %" PRId64, s->first_oom_event);
    else
        snprintf(buf, n, "at event %" PRId64 " (%" PRIu64 "x)", s->first_oom_event, s->ooms);
}

static void ratio(char *buf, size_t n, uint64_t reserved, uint64_t allocated)
{
    if (allocated == 0)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%.3f", (double)reserved / (double)allocated);
}

static void table(FILE *out, const column *c, size_t n)
{
    char b[48];
    fprintf(out, "%-26s", "");
    for (size_t i = 0; i < n; i++) fprintf(out, " %18s", c[i].title);
    fputc('\n', out);
    row_bytes(out, "peak allocated", c, n, offsetof(rs_replay_side, peak_allocated));
    row_bytes(out, "peak reserved", c, n, offsetof(rs_replay_side, peak_reserved));
    row_bytes(out, "fragmentation at peak", c, n, offsetof(rs_replay_side, fragmentation));
    fprintf(out, "%-26s", "reserved / allocated");
    for (size_t i = 0; i < n; i++) {
        ratio(b, sizeof b, c[i].side->peak_reserved, c[i].side->peak_allocated);
        fprintf(out, " %18s", b);
    }
    fputc('\n', out);
    row_count(out, "cudaMalloc calls", c, n, offsetof(rs_replay_side, device_allocs));
    row_count(out, "cudaFree calls", c, n, offsetof(rs_replay_side, device_frees));
    fprintf(out, "%-26s", "out of memory");
    for (size_t i = 0; i < n; i++) {
        oom_cell(b, sizeof b, c[i].side);
        fprintf(out, " %18s", b);
    }
    fputc('\n', out);
    row_count(out, "peak allocated, bytes", c, n, offsetof(rs_replay_side, peak_allocated));
    row_count(out, "peak reserved, bytes", c, n, offsetof(rs_replay_side, peak_reserved));
}

static void describe_settings(const rs_alloc_conf *c, char *buf, size_t n)
{
    rs_alloc_conf_describe(c, NULL, buf, n);
    if (!buf[0]) snprintf(buf, n, "PyTorch's defaults");
}

static void header(FILE *out, const char *name, const rs_replay_result *r)
{
    char conf[RS_CONF_TEXT_MAX], b[32], c[32];
    fprintf(out, "replay of %s: %" PRIu64 " events, %" PRIu64 " allocations, %" PRIu64
                 " frees, %" PRIu64 " blocks alive before the history\n",
            name, r->events, r->allocs, r->frees, r->preexisting);
    describe_settings(&r->conf, conf, sizeof conf);
    fprintf(out, "settings: %s\n", conf);
    const rs_replay_device *d = &r->device;
    fprintf(out, "device: ");
    if (d->memory) {
        rs_text_format_bytes(d->memory, b, sizeof b);
        fprintf(out, "%s", b);
    } else {
        fprintf(out, "capacity unknown");
    }
    if (d->has_cap) {
        rs_text_format_bytes(d->cap, b, sizeof b);
        fprintf(out, ", cap %s", b);
    }
    if (d->cap_derived) {
        rs_text_format_bytes(d->cap_below, c, sizeof c);
        fprintf(out, " derived from the trace's OOM (at least the highest reserved level it "
                     "reached, below %s: the reserved level then plus the segment it needed)", c);
    }
    fputc('\n', out);
}

/* Whether the replay ran out of memory where the original did. */
static void same_oom(FILE *out, const char *who, const rs_replay_side *o, const rs_replay_side *n)
{
    char b[32];
    if (!o->ooms && !n->ooms) return;
    if (o->ooms && n->ooms && o->first_oom_event == n->first_oom_event) {
        rs_text_format_bytes(n->first_oom_request, b, sizeof b);
        fprintf(out, "%s runs out of memory at the original's request (event %" PRId64 ", %s)\n",
                who, n->first_oom_event, b);
    } else if (o->ooms && !n->ooms) {
        fprintf(out, "%s serves every request, the original's failed one (event %" PRId64
                     ") included\n", who, o->first_oom_event);
    } else {
        rs_text_format_bytes(n->first_oom_request, b, sizeof b);
        fprintf(out, "%s runs out of memory at event %" PRId64 " (a request of %s)%s\n", who,
                n->first_oom_event, b, o->ooms ? ", not where the original did" : "");
    }
}

static void notes(FILE *out, const rs_replay_result *r)
{
    if (r->pools_at_peak) {
        char a[32], b[32];
        rs_text_format_bytes(r->pools_at_peak, a, sizeof a);
        rs_text_format_bytes(r->pools_free_at_peak, b, sizeof b);
        fprintf(out, "private pools (CUDA graphs'): %s of the original's reserved bytes at its peak, "
                     "%s of it in no block, reserved by design and left out of its fragmentation; "
                     "the replay has no private pool and serves their requests from its default pool\n",
                a, b);
    }
    if (r->incomplete)
        fprintf(out, "incomplete: the ring dropped %" PRIu64 " older events; replayed what is "
                     "there, from the blocks alive at its start\n", r->dropped);
    if (r->inconsistent)
        fprintf(out, "note: %" PRIu64 " events did not fit the blocks alive at that moment (frees "
                     "of blocks not alive, allocations over live ones): the history has gaps\n",
                r->inconsistent);
}

void rs_replay_report_text(FILE *out, const char *name, const rs_replay_result *r)
{
    char b[32];
    header(out, name, r);
    column c[2] = {{"original", &r->original}, {"ranksnap", &r->ranksnap}};
    table(out, c, 2);
    rs_text_format_bytes(r->ranksnap_peak_allocated_blocks, b, sizeof b);
    fprintf(out, "(allocated = live requests rounded up to 512 B; ranksnap's blocks, with the tails "
                 "of segments too small to split, peaked at %s)\n", b);
    if (r->original.peak_reserved && r->ranksnap.peak_reserved != r->original.peak_reserved) {
        double d = ((double)r->ranksnap.peak_reserved - (double)r->original.peak_reserved) /
                   (double)r->original.peak_reserved * 100.0;
        fprintf(out, "ranksnap reserves %.1f%% %s than the original at the peak\n",
                d < 0 ? -d : d, d < 0 ? "less" : "more");
    }
    same_oom(out, "the replay", &r->original, &r->ranksnap);
    notes(out, r);
}

/* Whether the what-if ran out of memory where the replay did not (first, or more often): its
 * peaks are then those of a run that failed, lower because it stopped serving requests, and
 * never a saving. */
static int whatif_failed(const rs_replay_side *replay, const rs_replay_side *whatif)
{
    if (!whatif->ooms) return 0;
    return !replay->ooms || whatif->first_oom_event < replay->first_oom_event || whatif->ooms > replay->ooms;
}

void rs_replay_report_whatif_text(FILE *out, const char *name, const rs_replay_result *base,
                                  const rs_replay_result *whatif)
{
    char conf[RS_CONF_TEXT_MAX], b[32];
    header(out, name, base);
    rs_alloc_conf_describe(&whatif->conf, &base->conf, conf, sizeof conf);
    fprintf(out, "what-if: %s", conf[0] ? conf : "the same settings");
    if (whatif->device.memory != base->device.memory) {
        rs_text_format_bytes(whatif->device.memory, b, sizeof b);
        fprintf(out, " on a device of %s", b);
        if (whatif->device.has_cap) {
            rs_text_format_bytes(whatif->device.cap, b, sizeof b);
            fprintf(out, " (cap %s)", b);
        }
    }
    fputc('\n', out);
    uint64_t segment = rs_alloc_conf_large_segment(&whatif->conf);
    if (segment > whatif->device.memory && segment != rs_alloc_conf_large_segment(&base->conf)) {
        rs_text_format_bytes(whatif->device.memory, b, sizeof b);
        fprintf(out, "absurd: large_segment_size_mb:%" PRIu64 " asks for segments larger than the "
                     "device (%s): no large segment can be made\n", segment / RS_CONF_MIB, b);
    }
    int failed = whatif_failed(&base->ranksnap, &whatif->ranksnap);
    if (failed) {
        same_oom(out, "the what-if", &base->original, &whatif->ranksnap);
        fprintf(out, "so it is no saving: its peaks are those of a run that stopped serving "
                     "requests\n");
    }
    column c[3] = {{"original", &base->original},
                   {"replayed", &base->ranksnap},
                   {"what-if", &whatif->ranksnap}};
    table(out, c, 3);
    same_oom(out, "the replay", &base->original, &base->ranksnap);
    if (failed) {
        notes(out, base);
        return;
    }
    same_oom(out, "the what-if", &base->original, &whatif->ranksnap);
    if (base->ranksnap.peak_reserved && whatif->ranksnap.peak_reserved != base->ranksnap.peak_reserved) {
        uint64_t x = base->ranksnap.peak_reserved, y = whatif->ranksnap.peak_reserved;
        rs_text_format_bytes(x > y ? x - y : y - x, b, sizeof b);
        fprintf(out, "the what-if's peak reserved is %s %s than the replay's\n", b,
                y < x ? "less" : "more");
    }
    notes(out, base);
}

void rs_replay_report_suggest_text(FILE *out, const char *name, const rs_suggest_result *s)
{
    char sentence[512], b[32];
    header(out, name, &s->base);
    if (s->base_oom) {
        rs_text_format_bytes(s->base_needed, b, sizeof b);
        fprintf(out, "the trace's settings run out of memory at event %" PRId64
                     "; without a cap they would have needed %s\n",
                s->base.ranksnap.first_oom_event, b);
    }
    fprintf(out, "%-56s %14s %14s %10s %14s\n", "settings changed", "peak reserved",
            "frag. at peak", "cudaMalloc", "out of memory");
    for (size_t i = 0; i <= s->n_tries; i++) {
        const rs_replay_side *r = i == 0 ? &s->base.ranksnap : &s->tries[i - 1].r.ranksnap;
        const char *what = i == 0 ? "(none: the trace's own)" : s->tries[i - 1].change;
        char p[32], f[32], o[48];
        rs_text_format_bytes(r->peak_reserved, p, sizeof p);
        rs_text_format_bytes(r->fragmentation, f, sizeof f);
        oom_cell(o, sizeof o, r);
        fprintf(out, "%s%-55s %14s %14s %10" PRIu64 " %14s\n",
                i > 0 && (int)(i - 1) == s->best ? "*" : " ", what, p, f, r->device_allocs, o);
    }
    rs_suggest_sentence(s, sentence, sizeof sentence);
    if (sentence[0])
        fprintf(out, "suggestion: %s\n", sentence);
    else if (s->base_oom)
        fprintf(out, "suggestion: none of these settings avoids the OOM\n");
    else
        fprintf(out, "suggestion: none of these settings lowers peak reserved\n");
    notes(out, &s->base);
}

/* ---- JSON ---------------------------------------------------------------------------------- */

/* A side's fields, without braces. */
static void json_side_fields(FILE *out, const rs_replay_side *s)
{
    fprintf(out,
            "\"peak_allocated\": %" PRIu64 ", \"peak_reserved\": %" PRIu64
            ", \"fragmentation\": %" PRIu64 ", \"device_allocs\": %" PRIu64
            ", \"device_frees\": %" PRIu64 ", \"ooms\": %" PRIu64 ", \"first_oom_event\": ",
            s->peak_allocated, s->peak_reserved, s->fragmentation, s->device_allocs,
            s->device_frees, s->ooms);
    if (s->ooms)
        fprintf(out, "%" PRId64 ", \"first_oom_request\": %" PRIu64, s->first_oom_event,
                s->first_oom_request);
    else
        fprintf(out, "null, \"first_oom_request\": null");
}

/* A side as an object, still open: the caller may add fields, then closes it. */
static void json_side(FILE *out, const rs_replay_side *s)
{
    fputc('{', out);
    json_side_fields(out, s);
}

static void json_settings(FILE *out, const rs_alloc_conf *c)
{
    char conf[RS_CONF_TEXT_MAX];
    rs_alloc_conf_describe(c, NULL, conf, sizeof conf);
    rs_json_string(out, conf, RS_JSON_PLAIN);
}

static void json_device(FILE *out, const rs_replay_device *d)
{
    fprintf(out, "{\"memory\": ");
    if (d->memory)
        fprintf(out, "%" PRIu64, d->memory);
    else
        fprintf(out, "null");
    fprintf(out, ", \"cap\": ");
    if (d->has_cap)
        fprintf(out, "%" PRIu64, d->cap);
    else
        fprintf(out, "null");
    fprintf(out, ", \"cap_derived\": %s", d->cap_derived ? "true" : "false");
    if (d->cap_derived) fprintf(out, ", \"cap_below\": %" PRIu64, d->cap_below);
    fputc('}', out);
}

static int same_oom_flag(const rs_replay_side *o, const rs_replay_side *n)
{
    return o->ooms == 0 ? n->ooms == 0 : n->ooms > 0 && n->first_oom_event == o->first_oom_event;
}

/* The common part of every replay object: everything but the closing brace. */
static void json_body(FILE *out, const char *name, const rs_replay_result *r)
{
    fprintf(out, "{\n  \"file\": ");
    rs_json_string(out, name, RS_JSON_PLAIN);
    fprintf(out, ",\n  \"original\": ");
    json_side(out, &r->original);
    if (r->pools_at_peak)
        fprintf(out, ", \"pools_at_peak\": %" PRIu64 ", \"pools_free_at_peak\": %" PRIu64,
                r->pools_at_peak, r->pools_free_at_peak);
    fprintf(out, "},\n  \"ranksnap\": ");
    json_side(out, &r->ranksnap);
    fprintf(out, ", \"peak_allocated_blocks\": %" PRIu64 "},\n  \"settings\": ",
            r->ranksnap_peak_allocated_blocks);
    json_settings(out, &r->conf);
    fprintf(out, ",\n  \"device\": ");
    json_device(out, &r->device);
    fprintf(out, ",\n  \"same_oom\": %s", same_oom_flag(&r->original, &r->ranksnap) ? "true" : "false");
    fprintf(out,
            ",\n  \"events\": %" PRIu64 ",\n  \"allocs\": %" PRIu64 ",\n  \"frees\": %" PRIu64
            ",\n  \"preexisting_blocks\": %" PRIu64 ",\n  \"incomplete\": %s,\n  \"dropped\": %" PRIu64
            ",\n  \"inconsistent_events\": %" PRIu64 ",\n  \"original_ooms\": %" PRIu64
            ",\n  \"ranksnap_ooms\": %" PRIu64,
            r->events, r->allocs, r->frees, r->preexisting, r->incomplete ? "true" : "false",
            r->dropped, r->inconsistent, r->original_ooms, r->ranksnap_ooms);
}

void rs_replay_report_json(FILE *out, const char *name, const rs_replay_result *r)
{
    json_body(out, name, r);
    fprintf(out, "\n}\n");
}

void rs_replay_report_whatif_json(FILE *out, const char *name, const rs_replay_result *base,
                                  const rs_replay_result *whatif)
{
    char conf[RS_CONF_TEXT_MAX];
    json_body(out, name, base);
    rs_alloc_conf_describe(&whatif->conf, &base->conf, conf, sizeof conf);
    fprintf(out, ",\n  \"what_if\": {\"change\": ");
    rs_json_string(out, conf, RS_JSON_PLAIN);
    fprintf(out, ", \"settings\": ");
    json_settings(out, &whatif->conf);
    fprintf(out, ", \"device\": ");
    json_device(out, &whatif->device);
    fprintf(out, ", \"same_oom\": %s, \"failed\": %s, ",
            same_oom_flag(&base->original, &whatif->ranksnap) ? "true" : "false",
            whatif_failed(&base->ranksnap, &whatif->ranksnap) ? "true" : "false");
    json_side_fields(out, &whatif->ranksnap);
    fprintf(out, "}\n}\n");
}

void rs_replay_report_suggest_json(FILE *out, const char *name, const rs_suggest_result *s)
{
    char sentence[512];
    json_body(out, name, &s->base);
    fprintf(out, ",\n  \"base_oom\": %s,\n  \"needed\": %" PRIu64 ",\n  \"tries\": [",
            s->base_oom ? "true" : "false", s->base_needed);
    for (size_t i = 0; i < s->n_tries; i++) {
        const rs_suggest_try *t = &s->tries[i];
        fprintf(out, "%s\n    {\"change\": ", i ? "," : "");
        rs_json_string(out, t->change, RS_JSON_PLAIN);
        fprintf(out, ", \"keys\": %u, ", t->n_keys);
        json_side_fields(out, &t->r.ranksnap);
        fputc('}', out);
    }
    fprintf(out, "\n  ],\n  \"suggestion\": ");
    if (s->best >= 0)
        rs_json_string(out, s->tries[s->best].change, RS_JSON_PLAIN);
    else
        fprintf(out, "null");
    rs_suggest_sentence(s, sentence, sizeof sentence);
    fprintf(out, ",\n  \"sentence\": ");
    rs_json_string(out, sentence, RS_JSON_PLAIN);
    fprintf(out, "\n}\n");
}
