/*
 * crafted_inputs.h — inputs made to hurt the decoders, as the hostile testing of issue 14 made
 * them: rings and PyTorch pickles whose keys aim at the decoders' hash tables, whose sizes
 * overflow sums, whose annotations point into a table the file does not have. The unit tests
 * decode them (test_crafted_inputs.c), the fuzz targets start from them (tests/fuzz) and the
 * benchmark times them at 1 MB (tests/bench/crafted_bench.c).
 *
 * The keys aim at the hashes the decoders used before they were seeded: MurmurHash3's fmix64
 * with seed 0 (rs_addr_hash), the memo's and the stream table's mixer (the same without the
 * last multiply), and the frame cache's (pointer, pointer, line) slot, whose line part the file
 * chooses. Each is inverted, so that thousands of distinct keys land in one slot of any table of
 * up to 2^20 slots. With the per-process seed (common/addr_hash.h) they land anywhere.
 *
 * Header-only, no library: every buffer is malloc'ed; NULL means out of memory.
 */
#ifndef RANKSNAP_TEST_CRAFTED_INPUTS_H
#define RANKSNAP_TEST_CRAFTED_INPUTS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "ring_format.h"

/* ---- a growing byte buffer --------------------------------------------------------------- */

typedef struct crafted {
    unsigned char *p;
    size_t n, cap;
    int failed;
} crafted;

static inline void cr_put(crafted *b, const void *d, size_t k)
{
    if (b->failed) return;
    if (b->n + k > b->cap) {
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->n + k) c *= 2;
        unsigned char *q = realloc(b->p, c);
        if (!q) {
            b->failed = 1;
            return;
        }
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, d, k);
    b->n += k;
}

static inline void cr_byte(crafted *b, unsigned c)
{
    unsigned char x = (unsigned char)c;
    cr_put(b, &x, 1);
}

/* The buffer, or NULL (freed) when an allocation failed. */
static inline unsigned char *cr_done(crafted *b, size_t *len)
{
    if (b->failed) {
        free(b->p);
        return NULL;
    }
    *len = b->n;
    return b->p;
}

/* ---- the hashes aimed at, and their inverses ---------------------------------------------- */

static inline uint64_t cr_xorshift33_inv(uint64_t x)
{
    return x ^ (x >> 33); /* x ^= x >> 33 is its own inverse: 33 >= 64 / 2 */
}

/* The inverse of a multiply by an odd constant, mod 2^64 (Newton's iteration). */
static inline uint64_t cr_mul_inv(uint64_t a)
{
    uint64_t x = a;
    for (int i = 0; i < 6; i++) x *= 2 - a * x;
    return x;
}

/* An a with fmix64(a) == h (rs_addr_hash(a, 0)). */
static inline uint64_t cr_unfmix64(uint64_t h)
{
    h = cr_xorshift33_inv(h);
    h *= cr_mul_inv(0xc4ceb9fe1a85ec53ull);
    h = cr_xorshift33_inv(h);
    h *= cr_mul_inv(0xff51afd7ed558ccdull);
    return cr_xorshift33_inv(h);
}

/* A k with k ^ k>>33, times 0xff51afd7ed558ccd, ^ >>33 == h: the memo's and the stream table's. */
static inline uint64_t cr_unmix(uint64_t h)
{
    h = cr_xorshift33_inv(h);
    h *= cr_mul_inv(0xff51afd7ed558ccdull);
    return cr_xorshift33_inv(h);
}

/* The line part of the frame cache's slot: slot = f(pointers) ^ g(line), so lines with equal
 * g(line) & mask share a slot whatever the pointers are. */
static inline uint64_t cr_line_part(uint64_t line)
{
    uint64_t h = line * 0x165667b19e3779f9ull;
    return h ^ (h >> 29);
}

/* ---- rings (common/ring_format.h) --------------------------------------------------------- */

typedef struct cr_ring {
    crafted b;
    uint64_t capacity, max_segments;
} cr_ring;

static inline rs_ring_header *cr_ring_header(cr_ring *r)
{
    return (rs_ring_header *)r->b.p;
}

static inline rs_ring_event *cr_ring_events(cr_ring *r)
{
    return (rs_ring_event *)(r->b.p + RS_RING_HEADER_SIZE + r->max_segments * sizeof(rs_ring_segment));
}

