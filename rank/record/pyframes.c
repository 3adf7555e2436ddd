/*
 * pyframes.c — Python frames of the allocating thread (pyframes.h), for a PyTorch rank that
 * ranksnap records itself (PyTorch's cudaMallocAsync backend has no recorder): the native stack of
 * such an allocation is libtorch's all the way up, and its line of the script is a Python frame.
 *
 * The interpreter's C API is found in the process with dlsym (the python executable exports it,
 * or libpython does; Python 3.10 or later), once, and only used where a Python interpreter is
 * running: nothing of this file runs for a C program, whose stacks are native.
 *
 * Two ways to the frames. A thread that holds the GIL is walked through the C API. The walk makes
 * frame objects (Python 3.11 and later make them on demand), and an allocation of the collector's
 * could run a finalizer that frees a tensor: into the framework's allocator, whose lock the
 * allocating thread holds. The collector is off for the walk.
 *
 * But PyTorch releases the GIL around every operator, so nearly every allocation comes from a
 * thread without it; taking the GIL there could deadlock against a thread that holds it and waits
 * for a lock the allocating thread holds (PyTorch's allocator's own, held across
 * cudaMallocAsync). Such a thread's own frames cannot change while it runs C code, and the
 * objects they point to (code objects, their names) are kept alive by them: they are read as
 * memory, with no call into the interpreter that takes a reference or allocates. Their layout is
 * the interpreter's internal one, which differs per minor version (3.11, 3.12 and 3.13 are
 * known), so it is found once, on a thread that holds the GIL (rs_pyframes_calibrate), and kept
 * only where a walk of the caller's own frames read that way gives exactly what the C API gives:
 * the same code objects, lines and names. Elsewhere, and on a thread with no Python state, the
 * native stack stands (stacks.c).
 *
 * Each distinct (code object, line) is numbered on first sight, with its code object's name and
 * file copied then: the dump, which may run on a thread without the GIL (a fatal signal's), reads
 * the copies only. A code object seen with the GIL is kept alive (one reference each, never
 * dropped) so that its address names it for the life of the process; one seen without the GIL
 * cannot take a reference, and a code object freed and another made at its address, with a
 * frame at the same line, would be named by the first (the functions of a model live as long as
 * the process). The table is guarded by a mutex of its own: captures come from any thread.
 */
/* pthread_getattr_np: _GNU_SOURCE, which the build defines */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "pyframes.h"

#define RS_PY_DEPTH_MAX RS_MAX_STACK_DEPTH

/* The tag of an entry: no return address of a user-space x86-64 or aarch64 process has these top
 * bits. The number of the (code, line) pair is in the low 32 bits. */
#define RS_PY_TAG (UINT64_C(0xfeed) << 48)
#define RS_PY_TAG_MASK (UINT64_C(0xffff) << 48)

typedef struct rs_py_api {
    int (*is_initialized)(void);
    int (*gil_check)(void);
    void *(*get_frame)(void);              /* PyEval_GetFrame: borrowed */
    void *(*frame_code)(void *);           /* PyFrame_GetCode: new reference */
    int (*frame_line)(void *);             /* PyFrame_GetLineNumber */
    void *(*frame_back)(void *);           /* PyFrame_GetBack: new reference or NULL */
    void *(*getattr)(void *, const char *); /* PyObject_GetAttrString: new reference */
    const char *(*utf8)(void *);           /* PyUnicode_AsUTF8: borrowed */
    void (*incref)(void *);
    void (*decref)(void *);
    void (*err_clear)(void);
    int (*gc_disable)(void);               /* PyGC_Disable: whether it was enabled */
    int (*gc_enable)(void);
    /* the walk without the GIL (optional: where one is missing, it stays off) */
    const unsigned long *version; /* Py_Version, 3.11 and later */
    void *code_type, *unicode_type; /* &PyCode_Type, &PyUnicode_Type */
    void *(*tstate_get)(void);      /* PyThreadState_Get: GIL held */
    void *(*tstate_this)(void);     /* PyGILState_GetThisThreadState: any thread */
    int (*addr2line)(void *, int);  /* PyCode_Addr2Line: reads the code's line table only */
} rs_py_api;

static rs_py_api rs_py;
static int rs_py_ok;
static pthread_once_t rs_py_once = PTHREAD_ONCE_INIT;

