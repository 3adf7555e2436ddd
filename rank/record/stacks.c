/*
 * stacks.c — capture and interning of native call stacks (symbols.c resolves them at dump time).
 *
 * Capture keeps return addresses only. RS_STACKS_NATIVE walks the stack with the unwind tables
 * (.eh_frame), right for any code that has them, which every x86-64 object has by default. Where
 * libunwind is present its unw_backtrace does it: it caches each pc's frame rule after the first
 * walk, which made a 16-frame stack cost ~110 ns instead of the ~2.6-8 µs of the compiler's
 * _Unwind_Backtrace (measured on the 2-core CI machine), the fallback without libunwind. RS_STACKS_FP follows the saved frame-pointer
 * chain: much cheaper, but only trustworthy where every frame between here and the caller keeps
 * a frame pointer (-fno-omit-frame-pointer, for ranksnap itself and for the application); a
 * function built without one either hides its caller's frame or, when it used rbp as a general
 * register, ends the walk early. The walk never leaves the thread's stack, so a bad chain yields
 * a short stack, never a crash.
 *
 * Pointer authentication (aarch64): code built with -mbranch-protection saves its return address
 * signed, a code in the bits above the address. The frame-pointer walk strips it
 * (platform/cpu.h). libunwind's unw_backtrace does not follow it (its fast path reads the saved
 * address as it is, and the libunwind of Debian 12 stops at the first signed frame, or crashes),
 * so where the processor signs return addresses the compiler's _Unwind_Backtrace takes the native
 * stacks: it reads the signing state from the unwind tables, at the cost of the slower walk.
 *
 * Interning: an open-addressing table (linear probing, power-of-two size, rehashed above 70%
 * load) maps a hash of the pc array to an id; entries keep an offset and a length into one
 * growing pool of pcs, so that a stack seen before costs a hash, one probe and one memcmp, and
 * no allocation. Ids are 1..count, in order of first sight. When a table cannot grow the stack
 * gets id 0 and the failure is counted; nothing already stored is lost.

 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <unwind.h>

#if defined(RANKSNAP_HAVE_LIBUNWIND)
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#include "cpu.h"
#include "errors.h"
#include "log.h"
#include "pyframes.h"
#include "stacks.h"

/* A frame bigger than this is taken as a broken chain rather than a real frame. */
#define RS_FP_MAX_FRAME ((uintptr_t)8 << 20)
#define RS_STACKS_MIN_SLOTS 256u

typedef struct rs_stack_entry {
    uint64_t hash;
    uint32_t off; /* into pool */
    uint32_t n;
} rs_stack_entry;

/* The tag (high half of the hash) lets most mismatches be rejected without touching the entry. */
typedef struct rs_stack_slot {
    uint32_t id; /* 0 = empty */
    uint32_t tag;
} rs_stack_slot;

struct rs_stacks {
    rs_stacks_mode mode;
    int depth;
    rs_stack_slot *slots;
    size_t slot_cap; /* power of two, or 0 before the first stack */
    rs_stack_entry *entries;
    size_t n_entries, entry_cap;
    uintptr_t *pool;
    size_t pool_len, pool_cap;
    uint64_t failed;
    uint64_t grow_budget; /* fault injection: growths left before they fail */
};

/* ---- creation ------------------------------------------------------------------------------- */

#if defined(RANKSNAP_HAVE_LIBUNWIND)
/* per-thread frame caches: the global one takes a lock on every walk. Set once per process,
 * before the first walk: a table made while other threads walk (the driver's interposers unwind
 * while ranksnap starts) must not change the policy under them. */
static void rs_unwind_policy(void)
{
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
}
static pthread_once_t rs_unwind_policy_once = PTHREAD_ONCE_INIT;
#endif

