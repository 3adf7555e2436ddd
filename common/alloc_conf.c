/*
 * alloc_conf.c — PyTorch's PYTORCH_CUDA_ALLOC_CONF syntax and keys (alloc_conf.h).
 *
 * The string is cut into tokens as PyTorch's ConfigTokenizer cuts it: each of , : [ ] is a token,
 * the characters between them form a word, and spaces are dropped wherever they are. Then the keys
 * are read left to right, except large_segment_size_mb, which is read first because the minima of
 * max_split_size_mb and max_non_split_rounding_mb depend on it (PyTorch 2.11 does the same).
 * Numbers are read as std::stoull and std::stod read them (a leading sign, trailing characters
 * ignored), so that every string PyTorch accepts is accepted here with the same meaning; where
 * PyTorch would ignore a malformed separator, we say what was expected instead.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_conf.h"

#define MAX_TOKENS 512

typedef struct tokens {
    char buf[RS_CONF_TEXT_MAX * 2];
    const char *tok[MAX_TOKENS];
    size_t n;
} tokens;

typedef struct parser {
    tokens t;
    size_t i;
    unsigned flags;
    char *why;
    size_t why_n;
} parser;

static int fail(parser *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (p->why && p->why_n) vsnprintf(p->why, p->why_n, fmt, ap);
    va_end(ap);
    return -1;
}

static int tokenize(parser *p, const char *text)
{
    tokens *t = &p->t;
    size_t w = 0, start = 0;
    int in_word = 0;
    t->n = 0;
    for (const char *c = text;; c++) {
        int special = *c == ',' || *c == ':' || *c == '[' || *c == ']';
        if ((special || !*c) && in_word) {
            t->buf[w++] = '\0';
            if (t->n == MAX_TOKENS) return fail(p, "more than %d tokens", MAX_TOKENS);
            t->tok[t->n++] = t->buf + start;
            in_word = 0;
        }
        if (!*c) break;
        if (w + 3 > sizeof t->buf) return fail(p, "longer than %d bytes", RS_CONF_TEXT_MAX - 1);
        if (special) {
            if (t->n == MAX_TOKENS) return fail(p, "more than %d tokens", MAX_TOKENS);
            t->tok[t->n++] = t->buf + w;
            t->buf[w++] = *c;
            t->buf[w++] = '\0';
        } else if (*c != ' ') {
            if (!in_word) start = w;
            in_word = 1;
            t->buf[w++] = *c;
        }
    }
    return 0;
}

static int is_tok(const parser *p, size_t i, const char *s)
{
    return i < p->t.n && strcmp(p->t.tok[i], s) == 0;
}

/* Moves to the next token, which must exist. */
static int next(parser *p, const char *key, const char *what)
{
    if (++p->i >= p->t.n) return fail(p, "%s: expected %s, but the string ended", key, what);
    return 0;
}

static int expect(parser *p, const char *key, const char *sep)
{
    if (next(p, key, sep[0] == ':' ? "':' and a value" : "a separator") != 0) return -1;
    if (!is_tok(p, p->i, sep))
        return fail(p, "%s: expected '%s' at index %zu, got '%s'", key, sep, p->i, p->t.tok[p->i]);
    return 0;
}

/* std::stoull: an optional sign, base-10 digits, anything after them ignored. */
static int to_u64(parser *p, const char *key, size_t i, uint64_t *out)
{
    const char *s = p->t.tok[i];
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return fail(p, "%s: expected an integer, got '%s'", key, s);
    if (errno == ERANGE) return fail(p, "%s: '%s' is out of range", key, s);
    *out = (uint64_t)v;
    return 0;
}

static int to_double(parser *p, const char *key, size_t i, double *out)
{
    const char *s = p->t.tok[i];
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s) return fail(p, "%s: expected a number, got '%s'", key, s);
    if (errno == ERANGE) return fail(p, "%s: '%s' is out of range", key, s);
    *out = v;
    return 0;
}

