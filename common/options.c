/*
 * options.c — the RANKSNAP_* environment options: one table, everything else generated from it.
 *
 * Each row of rs_option_table names a variable, its type as shown to users, its default written
 * the way a user would write it, a one-line doc, what a bad value should have looked like, and the
 * parser that stores it into its rs_options field (by offset, as mimalloc's options.c does).
 * Defaults are produced by running each row's parser on its default string, so the default that
 * --help-env prints is the default that is used. Adding an option is adding a field to rs_options
 * and a row here.
 *
 * An empty value is the same as an unset one (NCCL does the same), so `RANKSNAP_X= ./app` never
 * turns into an error. Everything else that does not parse is an error naming the variable, the
 * value and what was expected; unknown RANKSNAP_* variables only warn, with a suggestion.
 */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_conf.h"
#include "errors.h"
#include "log.h"
#include "options.h"

extern char **environ;

/* The enum fields are written through an int *; this keeps that honest. */
_Static_assert(sizeof(rs_backend_kind) == sizeof(int), "enum fields are stored as int");
_Static_assert(sizeof(rs_stacks_mode) == sizeof(int), "enum fields are stored as int");
_Static_assert(sizeof(rs_gather_mode) == sizeof(int), "enum fields are stored as int");
_Static_assert(sizeof(rs_write_mode) == sizeof(int), "enum fields are stored as int");
_Static_assert(sizeof(rs_on_oom) == sizeof(int), "enum fields are stored as int");
_Static_assert(sizeof(rs_ring_kind) == sizeof(int), "enum fields are stored as int");
_Static_assert(sizeof(rs_recorder_kind) == sizeof(int), "enum fields are stored as int");
/* String rows carry their field's size in `max`. */
_Static_assert(sizeof(((rs_options *)0)->dir) == RS_PATH_MAX, "RANKSNAP_DIR row's max");
_Static_assert(sizeof(((rs_options *)0)->job) == RS_JOB_MAX, "RANKSNAP_JOB row's max");

#define RS_KIB ((uint64_t)1024)
#define RS_MIB (RS_KIB * 1024)
/* PyTorch's kLargeBuffer: max_split_size_mb must be at least this (c10 AllocatorConfig). */
#define RS_MIN_MAX_SPLIT_SIZE (20 * RS_MIB)

typedef struct rs_opt_word {
    const char *word;
    int value;
} rs_opt_word;

typedef struct rs_opt rs_opt;

/* Parses `value` (non-empty) and stores it into `field` only on success. On failure returns -1
 * and either fills `why` with what was expected (the text after "expected ") or leaves it empty,
 * in which case the row's `expected` is used. */
typedef int (*rs_opt_parse_fn)(const rs_opt *opt, const char *value, void *field, char *why,
                               size_t why_n);

struct rs_opt {
    const char *name;
    const char *type; /* for --help-env; NULL: the row's words joined with '|' */
    const char *def;  /* the default, in the syntax a user writes */
    const char *doc;
    const char *expected; /* completes "NAME=value: expected ..."; NULL when the parser says */
    rs_opt_parse_fn parse;
    size_t offset; /* of the field in rs_options */
    uint64_t min, max;
    const rs_opt_word *words; /* enum and bool spellings, NULL-terminated */
    /* read, in order, when the option itself is unset: another tool's variable of the same
     * meaning (NULL-terminated, NULL = none), parsed by parse_fallback (NULL: parse) */
    const char *const *fallbacks;
    rs_opt_parse_fn parse_fallback;
};

/* ---- small string helpers ---------------------------------------------------------------- */

static const char *skip_space(const char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    return s;
}

/* Length of s without trailing blanks. */
static size_t trimmed_len(const char *s, size_t n)
{
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    return n;
}

/* Case-insensitive equality of s[0..n) and the NUL-terminated word. */
static int word_eq(const char *s, size_t n, const char *word)
{
    size_t i;
    for (i = 0; i < n && word[i]; i++)
        if (tolower((unsigned char)s[i]) != tolower((unsigned char)word[i])) return 0;
    return i == n && word[i] == '\0';
}

static int value_is(const char *value, const char *word)
{
    const char *s = skip_space(value);
    return word_eq(s, trimmed_len(s, strlen(s)), word);
}

/* ---- sizes -------------------------------------------------------------------------------- */

typedef struct rs_size_suffix {
    const char *text;
    uint64_t mult;
} rs_size_suffix;

static const rs_size_suffix rs_size_suffixes[] = {
    {"B", 1},
    {"K", 1024ull},
    {"KiB", 1024ull},
    {"KB", 1000ull},
    {"M", 1024ull * 1024},
    {"MiB", 1024ull * 1024},
    {"MB", 1000ull * 1000},
    {"G", 1024ull * 1024 * 1024},
    {"GiB", 1024ull * 1024 * 1024},
    {"GB", 1000ull * 1000 * 1000},
    {"T", 1024ull * 1024 * 1024 * 1024},
    {"TiB", 1024ull * 1024 * 1024 * 1024},
    {"TB", 1000ull * 1000 * 1000 * 1000},
};

