/*
 * step_detect.c — step numbers for a program that never marks them, found on the fly from the
 * period of its collective calls.
 *
 * A training loop calls the same collectives, with the same counts and datatypes, in the same
 * order every iteration (gradient buckets, a loss all-reduce); each call becomes a token and the
 * detector looks for the smallest period p (up to RS_SD_MAX_PERIOD) at which the last
 * RS_SD_REPEATS * p tokens repeat, keeping for every p the length of the run of calls equal to the
 * call p before. Once found, each completed repetition of the pattern ends a step; calls off the
 * pattern (an evaluation every K steps, a checkpoint's broadcast) are skipped until the pattern's
 * first call comes back, so steps count training iterations; a last partial iteration ends no
 * step. A step begins where the program's first collective call sits in the pattern (the warm-up
 * iteration, which may differ, begins as the others do, and is step 0); a program whose first
 * call is not in the pattern (set-up broadcasts) has its steps begin where the repetitions began,
 * and the calls before them come before step 0.
 *
 * In an SPMD job every rank sees the same calls and finds the same numbers without talking to the
 * others; the snapshot says what each rank found, so ranks that disagree (pipeline stages) show
 * in the report instead of being reconciled by a collective that could hang the job.
 */
#include <stdio.h>
#include <string.h>

#include "step_detect.h"

uint64_t rs_step_detect_token(const char *name, uint64_t count, uint64_t datatype, uint64_t extra)
{
    /* FNV-1a over the name, then the numbers mixed in: equal calls, equal tokens */
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) h = (h ^ *c) * 1099511628211ull;
    uint64_t v[3] = {count, datatype, extra};
    for (int i = 0; i < 3; i++) {
        h ^= v[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h *= 0xff51afd7ed558ccdull;
    }
    return h;
}

#define RS_SD_AT(d, i) ((d)->tok[(i) & (RS_SD_HIST - 1)])

/* Looking: updates the runs for the new call (index i) and locks on the smallest period that
 * repeated RS_SD_REPEATS times. */
static int64_t rs_sd_look(rs_step_detect *d, uint64_t i)
{
    int pmax = i < RS_SD_MAX_PERIOD ? (int)i : RS_SD_MAX_PERIOD;
    int found = 0;
    for (int p = 1; p <= pmax; p++) {
        d->run[p] = RS_SD_AT(d, i) == RS_SD_AT(d, i - (uint64_t)p) ? d->run[p] + 1 : 0;
        if (!found && d->run[p] >= (uint32_t)(RS_SD_REPEATS - 1) * (uint32_t)p) found = p;
    }
    if (!found) {
        if (d->n >= RS_SD_GIVE_UP) d->period = -1;
        return -1;
    }
    int p = found;
    uint64_t start = i + 1 - (uint64_t)RS_SD_REPEATS * (uint64_t)p; /* the first repetition's first call */
    /* Where a step begins inside the pattern: where the program's first call does, when the
     * pattern has it (a warm-up iteration begins as the others do); else where the repetitions
     * began. Calls older than the ring are not known: then the repetitions decide. */
    int r = 0, warm = 0;
    if (start > 0 && i < RS_SD_HIST) {
        for (r = 0; r < p && RS_SD_AT(d, start + (uint64_t)r) != d->tok[0]; r++) {
        }
        if (r == p) r = 0; else warm = 1;
    }
    for (int k = 0; k < p; k++) {
        uint64_t at = start + (uint64_t)((r + k) % p);
        d->pat[k] = RS_SD_AT(d, at);
        d->pat_name[k] = d->name[at & (RS_SD_HIST - 1)];
    }
    d->period = p;
    d->lost = 0;
    /* from the first call of the rotated pattern to now: whole steps, then the current one's
     * calls so far; the calls before it are step 0 when the program's first call begins it */
    uint64_t since = (uint64_t)RS_SD_REPEATS * (uint64_t)p - (uint64_t)r;
    d->phase = (int)(since % (uint64_t)p);
    d->step = (int64_t)(since / (uint64_t)p) + warm;
    return d->step;
}

int64_t rs_step_detect_feed(rs_step_detect *d, uint64_t token, const char *name)
{
    if (d->period < 0) return -1;
    if (d->period > 0) {
        if (token != d->pat[d->phase]) {
            /* off the pattern: wait for the pattern's first call to begin the next step */
            d->lost = 1;
            d->phase = 0;
            if (token != d->pat[0]) return -1;
        }
        d->lost = 0;
        if (++d->phase < d->period) return -1;
        d->phase = 0;
        return ++d->step;
    }
    uint64_t i = d->n++;
    d->tok[i & (RS_SD_HIST - 1)] = token;
    d->name[i & (RS_SD_HIST - 1)] = name;
    return rs_sd_look(d, i);
}

void rs_step_detect_describe(const rs_step_detect *d, char *buf, size_t n)
{
    if (n == 0) return;
    buf[0] = '\0';
    if (d->period <= 0) return;
    size_t len = 0;
    for (int k = 0; k < d->period; k++) {
        int seen = 0, count = 0;
        for (int j = 0; j < k; j++) seen |= !strcmp(d->pat_name[j], d->pat_name[k]);
        if (seen) continue;
        for (int j = k; j < d->period; j++) count += !strcmp(d->pat_name[j], d->pat_name[k]);
        int w = snprintf(buf + len, n - len, "%s%s x%d", len ? ", " : "", d->pat_name[k], count);
        if (w < 0 || (size_t)w >= n - len) return;
        len += (size_t)w;
    }
    snprintf(buf + len, n - len, " per step");
}