/* A valid empty ring of rank 0 of 1 with room for `capacity` events; 0, or -1 out of memory. */
static inline int cr_ring_init(cr_ring *r, uint64_t capacity, uint64_t max_segments)
{
    memset(r, 0, sizeof *r);
    r->capacity = capacity;
    r->max_segments = max_segments;
    size_t len = RS_RING_HEADER_SIZE + max_segments * sizeof(rs_ring_segment) +
                 capacity * sizeof(rs_ring_event);
    r->b.p = calloc(1, len);
    if (!r->b.p) return -1;
    r->b.n = r->b.cap = len;
    rs_ring_header *h = cr_ring_header(r);
    rs_ring_header_init(h, capacity, max_segments);
    memcpy(h->magic, RS_RING_MAGIC, sizeof h->magic);
    h->rank = 0;
    h->world_size = 1;
    h->pid = 4242;
    strcpy(h->job, "crafted");
    strcpy(h->host, "crafted");
    strcpy(h->device_name, "crafted");
    h->device_total = (uint64_t)80 << 30;
    h->n_streams = 1;
    return 0;
}

static inline void cr_ring_event(cr_ring *r, uint8_t action, uint64_t addr, uint64_t size, uint8_t flags)
{
    rs_ring_header *h = cr_ring_header(r);
    rs_ring_event *e = &cr_ring_events(r)[h->total % r->capacity];
    e->time_us = 1700000000000000ull + h->total;
    e->addr = addr;
    e->size = size;
    e->stack_id = 0;
    e->stream = 0;
    e->action = action;
    e->flags = flags;
    h->total++;
}

/* The ring: n frees of blocks the history never saw allocated, at addresses (i+1) << 30,
 * which an unseeded table of a power-of-two size puts in one slot. */
static inline unsigned char *crafted_ring_frees(uint64_t n, size_t *len)
{
    cr_ring r;
    if (cr_ring_init(&r, n, 1) != 0) return NULL;
    for (uint64_t i = 0; i < n; i++) cr_ring_event(&r, RS_ACT_FREE_REQUESTED, (i + 1) << 30, 512, 1);
    return cr_done(&r.b, len);
}

/* Sizes and totals near 2^64: the levels of the walk and the decoder's sums would overflow (a
 * signed one is undefined: UBSan aborts), the anchor at the last step claims a peak of 2^64 - 1,
 * the segment table's sizes add up past 2^64, and so do the outside bytes of one site. */
static inline unsigned char *crafted_ring_overflow(size_t *len)
{
    cr_ring r;
    if (cr_ring_init(&r, 64, 4) != 0) return NULL;
    rs_ring_header *h = cr_ring_header(&r);
    rs_ring_segment *seg = (rs_ring_segment *)(r.b.p + RS_RING_HEADER_SIZE);
    for (int i = 0; i < 4; i++) seg[i] = (rs_ring_segment){(uint64_t)(i + 1) << 40, UINT64_MAX - 1, 0, 0};
    h->reserved_bytes = UINT64_MAX;
    for (int i = 0; i < 20; i++) {
        cr_ring_event(&r, RS_ACT_SEGMENT_ALLOC, (uint64_t)(i + 1) << 40, UINT64_MAX / 3, 0);
        cr_ring_event(&r, RS_ACT_ALLOC, (uint64_t)(i + 1) << 40, (uint64_t)1 << 62, 0);
    }
    cr_ring_event(&r, RS_ACT_STEP, 0, UINT64_MAX, 0);
    h->step_total = h->total - 1;
    h->allocated_at_step = UINT64_MAX - 1;
    h->allocated_peak_at_step = UINT64_MAX;
    h->reserved_peak_at_step = UINT64_MAX;
    for (int i = 0; i < 10; i++) cr_ring_event(&r, RS_ACT_FREE_REQUESTED, (uint64_t)(i + 1) << 40, UINT64_MAX, 1);
    cr_ring_event(&r, RS_ACT_OOM, UINT64_MAX, UINT64_MAX, 0);
    cr_ring_event(&r, RS_ACT_SEGMENT_FREE, 1ull << 40, UINT64_MAX, 0);
    /* memory outside the allocator from one site, whose bytes add up past the integer range */
    for (int i = 0; i < 3; i++) cr_ring_event(&r, RS_ACT_OUTSIDE_ALLOC, (uint64_t)(i + 1) << 50, UINT64_MAX / 2, 0);
    return cr_done(&r.b, len);
}

/* Annotations, whose names the process kept in its heap: string indexes into nothing. */
static inline unsigned char *crafted_ring_annotations(size_t *len)
{
    cr_ring r;
    if (cr_ring_init(&r, 16, 1) != 0) return NULL;
    cr_ring_event(&r, RS_ACT_ANNOTATION_BEGIN, 3, 0, 0);
    cr_ring_event(&r, RS_ACT_ALLOC, 1ull << 40, 4096, 0);
    cr_ring_event(&r, RS_ACT_ANNOTATION_END, 3, 0, 0);
    cr_ring_event(&r, RS_ACT_ANNOTATION_BEGIN, UINT64_MAX, 0, 0);
    return cr_done(&r.b, len);
}