/* Parses s[0..n). A fraction is exact in decimal and rounded down to a whole byte ("1.5" is 1
 * byte, "0.3KiB" is 307 bytes): the fraction's digits are folded in from the last one, each step
 * an integer division by 10, which gives exactly floor(fraction * multiplier). */
static int parse_size_n(const char *s, size_t n, uint64_t *out)
{
    const char *p = s, *end = s + n;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    n = trimmed_len(p, (size_t)(end - p));
    end = p + n;

    if (p == end || !isdigit((unsigned char)*p)) return -1;
    uint64_t whole = 0;
    while (p < end && isdigit((unsigned char)*p)) {
        unsigned d = (unsigned)(*p - '0');
        if (whole > (UINT64_MAX - d) / 10) return -1;
        whole = whole * 10 + d;
        p++;
    }
    const char *frac = NULL, *frac_end = NULL;
    if (p < end && *p == '.') {
        frac = ++p;
        while (p < end && isdigit((unsigned char)*p)) p++;
        frac_end = p;
        if (frac == frac_end) return -1; /* "1." */
    }
    while (p < end && (*p == ' ' || *p == '\t')) p++;

    uint64_t mult = 1;
    if (p < end) {
        size_t i, k = sizeof rs_size_suffixes / sizeof rs_size_suffixes[0];
        for (i = 0; i < k; i++)
            if (word_eq(p, (size_t)(end - p), rs_size_suffixes[i].text)) break;
        if (i == k) return -1;
        mult = rs_size_suffixes[i].mult;
    }

    uint64_t part = 0; /* floor(fraction * mult); below mult, so d * mult + part cannot overflow */
    if (frac)
        for (const char *q = frac_end; q > frac; q--)
            part = ((uint64_t)(q[-1] - '0') * mult + part) / 10;

    if (mult > 1 && whole > UINT64_MAX / mult) return -1;
    uint64_t bytes = whole * mult;
    if (bytes > UINT64_MAX - part) return -1;
    *out = bytes + part;
    return 0;
}

int rs_options_parse_size(const char *s, uint64_t *out)
{
    if (!s || !out) return -1;
    return parse_size_n(s, strlen(s), out);
}

/* ---- parsers, one per kind of row ---------------------------------------------------------- */

static void words_joined(const rs_opt_word *w, const char *sep, const char *last_sep, char *buf,
                         size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; w[i].word && len < n; i++) {
        const char *s = i == 0 ? "" : w[i + 1].word ? sep : last_sep;
        int k = snprintf(buf + len, n - len, "%s%s", s, w[i].word);
        if (k < 0) break;
        len += (size_t)k;
    }
}

static int parse_word(const rs_opt *opt, const char *value, void *field, char *why, size_t why_n)
{
    for (size_t i = 0; opt->words[i].word; i++) {
        if (value_is(value, opt->words[i].word)) {
            *(int *)field = opt->words[i].value;
            return 0;
        }
    }
    if (!opt->expected) {
        char list[256];
        words_joined(opt->words, ", ", " or ", list, sizeof list);
        snprintf(why, why_n, "%s", list);
    }
    return -1;
}

static int parse_count(const rs_opt *opt, const char *value, uint64_t *v, char *why, size_t why_n)
{
    const char *s = skip_space(value);
    size_t n = trimmed_len(s, strlen(s));
    uint64_t x = 0;
    size_t i = 0;
    for (; i < n && isdigit((unsigned char)s[i]); i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (x > (UINT64_MAX - d) / 10) break;
        x = x * 10 + d;
    }
    if (n == 0 || i != n || x < opt->min || x > opt->max) {
        snprintf(why, why_n, "an integer from %llu to %llu", (unsigned long long)opt->min,
                 (unsigned long long)opt->max);
        return -1;
    }
    *v = x;
    return 0;
}

static int parse_u64(const rs_opt *opt, const char *value, void *field, char *why, size_t why_n)
{
    uint64_t v;
    if (parse_count(opt, value, &v, why, why_n) != 0) return -1;
    *(uint64_t *)field = v;
    return 0;
}

static int parse_int(const rs_opt *opt, const char *value, void *field, char *why, size_t why_n)
{
    uint64_t v;
    if (parse_count(opt, value, &v, why, why_n) != 0) return -1; /* max fits in int */
    *(int *)field = (int)v;
    return 0;
}

/* A size within [min, max]. */
static int parse_size_field(const rs_opt *opt, const char *value, void *field, char *why,
                            size_t why_n)
{
    uint64_t v;
    (void)why;
    (void)why_n;
    if (rs_options_parse_size(value, &v) != 0 || v < opt->min || v > opt->max) return -1;
    *(uint64_t *)field = v;
    return 0;
}

static int parse_max_split(const rs_opt *opt, const char *value, void *field, char *why,
                           size_t why_n)
{
    if (value_is(value, "unlimited")) {
        *(uint64_t *)field = UINT64_MAX;
        return 0;
    }
    return parse_size_field(opt, value, field, why, why_n);
}