static int to_bool(parser *p, size_t i, int *out)
{
    if (is_tok(p, i, "True")) {
        *out = 1;
        return 0;
    }
    if (is_tok(p, i, "False")) {
        *out = 0;
        return 0;
    }
    return fail(p, "Expected 'True' or 'False' at index %zu in ConfigTokenizer but got '%s'", i,
                p->t.tok[i]);
}

static int is_pow2(uint64_t v)
{
    return v && (v & (v - 1)) == 0;
}

/* key:<integer MiB>, at least min_mb (above it when `strictly_above`; `too_small` is the message,
 * with one %llu for min_mb), clamped as PyTorch clamps (SIZE_MAX / MiB). */
static int value_mb(parser *p, const char *key, uint64_t min_mb, int strictly_above,
                    const char *too_small, uint64_t *bytes)
{
    uint64_t v = 0;
    if (expect(p, key, ":") != 0 || next(p, key, "a value") != 0 ||
        to_u64(p, key, p->i, &v) != 0)
        return -1;
    if (strictly_above ? v <= min_mb : v < min_mb)
        return fail(p, too_small, (unsigned long long)min_mb);
    if (v > UINT64_MAX / RS_CONF_MIB) v = UINT64_MAX / RS_CONF_MIB;
    *bytes = v * RS_CONF_MIB;
    return 0;
}

static int value_bool(parser *p, const char *key, int *out)
{
    if (expect(p, key, ":") != 0 || next(p, key, "True or False") != 0) return -1;
    return to_bool(p, p->i, out);
}

/* roundup_power2_divisions:N or roundup_power2_divisions:[64:8,256:4,>:1] (boundaries in MiB). */
static int value_roundup(parser *p, rs_alloc_conf *c)
{
    const char *key = "roundup_power2_divisions";
    if (expect(p, key, ":") != 0 || next(p, key, "a value") != 0) return -1;
    if (!is_tok(p, p->i, "[")) {
        uint64_t v = 0;
        if (to_u64(p, key, p->i, &v) != 0) return -1;
        if (!is_pow2(v) || v > UINT32_MAX)
            return fail(p, "For roundups, the divisions has to be power of 2 ");
        for (unsigned k = 0; k < RS_CONF_INTERVALS; k++) c->roundup_divisions[k] = (uint32_t)v;
        return 0;
    }
    int first = 1;
    unsigned last = 0;
    for (;;) {
        if (next(p, key, "a boundary or ']'") != 0) return -1;
        if (is_tok(p, p->i, "]")) return 0;
        size_t at = p->i;
        uint64_t v = 0;
        if (expect(p, key, ":") != 0 || next(p, key, "a number of divisions") != 0 ||
            to_u64(p, key, p->i, &v) != 0)
            return -1;
        if ((v != 0 && !is_pow2(v)) || v > UINT32_MAX)
            return fail(p, "For roundups, the divisions has to be power of 2 or 0 to disable roundup ");
        if (is_tok(p, at, ">")) {
            for (unsigned k = last + 1; k < RS_CONF_INTERVALS; k++)
                c->roundup_divisions[k] = (uint32_t)v;
        } else {
            uint64_t b = 0;
            if (to_u64(p, key, at, &b) != 0) return -1;
            if (!is_pow2(b)) return fail(p, "For roundups, the intervals have to be power of 2 ");
            unsigned idx = rs_alloc_conf_floor_log2(b);
            if (idx >= RS_CONF_INTERVALS) idx = RS_CONF_INTERVALS - 1;
            if (first) {
                for (unsigned k = 0; k < idx; k++) c->roundup_divisions[k] = (uint32_t)v;
                first = 0;
            }
            c->roundup_divisions[idx] = (uint32_t)v;
            last = idx;
        }
        if (p->i + 1 < p->t.n && !is_tok(p, p->i + 1, "]") && expect(p, key, ",") != 0) return -1;
        if (p->i + 1 >= p->t.n)
            return fail(p, "Expected closing bracket ']' in ConfigTokenizer but reached end of config");
    }
}

