/*
 * suggest.c — rs_suggest (suggest.h): the trace replayed under each setting worth trying, and
 * the smallest change that helps.
 *
 * All runs share one replay session (one walk table), so that trying a setting costs one pass of
 * the allocator over the events and nothing else.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "suggest.h"
#include "text.h"

/* A candidate: keys in PYTORCH_CUDA_ALLOC_CONF syntax applied on top of the trace's settings. */
static ranksnap_status try_change(rs_replay_session *ss, const rs_alloc_conf *base,
                                  const rs_replay_opts *o, const char *keys, unsigned n_keys,
                                  rs_suggest_result *out)
{
    if (out->n_tries == RS_SUGGEST_MAX_TRIES) return RANKSNAP_OK;
    rs_alloc_conf c = *base;
    char why[256];
    if (rs_alloc_conf_parse(&c, keys, 0, why, sizeof why) != 0)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "suggest: %s: %s", keys, why);
    rs_suggest_try *t = &out->tries[out->n_tries];
    snprintf(t->change, sizeof t->change, "%s", keys);
    t->n_keys = n_keys;
    rs_replay_opts ro = {&c, o ? o->device_memory : 0, 0};
    RS_CHECK(rs_replay_run(ss, &ro, &t->r));
    out->n_tries++;
    return RANKSNAP_OK;
}

static uint64_t largest_request(const rs_snap *s)
{
    uint64_t m = 0;
    for (uint64_t i = 0; i < s->history.count; i++)
        if (s->history.action[i] == RS_ACT_ALLOC && s->history.size[i] > m) m = s->history.size[i];
    return m;
}

/* Better for the answer: fewer keys, then the lower peak reserved. */
static int better(const rs_suggest_try *a, const rs_suggest_try *b)
{
    if (a->n_keys != b->n_keys) return a->n_keys < b->n_keys;
    return a->r.ranksnap.peak_reserved < b->r.ranksnap.peak_reserved;
}

static void pick(rs_suggest_result *out)
{
    out->best = -1;
    for (size_t i = 0; i < out->n_tries; i++) {
        const rs_suggest_try *t = &out->tries[i];
        if (out->base_oom) {
            if (t->r.ranksnap.ooms) continue;
        } else if (t->r.ranksnap.peak_reserved >= out->base.ranksnap.peak_reserved) {
            continue;
        }
        if (out->best < 0 || better(t, &out->tries[out->best])) out->best = (int)i;
    }
}

ranksnap_status rs_suggest(const rs_snap *s, const char *name_for_errors, const rs_replay_opts *o,
                           rs_suggest_result *out)
{
    if (!s || !out) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_suggest: NULL argument");
    memset(out, 0, sizeof *out);
    out->best = -1;
    rs_replay_session *ss = NULL;
    RS_CHECK(rs_replay_open(s, name_for_errors, &ss));
    const rs_alloc_conf *base = &s->allocator.conf;
    rs_replay_opts bo = {base, o ? o->device_memory : 0, 0};
    ranksnap_status st = rs_replay_run(ss, &bo, &out->base);
    out->base_oom = st == RANKSNAP_OK && out->base.ranksnap.ooms > 0;
    out->base_needed = out->base.ranksnap.peak_reserved;
    if (st == RANKSNAP_OK && out->base_oom) {
        /* what the trace's settings would have needed: the same device without a cap */
        rs_replay_result uncapped;
        rs_replay_opts uo = {base, 0, 1};
        st = rs_replay_run(ss, &uo, &uncapped);
        if (st == RANKSNAP_OK) out->base_needed = uncapped.ranksnap.peak_reserved;
    }
    uint64_t largest = largest_request(s);
    int has_expandable = !base->expandable_segments;
    char keys[sizeof out->tries[0].change];
    if (st == RANKSNAP_OK && has_expandable)
        st = try_change(ss, base, o, "expandable_segments:True", 1, out);
    static const unsigned split_mb[] = {128, 512};
    for (size_t k = 0; st == RANKSNAP_OK && k < sizeof split_mb / sizeof split_mb[0]; k++) {
        uint64_t mss = (uint64_t)split_mb[k] << 20;
        if (mss >= largest || mss == rs_alloc_conf_max_split(base) ||
            mss < rs_alloc_conf_large_segment(base))
            continue;
        snprintf(keys, sizeof keys, "max_split_size_mb:%u", split_mb[k]);
        st = try_change(ss, base, o, keys, 1, out);
    }
    if (st == RANKSNAP_OK && base->roundup_divisions[RS_CONF_INTERVALS - 1] != 4)
        st = try_change(ss, base, o, "roundup_power2_divisions:4", 1, out);
    if (st == RANKSNAP_OK && out->base.device.has_cap && base->garbage_collection_threshold == 0.0)
        st = try_change(ss, base, o, "garbage_collection_threshold:0.6", 1, out);
    if (st == RANKSNAP_OK) pick(out);
    /* no single change served every request: expandable segments with each of the others */
    size_t singles = out->n_tries;
    for (size_t i = 1; st == RANKSNAP_OK && out->base_oom && out->best < 0 && has_expandable &&
                       i < singles;
         i++) {
        int w = snprintf(keys, sizeof keys, "expandable_segments:True,%s", out->tries[i].change);
        if (w < 0 || (size_t)w >= sizeof keys) continue; /* a pair too long to be one setting */
        st = try_change(ss, base, o, keys, 2, out);
    }
    if (st == RANKSNAP_OK) pick(out);
    rs_replay_close(ss);
    return st;
}

void rs_suggest_sentence(const rs_suggest_result *r, char *buf, size_t n)
{
    if (n) buf[0] = '\0';
    if (!r || r->best < 0 || !n) return;
    const rs_suggest_try *t = &r->tries[r->best];
    char now[32], was[32], diff[32];
    uint64_t peak = t->r.ranksnap.peak_reserved;
    rs_text_format_bytes(peak, now, sizeof now);
    rs_text_format_bytes(r->base_needed, was, sizeof was);
    if (r->base_oom) {
        if (peak < r->base_needed) {
            rs_text_format_bytes(r->base_needed - peak, diff, sizeof diff);
            snprintf(buf, n, "%s would not have run out of memory: it would have needed %s less "
                             "(peak reserved %s instead of %s); replayed",
                     t->change, diff, now, was);
        } else {
            snprintf(buf, n, "%s would not have run out of memory (peak reserved %s); replayed",
                     t->change, now);
        }
        return;
    }
    rs_text_format_bytes(r->base_needed - peak, diff, sizeof diff);
    snprintf(buf, n, "%s would have needed %s less (peak reserved %s instead of %s); replayed",
             t->change, diff, now, was);
}

ranksnap_status rs_suggest_note(const rs_snap *s, const char *name, char *buf, size_t n)
{
    if (n) buf[0] = '\0';
    rs_suggest_result *r = malloc(sizeof *r);
    if (!r) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory to replay", name);
    char sentence[512];
    ranksnap_status st = rs_suggest(s, name, NULL, r);
    if (st == RANKSNAP_OK && r->base_oom && r->base.original.ooms &&
        r->base.ranksnap.first_oom_event == r->base.original.first_oom_event) {
        rs_suggest_sentence(r, sentence, sizeof sentence);
        if (sentence[0] && n)
            snprintf(buf, n, "rank %d: %s (ranksnap replay --suggest)", s->rank, sentence);
    }
    free(r);
    return st;
}