/* PYTORCH_CUDA_ALLOC_CONF's syntax and keys (common/alloc_conf.h), from PyTorch's defaults. */
static int alloc_conf_with(unsigned flags, const char *value, void *field, char *why, size_t why_n)
{
    rs_alloc_conf c;
    char pt[256];
    rs_alloc_conf_reset(&c);
    if (rs_alloc_conf_parse(&c, value, flags, pt, sizeof pt) != 0) {
        snprintf(why, why_n, "PyTorch's allocator settings such as expandable_segments:True or "
                             "max_split_size_mb:128,roundup_power2_divisions:4 (%s)", pt);
        return -1;
    }
    if (c.unknown_keys)
        RS_WARN(RS_SUB_INIT, "allocator settings \"%s\": %u key%s this ranksnap (PyTorch 2.11's "
                "keys) does not know, ignored", value, c.unknown_keys,
                c.unknown_keys == 1 ? "" : "s");
    *(rs_alloc_conf *)field = c;
    return 0;
}

static int parse_alloc_conf(const rs_opt *opt, const char *value, void *field, char *why,
                            size_t why_n)
{
    (void)opt;
    return alloc_conf_with(0, value, field, why, why_n);
}

/* PyTorch's own variable: the job's PyTorch, maybe newer than 2.11, accepted it; a key ranksnap
 * does not know must not stop the job. */
static int parse_alloc_conf_of_pytorch(const rs_opt *opt, const char *value, void *field,
                                       char *why, size_t why_n)
{
    (void)opt;
    return alloc_conf_with(RS_CONF_LENIENT, value, field, why, why_n);
}

/* "16GiB", "2:8GiB,3:4GiB", "16GiB,2:8GiB"; "none" or "0" is no limit, as a whole or per rank. */
static int parse_memory_limit(const rs_opt *opt, const char *value, void *field, char *why,
                              size_t why_n)
{
    rs_memory_limit m;
    int have_default = 0;
    (void)opt;
    memset(&m, 0, sizeof m);
    if (value_is(value, "none")) {
        *(rs_memory_limit *)field = m;
        return 0;
    }
    const char *item = value;
    for (;;) {
        const char *comma = strchr(item, ',');
        size_t n = comma ? (size_t)(comma - item) : strlen(item);
        const char *colon = memchr(item, ':', n);
        const char *size_text = colon ? colon + 1 : item;
        size_t size_n = colon ? n - (size_t)(colon + 1 - item) : n;
        uint64_t bytes;
        const char *st = skip_space(size_text);
        if (word_eq(st, trimmed_len(st, size_n - (size_t)(st - size_text)), "none"))
            bytes = 0;
        else if (parse_size_n(size_text, size_n, &bytes) != 0)
            return -1;

        if (!colon) {
            if (have_default) {
                snprintf(why, why_n, "at most one size for all ranks, but found two");
                return -1;
            }
            have_default = 1;
            m.default_bytes = bytes;
        } else {
            const char *r = skip_space(item);
            size_t rn = trimmed_len(r, (size_t)(colon - r));
            long long rank = 0;
            size_t i = 0;
            if (rn > 0 && r[0] == '-') {
                snprintf(why, why_n, "a rank of 0 or more before ':', but found %.*s", (int)rn, r);
                return -1;
            }
            for (; i < rn && isdigit((unsigned char)r[i]) && rank <= 0x7fffffffLL; i++)
                rank = rank * 10 + (r[i] - '0');
            if (rn == 0 || i != rn || rank > 0x7fffffffLL) return -1;
            for (int k = 0; k < m.n_ranks; k++) {
                if (m.ranks[k].rank == (int)rank) {
                    snprintf(why, why_n, "each rank at most once, but rank %lld appears twice",
                             rank);
                    return -1;
                }
            }
            if (m.n_ranks == RS_MAX_RANK_LIMITS) {
                snprintf(why, why_n, "at most %d rank:size pairs", RS_MAX_RANK_LIMITS);
                return -1;
            }
            m.ranks[m.n_ranks].rank = (int)rank;
            m.ranks[m.n_ranks].bytes = bytes;
            m.n_ranks++;
        }
        if (!comma) break;
        item = comma + 1;
    }
    *(rs_memory_limit *)field = m;
    return 0;
}

static const rs_opt_word rs_subsys_words[] = {
    {"INIT", (int)RS_SUB_INIT}, {"ALLOC", (int)RS_SUB_ALLOC}, {"RECORD", (int)RS_SUB_RECORD},
    {"DUMP", (int)RS_SUB_DUMP}, {"MPI", (int)RS_SUB_MPI},     {"ALL", -1},
    {NULL, 0}};

/* NCCL_DEBUG_SUBSYS style: "INIT,ALLOC" keeps those, "^ALLOC" keeps everything else. */
static int parse_subsys(const rs_opt *opt, const char *value, void *field, char *why, size_t why_n)
{
    const char *s = skip_space(value);
    int invert = *s == '^';
    unsigned mask = 0;
    (void)opt;
    (void)why;
    (void)why_n;
    if (invert) s++;
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        const char *w = skip_space(s);
        size_t wn = trimmed_len(w, n - (size_t)(w - s));
        size_t i = 0;
        while (rs_subsys_words[i].word && !word_eq(w, wn, rs_subsys_words[i].word)) i++;
        if (!rs_subsys_words[i].word) return -1;
        mask |= (unsigned)rs_subsys_words[i].value;
        if (!comma) break;
        s = comma + 1;
    }
    *(unsigned *)field = invert ? (unsigned)RS_SUB_ALL & ~mask : mask;
    return 0;
}