static void rs_py_load(void)
{
#define RS_PY_SYM(field, name)                                                                     \
    do {                                                                                           \
        *(void **)(&rs_py.field) = dlsym(RTLD_DEFAULT, name);                                      \
        if (!rs_py.field) return;                                                                  \
    } while (0)
    RS_PY_SYM(is_initialized, "Py_IsInitialized");
    RS_PY_SYM(gil_check, "PyGILState_Check");
    RS_PY_SYM(get_frame, "PyEval_GetFrame");
    RS_PY_SYM(frame_code, "PyFrame_GetCode");
    RS_PY_SYM(frame_line, "PyFrame_GetLineNumber");
    RS_PY_SYM(frame_back, "PyFrame_GetBack");
    RS_PY_SYM(getattr, "PyObject_GetAttrString");
    RS_PY_SYM(utf8, "PyUnicode_AsUTF8");
    RS_PY_SYM(incref, "Py_IncRef");
    RS_PY_SYM(decref, "Py_DecRef");
    RS_PY_SYM(err_clear, "PyErr_Clear");
    RS_PY_SYM(gc_disable, "PyGC_Disable");
    RS_PY_SYM(gc_enable, "PyGC_Enable");
#undef RS_PY_SYM
    rs_py_ok = 1;
    *(void **)(&rs_py.version) = dlsym(RTLD_DEFAULT, "Py_Version");
    rs_py.code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
    rs_py.unicode_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
    *(void **)(&rs_py.tstate_get) = dlsym(RTLD_DEFAULT, "PyThreadState_Get");
    *(void **)(&rs_py.tstate_this) = dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
    *(void **)(&rs_py.addr2line) = dlsym(RTLD_DEFAULT, "PyCode_Addr2Line");
}

/* ---- the layout read without the GIL ------------------------------------------------------ */

/* Where the frames of a thread are, per minor version; the offsets are those of CPython's
 * _PyInterpreterFrame (Include/internal/pycore_frame.h) on a 64-bit build, and the rest is found
 * by rs_pyframes_calibrate. */
typedef struct rs_py_layout {
    unsigned minor;
    size_t code, previous, instr, owner; /* in _PyInterpreterFrame */
    int cstack_owner;                    /* owner of an entry shim frame (3.12+), or -1 */
    int via_cframe;                      /* 3.11, 3.12: tstate->cframe->current_frame */
    size_t cframe_current;               /* current_frame in _PyCFrame */
    /* found */
    size_t tstate_frame;                 /* tstate -> cframe, or -> current_frame (3.13) */
    size_t code_start;                   /* first code unit in a code object: its tp_basicsize */
    size_t co_name, co_filename;         /* in a code object */
    size_t str_data;                     /* an ASCII compact string's first byte */
} rs_py_layout;

static const rs_py_layout rs_py_layouts[] = {
    {.minor = 11, .code = 32, .previous = 48, .instr = 56, .owner = 69, .cstack_owner = -1,
     .via_cframe = 1, .cframe_current = 8},
    {.minor = 12, .code = 0, .previous = 8, .instr = 56, .owner = 70, .cstack_owner = 3,
     .via_cframe = 1, .cframe_current = 0},
    {.minor = 13, .code = 0, .previous = 8, .instr = 56, .owner = 70, .cstack_owner = 3,
     .via_cframe = 0},
};

#define RS_PY_OBJ_TYPE 8       /* ob_type in PyObject_HEAD */
#define RS_PY_FRAMEOBJ_FRAME 24 /* f_frame in a frame object, after PyObject_HEAD and f_back */
#define RS_PY_TYPE_BASICSIZE 32 /* tp_basicsize in a type object */
#define RS_PY_STR_LENGTH 16     /* length, then the hash, then the state bits */
#define RS_PY_STR_STATE 32
#define RS_PY_STR_COMPACT_ASCII (3u << 5)
#define RS_PY_SCAN_TSTATE 192  /* bytes of a thread state searched: its frame link is in the
                                   first words (3.11 to 3.13), and the struct is longer */
#define RS_PY_SCAN 512          /* bytes of a code object searched, within its basic size */
#define RS_PY_WALK_MAX 512      /* frames followed at most, however deep the stack asked */

static rs_py_layout rs_pyl;
static atomic_int rs_pyl_ok;

static void *rs_py_word(const void *base, size_t off)
{
    void *w;
    memcpy(&w, (const char *)base + off, sizeof w);
    return w;
}

