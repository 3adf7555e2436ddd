/*
 * pyframes.c — Python frames of the allocating thread (pyframes.h), for a PyTorch rank that
 * ranksnap records itself (PyTorch's cudaMallocAsync backend has no recorder): the native stack of
 * such an allocation is libtorch's all the way up, and its line of the script is a Python frame.
 *
 * The interpreter's C API is found in the process with dlsym (the python executable exports it,
 * or libpython does; Python 3.10 or later), once, and only used where a Python interpreter is
 * running: nothing of this file runs for a C program, whose stacks are native. The walk makes
 * frame objects (Python 3.11 and later make them on demand), and an allocation of the collector's
 * could run a finalizer that frees a tensor: into the framework's allocator, whose lock the
 * allocating thread holds. The collector is off for the walk. A thread is walked only while it holds the
 * GIL (PyGILState_Check): the frames of a thread that released it may change under another thread,
 * and taking the GIL here could deadlock against a thread that holds it and waits for a lock the
 * allocating thread holds (PyTorch's allocator's own). A thread without the GIL gets its native
 * stack instead (stacks.c).
 *
 * Each distinct (code object, line) is numbered on first sight, with its code object's name and
 * file copied then: the dump, which may run on a thread without the GIL (a fatal signal's), reads
 * the copies only. The code object is kept alive (one reference each, never dropped) so that its
 * address names it for the life of the process. The table is guarded by a mutex of its own: the
 * GIL already serialises the captures, but the dump reads it on any thread.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pyframes.h"

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

/* The number of (code, line), made on first sight; 0 when the table cannot grow. GIL held. The
 * names are read from the interpreter outside the mutex, which a call into Python must not hold
 * (it could come back here). */
static uint32_t rs_py_intern(void *code, int line)
{
    uint32_t slot = 0, id = 0;
    pthread_mutex_lock(&rs_py_mu);
    if ((rs_py_count + 1) * 2 <= rs_py_slot_cap || rs_py_grow_slots() == 0) id = rs_py_find(code, line, &slot);
    else id = UINT32_MAX;
    pthread_mutex_unlock(&rs_py_mu);
    if (id) return id == UINT32_MAX ? 0 : id;
    char *function = rs_py_string(code, "co_name"), *file = rs_py_string(code, "co_filename");
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
    rs_py.incref(code); /* its address names it from now on */
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

/* ---- capture and lookup -------------------------------------------------------------------- */

int rs_pyframes_capture(uintptr_t *pcs, int depth)
{
    pthread_once(&rs_py_once, rs_py_load);
    if (!rs_py_ok || !pcs || depth <= 0 || !rs_py.is_initialized() || !rs_py.gil_check()) return 0;
    int collecting = rs_py.gc_disable();
    void *f = rs_py.get_frame();
    if (f) rs_py.incref(f);
    int n = 0;
    while (f && n < depth) {
        void *code = rs_py.frame_code(f);
        if (code) {
            uint32_t id = rs_py_intern(code, rs_py.frame_line(f));
            rs_py.decref(code);
            if (id) pcs[n++] = (uintptr_t)(RS_PY_TAG | id);
        }
        void *back = rs_py.frame_back(f);
        rs_py.decref(f);
        f = back;
    }
    if (f) rs_py.decref(f);
    if (collecting) rs_py.gc_enable();
    return n;
}

int rs_pyframes_intern(const uintptr_t *codes, const int *lines, int n, uintptr_t *pcs)
{
    pthread_once(&rs_py_once, rs_py_load);
    if (!rs_py_ok || !rs_py.is_initialized() || !rs_py.gil_check()) return -1;
    int k = 0;
    for (int i = 0; i < n; i++) {
        uint32_t id = codes[i] ? rs_py_intern((void *)codes[i], lines[i]) : 0;
        if (id) pcs[k++] = (uintptr_t)(RS_PY_TAG | id);
    }
    return k;
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