/* A string kept as given (a path may end in a blank); `max` is the size of the field. */
static int parse_string(const rs_opt *opt, const char *value, void *field, char *why,
                        size_t why_n)
{
    (void)why;
    (void)why_n;
    size_t n = strlen(value);
    if (n >= opt->max) return -1;
    memcpy(field, value, n + 1);
    return 0;
}

/* RANKSNAP_MPI_PLUGIN: a family's name, auto or none, or the path of a plugin (a '/' in it). */
static int parse_mpi_plugin(const rs_opt *opt, const char *value, void *field, char *why,
                            size_t why_n)
{
    static const char *const words[] = {"auto", "openmpi", "mpich", "none", NULL};
    int ok = strchr(value, '/') != NULL;
    for (const char *const *w = words; !ok && *w; w++) ok = !strcmp(value, *w);
    return ok ? parse_string(opt, value, field, why, why_n) : -1;
}

/* "pp=4,dp=8": NAME=SIZE pairs, a name of letters, digits, '_' and '-', a size of at least 1. Checked
 * here so that a bad value is named at start-up; roles.c makes the grouping of it. */
static int parse_groups(const rs_opt *opt, const char *value, void *field, char *why,
                        size_t why_n)
{
    for (const char *p = value; *p;) {
        size_t len = 0;
        while (isalnum((unsigned char)p[len]) || p[len] == '_' || p[len] == '-') len++;
        if (len == 0 || len > 15 || p[len] != '=') return -1;
        p += len + 1;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 1 || v > 1 << 20 || (*end && *end != ',')) return -1;
        p = *end ? end + 1 : end;
        if (*end && !*p) return -1;
    }
    return parse_string(opt, value, field, why, why_n);
}

/* "5%", "5" or "2.5%": a percentage in (0, 1000]. */
static int parse_percent(const rs_opt *opt, const char *value, void *field, char *why,
                         size_t why_n)
{
    (void)opt;
    (void)why;
    (void)why_n;
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (end == value || errno) return -1;
    end = (char *)skip_space(end);
    if (*end == '%') end = (char *)skip_space(end + 1);
    if (*end || !(v > 0.0) || v > 1000.0) return -1;
    *(double *)field = v;
    return 0;
}

/* ---- the table ----------------------------------------------------------------------------- */

static const rs_opt_word rs_bool_words[] = {{"0", 0},   {"1", 1},  {"true", 1}, {"false", 0},
                                            {"yes", 1}, {"no", 0}, {"on", 1},   {"off", 0},
                                            {NULL, 0}};
static const rs_opt_word rs_backend_words[] = {
    {"auto", RS_BACKEND_AUTO}, {"cuda", RS_BACKEND_CUDA}, {"sim", RS_BACKEND_SIM}, {NULL, 0}};
static const rs_opt_word rs_stacks_words[] = {{"native", RS_STACKS_NATIVE},
                                              {"fp", RS_STACKS_FP},
                                              {"none", RS_STACKS_NONE},
                                              {"python", RS_STACKS_PYTHON},
                                              {"all", RS_STACKS_ALL},
                                              {NULL, 0}};
static const rs_opt_word rs_gather_words[] = {
    {"auto", RS_GATHER_AUTO}, {"all", RS_GATHER_ALL}, {"flagged", RS_GATHER_FLAGGED}, {NULL, 0}};
static const rs_opt_word rs_write_words[] = {
    {"all", RS_WRITE_ALL}, {"rank0", RS_WRITE_RANK0}, {"none", RS_WRITE_NONE}, {NULL, 0}};
static const rs_opt_word rs_on_oom_words[] = {{"dump", RS_ON_OOM_DUMP},
                                              {"dump-and-abort", RS_ON_OOM_DUMP_AND_ABORT},
                                              {"none", RS_ON_OOM_NONE},
                                              {NULL, 0}};
static const rs_opt_word rs_ring_words[] = {
    {"mmap", RS_RING_MMAP}, {"memory", RS_RING_MEMORY}, {NULL, 0}};
static const rs_opt_word rs_recorder_words[] = {
    {"ranksnap", RS_RECORDER_RANKSNAP}, {"torch", RS_RECORDER_TORCH}, {NULL, 0}};
static const rs_opt_word rs_debug_words[] = {{"NONE", RS_LOG_NONE},
                                             {"WARN", RS_LOG_WARN},
                                             {"INFO", RS_LOG_INFO},
                                             {"TRACE", RS_LOG_TRACE},
                                             {NULL, 0}};

static const char *const rs_alloc_conf_fallbacks[] = {"PYTORCH_CUDA_ALLOC_CONF",
                                                      "PYTORCH_ALLOC_CONF", NULL};

#define RS_FIELD(f) offsetof(rs_options, f)
#define RS_BOOL_EXPECTED "0, 1, true, false, yes, no, on or off"

