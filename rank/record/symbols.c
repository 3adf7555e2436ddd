/*
 * symbols.c — late symbolisation of the interned stacks (symbols.h).
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

#if defined(RANKSNAP_HAVE_LIBBACKTRACE)
#include <backtrace.h>
#endif

#include "errors.h"
#include "log.h"
#include "pyframes.h"
#include "stacks.h"
#include "symbols.h"

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

/* Inline levels kept for one pc (rs_resolve_frame). */
#define RS_MAX_INLINE 16

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

/* libbacktrace reports a pc inside inlined code once per inline level, innermost first: the
 * inlined function with the line in its own source, then each function it was inlined into with
 * the line of the call. Each level becomes a frame, so that a call merged into an inlined helper
 * (gcc -O3 folds identical calls, and the survivor's location is the helper's) still shows the
 * function that called the helper. */
struct rs_bt_info {
    int n;
    const char *function[RS_MAX_INLINE];
    const char *file[RS_MAX_INLINE];
    int line[RS_MAX_INLINE];
};

static int rs_bt_pcinfo(void *data, uintptr_t pc, const char *filename, int lineno,
                        const char *function)
{
    struct rs_bt_info *bi = data;
    (void)pc;
    if (!function && !filename) return bi->n > 0; /* no debug info for this pc */
    bi->function[bi->n] = function;
    bi->file[bi->n] = filename;
    bi->line[bi->n] = lineno;
    return ++bi->n == RS_MAX_INLINE;
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

/* Fills f[0..*n) with the levels of f->pc (at least one; at most RS_MAX_INLINE), each with
 * the pc and module of f[0]. */
static ranksnap_status rs_resolve_frame(rs_frame_info *f, int *n)
{
    const char *function[RS_MAX_INLINE] = {NULL}, *file[RS_MAX_INLINE] = {NULL};
    int line[RS_MAX_INLINE] = {0};
    int levels = 1;
    *n = 0;
    /* a Python frame (pyframes.h): its function, file and line as copied when it was seen */
    if (rs_pyframes_lookup(f->pc, &function[0], &file[0], &line[0])) {
        /* nothing to resolve */
    } else if (f->pc != 0) {
        uintptr_t at = (uintptr_t)f->pc - 1;
#if defined(RANKSNAP_HAVE_LIBBACKTRACE)
        pthread_once(&rs_bt_once, rs_bt_init);
        if (rs_bt_state) {
            struct rs_bt_info bi;
            bi.n = 0;
            backtrace_pcinfo(rs_bt_state, at, rs_bt_pcinfo, rs_bt_error, &bi);
            for (int k = 0; k < bi.n; k++) {
                function[k] = bi.function[k];
                file[k] = bi.file[k];
                line[k] = file[k] ? bi.line[k] : 0;
            }
            if (bi.n > 0) levels = bi.n;
            /* the outermost level's name from the symbol table when DWARF has none */
            if (!function[levels - 1])
                backtrace_syminfo(rs_bt_state, at, rs_bt_syminfo, rs_bt_error, &function[levels - 1]);
        }
#endif
        if (!function[levels - 1]) {
            Dl_info di;
            if (dladdr((void *)at, &di) != 0 && di.dli_sname) function[levels - 1] = di.dli_sname;
        }
    }
    for (int k = 0; k < levels; k++) {
        f[k].pc = f[0].pc;
        f[k].module = f[0].module;
        f[k].function = rs_dup_or_unknown(function[k]);
        f[k].file = rs_dup_or_unknown(file[k]);
        f[k].line = line[k] > 0 ? line[k] : 0;
        *n = k + 1; /* owned from here on, for rs_symbols_free */
        if (!f[k].function || !f[k].file)
            return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rs_symbols_resolve: out of memory");
    }
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
        struct rs_bt_info bi;
        bi.n = 0;
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
    size_t pool_len = 0;
    const uintptr_t *pool = s ? rs_stacks_pcs(s, &pool_len) : NULL;
    if (pool_len == 0) return RANKSNAP_OK;

    uintptr_t *pcs = malloc(pool_len * sizeof *pcs);
    if (!pcs)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "rs_symbols_resolve: cannot allocate %zu pcs",
                        pool_len);
    memcpy(pcs, pool, pool_len * sizeof *pcs);
    qsort(pcs, pool_len, sizeof *pcs, rs_cmp_pc);
    size_t n = 0;
    for (size_t i = 0; i < pool_len; i++)
        if (n == 0 || pcs[i] != pcs[n - 1]) pcs[n++] = pcs[i];

    rs_module_scan scan;
    ranksnap_status st = rs_module_scan_take(&scan);
    if (st != RANKSNAP_OK) {
        free(pcs);
        return st;
    }
    size_t cap = n + RS_MAX_INLINE, mod_cap = 0;
    out->frames = calloc(cap, sizeof *out->frames);
    if (!out->frames) {
        st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "rs_symbols_resolve: cannot allocate %zu frames", n);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        /* room for this pc's inline levels (usually one) */
        if (out->n_frames + RS_MAX_INLINE > cap) {
            size_t c = cap * 2;
            rs_frame_info *v = realloc(out->frames, c * sizeof *v);
            if (!v) {
                st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "rs_symbols_resolve: cannot allocate %zu frames", c);
                goto done;
            }
            memset(v + cap, 0, (c - cap) * sizeof *v);
            out->frames = v;
            cap = c;
        }
        rs_frame_info *f = &out->frames[out->n_frames];
        f->pc = pcs[i];
        f->module = -1;
        rs_loaded_module *m = pcs[i] ? rs_module_of(&scan, pcs[i] - 1) : NULL;
        if (m) {
            st = rs_symbols_add_module(out, &mod_cap, m);
            if (st != RANKSNAP_OK) goto done;
            f->module = m->out;
        }
        int levels = 0;
        st = rs_resolve_frame(f, &levels);
        out->n_frames += (size_t)levels; /* so that a failure frees what this pc got */
        if (st != RANKSNAP_OK) goto done;
    }
done:
    rs_module_scan_free(&scan);
    free(pcs);
    if (st != RANKSNAP_OK) rs_symbols_free(out);
    return st;
}

long rs_symbols_find(const rs_symbols *sym, uint64_t pc, int *levels)
{
    *levels = 0;
    if (!sym) return -1;
    /* the first frame of pc: its innermost level */
    size_t lo = 0, hi = sym->n_frames;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sym->frames[mid].pc < pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == sym->n_frames || sym->frames[lo].pc != pc) return -1;
    size_t end = lo;
    while (end < sym->n_frames && sym->frames[end].pc == pc) end++;
    *levels = (int)(end - lo);
    return (long)lo;
}