ranksnap_status rs_stacks_create(rs_stacks_mode mode, int depth, rs_stacks **out)
{
    if (!out) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_stacks_create: out is NULL");
    *out = NULL;
    if (mode != RS_STACKS_NATIVE && mode != RS_STACKS_FP && mode != RS_STACKS_NONE &&
        mode != RS_STACKS_PYTHON)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                        "rs_stacks_create: mode %d: expected native, fp, python or none", (int)mode);
    if (depth < 1 || depth > RS_MAX_STACK_DEPTH)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                        "RANKSNAP_STACK_DEPTH=%d: expected a depth from 1 to %d", depth,
                        RS_MAX_STACK_DEPTH);
    rs_stacks *s = calloc(1, sizeof *s);
    if (!s)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rs_stacks_create: cannot allocate %zu bytes",
                        sizeof *s);
    s->mode = mode;
    s->depth = depth;
    s->grow_budget = UINT64_MAX;
#if defined(RANKSNAP_HAVE_LIBUNWIND)
    if (mode == RS_STACKS_NATIVE || mode == RS_STACKS_PYTHON)
        pthread_once(&rs_unwind_policy_once, rs_unwind_policy);
#endif
    *out = s;
    return RANKSNAP_OK;
}

void rs_stacks_destroy(rs_stacks *s)
{
    if (!s) return;
    free(s->slots);
    free(s->entries);
    free(s->pool);
    free(s);
}

rs_stacks_mode rs_stacks_mode_of(const rs_stacks *s)
{
    return s ? s->mode : RS_STACKS_NONE;
}

size_t rs_stacks_count(const rs_stacks *s)
{
    return s ? s->n_entries : 0;
}

uint64_t rs_stacks_failed(const rs_stacks *s)
{
    return s ? s->failed : 0;
}

void rs_stacks_fail_allocs_after(rs_stacks *s, uint64_t n)
{
    if (s) s->grow_budget = n;
}

size_t rs_stacks_memory_bytes(const rs_stacks *s)
{
    if (!s) return 0;
    return sizeof *s + s->slot_cap * sizeof *s->slots + s->entry_cap * sizeof *s->entries +
           s->pool_cap * sizeof *s->pool;
}

const uintptr_t *rs_stacks_get(const rs_stacks *s, uint32_t id, int *n)
{
    if (!s || id == 0 || id > s->n_entries) {
        if (n) *n = 0;
        return NULL;
    }
    const rs_stack_entry *e = &s->entries[id - 1];
    if (n) *n = (int)e->n;
    return s->pool + e->off;
}

/* ---- capture -------------------------------------------------------------------------------- */

struct rs_native_walk {
    uintptr_t *pcs;
    int n, max, skip;
};

static _Unwind_Reason_Code rs_native_step(struct _Unwind_Context *ctx, void *arg)
{
    struct rs_native_walk *w = arg;
    uintptr_t ip = (uintptr_t)_Unwind_GetIP(ctx);
    if (ip == 0) return _URC_END_OF_STACK;
    if (w->skip > 0) {
        w->skip--;
        return _URC_NO_REASON;
    }
    w->pcs[w->n++] = ip;
    return w->n < w->max ? _URC_NO_REASON : _URC_END_OF_STACK;
}

/* The calling thread's stack, [lo, hi), found once per thread. The main thread's stack grows
 * down from hi, so everything between a live frame and hi is mapped. */
static _Thread_local uintptr_t rs_tls_stack_lo, rs_tls_stack_hi;
static _Thread_local int rs_tls_stack_known; /* 0 not asked yet, 1 known, -1 unknown */

static int rs_thread_stack(uintptr_t *lo, uintptr_t *hi)
{
    if (rs_tls_stack_known == 0) {
        pthread_attr_t attr;
        void *addr = NULL;
        size_t size = 0;
        rs_tls_stack_known = -1;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            if (pthread_attr_getstack(&attr, &addr, &size) == 0 && size > 0) {
                rs_tls_stack_lo = (uintptr_t)addr;
                rs_tls_stack_hi = (uintptr_t)addr + size;
                rs_tls_stack_known = 1;
            }
            pthread_attr_destroy(&attr);
        }
    }
    *lo = rs_tls_stack_lo;
    *hi = rs_tls_stack_hi;
    return rs_tls_stack_known == 1;
}

/* Follows [fp] (the caller's fp) and [fp+8] (the return address) from `fp`, the frame of the
 * capturing function. A chain link is believed only if it moves up the stack by less than
 * RS_FP_MAX_FRAME, is aligned and stays inside the thread's stack; the first that is not ends the
 * walk. ASan is off here: a stale chain may cross a redzone, and the reads are bounds-checked. */
