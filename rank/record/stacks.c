/*
 * stacks.c — capture, interning and late symbolisation of native call stacks.
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
 * Interning: an open-addressing table (linear probing, power-of-two size, rehashed above 70%
 * load) maps a hash of the pc array to an id; entries keep an offset and a length into one
 * growing pool of pcs, so that a stack seen before costs a hash, one probe and one memcmp, and
 * no allocation. Ids are 1..count, in order of first sight. When a table cannot grow the stack
 * gets id 0 and the failure is counted; nothing already stored is lost.
 *
 * Resolution (rs_symbols_resolve, at dump time) sorts the distinct pcs of all stacks and
 * resolves each once. Modules come from one dl_iterate_phdr pass (ranges of the PT_LOAD segments,
 * the NT_GNU_BUILD_ID note). Function, file and line come from libbacktrace when the build has it
 * (one state for the whole process: libbacktrace cannot free one), else from dladdr, which knows
 * only exported symbols. A return address points after its call, which may already be the next
 * line or the next function, so pc - 1 is looked up; the table keeps the pc itself.
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

#if defined(RANKSNAP_HAVE_LIBBACKTRACE)
#include <backtrace.h>
#endif

#include "errors.h"
#include "log.h"
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

ranksnap_status rs_stacks_create(rs_stacks_mode mode, int depth, rs_stacks **out)
{
    if (!out) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_stacks_create: out is NULL");
    *out = NULL;
    if (mode != RS_STACKS_NATIVE && mode != RS_STACKS_FP && mode != RS_STACKS_NONE)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT,
                        "rs_stacks_create: mode %d: expected native, fp or none", (int)mode);
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
    /* per-thread frame caches: the global one takes a lock on every walk */
    if (mode == RS_STACKS_NATIVE) unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
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
            pcs[n++] = ret;
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
__attribute__((always_inline)) static inline int rs_capture_here(rs_stacks_mode mode, int depth,
                                                                int skip, uintptr_t *pcs)
{
    if (skip < 0) skip = 0;
    if (mode == RS_STACKS_NATIVE) {
#if defined(RANKSNAP_HAVE_LIBUNWIND)
        /* unw_backtrace, like the unwinder below, reports the capturing function first */
        void *raw[RS_MAX_STACK_DEPTH + 16];
        int want = depth + skip + 1;
        if (want > (int)(sizeof raw / sizeof raw[0])) want = (int)(sizeof raw / sizeof raw[0]);
        int got = unw_backtrace(raw, want);
        int n = 0;
        for (int i = skip + 1; i < got && n < depth; i++) pcs[n++] = (uintptr_t)raw[i];
        return n;
#endif
        struct rs_native_walk w = {pcs, 0, depth, skip + 1};
        _Unwind_Backtrace(rs_native_step, &w);
        return w.n;
    }
    if (mode == RS_STACKS_FP)
        return rs_fp_walk((uintptr_t)__builtin_frame_address(0), pcs, depth, skip);
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

/* ---- modules -------------------------------------------------------------------------------- */

typedef struct rs_loaded_module {
    char *path;
    uint64_t base;   /* lowest mapped address, as dladdr's dli_fbase */
    uint64_t lo, hi; /* span of the PT_LOAD segments */
    char build_id[65];
    int32_t out; /* index in the output table, -1 until a pc falls in it */
} rs_loaded_module;

typedef struct rs_module_scan {
    rs_loaded_module *mods;
    size_t n, cap;
    int failed;
    uintptr_t page;
} rs_module_scan;

static void rs_hex(const unsigned char *p, size_t n, char *out, size_t out_size)
{
    static const char digits[] = "0123456789abcdef";
    size_t k = 0;
    for (size_t i = 0; i < n && k + 2 < out_size; i++) {
        out[k++] = digits[p[i] >> 4];
        out[k++] = digits[p[i] & 15];
    }
    out[k] = '\0';
}

/* Finds NT_GNU_BUILD_ID in one PT_NOTE segment; every length read is checked against the
 * segment, since a note is only as good as the file it came from. */
static void rs_note_build_id(const unsigned char *p, size_t size, size_t align, char *out)
{
    size_t off = 0;
    while (size - off >= sizeof(ElfW(Nhdr))) {
        ElfW(Nhdr) nh;
        memcpy(&nh, p + off, sizeof nh);
        off += sizeof nh;
        size_t name_sz = ((size_t)nh.n_namesz + align - 1) & ~(align - 1);
        size_t desc_sz = ((size_t)nh.n_descsz + align - 1) & ~(align - 1);
        if (name_sz > size - off) return;
        const unsigned char *name = p + off;
        off += name_sz;
        if (desc_sz > size - off) return;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
            nh.n_descsz > 0) {
            rs_hex(p + off, nh.n_descsz, out, 65);
            return;
        }
        off += desc_sz;
    }
}