static const rs_opt rs_option_table[] = {
    {"RANKSNAP_DISABLE", "bool", "0",
     "1 makes ranksnap a pass-through: no caching, no recording, no files",
     RS_BOOL_EXPECTED, parse_word, RS_FIELD(disable), 0, 0, rs_bool_words, NULL, NULL},
    {"RANKSNAP_BACKEND", NULL, "auto",
     "cuda (the CUDA runtime) or sim (a simulated device); auto picks cuda when a GPU is present",
     NULL, parse_word, RS_FIELD(backend), 0, 0, rs_backend_words, NULL, NULL},
    {"RANKSNAP_MEMORY_LIMIT", "size | rank:size,... | none", "none",
     "cap on reserved bytes, for every rank and/or per rank: 16GiB, 2:8GiB,3:4GiB, 16GiB,2:8GiB; "
     "a rank that allocates on several devices has the cap on each",
     "a size such as 16GiB, 512MiB or 1073741824, or rank:size pairs such as 2:8GiB,3:4GiB",
     parse_memory_limit, RS_FIELD(memory_limit), 0, 0, NULL, NULL, NULL},
    {"RANKSNAP_ALLOC_CONF", "PyTorch settings", "",
     "the caching allocator's settings, in PYTORCH_CUDA_ALLOC_CONF's syntax and keys: "
     "expandable_segments:True, max_split_size_mb:128, roundup_power2_divisions:4 or [256:1,>:4], "
     "garbage_collection_threshold:0.6, max_non_split_rounding_mb, large_segment_size_mb, "
     "per_process_memory_fraction:0.5; unset: PYTORCH_CUDA_ALLOC_CONF, else PYTORCH_ALLOC_CONF",
     NULL, parse_alloc_conf, RS_FIELD(alloc_conf), 0, 0, NULL, rs_alloc_conf_fallbacks,
     parse_alloc_conf_of_pytorch},
    {"RANKSNAP_MAX_SPLIT_SIZE", "size | unlimited", "unlimited",
     "deprecated, use RANKSNAP_ALLOC_CONF=max_split_size_mb:N; when set, it overrides that key: "
     "cached blocks this large or larger are never split",
     "a size of at least 20MiB such as 256MiB (PyTorch's max_split_size_mb minimum), or unlimited",
     parse_max_split, RS_FIELD(max_split_size), RS_MIN_MAX_SPLIT_SIZE, UINT64_MAX, NULL, NULL, NULL},
    {"RANKSNAP_SIM_CAPACITY", "size", "80GiB", "capacity of the simulated device (sim backend)",
     "a size greater than 0 such as 80GiB", parse_size_field, RS_FIELD(sim_capacity), 1,
     UINT64_MAX, NULL, NULL, NULL},
    {"RANKSNAP_MAX_ENTRIES", "integer", "100000",
     "events kept in the recorder's ring; older ones are overwritten (PyTorch's max_entries)",
     NULL, parse_u64, RS_FIELD(max_entries), 1, (uint64_t)1 << 30, NULL, NULL, NULL},
    {"RANKSNAP_STACKS", NULL, "native",
     "how stacks are captured: unwinder (native), frame pointers (fp) or not at all (none); "
     "PyTorch jobs (RANKSNAP_RECORDER=torch): Python frames (python, what native means there) "
     "or Python and C++ frames (all)",
     NULL,
     parse_word, RS_FIELD(stacks), 0, 0, rs_stacks_words, NULL, NULL},
    {"RANKSNAP_STACK_DEPTH", "integer", "16", "frames kept per captured stack", NULL, parse_int,
     RS_FIELD(stack_depth), 1, RS_MAX_STACK_DEPTH, NULL, NULL, NULL},
    {"RANKSNAP_RECORD", "bool", "1",
     "record events from init on; 0 waits for ranksnap_record(1) or a step range",
     RS_BOOL_EXPECTED, parse_word, RS_FIELD(record), 0, 0, rs_bool_words, NULL, NULL},
    {"RANKSNAP_DEBUG", NULL, "WARN", "log level, as NCCL_DEBUG (case-insensitive)", NULL,
     parse_word, RS_FIELD(debug_level), 0, 0, rs_debug_words, NULL, NULL},
    {"RANKSNAP_DEBUG_SUBSYS", "[^]list", "ALL",
     "subsystems that log, of INIT,ALLOC,RECORD,DUMP,MPI,ALL; ^ALLOC means all but ALLOC "
     "(NCCL_DEBUG_SUBSYS)",
     "a comma-separated list of INIT, ALLOC, RECORD, DUMP, MPI or ALL, optionally starting with "
     "^ to exclude them",
     parse_subsys, RS_FIELD(debug_subsys), 0, 0, NULL, NULL, NULL},
    {"RANKSNAP_DIR", "path", "ranksnap-out", "folder the rank-RRRRR.rsnap snapshots are written to",
     "a path shorter than 4096 bytes", parse_string, RS_FIELD(dir), 0, RS_PATH_MAX, NULL, NULL, NULL},
    {"RANKSNAP_JOB", "string", "",
     "job id written into each snapshot; unset: SLURM_JOB_ID, PBS_JOBID, LSB_JOBID, ... or "
     "local-HOST-PPID",
     "a job id shorter than 256 bytes", parse_string, RS_FIELD(job), 0, RS_JOB_MAX, NULL, NULL, NULL},
    {"RANKSNAP_STEPS", "ranges", "",
     "steps recorded on every rank: 10:15 (steps 10..14), 10:15,100:105, 10: (from 10 on), "
     "time:30:40 (seconds 30..40 after init); empty = the whole run",
     "step ranges such as 10:15 or 10:15,100:105 or 10: or time:30:40", parse_string,
     RS_FIELD(steps), 0, sizeof(((rs_options *)0)->steps), NULL, NULL, NULL},
    {"RANKSNAP_STEP_ON", "MPI_Name:N", "",
     "count steps for programs that never call ranksnap_step: every N calls of an MPI "
     "or NCCL collective, e.g. MPI_Allreduce:1, MPI_Barrier:2, ncclAllReduce:40, ncclAllGather:96; "
     "empty = found from the period of the collectives; none = no steps but ranksnap_step's",
     "an MPI collective and a count such as MPI_Allreduce:1, or none", parse_string, RS_FIELD(step_on), 0,
     sizeof(((rs_options *)0)->step_on), NULL, NULL, NULL},
    {"RANKSNAP_TRIGGER_STEPS", "integer", "5",
     "steps recorded after a trigger (ranksnap trigger, or SIGUSR1 to rank 0)", NULL, parse_int,
     RS_FIELD(trigger_steps), 1, 1000000, NULL, NULL, NULL},
    {"RANKSNAP_TRIGGER_LAG", "integer", "2",
     "steps between rank 0 seeing a trigger and the range starting, so every rank gets it first",
     NULL, parse_int, RS_FIELD(trigger_lag), 1, 1000, NULL, NULL, NULL},
    {"RANKSNAP_GATHER", NULL, "auto",
     "full snapshots sent to rank 0: all, or only the flagged ranks and the reference (flagged); "
     "auto = all up to 16 ranks",
     NULL, parse_word, RS_FIELD(gather), 0, 0, rs_gather_words, NULL, NULL},
    {"RANKSNAP_GATHER_TIMEOUT", "seconds", "60",
     "how long rank 0 waits for a rank's data before naming it missing", NULL, parse_int,
     RS_FIELD(gather_timeout), 1, 86400, NULL, NULL, NULL},
    {"RANKSNAP_WRITE", NULL, "all",
     "which ranks write their own rank-RRRRR.rsnap into RANKSNAP_DIR", NULL, parse_word,
     RS_FIELD(write), 0, 0, rs_write_words, NULL, NULL},
    {"RANKSNAP_DIVERGENCE", "percent", "5%",
     "a rank whose peak is this far from the median (and beyond the noise, median/MAD) is flagged",
     "a percentage such as 5% or 2.5", parse_percent, RS_FIELD(divergence), 0, 0, NULL, NULL, NULL},
    {"RANKSNAP_GROUPS", "dims", "",
     "compare each rank with the ranks of its own role: dimensions in the launcher's rank order, "
     "outermost first, e.g. pp=4,dp=8 (ranks 0-7 are stage 0); the dimension named dp (or data, "
     "fsdp, ddp, dp_replicate, dp_shard, in any case) holds the replicas, the others name the "
     "role; unset: found from the communicators the job created",
     "NAME=SIZE pairs such as pp=4,dp=8", parse_groups, RS_FIELD(groups), 0,
     sizeof(((rs_options *)0)->groups), NULL, NULL, NULL},
    {"RANKSNAP_SITE_SKIP", "patterns", "",
     "frames never named as an allocation site, added to the defaults (CUDA, NCCL, libc, Python, "
     "PyTorch's machinery): comma-separated shell patterns matched against a frame's function, "
     "source file and library, e.g. '*/mylib/alloc.py,myproj::pool::*'",
     "comma-separated patterns, together shorter than 1024 bytes", parse_string,
     RS_FIELD(site_skip), 0, sizeof(((rs_options *)0)->site_skip), NULL, NULL, NULL},
    {"RANKSNAP_REPORT", "bool", "1",
     "gather to rank 0 at the end of each recorded range, print the text report there and write "
     "report.txt/json; 0: each rank only writes its file (RANKSNAP_WRITE)",
     RS_BOOL_EXPECTED, parse_word, RS_FIELD(report), 0, 0, rs_bool_words, NULL, NULL},
    {"RANKSNAP_ON_OOM", NULL, "dump",
     "on an out-of-memory: write this rank's snapshot before returning the error (dump); also "
     "MPI_Abort the job so that every rank dumps (dump-and-abort); or nothing (none)",
     NULL, parse_word, RS_FIELD(on_oom), 0, 0, rs_on_oom_words, NULL, NULL},
    {"RANKSNAP_SIGNALS", "bool", "1",
     "dump the snapshot on SIGTERM, SIGINT, SIGABRT, SIGSEGV and SIGBUS, then die as before",
     RS_BOOL_EXPECTED, parse_word, RS_FIELD(signals), 0, 0, rs_bool_words, NULL, NULL},
    {"RANKSNAP_DUMP_TIMEOUT_MS", "integer", "800",
     "how long a fatal signal waits for the dump; mpirun sends SIGKILL 1 s after SIGTERM by "
     "default (docs/POSTMORTEM.md)",
     NULL, parse_int, RS_FIELD(dump_timeout_ms), 1, 600000, NULL, NULL, NULL},
    {"RANKSNAP_MPI", "bool", "1",
     "under mpirun or srun, join a program that never calls MPI_Init to the job's MPI world (to "
     "agree on steps and gather at rank 0); 0 leaves MPI alone and every rank reports on its own",
     RS_BOOL_EXPECTED, parse_word, RS_FIELD(mpi), 0, 0, rs_bool_words, NULL, NULL},
    {"RANKSNAP_MPI_PLUGIN", "auto | openmpi | mpich | none | path", "auto",
     "the MPI plugin (PMPI wrappers, joining, the gather over MPI), one per MPI family: auto "
     "takes the one ranksnap-run preloaded, else the family of the MPI library the process "
     "loaded or of its launcher (mpirun: Open MPI's, PMI: MPICH's), from libranksnap.so's folder; "
     "none keeps ranksnap off MPI",
     "auto, openmpi, mpich, none, or the path of a libranksnap-mpi-*.so", parse_mpi_plugin,
     RS_FIELD(mpi_plugin), 0, RS_PATH_MAX, NULL, NULL, NULL},
    {"RANKSNAP_DRIVER", "bool", "1",
     "record the device memory the CUDA driver gives outside ranksnap's allocators (cuMemAlloc, "
     "cuMemCreate, ... by any route: NCCL's, a static runtime's); 0 leaves the driver's calls alone",
     RS_BOOL_EXPECTED, parse_word, RS_FIELD(driver), 0, 0, rs_bool_words, NULL, NULL},
    {"RANKSNAP_NVML", "path | none", "libnvidia-ml.so.1",
     "the NVIDIA management library (NVML), loaded when first needed, from which a rank takes its "
     "own process's device memory (the outside column: what its process holds beyond the "
     "allocator) and the other processes on its device; none: not asked, and outside is the "
     "device's whole use, every process on it counted",
     "a library path shorter than 512 bytes, or none", parse_string, RS_FIELD(nvml), 0,
     sizeof(((rs_options *)0)->nvml), NULL, NULL, NULL},
    {"RANKSNAP_RING", NULL, "mmap",
     "where the event ring lives: a file-backed mapping in RANKSNAP_DIR that survives SIGKILL "
     "(mmap), or plain memory",
     NULL, parse_word, RS_FIELD(ring), 0, 0, rs_ring_words, NULL, NULL},
    /* ---- PyTorch jobs (rank/runtime/external.c, docs/PYTORCH.md) ---- */
    {"RANKSNAP_RECORDER", NULL, "ranksnap",
     "whose allocator and recorder: ranksnap's own (ranksnap: C programs, and PyTorch's pluggable "
     "allocator), or PyTorch's own driven by ranksnap (torch; ranksnap-run sets it for Python)",
     NULL, parse_word, RS_FIELD(recorder), 0, 0, rs_recorder_words, NULL, NULL},
};

