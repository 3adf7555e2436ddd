/*
 * alloc_conf.h — PyTorch's allocator settings (PYTORCH_CUDA_ALLOC_CONF): their syntax, their
 * values, and what they do to sizes.
 *
 * One parser for everyone who reads such a string: the rank (RANKSNAP_ALLOC_CONF, common/options.c),
 * the readers (a PyTorch pickle's allocator_settings, a .rsnap's settings) and the replay's
 * what-if (`ranksnap replay --alloc-conf`). It follows PyTorch 2.11's ConfigTokenizer and
 * AcceleratorAllocatorConfig/CUDAAllocatorConfig: `key:value,key:[a:b,c:d]`, blanks dropped,
 * case-sensitive keys, booleans spelt True/False, integers read as std::stoull reads them, and
 * PyTorch's own error messages.
 *
 * A zero-filled rs_alloc_conf is PyTorch's defaults (max_split_size 0 = unlimited,
 * large_segment_size 0 = 20 MiB, no fraction), so that configs built with calloc or `= {0}` need
 * no initialiser. The size policy that depends on the settings (round_size with
 * roundup_power2_divisions, the segment size of a new cudaMalloc) is here too, inline, so that the
 * allocator's hot path and the readers compute one thing one way.
 */
#ifndef RANKSNAP_ALLOC_CONF_H
#define RANKSNAP_ALLOC_CONF_H

#include <stddef.h>
#include <stdint.h>

#define RS_CONF_MIB ((uint64_t)1 << 20)
#define RS_CONF_MIN_BLOCK ((uint64_t)512)           /* kMinBlockSize */
#define RS_CONF_SMALL_SIZE RS_CONF_MIB              /* kSmallSize: largest small request */
#define RS_CONF_SMALL_BUFFER (2 * RS_CONF_MIB)      /* kSmallBuffer: small segments, small pages */
#define RS_CONF_LARGE_BUFFER (20 * RS_CONF_MIB)     /* kLargeBuffer: the default large segment */
#define RS_CONF_MIN_LARGE_ALLOC (10 * RS_CONF_MIB)  /* kMinLargeAlloc */
#define RS_CONF_ROUND_LARGE (2 * RS_CONF_MIB)       /* kRoundLarge */
#define RS_CONF_INTERVALS 16                        /* roundup_power2_divisions: 1 MiB .. 32 GiB */
#define RS_CONF_TEXT_MAX 1024

/* Which keys a string named (rs_alloc_conf.given). */
enum {
    RS_CONF_MAX_SPLIT = 1u << 0,
    RS_CONF_MAX_NON_SPLIT_ROUNDING = 1u << 1,
    RS_CONF_LARGE_SEGMENT = 1u << 2,
    RS_CONF_GC_THRESHOLD = 1u << 3,
    RS_CONF_ROUNDUP = 1u << 4,
    RS_CONF_EXPANDABLE = 1u << 5,
    RS_CONF_FRACTION = 1u << 6,
    RS_CONF_BACKEND = 1u << 7,
    RS_CONF_OTHER = 1u << 8, /* keys without effect on placement (release_lock_on_cudamalloc, pinned_*, ...) */
};

typedef struct rs_alloc_conf {
    uint64_t max_split_size;         /* bytes; 0 = unlimited (PyTorch's SIZE_MAX)             */
    uint64_t max_non_split_rounding; /* bytes; 0 = the large segment size (PyTorch's default) */
    uint64_t large_segment_size;     /* bytes; 0 = 20 MiB                                      */
    double garbage_collection_threshold; /* 0 = off; else in (0, 1)                           */
    int has_fraction;                /* per_process_memory_fraction given and < 1             */
    double memory_fraction;          /* when has_fraction: in [0, 1)                          */
    uint32_t roundup_divisions[RS_CONF_INTERVALS]; /* 0 or 1 = none, else a power of two      */
    int expandable_segments;
    int backend_async;               /* backend:cudaMallocAsync (no caching policy to follow)  */
    /* no effect on placement; kept so that a snapshot says what the job said */
    int release_lock_on_cudamalloc;
    int graph_capture_record_stream_reuse;
    int pinned_use_cuda_host_register;
    int pinned_use_background_threads;
    uint32_t pinned_num_register_threads; /* 0 = PyTorch's default, 1 */
    uint64_t pinned_reserve_segment_size;
    unsigned given;                  /* RS_CONF_* bits of the keys parsed                      */
    unsigned unknown_keys;           /* keys skipped (lenient parse only)                      */
    char text[RS_CONF_TEXT_MAX];     /* the last string parsed, as given ("" = none)           */
} rs_alloc_conf;

/* Parse flags. */
enum {
    /* Skip keys this parser does not know (a newer PyTorch's, in a pickle) instead of failing as
     * PyTorch does ("Unrecognized key ..."); they are counted in unknown_keys. */
    RS_CONF_LENIENT = 1u << 0,
};