static int rs_module_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    rs_module_scan *scan = arg;
    (void)size;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uint64_t a = (uint64_t)info->dlpi_addr + ph->p_vaddr;
        if (a < lo) lo = a;
        if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
    }
    if (hi <= lo) return 0;
    if (scan->n == scan->cap) {
        size_t cap = scan->cap ? scan->cap * 2 : 32;
        rs_loaded_module *m = realloc(scan->mods, cap * sizeof *m);
        if (!m) {
            scan->failed = 1;
            return 1;
        }
        scan->mods = m;
        scan->cap = cap;
    }
    rs_loaded_module *m = &scan->mods[scan->n];
    memset(m, 0, sizeof *m);
    m->path = strdup(info->dlpi_name ? info->dlpi_name : "");
    if (!m->path) {
        scan->failed = 1;
        return 1;
    }
    m->lo = lo;
    m->hi = hi;
    m->base = lo & ~(uint64_t)(scan->page - 1);
    m->out = -1;
    for (int i = 0; i < info->dlpi_phnum && !m->build_id[0]; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        size_t align = ph->p_align == 8 ? 8 : 4;
        rs_note_build_id((const unsigned char *)(info->dlpi_addr + ph->p_vaddr),
                         (size_t)ph->p_filesz, align, m->build_id);
    }
    scan->n++;
    return 0;
}