/* A copy of an ASCII string object read as memory, "??" for any other. */
static char *rs_py_raw_string(const char *s)
{
    uint32_t state;
    size_t len;
    if (!s || rs_py_word(s, RS_PY_OBJ_TYPE) != rs_py.unicode_type) return strdup("??");
    memcpy(&state, s + RS_PY_STR_STATE, sizeof state);
    memcpy(&len, s + RS_PY_STR_LENGTH, sizeof len);
    if ((state & RS_PY_STR_COMPACT_ASCII) != RS_PY_STR_COMPACT_ASCII || !len || len > 4096)
        return strdup("??");
    return strndup(s + rs_pyl.str_data, len);
}

/* ---- the table of (code, line) ------------------------------------------------------------- */

typedef struct rs_py_entry {
    void *code;
    int line;
    char *function;
    char *file;
} rs_py_entry;

static pthread_mutex_t rs_py_mu = PTHREAD_MUTEX_INITIALIZER;
static rs_py_entry *rs_py_entries; /* number n is rs_py_entries[n - 1] */
static uint32_t rs_py_count, rs_py_entries_cap;
static uint32_t *rs_py_slots; /* open addressing: entry numbers, 0 = empty */
static uint32_t rs_py_slot_cap;

static uint32_t rs_py_hash(const void *code, int line)
{
    uint64_t h = (uint64_t)(uintptr_t)code * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)(uint32_t)line;
    h ^= h >> 29;
    h *= UINT64_C(0xbf58476d1ce4e5b9);
    return (uint32_t)(h ^ (h >> 32));
}

/* rs_py_mu held: the slots twice as large, every entry put back. */
static int rs_py_grow_slots(void)
{
    uint32_t cap = rs_py_slot_cap ? rs_py_slot_cap * 2 : 1024;
    uint32_t *s = calloc(cap, sizeof *s);
    if (!s) return -1;
    for (uint32_t i = 0; i < rs_py_count; i++) {
        uint32_t j = rs_py_hash(rs_py_entries[i].code, rs_py_entries[i].line) & (cap - 1);
        while (s[j]) j = (j + 1) & (cap - 1);
        s[j] = i + 1;
    }
    free(rs_py_slots);
    rs_py_slots = s;
    rs_py_slot_cap = cap;
    return 0;
}

/* A copy of the string attribute `name` of `code` (GIL held), "??" when it has none. */
static char *rs_py_string(void *code, const char *name)
{
    void *v = rs_py.getattr(code, name);
    const char *s = v ? rs_py.utf8(v) : NULL;
    char *out = strdup(s && *s ? s : "??");
    if (!s) rs_py.err_clear(); /* a missing attribute or a bad string leaves an exception set */
    if (v) rs_py.decref(v);
    return out;
}

/* rs_py_mu held: the number of (code, line), 0 when it has none yet; *slot where it would go. */
static uint32_t rs_py_find(void *code, int line, uint32_t *slot)
{
    uint32_t j = rs_py_hash(code, line) & (rs_py_slot_cap - 1);
    for (; rs_py_slots[j]; j = (j + 1) & (rs_py_slot_cap - 1)) {
        const rs_py_entry *e = &rs_py_entries[rs_py_slots[j] - 1];
        if (e->code == code && e->line == line) return rs_py_slots[j];
    }
    *slot = j;
    return 0;
}

/* The number of (code, line), made on first sight; 0 when the table cannot grow. With `gil`, the
 * names are asked of the interpreter, outside the mutex, which a call into Python must not hold
 * (it could come back here), and the code object kept alive; without, read as memory. */