/* Applies the keys of `text` onto *conf, as one call of PyTorch's parser does after
 * rs_alloc_conf_reset: keys not named keep their values. Returns 0, or -1 with `why` set to what
 * PyTorch would have said (e.g. "CachingAllocator option max_split_size_mb too small, must be >= 20")
 * and *conf unchanged. text is also copied into conf->text (cut at RS_CONF_TEXT_MAX - 1 bytes). */
int rs_alloc_conf_parse(rs_alloc_conf *conf, const char *text, unsigned flags, char *why,
                        size_t why_n);

/* PyTorch's defaults (all zero). */
void rs_alloc_conf_reset(rs_alloc_conf *conf);

/* The keys of `conf` whose effective value differs from `base`'s (NULL: the defaults), written in
 * PYTORCH_CUDA_ALLOC_CONF syntax ("expandable_segments:True,max_split_size_mb:128"); "" when none.
 * Parsing the result onto `base` gives `conf` back, except a garbage_collection_threshold switched
 * off, which PyTorch's syntax cannot say. */
void rs_alloc_conf_describe(const rs_alloc_conf *conf, const rs_alloc_conf *base, char *buf,
                            size_t n);

/* The cap on reserved bytes in force: `memory_limit` (0 = none; RANKSNAP_MEMORY_LIMIT) and the
 * fraction of `device_total` (PyTorch: size_t(fraction * totalGlobalMem), no cap at 1.0),
 * whichever is lower. Returns 1 and sets *cap when there is one (a fraction of 0 is a cap of 0
 * bytes, as in PyTorch), else 0. */
int rs_alloc_conf_cap(const rs_alloc_conf *conf, uint64_t memory_limit, uint64_t device_total,
                      uint64_t *cap);

/* ---- the size policy ---------------------------------------------------------------------- */

static inline uint64_t rs_alloc_conf_max_split(const rs_alloc_conf *c)
{
    return c->max_split_size ? c->max_split_size : UINT64_MAX;
}

static inline uint64_t rs_alloc_conf_large_segment(const rs_alloc_conf *c)
{
    return c->large_segment_size ? c->large_segment_size : RS_CONF_LARGE_BUFFER;
}

static inline uint64_t rs_alloc_conf_max_non_split_rounding(const rs_alloc_conf *c)
{
    return c->max_non_split_rounding ? c->max_non_split_rounding : rs_alloc_conf_large_segment(c);
}

static inline unsigned rs_alloc_conf_floor_log2(uint64_t x)
{
    return 63u - (unsigned)__builtin_clzll(x); /* x > 0 */
}

/* The roundup_power2_divisions interval of a size: 0 below 2 MiB, k for [2^k, 2^(k+1)) MiB, 15
 * from 32 GiB on. */
static inline unsigned rs_alloc_conf_interval(uint64_t size)
{
    unsigned l = rs_alloc_conf_floor_log2(size);
    unsigned k = l > 20 ? l - 20 : 0;
    return k < RS_CONF_INTERVALS ? k : RS_CONF_INTERVALS - 1;
}

/* PyTorch's round_size: at least 512 B; sizes above 512 * d bytes (d the divisions of the size's
 * interval, d > 1) go up to the next of d equal steps between two powers of two; the others to a
 * multiple of 512. `size` must be below 2^63. */
static inline uint64_t rs_alloc_conf_round(const rs_alloc_conf *c, uint64_t size)
{
    if (size < RS_CONF_MIN_BLOCK) return RS_CONF_MIN_BLOCK;
    uint32_t d = c->roundup_divisions[rs_alloc_conf_interval(size)];
    if (d > 1 && size > RS_CONF_MIN_BLOCK * d) {
        if ((size & (size - 1)) == 0) return size;
        uint64_t floor2 = (uint64_t)1 << rs_alloc_conf_floor_log2(size);
        uint64_t step = floor2 >> rs_alloc_conf_floor_log2(d);
        if (step == 0) return floor2 << 1;
        uint64_t down = size & ~(step - 1);
        return down == size ? size : down + step;
    }
    return RS_CONF_MIN_BLOCK * ((size + RS_CONF_MIN_BLOCK - 1) / RS_CONF_MIN_BLOCK);
}

/* PyTorch's get_allocation_size: the segment a rounded request needs when nothing cached fits
 * (2 MiB small, the large segment size below 10 MiB, else the size rounded up to 2 MiB). */
static inline uint64_t rs_alloc_conf_segment_size(const rs_alloc_conf *c, uint64_t rounded)
{
    if (rounded <= RS_CONF_SMALL_SIZE) return RS_CONF_SMALL_BUFFER;
    if (rounded < RS_CONF_MIN_LARGE_ALLOC) return rs_alloc_conf_large_segment(c);
    return RS_CONF_ROUND_LARGE * ((rounded + RS_CONF_ROUND_LARGE - 1) / RS_CONF_ROUND_LARGE);
}

#endif