/* ---- PyTorch pickles (protocol 2, the opcodes collector/decode/pickle.c reads) --------------- */

static inline void pk_str(crafted *b, const char *s)
{
    size_t n = strlen(s);
    cr_byte(b, 0x8c); /* SHORT_BINUNICODE */
    cr_byte(b, (unsigned)n);
    cr_put(b, s, n);
}

static inline void pk_uint(crafted *b, uint64_t v)
{
    if (v < 256) {
        cr_byte(b, 'K');
        cr_byte(b, (unsigned)v);
    } else if (v < 65536) {
        cr_byte(b, 'M');
        cr_byte(b, (unsigned)(v & 255));
        cr_byte(b, (unsigned)(v >> 8));
    } else {
        unsigned char d[9];
        int k = 0;
        for (uint64_t x = v; x; x >>= 8) d[k++] = (unsigned char)(x & 255);
        if (d[k - 1] & 0x80) d[k++] = 0; /* LONG1 is signed: keep it positive */
        cr_byte(b, 0x8a);
        cr_byte(b, (unsigned)k);
        cr_put(b, d, (size_t)k);
    }
}

/* The keys and names every entry repeats, memoized once (BINPUT) and fetched after (BINGET). */
enum { PK_ACTION, PK_ALLOC, PK_ADDR, PK_SIZE, PK_STREAM, PK_TIME, PK_FRAMES, PK_NAME, PK_FILENAME,
       PK_LINE, PK_FN, PK_FILE, PK_N_ };
static const char *const pk_words[PK_N_] = {"action", "alloc", "addr", "size", "stream", "time_us",
                                             "frames", "name", "filename", "line", "forward",
                                             "model.py"};

static inline void pk_word(crafted *b, int w, int *defined)
{
    if (defined[w]) {
        cr_byte(b, 'h'); /* BINGET */
        cr_byte(b, (unsigned)w);
        return;
    }
    pk_str(b, pk_words[w]);
    cr_byte(b, 'q'); /* BINPUT */
    cr_byte(b, (unsigned)w);
    defined[w] = 1;
}

/* The kinds of trace entries below. */
enum { PK_PLAIN, PK_STREAMS, PK_LINES };

/* A PyTorch snapshot: no segments, one device trace of n allocations; `addr`, `stream` and the
 * frame's `line` of entry i are given by the callers below. */
static inline unsigned char *pk_snapshot(uint64_t n, int kind, const uint64_t *keys, size_t *len)
{
    crafted b = {NULL, 0, 0, 0};
    int def[PK_N_] = {0};
    cr_byte(&b, 0x80); /* PROTO 2 */
    cr_byte(&b, 2);
    cr_byte(&b, '}'); /* EMPTY_DICT */
    cr_byte(&b, '('); /* MARK */
    pk_str(&b, "segments");
    cr_byte(&b, ']');
    pk_str(&b, "device_traces");
    cr_byte(&b, ']');
    cr_byte(&b, '(');
    cr_byte(&b, ']');
    cr_byte(&b, '(');
    for (uint64_t i = 0; i < n && !b.failed; i++) {
        cr_byte(&b, '}');
        cr_byte(&b, '(');
        pk_word(&b, PK_ACTION, def);
        pk_word(&b, PK_ALLOC, def);
        pk_word(&b, PK_ADDR, def);
        pk_uint(&b, kind == PK_PLAIN ? keys[i] : (i + 1) << 12);
        pk_word(&b, PK_SIZE, def);
        pk_uint(&b, 512);
        pk_word(&b, PK_STREAM, def);
        pk_uint(&b, kind == PK_STREAMS ? keys[i] : 0);
        pk_word(&b, PK_TIME, def);
        pk_uint(&b, 1000 + i);
        if (kind == PK_LINES) {
            pk_word(&b, PK_FRAMES, def);
            cr_byte(&b, ']');
            cr_byte(&b, '}');
            cr_byte(&b, '(');
            pk_word(&b, PK_NAME, def);
            pk_word(&b, PK_FN, def);
            pk_word(&b, PK_FILENAME, def);
            pk_word(&b, PK_FILE, def);
            pk_word(&b, PK_LINE, def);
            pk_uint(&b, keys[i]);
            cr_byte(&b, 'u'); /* SETITEMS */
            cr_byte(&b, 'a'); /* APPEND */
        }
        cr_byte(&b, 'u');
    }
    cr_byte(&b, 'e'); /* APPENDS: the entries into device 0's trace */
    cr_byte(&b, 'e'); /* and that trace into device_traces */
    cr_byte(&b, 'u');
    cr_byte(&b, '.'); /* STOP */
    return cr_done(&b, len);
}