static uint32_t rs_py_intern(void *code, int line, int gil)
{
    uint32_t slot = 0, id = 0;
    pthread_mutex_lock(&rs_py_mu);
    if ((rs_py_count + 1) * 2 <= rs_py_slot_cap || rs_py_grow_slots() == 0) id = rs_py_find(code, line, &slot);
    else id = UINT32_MAX;
    pthread_mutex_unlock(&rs_py_mu);
    if (id) return id == UINT32_MAX ? 0 : id;
    char *function = gil ? rs_py_string(code, "co_name") : rs_py_raw_string(rs_py_word(code, rs_pyl.co_name));
    char *file = gil ? rs_py_string(code, "co_filename") : rs_py_raw_string(rs_py_word(code, rs_pyl.co_filename));
    pthread_mutex_lock(&rs_py_mu);
    if (!function || !file) goto out;
    if ((rs_py_count + 1) * 2 > rs_py_slot_cap && rs_py_grow_slots() != 0) goto out;
    if ((id = rs_py_find(code, line, &slot)) != 0) goto out; /* made meanwhile */
    if (rs_py_count == rs_py_entries_cap) {
        uint32_t cap = rs_py_entries_cap ? rs_py_entries_cap * 2 : 256;
        rs_py_entry *v = realloc(rs_py_entries, cap * sizeof *v);
        if (!v) goto out;
        rs_py_entries = v;
        rs_py_entries_cap = cap;
    }
    if (gil) rs_py.incref(code); /* its address names it from now on */
    rs_py_entries[rs_py_count] = (rs_py_entry){code, line, function, file};
    function = file = NULL;
    id = ++rs_py_count;
    rs_py_slots[slot] = id;
out:
    pthread_mutex_unlock(&rs_py_mu);
    free(function);
    free(file);
    return id;
}

/* ---- the two walks ------------------------------------------------------------------------- */

/* GIL held: the calling thread's frames through the C API, innermost first: code objects (no
 * reference kept) and lines. */
static int rs_py_api_walk(void **codes, int *lines, int depth)
{
    int collecting = rs_py.gc_disable();
    void *f = rs_py.get_frame();
    if (f) rs_py.incref(f);
    int n = 0;
    while (f && n < depth) {
        void *code = rs_py.frame_code(f);
        if (code) {
            codes[n] = code;
            lines[n++] = rs_py.frame_line(f);
            rs_py.decref(code); /* the frame keeps it */
        }
        void *back = rs_py.frame_back(f);
        rs_py.decref(f);
        f = back;
    }
    if (f) rs_py.decref(f);
    if (collecting) rs_py.gc_enable();
    return n;
}

/* The interpreter frames of thread state `ts`, read as memory (rs_pyl found), innermost first;
 * shim frames and frames not started yet left out, as the C API leaves them. */
static int rs_py_raw_walk(void *ts, void **codes, int *lines, int depth)
{
    const char *f = rs_py_word(ts, rs_pyl.tstate_frame);
    if (rs_pyl.via_cframe && f) f = rs_py_word(f, rs_pyl.cframe_current);
    int n = 0;
    for (int hops = 0; f && n < depth && hops < RS_PY_WALK_MAX; hops++, f = rs_py_word(f, rs_pyl.previous)) {
        char *code = rs_py_word(f, rs_pyl.code);
        if (f[rs_pyl.owner] == rs_pyl.cstack_owner || !code || rs_py_word(code, RS_PY_OBJ_TYPE) != rs_py.code_type)
            continue;
        const char *instr = rs_py_word(f, rs_pyl.instr);
        long units = (instr - (code + rs_pyl.code_start)) / 2;
        if (units < 0 || units > INT32_MAX / 2) continue;
        codes[n] = code;
        lines[n++] = rs_py.addr2line(code, (int)units * 2);
    }
    return n;
}

/* The bounds of the calling thread's stack, where a word that points into them can be read. */
static int rs_py_own_stack(uintptr_t *lo, uintptr_t *hi)
{
    pthread_attr_t a;
    void *addr;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &a) != 0) return -1;
    int rc = pthread_attr_getstack(&a, &addr, &size);
    pthread_attr_destroy(&a);
    if (rc != 0) return -1;
    *lo = (uintptr_t)__builtin_frame_address(0);
    *hi = (uintptr_t)addr + size;
    return 0;
}

/* The offset of the first pointer-sized word equal to `want` in the first `limit` bytes of
 * `base`, or (size_t)-1. */
static size_t rs_py_find_word(const void *base, size_t limit, const void *want)
{
    for (size_t off = 0; off + sizeof(void *) <= limit; off += sizeof(void *))
        if (rs_py_word(base, off) == want) return off;
    return (size_t)-1;
}