__attribute__((noinline, no_sanitize("address"))) static int
rs_fp_walk(uintptr_t fp, uintptr_t *pcs, int max, int skip)
{
    uintptr_t lo, hi;
    int known = rs_thread_stack(&lo, &hi);
    int n = 0;
    while (n < max) {
        if (known && (fp < lo || fp > hi - 2 * sizeof(uintptr_t))) break;
        const uintptr_t *frame = (const uintptr_t *)fp;
        uintptr_t next = frame[0];
        uintptr_t ret = frame[1];
        if (ret == 0) break;
        if (skip > 0)
            skip--;
        else
            pcs[n++] = rs_cpu_strip_pc(ret);
        if (next <= fp || (next & (sizeof(uintptr_t) - 1)) != 0 || next - fp > RS_FP_MAX_FRAME)
            break;
        fp = next;
    }
    return n;
}

/* Inlined into each public capture function so that "the caller" means the same frame for both
 * modes without depending on whether the compiler turns a helper call into a tail call: the
 * unwinder reports the capturing function itself first (hence skip + 1), while the capturing
 * function's frame pointer already leads to its caller's return address. Using
 * __builtin_frame_address(0) also makes the capturing function keep a frame pointer. */
__attribute__((always_inline)) static inline int rs_native_here(int depth, int skip, uintptr_t *pcs)
{
#if defined(RANKSNAP_HAVE_LIBUNWIND)
    if (!rs_cpu_signs_return_addresses()) {
        /* unw_backtrace, like the unwinder below, reports the capturing function first */
        void *raw[RS_MAX_STACK_DEPTH + 16];
        int want = depth + skip + 1;
        if (want > (int)(sizeof raw / sizeof raw[0])) want = (int)(sizeof raw / sizeof raw[0]);
        int got = unw_backtrace(raw, want);
        int n = 0;
        for (int i = skip + 1; i < got && n < depth; i++) pcs[n++] = (uintptr_t)raw[i];
        return n;
    }
#endif
    struct rs_native_walk w = {pcs, 0, depth, skip + 1};
    _Unwind_Backtrace(rs_native_step, &w);
    return w.n;
}

/* RS_STACKS_PYTHON (a PyTorch rank ranksnap records itself): the thread's Python frames when it
 * holds the GIL (pyframes.c), else its native stack, the nearest there is. Tested after the C
 * modes, which it costs nothing. */
__attribute__((always_inline)) static inline int rs_capture_here(rs_stacks_mode mode, int depth,
                                                                int skip, uintptr_t *pcs)
{
    if (skip < 0) skip = 0;
    if (mode == RS_STACKS_NATIVE) return rs_native_here(depth, skip, pcs);
    if (mode == RS_STACKS_FP)
        return rs_fp_walk((uintptr_t)__builtin_frame_address(0), pcs, depth, skip);
    if (mode == RS_STACKS_PYTHON) {
        int n = rs_pyframes_capture(pcs, depth);
        return n > 0 ? n : rs_native_here(depth, skip, pcs);
    }
    return 0;
}

int rs_stacks_capture_pcs(const rs_stacks *s, int skip, uintptr_t *pcs)
{
    if (!s || !pcs) return 0;
    return rs_capture_here(s->mode, s->depth, skip, pcs);
}

uint32_t rs_stacks_capture(rs_stacks *s, int skip)
{
    uintptr_t pcs[RS_MAX_STACK_DEPTH];
    if (!s) return 0;
    int n = rs_capture_here(s->mode, s->depth, skip, pcs);
    if (n <= 0) return 0;
    return rs_stacks_intern(s, pcs, n);
}

/* ---- interning ------------------------------------------------------------------------------ */

/* Return addresses differ mostly in their low bits; a multiply-xorshift per word spreads them
 * over the whole word so that both the slot index (low bits) and the tag (high bits) vary. */