/* Skips a key's value: a word or a bracketed list. */
static int skip_value(parser *p, const char *key)
{
    if (expect(p, key, ":") != 0 || next(p, key, "a value") != 0) return -1;
    if (!is_tok(p, p->i, "[")) return 0;
    while (!is_tok(p, p->i, "]"))
        if (next(p, key, "']'") != 0) return -1;
    return 0;
}

static int parse_key(parser *p, rs_alloc_conf *c, const char *key)
{
    double d = 0.0;
    uint64_t v = 0, large_mb = rs_alloc_conf_large_segment(c) / RS_CONF_MIB;
    if (strcmp(key, "large_segment_size_mb") == 0) return skip_value(p, key); /* read first */
    if (strcmp(key, "max_split_size_mb") == 0) {
        c->given |= RS_CONF_MAX_SPLIT;
        if (value_mb(p, key, large_mb, 0,
                     "CachingAllocator option max_split_size_mb too small, must be >= %llu",
                     &c->max_split_size) != 0)
            return -1;
        /* PyTorch clamps to SIZE_MAX / MiB MiB, which no block reaches: the same as unlimited */
        if (c->max_split_size == UINT64_MAX / RS_CONF_MIB * RS_CONF_MIB) c->max_split_size = 0;
        return 0;
    }
    if (strcmp(key, "max_non_split_rounding_mb") == 0) {
        c->given |= RS_CONF_MAX_NON_SPLIT_ROUNDING;
        return value_mb(p, key, large_mb, 0,
                        "CachingAllocator option max_non_split_rounding_mb too small, must be >= %llu",
                        &c->max_non_split_rounding);
    }
    if (strcmp(key, "garbage_collection_threshold") == 0) {
        if (expect(p, key, ":") != 0 || next(p, key, "a value") != 0 ||
            to_double(p, key, p->i, &d) != 0)
            return -1;
        if (!(d > 0.0 && d < 1.0))
            return fail(p, "garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
        c->garbage_collection_threshold = d;
        c->given |= RS_CONF_GC_THRESHOLD;
        return 0;
    }
    if (strcmp(key, "roundup_power2_divisions") == 0) {
        c->given |= RS_CONF_ROUNDUP;
        return value_roundup(p, c);
    }
    if (strcmp(key, "expandable_segments") == 0) {
        c->given |= RS_CONF_EXPANDABLE;
        return value_bool(p, key, &c->expandable_segments);
    }
    if (strcmp(key, "per_process_memory_fraction") == 0) {
        if (expect(p, key, ":") != 0 || next(p, key, "a value") != 0 ||
            to_double(p, key, p->i, &d) != 0)
            return -1;
        if (!(d >= 0.0 && d <= 1.0))
            return fail(p, "per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
        c->has_fraction = d < 1.0;
        c->memory_fraction = d < 1.0 ? d : 0.0;
        c->given |= RS_CONF_FRACTION;
        return 0;
    }
    if (strcmp(key, "backend") == 0) {
        if (expect(p, key, ":") != 0 || next(p, key, "a value") != 0) return -1;
        if (is_tok(p, p->i, "native"))
            c->backend_async = 0;
        else if (is_tok(p, p->i, "cudaMallocAsync") || is_tok(p, p->i, "hipMallocAsync"))
            c->backend_async = 1;
        else
            return fail(p, "Unknown allocator backend, options are native and cudaMallocAsync");
        c->given |= RS_CONF_BACKEND;
        return 0;
    }
    c->given |= RS_CONF_OTHER;
    if (strcmp(key, "release_lock_on_cudamalloc") == 0 ||
        strcmp(key, "release_lock_on_hipmalloc") == 0)
        return value_bool(p, key, &c->release_lock_on_cudamalloc);
    if (strcmp(key, "graph_capture_record_stream_reuse") == 0)
        return value_bool(p, key, &c->graph_capture_record_stream_reuse);
    if (strcmp(key, "pinned_use_cuda_host_register") == 0 ||
        strcmp(key, "pinned_use_hip_host_register") == 0)
        return value_bool(p, key, &c->pinned_use_cuda_host_register);
    if (strcmp(key, "pinned_use_background_threads") == 0)
        return value_bool(p, key, &c->pinned_use_background_threads);
    if (strcmp(key, "pinned_num_register_threads") == 0) {
        if (expect(p, key, ":") != 0 || next(p, key, "a value") != 0 ||
            to_u64(p, key, p->i, &v) != 0)
            return -1;
        if (!is_pow2(v)) return fail(p, "Number of register threads has to be power of 2 ");
        if (v > 128)
            return fail(p, "Number of register threads should be less than or equal to 128");
        c->pinned_num_register_threads = (uint32_t)v;
        return 0;
    }
    if (strcmp(key, "pinned_reserve_segment_size_mb") == 0) {
        if (expect(p, key, ":") != 0 || next(p, key, "a value") != 0 ||
            to_u64(p, key, p->i, &v) != 0)
            return -1;
        if (v == 0) return fail(p, "Pinned reserve segment size has to be greater than 0 ");
        c->pinned_reserve_segment_size = v > UINT64_MAX / RS_CONF_MIB ? UINT64_MAX : v * RS_CONF_MIB;
        return 0;
    }
    if (p->flags & RS_CONF_LENIENT) {
        c->unknown_keys++;
        return skip_value(p, key);
    }
    return fail(p, "Unrecognized key '%s' in CUDA allocator config.", key);
}

/* The pre-pass: large_segment_size_mb, wherever it is. */
static int parse_large_segment(parser *p, rs_alloc_conf *c)
{
    for (size_t i = 0; i + 2 < p->t.n; i++) {
        if (!is_tok(p, i, "large_segment_size_mb") || !is_tok(p, i + 1, ":")) continue;
        p->i = i;
        if (value_mb(p, "large_segment_size_mb", RS_CONF_MIN_LARGE_ALLOC / RS_CONF_MIB, 1,
                     "CachingAllocator option large_segment_size_mb must be > %llu MB",
                     &c->large_segment_size) != 0)
            return -1;
        c->given |= RS_CONF_LARGE_SEGMENT;
    }
    return 0;
}

int rs_alloc_conf_parse(rs_alloc_conf *conf, const char *text, unsigned flags, char *why,
                        size_t why_n)
{
    parser p; /* about 6 KiB; parsed once at init or per file, never on a hot path */
    if (why && why_n) why[0] = '\0';
    if (!conf || !text) {
        if (why && why_n) snprintf(why, why_n, "no settings to parse");
        return -1;
    }
    rs_alloc_conf c = *conf;
    p.t.n = 0;
    p.i = 0;
    p.flags = flags;
    p.why = why;
    p.why_n = why_n;
    int rc = tokenize(&p, text);
    if (rc == 0) rc = parse_large_segment(&p, &c);
    for (p.i = 0; rc == 0 && p.i < p.t.n; p.i++) {
        rc = parse_key(&p, &c, p.t.tok[p.i]);
        if (rc == 0 && p.i + 1 < p.t.n) rc = expect(&p, p.t.tok[p.i], ",");
    }
    if (rc != 0) return -1;
    snprintf(c.text, sizeof c.text, "%s", text);
    *conf = c;
    return 0;
}

void rs_alloc_conf_reset(rs_alloc_conf *conf)
{
    memset(conf, 0, sizeof *conf);
}

/* Appends "key:value" (with a comma before all but the first) to buf. */
static void append(char *buf, size_t n, size_t *w, const char *fmt, ...)
{
    if (*w >= n) return;
    if (*w > 0) {
        int k = snprintf(buf + *w, n - *w, ",");
        *w += k > 0 ? (size_t)k : 0;
        if (*w >= n) return;
    }
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *w, n - *w, fmt, ap);
    va_end(ap);
    *w += k > 0 ? (size_t)k : 0;
}

static int same_divisions(const rs_alloc_conf *a, const rs_alloc_conf *b)
{
    for (unsigned k = 0; k < RS_CONF_INTERVALS; k++) {
        uint32_t x = a->roundup_divisions[k] > 1 ? a->roundup_divisions[k] : 0;
        uint32_t y = b->roundup_divisions[k] > 1 ? b->roundup_divisions[k] : 0;
        if (x != y) return 0;
    }
    return 1;
}

void rs_alloc_conf_describe(const rs_alloc_conf *conf, const rs_alloc_conf *base, char *buf,
                            size_t n)
{
    static const rs_alloc_conf defaults;
    if (!base) base = &defaults;
    size_t w = 0;
    if (n) buf[0] = '\0';
    if (rs_alloc_conf_large_segment(conf) != rs_alloc_conf_large_segment(base))
        append(buf, n, &w, "large_segment_size_mb:%llu",
               (unsigned long long)(rs_alloc_conf_large_segment(conf) / RS_CONF_MIB));
    if (conf->expandable_segments != base->expandable_segments)
        append(buf, n, &w, "expandable_segments:%s", conf->expandable_segments ? "True" : "False");
    if (rs_alloc_conf_max_split(conf) != rs_alloc_conf_max_split(base)) {
        /* "unlimited" has no spelling but the largest value, which PyTorch clamps to */
        uint64_t mb = conf->max_split_size ? conf->max_split_size / RS_CONF_MIB
                                           : UINT64_MAX / RS_CONF_MIB;
        append(buf, n, &w, "max_split_size_mb:%llu", (unsigned long long)mb);
    }
    if (rs_alloc_conf_max_non_split_rounding(conf) != rs_alloc_conf_max_non_split_rounding(base))
        append(buf, n, &w, "max_non_split_rounding_mb:%llu",
               (unsigned long long)(rs_alloc_conf_max_non_split_rounding(conf) / RS_CONF_MIB));
    if (!same_divisions(conf, base)) {
        int uniform = 1;
        for (unsigned k = 1; k < RS_CONF_INTERVALS; k++)
            uniform &= conf->roundup_divisions[k] == conf->roundup_divisions[0];
        if (uniform && conf->roundup_divisions[0] > 0) {
            append(buf, n, &w, "roundup_power2_divisions:%u", conf->roundup_divisions[0]);
        } else {
            char list[RS_CONF_INTERVALS * 16] = "";
            size_t lw = 0;
            for (unsigned k = 0; k < RS_CONF_INTERVALS; k++) {
                int m = snprintf(list + lw, sizeof list - lw, "%s%llu:%u", k ? "," : "",
                                 1ull << k, conf->roundup_divisions[k]);
                lw += m > 0 ? (size_t)m : 0;
            }
            append(buf, n, &w, "roundup_power2_divisions:[%s]", list);
        }
    }
    /* PyTorch has no spelling for "off" (0 is refused): only a threshold is written */
    if (conf->garbage_collection_threshold != base->garbage_collection_threshold &&
        conf->garbage_collection_threshold > 0.0)
        append(buf, n, &w, "garbage_collection_threshold:%g", conf->garbage_collection_threshold);
    if (conf->has_fraction != base->has_fraction ||
        (conf->has_fraction && conf->memory_fraction != base->memory_fraction))
        append(buf, n, &w, "per_process_memory_fraction:%.17g",
               conf->has_fraction ? conf->memory_fraction : 1.0);
    if (conf->backend_async != base->backend_async)
        append(buf, n, &w, "backend:%s", conf->backend_async ? "cudaMallocAsync" : "native");
    if (w >= n && n) buf[n - 1] = '\0';
}

int rs_alloc_conf_cap(const rs_alloc_conf *conf, uint64_t memory_limit, uint64_t device_total,
                      uint64_t *cap)
{
    int have = 0;
    uint64_t c = 0;
    if (conf && conf->has_fraction && device_total) {
        /* size_t(fraction * double(totalGlobalMem)), truncated as PyTorch truncates */
        c = (uint64_t)(conf->memory_fraction * (double)device_total);
        have = 1;
    }
    if (memory_limit && (!have || memory_limit < c)) {
        c = memory_limit;
        have = 1;
    }
    if (have && cap) *cap = c;
    return have;
}
