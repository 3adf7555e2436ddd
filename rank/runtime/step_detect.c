/*
 * step_detect.c — step numbers for a program that never marks them, found on the fly from the
 * period of its collective calls.
 *
 * A training loop calls the same collectives, with the same counts and datatypes, in the same
 * order every iteration (gradient buckets, a loss all-reduce); each call becomes a token, and the
 * step is the smallest period p (up to RS_SD_MAX_PERIOD) with which the last calls repeat
 * RS_SD_REPEATS times and over at least RS_SD_MIN_SPAN calls. The second condition is what keeps
 * a run of equal calls inside a step (equal gradient buckets, one all-reduce per layer) from being
 * taken for the step: a step whose calls repeat over fewer than RS_SD_MIN_SPAN calls is found as
 * the whole step, and the price is paid by programs with very short steps: one collective per
 * iteration is found at its 128th iteration, two at the 64th.
 *
 * Looking costs O(1) a call whatever the period: periods are proposed by the distance between a
 * call and the last call that ended the same RS_SD_GRAM calls (a table of the grams' last calls;
 * a real period p is proposed within its second repetition), and up to RS_SD_CANDS proposed
 * periods are verified incrementally, each keeping the length of the run of calls equal to the
 * call p before (a new proposal is scanned back once, to start with its true run). When one holds
 * long enough its pattern is cut to its smallest period (the failure function of the pattern:
 * Fine and Wilf say a window of 3p calls with periods p and q has period gcd(p, q)).
 *
 * Once found, each completed repetition of the pattern ends a step; calls off the pattern (an
 * evaluation every K steps, a checkpoint's broadcast) are skipped until the pattern's first call
 * comes back, so steps count training iterations; a last partial iteration ends no step. The
 * looking goes on beside the pattern at the same cost: when no step has completed for as long as
 * another pattern has held (RS_SD_MIN_SPAN calls at least), the pattern was lost and the new one
 * is followed, its steps numbered on from the last. A step begins where the program's first
 * collective call sits in the pattern (the warm-up iteration, which may differ, begins as the
 * others do, and is step 0); a program whose first call is not in the pattern (set-up
 * broadcasts) has its steps begin where the repetitions began, and the calls before them come
 * before step 0.
 *
 * The tentative step. A program with one or two collectives per iteration repeats them 128 times
 * only at its 128th or 64th iteration, past the range a user asks for first (--steps 3:6). So,
 * until a pattern is found, the smallest period of at most RS_SD_QUICK_MAX calls that repeated
 * RS_SD_REPEATS times (as the detector of old did, O(RS_SD_QUICK_MAX) a call) is followed as a
 * tentative step, numbered by the same rule as a found pattern: steps.c opens the range on it
 * and keeps what it recorded until the pattern found confirms it (same period, same numbers),
 * or drops it when its pattern stops making steps (calls off it are skipped, as they are
 * once found) or the found pattern differs. A dropped guess (set-up broadcasts, then the loop)
 * doubles the repetitions the next one needs; guessing stops after RS_SD_QUICK_CALLS calls with
 * no guess (a set-up phase longer than that leaves the found pattern alone to number the steps).
 * A step of runs of equal calls (three equal calls and another) is guessed as steps of one, the
 * other call skipped; the pattern found at the 128th call differs and drops it.
 *
 * In an SPMD job every rank sees the same calls and finds the same numbers without talking to the
 * others; the snapshot says what each rank found, so ranks that disagree (pipeline stages) show
 * in the report instead of being reconciled by a collective that could hang the job.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "step_detect.h"

#define RS_SD_MUL 0x9e3779b97f4a7c15ull /* the grams' polynomial hash */
#define AT(d, i) ((d)->tok[(i) & (RS_SD_HIST - 1)])

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

/* Calls a pattern of p must have held over to be the step. */
static uint64_t rs_sd_need(uint64_t p)
{
    return RS_SD_REPEATS * p < RS_SD_MIN_SPAN ? RS_SD_MIN_SPAN : RS_SD_REPEATS * p;
}