static int rs_cmp_module(const void *a, const void *b)
{
    const rs_loaded_module *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void rs_module_scan_free(rs_module_scan *scan)
{
    for (size_t i = 0; i < scan->n; i++) free(scan->mods[i].path);
    free(scan->mods);
}

/* The main program appears with an empty name; the header promises its resolved path. */
static ranksnap_status rs_module_scan_take(rs_module_scan *scan)
{
    memset(scan, 0, sizeof *scan);
    long page = sysconf(_SC_PAGESIZE);
    scan->page = page > 0 ? (uintptr_t)page : 4096;
    dl_iterate_phdr(rs_module_cb, scan);
    if (scan->failed) {
        rs_module_scan_free(scan);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rs_symbols_resolve: out of memory listing modules");
    }
    for (size_t i = 0; i < scan->n; i++) {
        if (scan->mods[i].path[0]) continue;
        char buf[RS_PATH_MAX];
        ssize_t len = readlink("/proc/self/exe", buf, sizeof buf - 1);
        if (len <= 0) continue;
        buf[len] = '\0';
        char *p = strdup(buf);
        if (!p) {
            rs_module_scan_free(scan);
            return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rs_symbols_resolve: out of memory");
        }
        free(scan->mods[i].path);
        scan->mods[i].path = p;
        break; /* only the first empty name is the main program; vdso-like ones keep theirs */
    }
    qsort(scan->mods, scan->n, sizeof *scan->mods, rs_cmp_module);
    return RANKSNAP_OK;
}

static rs_loaded_module *rs_module_of(rs_module_scan *scan, uint64_t addr)
{
    size_t lo = 0, hi = scan->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (scan->mods[mid].lo <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0) return NULL;
    rs_loaded_module *m = &scan->mods[lo - 1];
    return addr < m->hi ? m : NULL;
}

/* ---- symbols -------------------------------------------------------------------------------- */

#if defined(RANKSNAP_HAVE_LIBBACKTRACE)
static struct backtrace_state *rs_bt_state;
static pthread_once_t rs_bt_once = PTHREAD_ONCE_INIT;

static void rs_bt_error(void *data, const char *msg, int errnum)
{
    (void)data;
    /* -1 means "no debug info" for a module: normal for system libraries. */
    RS_TRACE(RS_SUB_DUMP, "libbacktrace: %s (%d)", msg, errnum);
}

static void rs_bt_init(void)
{
    rs_bt_state = backtrace_create_state(NULL, 1, rs_bt_error, NULL);
}

/* The first report is the innermost inlined frame: the function whose source holds the line of
 * the call, so that function, file and line always describe the same place. */
struct rs_bt_info {
    const char *function;
    const char *file;
    int line;
    int seen;
};

static int rs_bt_pcinfo(void *data, uintptr_t pc, const char *filename, int lineno,
                        const char *function)
{
    struct rs_bt_info *bi = data;
    (void)pc;
    bi->function = function;
    bi->file = filename;
    bi->line = lineno;
    bi->seen = 1;
    return 1;
}

static void rs_bt_syminfo(void *data, uintptr_t pc, const char *symname, uintptr_t symval,
                          uintptr_t symsize)
{
    (void)pc;
    (void)symval;
    (void)symsize;
    if (symname) *(const char **)data = symname;
}
#endif

int rs_symbols_have_file_lines(void)
{
#if defined(RANKSNAP_HAVE_LIBBACKTRACE)
    return 1;
#else
    return 0;
#endif
}

static char *rs_dup_or_unknown(const char *s)
{
    return strdup(s && *s ? s : "??");
}

static ranksnap_status rs_resolve_frame(rs_frame_info *f)
{
    const char *function = NULL, *file = NULL;
    int line = 0;
    if (f->pc == 0) {
        f->function = strdup("??");
        f->file = strdup("??");
        return f->function && f->file ? RANKSNAP_OK
                                      : rs_error(RANKSNAP_ERR_HOST_MEMORY,
                                                 "rs_symbols_resolve: out of memory");
    }
    uintptr_t at = (uintptr_t)f->pc - 1;
#if defined(RANKSNAP_HAVE_LIBBACKTRACE)
    pthread_once(&rs_bt_once, rs_bt_init);
    if (rs_bt_state) {
        struct rs_bt_info bi = {NULL, NULL, 0, 0};
        backtrace_pcinfo(rs_bt_state, at, rs_bt_pcinfo, rs_bt_error, &bi);
        if (bi.seen) {
            function = bi.function;
            file = bi.file;
            line = file ? bi.line : 0;
        }
        if (!function) backtrace_syminfo(rs_bt_state, at, rs_bt_syminfo, rs_bt_error, &function);
    }
#endif
    if (!function) {
        Dl_info di;
        if (dladdr((void *)at, &di) != 0 && di.dli_sname) function = di.dli_sname;
    }
    f->function = rs_dup_or_unknown(function);
    f->file = rs_dup_or_unknown(file);
    f->line = line > 0 ? line : 0;
    if (!f->function || !f->file)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rs_symbols_resolve: out of memory");
    return RANKSNAP_OK;
}

void rs_symbols_prewarm(void)
{
#if defined(RANKSNAP_HAVE_LIBBACKTRACE)
    /* libbacktrace reads the debug info of every loaded module at its first lookup (~0.1 s for
     * a small program, more for a large one); done once here, a dump later pays only for its
     * own frames. */
    pthread_once(&rs_bt_once, rs_bt_init);
    if (rs_bt_state) {
        struct rs_bt_info bi = {NULL, NULL, 0, 0};
        backtrace_pcinfo(rs_bt_state, (uintptr_t)&rs_symbols_prewarm, rs_bt_pcinfo, rs_bt_error, &bi);
    }
#endif
}

static int rs_cmp_pc(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

void rs_symbols_free(rs_symbols *sym)
{
    if (!sym) return;
    for (size_t i = 0; i < sym->n_modules; i++) free(sym->modules[i].path);
    free(sym->modules);
    for (size_t i = 0; i < sym->n_frames; i++) {
        free(sym->frames[i].function);
        free(sym->frames[i].file);
    }
    free(sym->frames);
    memset(sym, 0, sizeof *sym);
}

/* Gives `m` an index in the output table the first time one of its pcs is seen. */
static ranksnap_status rs_symbols_add_module(rs_symbols *out, size_t *cap, rs_loaded_module *m)
{
    if (m->out >= 0) return RANKSNAP_OK;
    if (out->n_modules == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        rs_module_info *mi = realloc(out->modules, c * sizeof *mi);
        if (!mi) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rs_symbols_resolve: out of memory");
        out->modules = mi;
        *cap = c;
    }
    rs_module_info *mi = &out->modules[out->n_modules];
    mi->path = strdup(m->path);
    if (!mi->path) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rs_symbols_resolve: out of memory");
    mi->base = m->base;
    memcpy(mi->build_id, m->build_id, sizeof mi->build_id);
    m->out = (int32_t)out->n_modules++;
    return RANKSNAP_OK;
}

ranksnap_status rs_symbols_resolve(const rs_stacks *s, rs_symbols *out)
{
    if (!out) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_symbols_resolve: out is NULL");
    memset(out, 0, sizeof *out);
    if (!s || s->pool_len == 0) return RANKSNAP_OK;

    uintptr_t *pcs = malloc(s->pool_len * sizeof *pcs);
    if (!pcs)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rs_symbols_resolve: cannot allocate %zu pcs",
                        s->pool_len);
    memcpy(pcs, s->pool, s->pool_len * sizeof *pcs);
    qsort(pcs, s->pool_len, sizeof *pcs, rs_cmp_pc);
    size_t n = 0;
    for (size_t i = 0; i < s->pool_len; i++)
        if (n == 0 || pcs[i] != pcs[n - 1]) pcs[n++] = pcs[i];

    rs_module_scan scan;
    ranksnap_status st = rs_module_scan_take(&scan);
    if (st != RANKSNAP_OK) {
        free(pcs);
        return st;
    }
    out->frames = calloc(n, sizeof *out->frames);
    if (!out->frames) {
        st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "rs_symbols_resolve: cannot allocate %zu frames", n);
        goto done;
    }
    size_t mod_cap = 0;
    for (size_t i = 0; i < n; i++) {
        rs_frame_info *f = &out->frames[i];
        out->n_frames = i + 1; /* so that a failure frees what this frame got */
        f->pc = pcs[i];
        f->module = -1;
        rs_loaded_module *m = pcs[i] ? rs_module_of(&scan, pcs[i] - 1) : NULL;
        if (m) {
            st = rs_symbols_add_module(out, &mod_cap, m);
            if (st != RANKSNAP_OK) goto done;
            f->module = m->out;
        }
        st = rs_resolve_frame(f);
        if (st != RANKSNAP_OK) goto done;
    }
done:
    rs_module_scan_free(&scan);
    free(pcs);
    if (st != RANKSNAP_OK) rs_symbols_free(out);
    return st;
}

long rs_symbols_find(const rs_symbols *sym, uint64_t pc)
{
    if (!sym) return -1;
    size_t lo = 0, hi = sym->n_frames;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t v = sym->frames[mid].pc;
        if (v == pc) return (long)mid;
        if (v < pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}