/* pk_snapshot with key i given by key(i). */
static inline unsigned char *pk_keyed(uint64_t n, int kind, uint64_t (*key)(uint64_t), size_t *len)
{
    uint64_t *k = malloc((n ? n : 1) * sizeof *k);
    if (!k) return NULL;
    for (uint64_t i = 0; i < n; i++) k[i] = key(i);
    unsigned char *p = pk_snapshot(n, kind, k, len);
    free(k);
    return p;
}

static inline uint64_t cr_aim_fmix64(uint64_t i)
{
    return cr_unfmix64((i + 1) << 20);
}

static inline uint64_t cr_aim_mix(uint64_t i)
{
    return cr_unmix((i + 1) << 20);
}

/* The pickle: n allocations at addresses that fmix64 with seed 0 sends to one slot. */
static inline unsigned char *crafted_pickle_addresses(uint64_t n, size_t *len)
{
    return pk_keyed(n, PK_PLAIN, cr_aim_fmix64, len);
}

/* n allocations on n streams whose handles the stream table's mixer sends to one slot. */
static inline unsigned char *crafted_pickle_streams(uint64_t n, size_t *len)
{
    return pk_keyed(n, PK_STREAMS, cr_aim_mix, len);
}

/* n allocations, each from the same function and file (the memoized strings: the same two
 * pointers) at a line of its own, the lines chosen to share the frame cache's slot in a table
 * of up to 2^bits slots. */
static inline unsigned char *crafted_pickle_lines(uint64_t n, int bits, size_t *len)
{
    uint64_t *k = malloc((n ? n : 1) * sizeof *k);
    if (!k) return NULL;
    uint64_t mask = ((uint64_t)1 << bits) - 1, want = cr_line_part(1) & mask, found = 0;
    for (uint64_t line = 1; line < (1ull << 31) && found < n; line++)
        if ((cr_line_part(line) & mask) == want) k[found++] = line;
    unsigned char *p = found == n ? pk_snapshot(n, PK_LINES, k, len) : NULL;
    free(k);
    return p;
}

/* n memo entries (PUT with a decimal key, as a hand-made pickle may write) whose keys are above
 * the input's length, where the memo's hash table keeps them, chosen for one slot of it. */
static inline unsigned char *crafted_pickle_memo(uint64_t n, size_t *len)
{
    crafted b = {NULL, 0, 0, 0};
    cr_byte(&b, 0x80);
    cr_byte(&b, 2);
    for (uint64_t i = 0; i < n && !b.failed; i++) {
        char key[32];
        uint64_t k = cr_aim_mix(i);
        if (k < ((uint64_t)1 << 32)) k |= (uint64_t)1 << 63; /* above any input's length */
        int w = snprintf(key, sizeof key, "p%llu\n", (unsigned long long)k);
        cr_byte(&b, 'N'); /* NONE */
        cr_put(&b, key, (size_t)w);
        cr_byte(&b, '0'); /* POP */
    }
    cr_byte(&b, '}');
    cr_byte(&b, '.');
    return cr_done(&b, len);
}

/* ---- .rsnap (msgpack) ---------------------------------------------------------------------- */

/* A map claiming 2^32 - 1 pairs whose first value is an array claiming 2^32 - 1 elements, then
 * nils up to `size` bytes: a reader that trusts the counts allocates for them. */
static inline unsigned char *crafted_rsnap_lengths(size_t size, size_t *len)
{
    crafted b = {NULL, 0, 0, 0};
    cr_byte(&b, 0xdf); /* map32 */
    for (int i = 0; i < 4; i++) cr_byte(&b, 0xff);
    cr_byte(&b, 0xa6);
    cr_put(&b, "format", 6);
    cr_byte(&b, 0xdd); /* array32 */
    for (int i = 0; i < 4; i++) cr_byte(&b, 0xff);
    while (!b.failed && b.n < size) cr_byte(&b, 0xc0);
    return cr_done(&b, len);
}

/* {"x": [[[[...]]]]}, `size` bytes deep: a recursive reader runs out of stack. */
static inline unsigned char *crafted_rsnap_deep(size_t size, size_t *len)
{
    crafted b = {NULL, 0, 0, 0};
    cr_byte(&b, 0x81);
    cr_byte(&b, 0xa1);
    cr_byte(&b, 'x');
    while (!b.failed && b.n < size) cr_byte(&b, 0x91); /* fixarray of one */
    cr_byte(&b, 0xc0);
    return cr_done(&b, len);
}

#endif