/* The index of `name` in the detector's names; the wrappers pass static strings, so the pointer
 * nearly always decides. Past RS_SD_NAMES names the last index stands for the rest. */
static uint8_t rs_sd_name(rs_step_detect *d, const char *name)
{
    for (int k = 0; k < d->n_names; k++)
        if (d->names[k] == name) return (uint8_t)k;
    for (int k = 0; k < d->n_names; k++)
        if (!strcmp(d->names[k], name)) return (uint8_t)k;
    if (d->n_names < RS_SD_NAMES) d->names[d->n_names++] = name;
    return (uint8_t)(d->n_names - 1);
}

/* Proposes period `p` at call i, with the run of calls that already repeat it (scanned back once,
 * as far as the ring goes); the candidate with the shortest run gives way. */
static void rs_sd_propose(rs_step_detect *d, uint64_t i, uint32_t p)
{
    for (int k = 0; k < d->n_cand; k++)
        if (d->cand[k].p == p) return;
    uint32_t run = 0;
    for (uint64_t j = i; j >= p && i - (j - p) < RS_SD_HIST && AT(d, j) == AT(d, j - p); j--) run++;
    int slot = d->n_cand;
    if (slot == RS_SD_CANDS) {
        slot = 0;
        for (int k = 1; k < RS_SD_CANDS; k++)
            if (d->cand[k].run < d->cand[slot].run) slot = k;
    } else {
        d->n_cand++;
    }
    d->cand[slot] = (rs_sd_cand){p, run};
}

/* The smallest period of the cyclic pattern pat[0..p), from its failure function. */
static int rs_sd_primitive(rs_step_detect *d, int p)
{
    d->fail[0] = 0;
    for (int k = 1, m = 0; k < p; k++) {
        while (m > 0 && d->pat[k] != d->pat[m]) m = d->fail[m - 1];
        if (d->pat[k] == d->pat[m]) m++;
        d->fail[k] = (uint16_t)m;
    }
    int q = p - d->fail[p - 1];
    return p % q == 0 ? q : p;
}

/* The pattern of period p that the calls up to i repeat, from the call at s + r on. */
static void rs_sd_take(rs_step_detect *d, uint64_t i, uint64_t p, uint64_t from)
{
    for (uint64_t j = i + 1 - p; j <= i; j++) {
        d->pat[(j - from) % p] = AT(d, j);
        d->pat_name[(j - from) % p] = d->name_at[j & (RS_SD_HIST - 1)];
    }
}

/* The tentative step at call i (no pattern found yet): follows the one guessed, or guesses one.
 * The runs of every short period are kept at every call, following or not, so that a guess made
 * after another numbers its steps from where its repetitions really began, as the pattern found
 * later will. */