/* GIL held, on the calling thread: rs_pyl found and checked, or why not. */
static int rs_py_find_layout(char *why, size_t n)
{
    if (!rs_py.version || !rs_py.code_type || !rs_py.unicode_type || !rs_py.tstate_get ||
        !rs_py.tstate_this || !rs_py.addr2line) {
        snprintf(why, n, "this Python (before 3.11) lacks a call the walk needs");
        return -1;
    }
    unsigned major = (unsigned)(*rs_py.version >> 24), minor = (unsigned)(*rs_py.version >> 16) & 0xff;
    const rs_py_layout *known = NULL;
    for (size_t i = 0; i < sizeof rs_py_layouts / sizeof rs_py_layouts[0]; i++)
        if (major == 3 && rs_py_layouts[i].minor == minor) known = &rs_py_layouts[i];
    if (!known) {
        snprintf(why, n, "Python %u.%u's frames are not among those read without the GIL (3.11 to 3.13)",
                 major, minor);
        return -1;
    }
    rs_py_layout L = *known;
    void *ts = rs_py.tstate_get(), *fobj = rs_py.get_frame();
    if (!ts || !fobj || ts != rs_py.tstate_this()) {
        snprintf(why, n, "no Python frame or thread state at the check");
        return -1;
    }
    const void *top = rs_py_word(fobj, RS_PY_FRAMEOBJ_FRAME);
    L.tstate_frame = (size_t)-1;
    if (!L.via_cframe) {
        L.tstate_frame = rs_py_find_word(ts, RS_PY_SCAN_TSTATE, top);
    } else {
        /* the current _PyCFrame lives on this thread's stack, in the interpreter's loop that
         * called here: only a word pointing there is followed */
        uintptr_t lo, hi;
        if (rs_py_own_stack(&lo, &hi) == 0)
            for (size_t off = 0; off + sizeof(void *) <= RS_PY_SCAN_TSTATE && L.tstate_frame == (size_t)-1; off += sizeof(void *)) {
                uintptr_t w = (uintptr_t)rs_py_word(ts, off);
                if (w >= lo && w + L.cframe_current + sizeof(void *) <= hi &&
                    rs_py_word((const void *)w, L.cframe_current) == top)
                    L.tstate_frame = off;
            }
    }
    memcpy(&L.code_start, (const char *)rs_py.code_type + RS_PY_TYPE_BASICSIZE, sizeof L.code_start);
    void *code = rs_py.frame_code(fobj);
    void *name = code ? rs_py.getattr(code, "co_name") : NULL;
    void *file = code ? rs_py.getattr(code, "co_filename") : NULL;
    const char *text = file ? rs_py.utf8(file) : NULL;
    size_t limit = L.code_start < RS_PY_SCAN ? L.code_start : RS_PY_SCAN;
    L.co_name = name ? rs_py_find_word(code, limit, name) : (size_t)-1;
    L.co_filename = file ? rs_py_find_word(code, limit, file) : (size_t)-1;
    L.str_data = text ? (size_t)(text - (const char *)file) : (size_t)-1;
    if (!name || !file || !text) rs_py.err_clear();
    if (name) rs_py.decref(name);
    if (file) rs_py.decref(file);
    if (code) rs_py.decref(code);
    if (L.tstate_frame == (size_t)-1 || L.co_name == (size_t)-1 || L.co_filename == (size_t)-1 ||
        L.str_data > 64) {
        snprintf(why, n, "Python %u.%u: its thread state, code objects or strings are not laid out as expected",
                 major, minor);
        return -1;
    }
    rs_pyl = L;
    return 0;
}

/* GIL held: whether the walk read as memory gives, on this thread, exactly what the C API
 * gives: the same code objects, lines and names, frame for frame. */
static int rs_py_same_walks(char *why, size_t n)
{
    void *a[64], *b[64];
    int la[64], lb[64];
    int na = rs_py_api_walk(a, la, 64), nb = rs_py_raw_walk(rs_py.tstate_this(), b, lb, 64);
    int same = na > 0 && na == nb;
    for (int i = 0; same && i < na; i++) {
        same = a[i] == b[i] && la[i] == lb[i];
        char *fa = rs_py_string(a[i], "co_name"), *fb = rs_py_raw_string(rs_py_word(b[i], rs_pyl.co_name));
        char *pa = rs_py_string(a[i], "co_filename"), *pb = rs_py_raw_string(rs_py_word(b[i], rs_pyl.co_filename));
        /* a name that is not ASCII reads "??" either way round only through the API's copy */
        same = same && fa && fb && pa && pb && (!strcmp(fa, fb) || !strcmp(fb, "??")) &&
               (!strcmp(pa, pb) || !strcmp(pb, "??"));
        free(fa), free(fb), free(pa), free(pb);
    }
    if (!same) snprintf(why, n, "the frames read as memory differ from the interpreter's (%d and %d frames)", nb, na);
    return same;
}