#define RS_N_OPTIONS (sizeof rs_option_table / sizeof rs_option_table[0])

/* ---- generated from the table ----------------------------------------------------------- */

void rs_options_defaults(rs_options *o)
{
    char why[256];
    memset(o, 0, sizeof *o);
    for (size_t i = 0; i < RS_N_OPTIONS; i++) {
        const rs_opt *opt = &rs_option_table[i];
        /* Defaults are constants checked by test_options; a row whose default does not parse
         * is a bug in this table, caught there, not a runtime condition. */
        (void)opt->parse(opt, opt->def, (char *)o + opt->offset, why, sizeof why);
    }
}

ranksnap_status rs_options_load(rs_options *o, rs_getenv_fn get, void *ctx)
{
    rs_options_defaults(o);
    for (size_t i = 0; i < RS_N_OPTIONS; i++) {
        const rs_opt *opt = &rs_option_table[i];
        const char *name = opt->name;
        const char *value = get(name, ctx);
        for (const char *const *f = opt->fallbacks; f && *f && (!value || !*value); f++)
            value = get(name = *f, ctx);
        if (!value || !*value) continue;
        char why[512] = "";
        rs_opt_parse_fn parse =
            name != opt->name && opt->parse_fallback ? opt->parse_fallback : opt->parse;
        if (parse(opt, value, (char *)o + opt->offset, why, sizeof why) != 0) {
            /* A long value is cut so that what was expected still fits in the message. */
            int cut = strlen(value) > 200;
            return rs_error(RANKSNAP_ERR_OPTION, "%s=%.*s%s: expected %s", name,
                            cut ? 200 : (int)strlen(value), value, cut ? "..." : "",
                            why[0] ? why : opt->expected);
        }
    }
    /* The older spelling of one key of the settings wins over the settings' own: a job that sets
     * it means it. */
    if (o->max_split_size != UINT64_MAX) {
        o->alloc_conf.max_split_size = o->max_split_size;
        o->alloc_conf.given |= RS_CONF_MAX_SPLIT;
    }
    return RANKSNAP_OK;
}