static void rs_sd_quick(rs_step_detect *d, uint64_t i)
{
    uint64_t tok = AT(d, i);
    uint64_t pmax = i < RS_SD_QUICK_MAX ? i : RS_SD_QUICK_MAX;
    uint64_t at = i & (RS_SD_HIST - 1);
    const uint64_t *prev = &d->tok[at];
    int in_a_row = at >= RS_SD_QUICK_MAX; /* the calls before this one lie in a row in the ring */
    for (uint64_t k = 1; k <= pmax; k++) {
        uint64_t before = in_a_row ? prev[-(ptrdiff_t)k] : AT(d, i - k);
        d->q_run[k] = tok == before ? d->q_run[k] + 1 : 0;
    }
    if (d->q_period > 0) {
        /* as a found pattern is followed: a call off it skips the step's calls so far (an
         * evaluation, a barrier between warm-up and timed iterations); no step for as many calls
         * as two steps and three more, and the guess was wrong (set-up broadcasts, then a loop) */
        int p = d->q_period;
        d->q_since_step++;
        if (tok == d->q_pat[d->q_phase]) {
            d->q_phase++;
        } else {
            d->q_phase = tok == d->q_pat[0];
        }
        if (d->q_phase == p) {
            d->q_phase = 0;
            d->q_since_step = 0;
            d->q_began = ++d->q_step;
            return;
        }
        if (d->q_since_step <= 2 * (uint64_t)p + 3) return;
        d->q_lost = 1;
        d->q_period = 0;
        d->q_breaks++;
        d->q_since = i;
    }
    if (i - d->q_since >= RS_SD_QUICK_CALLS) {
        d->q_done = 1;
        return;
    }
    /* after k broken guesses a guess needs 3 * 2^k calls; from RS_SD_MIN_SPAN on, the pattern
     * found decides alone */
    if (d->q_breaks >= 6 || ((uint64_t)RS_SD_REPEATS << d->q_breaks) >= RS_SD_MIN_SPAN) return;
    uint64_t need = (uint64_t)RS_SD_REPEATS << d->q_breaks, p = 0;
    for (uint64_t k = 1; k <= pmax && !p; k++) {
        uint64_t run = d->q_run[k];
        if (run >= 2 * k && run + k >= need) p = k;
    }
    if (!p) return;
    /* numbered as rs_sd_lock numbers a first pattern: from where the program's first call sits
     * in it when calls came before the repetitions, else from where they began */
    uint64_t len = d->q_run[p] + p, s = i + 1 - len, r = 0;
    int warm = 0;
    if (s > 0) {
        while (r < p && AT(d, s + r) != d->first_tok) r++;
        if (r == p) r = 0; else warm = 1;
    }
    uint64_t since = len - r;
    for (uint64_t k = 0; k < p; k++) {
        d->q_pat[k] = AT(d, s + r + k);
        d->q_pat_name[k] = d->name_at[(s + r + k) & (RS_SD_HIST - 1)];
    }
    d->q_period = (int)p;
    d->q_phase = (int)(since % p);
    d->q_since_step = since % p;
    d->q_step = (int64_t)(since / p) + warm;
    d->q_began = d->q_step;
}

/* Follows period p of the candidate that held at call i: its pattern, where its steps begin and
 * the step under way. `run` calls repeated the one p before, so the repetitions began at call s
 * (or, for a pattern found again, after the last step began, whichever is later). */
static int64_t rs_sd_lock(rs_step_detect *d, uint64_t i, uint64_t p, uint64_t run)
{
    int first = d->period == 0;
    uint64_t len = run + p;
    if (!first && len > d->since_step) len = d->since_step;
    uint64_t s = i + 1 - len;
    rs_sd_take(d, i, p, s);
    p = (uint64_t)rs_sd_primitive(d, (int)p);
    /* Where a step begins: where the program's first call does, when the pattern has it and
     * calls came before the repetitions (a warm-up iteration begins as the others do); else where
     * the repetitions began. */
    uint64_t r = 0;
    int warm = 0;
    if (first && s > 0) {
        while (r < p && d->pat[r] != d->first_tok) r++;
        if (r == p) r = 0; else warm = 1;
    }
    rs_sd_take(d, i, p, s + r);
    uint64_t since = len - r, whole = since / p;
    d->period = (int)p;
    d->phase = (int)(since % p);
    d->found_at = i + 1;
    if (first) {
        d->before = warm ? 0 : s;
        d->step = (int64_t)whole + warm;
        d->q_agrees = d->q_period == (int)p && d->q_step == d->step;
        d->q_period = 0;
        d->q_done = 1;
    } else {
        /* numbered on: the new pattern's first repetition is the step after the one under way,
         * unless it began where that one did */
        d->step += (int64_t)whole + (len < d->since_step ? 1 : 0);
        d->changes++;
    }
    d->steps_seen += whole;
    d->since_step = since % p;
    return d->step;
}

/* Looking (`verify`): proposes the gram's period, updates the candidates' runs; returns the
 * smallest period that held long enough (0: none). While a pattern is followed, only one that
 * held since its last step counts. Otherwise only the gram's last call is kept. */