static uint64_t rs_hash_pcs(const uintptr_t *pcs, int n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)pcs[i];
        h *= 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static void *rs_stacks_grow(rs_stacks *s, void *p, size_t count, size_t elem)
{
    if (s->grow_budget == 0) return NULL;
    if (count > SIZE_MAX / elem) return NULL;
    void *q = realloc(p, count * elem);
    if (q && s->grow_budget != UINT64_MAX) s->grow_budget--;
    return q;
}

static void rs_slots_put(rs_stack_slot *slots, size_t cap, uint64_t hash, uint32_t id)
{
    size_t mask = cap - 1;
    size_t i = (size_t)hash & mask;
    while (slots[i].id != 0) i = (i + 1) & mask;
    slots[i].id = id;
    slots[i].tag = (uint32_t)(hash >> 32);
}

/* Makes room for one more stack of `n` pcs; on failure nothing has changed. */
static int rs_stacks_reserve(rs_stacks *s, size_t n)
{
    if (s->n_entries >= UINT32_MAX - 1 || s->pool_len + n > UINT32_MAX) return -1;
    if ((s->n_entries + 1) * 10 > s->slot_cap * 7) {
        size_t cap = s->slot_cap ? s->slot_cap * 2 : RS_STACKS_MIN_SLOTS;
        if (s->grow_budget == 0) return -1;
        rs_stack_slot *slots = calloc(cap, sizeof *slots);
        if (!slots) return -1;
        if (s->grow_budget != UINT64_MAX) s->grow_budget--;
        for (size_t i = 0; i < s->n_entries; i++)
            rs_slots_put(slots, cap, s->entries[i].hash, (uint32_t)(i + 1));
        free(s->slots);
        s->slots = slots;
        s->slot_cap = cap;
    }
    if (s->n_entries == s->entry_cap) {
        size_t cap = s->entry_cap ? s->entry_cap * 2 : RS_STACKS_MIN_SLOTS / 2;
        rs_stack_entry *e = rs_stacks_grow(s, s->entries, cap, sizeof *e);
        if (!e) return -1;
        s->entries = e;
        s->entry_cap = cap;
    }
    if (s->pool_len + n > s->pool_cap) {
        size_t cap = s->pool_cap ? s->pool_cap : 1024;
        while (cap < s->pool_len + n) cap *= 2;
        uintptr_t *p = rs_stacks_grow(s, s->pool, cap, sizeof *p);
        if (!p) return -1;
        s->pool = p;
        s->pool_cap = cap;
    }
    return 0;
}

/* The first sight of a stack: kept out of line so that the lookup stays small. */
__attribute__((noinline)) static uint32_t rs_stacks_insert(rs_stacks *s, const uintptr_t *pcs,
                                                           int n, uint64_t hash)
{
    if (rs_stacks_reserve(s, (size_t)n) != 0) {
        s->failed++;
        return 0;
    }
    rs_stack_entry *e = &s->entries[s->n_entries];
    e->hash = hash;
    e->off = (uint32_t)s->pool_len;
    e->n = (uint32_t)n;
    memcpy(s->pool + s->pool_len, pcs, (size_t)n * sizeof *pcs);
    s->pool_len += (size_t)n;
    uint32_t id = (uint32_t)++s->n_entries;
    rs_slots_put(s->slots, s->slot_cap, hash, id);
    return id;
}

uint32_t rs_stacks_intern(rs_stacks *s, const uintptr_t *pcs, int n)
{
    if (!s || !pcs || n <= 0) return 0;
    if (n > s->depth) n = s->depth;
    uint64_t hash = rs_hash_pcs(pcs, n);
    if (s->slot_cap) {
        size_t mask = s->slot_cap - 1;
        uint32_t tag = (uint32_t)(hash >> 32);
        for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
            rs_stack_slot slot = s->slots[i];
            if (slot.id == 0) break;
            if (slot.tag != tag) continue;
            const rs_stack_entry *e = &s->entries[slot.id - 1];
            if (e->hash == hash && e->n == (uint32_t)n &&
                memcmp(s->pool + e->off, pcs, (size_t)n * sizeof *pcs) == 0)
                return slot.id;
        }
    }
    return rs_stacks_insert(s, pcs, n, hash);
}

const uintptr_t *rs_stacks_pcs(const rs_stacks *s, size_t *n)
{
    *n = s->pool_len;
    return s->pool;
}