/* Levenshtein distance, case-insensitive, or a large number for names too long to matter. */
static size_t edit_distance(const char *a, const char *b)
{
    enum { MAXLEN = 64 };
    size_t na = strlen(a), nb = strlen(b);
    size_t prev[MAXLEN + 1], cur[MAXLEN + 1];
    if (na > MAXLEN || nb > MAXLEN) return (size_t)-1;
    for (size_t j = 0; j <= nb; j++) prev[j] = j;
    for (size_t i = 1; i <= na; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t sub = prev[j - 1] + (tolower((unsigned char)a[i - 1]) !=
                                        tolower((unsigned char)b[j - 1]));
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof cur);
    }
    return prev[nb];
}

const char *rs_options_closest(const char *name)
{
    const char *best = NULL;
    size_t best_d = 3; /* suggest only within an edit distance of 2 */
    for (size_t i = 0; i < RS_N_OPTIONS; i++) {
        size_t d = edit_distance(name, rs_option_table[i].name);
        if (d < best_d) {
            best_d = d;
            best = rs_option_table[i].name;
        }
    }
    return best;
}

int rs_options_is_known(const char *name)
{
    for (size_t i = 0; i < RS_N_OPTIONS; i++)
        if (strcmp(name, rs_option_table[i].name) == 0) return 1;
    return 0;
}