static uint32_t rs_sd_look(rs_step_detect *d, uint64_t i, int verify, uint64_t *run)
{
    for (int k = 0; k < d->n_cand && verify; k++) {
        rs_sd_cand *c = &d->cand[k];
        c->run = AT(d, i) == AT(d, i - c->p) ? c->run + 1 : 0;
    }
    if (i + 1 >= RS_SD_GRAM) {
        uint64_t h = d->gram;
        uint64_t slot = (h * RS_SD_MUL) >> (64 - 14);
        uint64_t e = d->table[slot & (RS_SD_TABLE - 1)];
        if (verify && e && (e >> 32) == (h >> 32)) {
            uint32_t dist = (uint32_t)i - (uint32_t)e;
            if (dist >= 1 && dist <= RS_SD_MAX_PERIOD) rs_sd_propose(d, i, dist);
        }
        d->table[slot & (RS_SD_TABLE - 1)] = (h & 0xffffffff00000000ull) | (uint32_t)i;
    }
    uint32_t best = 0;
    for (int k = 0; k < d->n_cand && verify; k++) {
        const rs_sd_cand *c = &d->cand[k];
        uint64_t need = rs_sd_need(c->p);
        if ((uint64_t)c->run + c->p < need || (best && c->p >= best)) continue;
        if (d->period > 0 && need > d->since_step) continue;
        best = c->p;
        *run = c->run;
    }
    return best;
}

int64_t rs_step_detect_feed(rs_step_detect *d, uint64_t token, const char *name)
{
    uint64_t i = d->n++;
    uint8_t nm = rs_sd_name(d, name);
    if (i == 0) d->first_tok = token;
    d->q_began = -1;
    d->q_lost = 0;
    if (d->period == 0) {
        /* how regular each collective's calls are: the evidence for RANKSNAP_STEP_ON while no
         * pattern is found */
        uint64_t gap = i - d->name_last[nm];
        d->name_regular[nm] += d->name_calls[nm] > 0 && gap == d->name_gap[nm];
        d->name_gap[nm] = gap;
        d->name_last[nm] = i;
        d->name_calls[nm]++;
    }
    /* the gram of the last RS_SD_GRAM calls, rolled: out goes the oldest, in the new one */
    if (i >= RS_SD_GRAM) d->gram -= d->gram_out * AT(d, i - RS_SD_GRAM);
    else d->gram_out = d->gram_out ? d->gram_out * RS_SD_MUL : 1;
    d->gram = d->gram * RS_SD_MUL + token;
    d->tok[i & (RS_SD_HIST - 1)] = token;
    d->name_at[i & (RS_SD_HIST - 1)] = nm;

    if (!d->q_done) rs_sd_quick(d, i);
    int64_t began = -1;
    if (d->period > 0) {
        d->since_step++;
        if (token == d->pat[d->phase]) {
            d->phase++;
        } else {
            /* off the pattern: the step's calls so far are skipped with this one, unless it is
             * the pattern's first call, which begins the next step */
            d->skipped += (uint64_t)d->phase;
            d->phase = token == d->pat[0];
            d->skipped += (uint64_t)!d->phase;
        }
        if (d->phase == d->period) {
            d->phase = 0;
            d->since_step = 0;
            d->steps_seen++;
            began = ++d->step;
        }
    }
    /* Beside a pattern that makes steps, no other can have held since the last one: the
     * candidates rest until no step came for RS_SD_MIN_SPAN calls, and start again then from
     * what the ring shows (a proposal scans back its run). */
    int verify = d->period == 0 || d->since_step >= RS_SD_MIN_SPAN;
    if (d->period > 0 && d->since_step == RS_SD_MIN_SPAN) d->n_cand = 0;
    uint64_t run = 0;
    uint32_t p = rs_sd_look(d, i, verify, &run);
    if (p) began = rs_sd_lock(d, i, p, run);
    return began;
}

/* "MPI_Allreduce x2, MPI_Bcast x1" for the names of `at[0..p)`, in the order of their first call;
 * the length written. */
