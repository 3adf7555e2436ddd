/*
 * schedule.c — parsing and querying the recorded step ranges (see schedule.h).
 *
 * Ranges are kept sorted and merged, so "is step n recorded" is a short scan (there are at most
 * RS_SCHEDULE_MAX_RANGES) done once per step, far off any allocation path.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "schedule.h"

#define RS_STEPS_EXPECTED                                                                          \
    "step ranges such as 10:15 (steps 10..14), 10:15,100:105, 10: (from 10 on), or time:30:40 "   \
    "(seconds after init); begin < end, ranges in increasing order"

static ranksnap_status rs_steps_error(const char *spec, const char *why)
{
    return rs_error(RANKSNAP_ERR_OPTION, "RANKSNAP_STEPS=%.200s: %s; expected %s", spec, why,
                    RS_STEPS_EXPECTED);
}

/* A non-negative decimal integer; *p advances past it. */
static int rs_parse_nonneg(const char **p, int64_t *out)
{
    const char *s = *p;
    if (!isdigit((unsigned char)*s)) return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || v < 0) return -1;
    *out = v;
    *p = end;
    return 0;
}

static int rs_cmp_range(const void *a, const void *b)
{
    const rs_range *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Sorts and merges overlapping or touching ranges; an open end swallows everything after it. */
static void rs_schedule_normalize(rs_schedule *s)
{
    if (s->n < 2) return;
    qsort(s->r, s->n, sizeof s->r[0], rs_cmp_range);
    size_t w = 0;
    for (size_t i = 1; i < s->n; i++) {
        rs_range *last = &s->r[w];
        if (last->end < 0 || s->r[i].begin <= last->end) {
            if (last->end >= 0 && (s->r[i].end < 0 || s->r[i].end > last->end)) last->end = s->r[i].end;
        } else {
            s->r[++w] = s->r[i];
        }
    }
    s->n = w + 1;
}

ranksnap_status rs_schedule_parse(const char *spec, rs_schedule *out)
{
    memset(out, 0, sizeof *out);
    if (!spec) spec = "";
    const char *p = spec;
    while (isspace((unsigned char)*p)) p++;
    if (!*p) {
        out->whole_run = 1;
        return RANKSNAP_OK;
    }
    if (!strncmp(p, "time:", 5)) {
        out->time_based = 1;
        p += 5;
    }
    int64_t prev_end = -1;
    for (;;) {
        rs_range r;
        if (rs_parse_nonneg(&p, &r.begin)) return rs_steps_error(spec, "a range must start with a step number");
        if (*p != ':') return rs_steps_error(spec, "missing ':' between begin and end");
        p++;
        if (*p == '\0' || *p == ',') {
            r.end = -1;
        } else {
            if (rs_parse_nonneg(&p, &r.end)) return rs_steps_error(spec, "the end of a range must be a step number");
            if (r.end <= r.begin) return rs_steps_error(spec, "a range's end must be greater than its begin");
        }
        if (out->n > 0 && (prev_end < 0 || r.begin < prev_end))
            return rs_steps_error(spec, "ranges overlap or are not in increasing order");
        if (out->n == RS_SCHEDULE_MAX_RANGES) return rs_steps_error(spec, "more than 64 ranges");
        out->r[out->n++] = r;
        prev_end = r.end;
        if (*p == '\0') break;
        if (*p != ',') return rs_steps_error(spec, "unexpected text after a range");
        p++;
        if (out->time_based && !strncmp(p, "time:", 5)) p += 5;
    }
    return RANKSNAP_OK;
}

int rs_schedule_contains(const rs_schedule *s, int64_t x)
{
    if (s->whole_run) return 1;
    for (size_t i = 0; i < s->n; i++)
        if (x >= s->r[i].begin && (s->r[i].end < 0 || x < s->r[i].end)) return 1;
    return 0;
}

ranksnap_status rs_schedule_add(rs_schedule *s, int64_t begin, int64_t end)
{
    if (begin < 0 || (end >= 0 && end <= begin))
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "step range %lld:%lld is empty",
                        (long long)begin, (long long)end);
    if (s->whole_run) return RANKSNAP_OK;
    if (s->n == RS_SCHEDULE_MAX_RANGES)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "more than %d step ranges", RS_SCHEDULE_MAX_RANGES);
    s->r[s->n].begin = begin;
    s->r[s->n].end = end;
    s->n++;
    rs_schedule_normalize(s);
    return RANKSNAP_OK;
}