int rs_pyframes_calibrate(char *why, size_t n)
{
    pthread_once(&rs_py_once, rs_py_load);
    if (atomic_load_explicit(&rs_pyl_ok, memory_order_acquire)) return 0;
    if (!rs_py_ok || !rs_py.is_initialized()) {
        snprintf(why, n, "no Python interpreter with the C API the walk needs (3.10 or later)");
        return -1;
    }
    if (!rs_py.gil_check()) {
        snprintf(why, n, "the check ran on a thread without the GIL");
        return -1;
    }
    if (rs_py_find_layout(why, n) != 0 || !rs_py_same_walks(why, n)) return -1;
    atomic_store_explicit(&rs_pyl_ok, 1, memory_order_release);
    return 0;
}

/* ---- capture and lookup -------------------------------------------------------------------- */

/* A Python stack deeper than the depth asked keeps its outermost frames too: a model's line runs
 * under dozens of the framework's frames (a module's call is two), and the script's own line,
 * the one the report shows above a model library's, is near the bottom. */
#define RS_PY_WALK_FRAMES 256
static int rs_py_outer_kept(int depth)
{
    return depth >= 8 ? 4 : depth / 2;
}

/* The entries of frames codes[0..n) (innermost first) in pcs, at most `depth` of them: of more,
 * the innermost and the outermost few (rs_py_outer_kept); how many. */
static int rs_py_entries_of(void *const *codes, const int *lines, int n, int depth, int gil, uintptr_t *pcs)
{
    int outer = n > depth ? rs_py_outer_kept(depth) : 0, out = 0;
    for (int i = 0; i < n && out < depth; i++) {
        if (outer && i == depth - outer) i = n - outer; /* the middle left out */
        uint32_t id = codes[i] ? rs_py_intern(codes[i], lines[i], gil) : 0;
        if (id) pcs[out++] = (uintptr_t)(RS_PY_TAG | id);
    }
    return out;
}

int rs_pyframes_capture(uintptr_t *pcs, int depth)
{
    pthread_once(&rs_py_once, rs_py_load);
    if (!rs_py_ok || !pcs || depth <= 0 || !rs_py.is_initialized()) return 0;
    void *codes[RS_PY_WALK_FRAMES];
    int lines[RS_PY_WALK_FRAMES], n = 0, gil = rs_py.gil_check();
    if (depth > RS_PY_DEPTH_MAX) depth = RS_PY_DEPTH_MAX;
    if (gil) {
        n = rs_py_api_walk(codes, lines, RS_PY_WALK_FRAMES);
    } else if (atomic_load_explicit(&rs_pyl_ok, memory_order_acquire)) {
        void *ts = rs_py.tstate_this();
        if (ts) n = rs_py_raw_walk(ts, codes, lines, RS_PY_WALK_FRAMES);
    }
    return rs_py_entries_of(codes, lines, n, depth, gil, pcs);
}

int rs_pyframes_intern(const uintptr_t *codes, const int *lines, int n, int depth, uintptr_t *pcs)
{
    pthread_once(&rs_py_once, rs_py_load);
    if (!rs_py_ok || !rs_py.is_initialized() || !rs_py.gil_check()) return -1;
    if (depth > RS_PY_DEPTH_MAX) depth = RS_PY_DEPTH_MAX;
    void *objs[RS_PY_WALK_FRAMES];
    if (n > RS_PY_WALK_FRAMES) n = RS_PY_WALK_FRAMES; /* the innermost */
    for (int i = 0; i < n; i++) objs[i] = (void *)codes[i];
    return depth > 0 ? rs_py_entries_of(objs, lines, n, depth, 1, pcs) : 0;
}

int rs_pyframes_is(uint64_t pc)
{
    return (pc & RS_PY_TAG_MASK) == RS_PY_TAG;
}

int rs_pyframes_lookup(uint64_t pc, const char **function, const char **file, int *line)
{
    if (!rs_pyframes_is(pc)) return 0;
    uint64_t id = pc & UINT64_C(0xffffffff);
    int ok = 0;
    pthread_mutex_lock(&rs_py_mu);
    if (id >= 1 && id <= rs_py_count) {
        const rs_py_entry *e = &rs_py_entries[id - 1];
        *function = e->function;
        *file = e->file;
        *line = e->line;
        ok = 1;
    }
    pthread_mutex_unlock(&rs_py_mu);
    return ok;
}