static size_t rs_sd_names_of(const rs_step_detect *d, const uint8_t *at, uint64_t p, char *buf, size_t n)
{
    uint64_t count[RS_SD_NAMES] = {0};
    uint8_t order[RS_SD_NAMES];
    int n_order = 0;
    for (uint64_t k = 0; k < p; k++)
        if (count[at[k]]++ == 0) order[n_order++] = at[k];
    size_t len = 0;
    for (int k = 0; k < n_order && len < n; k++) {
        int w = snprintf(buf + len, n - len, "%s%s x%" PRIu64, k ? ", " : "", d->names[order[k]], count[order[k]]);
        if (w < 0) break;
        len += (size_t)w;
    }
    return len < n ? len : n - 1;
}

void rs_step_detect_describe(const rs_step_detect *d, char *buf, size_t n)
{
    if (n == 0) return;
    buf[0] = '\0';
    if (d->period <= 0 && d->q_period > 0) {
        /* short: the report's steps line keeps 95 characters */
        size_t len = rs_sd_names_of(d, d->q_pat_name, (uint64_t)d->q_period, buf, n);
        snprintf(buf + len, n - len, " per step, tentative (%" PRIu64 " calls; %d confirm)", d->n, RS_SD_MIN_SPAN);
        return;
    }
    if (d->period <= 0) return;
    size_t len = rs_sd_names_of(d, d->pat_name, (uint64_t)d->period, buf, n);
    snprintf(buf + len, n - len, " per step, %" PRIu64 " steps, %" PRIu64 " calls before, %" PRIu64 " off the pattern%s",
             d->steps_seen, d->before, d->skipped, d->changes ? ", pattern changed" : "");
}

void rs_step_detect_explain(const rs_step_detect *d, char *buf, size_t n)
{
    if (n == 0) return;
    buf[0] = '\0';
    if (d->period > 0) return;
    if (d->n == 0) {
        snprintf(buf, n, "no collective call seen");
        return;
    }
    /* The evidence, best first: a pattern seen twice or more but over too few calls (a short
     * run, or steps of one or two calls): every COUNT-th call of its rarest collective is a
     * step. Else the collective whose calls came at the most regular intervals, each a step. */
    const rs_sd_cand *best = NULL;
    for (int k = 0; k < d->n_cand; k++) {
        const rs_sd_cand *c = &d->cand[k];
        if (c->run >= c->p && (!best || c->run + c->p > best->run + best->p)) best = c;
    }
    const char *name;
    uint64_t every = 1;
    size_t len;
    if (best) {
        uint64_t count[RS_SD_NAMES] = {0};
        uint64_t i = d->n - 1;
        for (uint64_t j = i + 1 - best->p; j <= i; j++) count[d->name_at[j & (RS_SD_HIST - 1)]]++;
        int rare = -1;
        for (int k = 0; k < RS_SD_NAMES; k++)
            if (count[k] && (rare < 0 || count[k] < count[rare])) rare = k;
        name = d->names[rare];
        every = count[rare];
        int w = snprintf(buf, n, "a pattern of %" PRIu32 " calls held over %" PRIu64 " of %" PRIu64 " calls (%" PRIu64 " needed)",
                         best->p, (uint64_t)best->run + best->p, d->n, rs_sd_need(best->p));
        len = w < 0 ? 0 : (size_t)w;
    } else {
        int reg = 0;
        for (int k = 1; k < d->n_names; k++) { /* the largest share of calls at the same gap */
            uint64_t a = d->name_regular[k] * d->name_calls[reg], b = d->name_regular[reg] * d->name_calls[k];
            if (a > b || (a == b && d->name_calls[k] > d->name_calls[reg])) reg = k;
        }
        name = d->names[reg];
        int w = snprintf(buf, n, "no repeating pattern in %" PRIu64 " collectives", d->n);
        len = w < 0 ? 0 : (size_t)w;
    }
    if (len < n) snprintf(buf + len, n - len, "; try RANKSNAP_STEP_ON=%s:%" PRIu64, name, every);
}