static const char *env_get(const char *name, void *ctx)
{
    (void)ctx;
    return getenv(name);
}

/* A misspelt option silently doing nothing is the worst outcome, but failing the job over a
 * variable a newer or older ranksnap knows would be worse; so warn, as NCCL does. */
static void warn_unknown(const rs_options *o)
{
    if (o->debug_level < RS_LOG_WARN || !(o->debug_subsys & RS_SUB_INIT)) return;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "RANKSNAP_", 9) != 0) continue;
        const char *eq = strchr(*e, '=');
        size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
        char name[128];
        if (n >= sizeof name) n = sizeof name - 1;
        memcpy(name, *e, n);
        name[n] = '\0';
        if (rs_options_is_known(name)) continue;
        const char *near = rs_options_closest(name);
        if (near)
            RS_WARN(RS_SUB_INIT, "%s is not a ranksnap option (did you mean %s?); ignored", name,
                    near);
        else
            RS_WARN(RS_SUB_INIT,
                    "%s is not a ranksnap option (see ranksnap --help-env); ignored", name);
    }
}

ranksnap_status rs_options_load_env(rs_options *o)
{
    ranksnap_status st = rs_options_load(o, env_get, NULL);
    if (st == RANKSNAP_OK) warn_unknown(o);
    if (st == RANKSNAP_OK && o->max_split_size != UINT64_MAX)
        RS_WARN(RS_SUB_INIT, "RANKSNAP_MAX_SPLIT_SIZE is deprecated: use "
                             "RANKSNAP_ALLOC_CONF=max_split_size_mb:%llu",
                (unsigned long long)(o->max_split_size >> 20));
    return st;
}

typedef struct one_option {
    const char *name;
    const char *value;
} one_option;

static const char *one_get(const char *name, void *ctx)
{
    const one_option *one = ctx;
    if (strcmp(name, one->name) != 0) return NULL;
    return one->value ? one->value : getenv(name);
}

ranksnap_status rs_options_load_one(rs_options *o, const char *name, const char *value)
{
    one_option one = {name, value};
    return rs_options_load(o, one_get, &one);
}

uint64_t rs_options_memory_limit_for_rank(const rs_memory_limit *m, int rank)
{
    for (int i = 0; i < m->n_ranks; i++)
        if (m->ranks[i].rank == rank) return m->ranks[i].bytes;
    return m->default_bytes;
}

static void opt_type(const rs_opt *opt, char *buf, size_t n)
{
    if (opt->type)
        snprintf(buf, n, "%s", opt->type);
    else
        words_joined(opt->words, "|", "|", buf, n);
}

void rs_options_print_help(FILE *out)
{
    char type[256];
    int wname = 0, wtype = 0;
    for (size_t i = 0; i < RS_N_OPTIONS; i++) {
        const rs_opt *opt = &rs_option_table[i];
        int k = (int)strlen(opt->name);
        if (k > wname) wname = k;
        opt_type(opt, type, sizeof type);
        k = (int)strlen(type);
        if (k > wtype) wtype = k;
    }
    fprintf(out, "ranksnap reads these environment variables (an empty value is the same as "
                 "unset).\nbool: 0/1, true/false, yes/no, on/off. size: 4096, 512KiB, 1.5GiB, "
                 "16G (K/M/G/T and KiB... are\npowers of 1024, KB/MB/GB/TB of 1000; a fraction "
                 "is rounded down to a whole byte).\n\n");
    for (size_t i = 0; i < RS_N_OPTIONS; i++) {
        const rs_opt *opt = &rs_option_table[i];
        opt_type(opt, type, sizeof type);
        fprintf(out, "  %-*s  %-*s  default: %s\n", wname, opt->name, wtype, type,
                opt->def[0] ? opt->def : "\"\"");
        fprintf(out, "  %-*s  %s\n", wname, "", opt->doc);
    }
}

