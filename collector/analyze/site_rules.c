/*
 * site_rules.c — site_rules.h: what each frame of a stack is, and whether it may be a site.
 *
 * Frames come from two kinds of stack. A native stack (.rsnap, .ring) has C/C++ frames with a
 * module, a symbol (mangled when the binary is C++) and, with debug info, a file and line.
 * PyTorch's `stacks="all"` interleaves its own symbolizer's C++ frames (names demangled, file
 * "??", "" or a base name such as RegisterCUDA_0.cpp, line 0; or, in dladdr mode, the library's
 * path) with Python frames (the file as imported, a line > 0); `stacks="python"` has only the
 * latter. A frame is Python when its file is a .py file or a <...> pseudo-file.
 *
 * The default lists below name what is never the user's line. They are patterns, so that a
 * reader can check one against a frame by eye, and the user's RANKSNAP_SITE_SKIP patterns are
 * matched the same way, against the same three strings (function, file, module). Python files of
 * installed packages other than torch (transformers, ...) are not skipped: a model's own Python
 * code is a line worth naming, and the report shows the user's line above it (sites.c, "paths").
 */
#include <fnmatch.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "errors.h"
#include "frame_memo.h"
#include "log.h"
#include "options.h"
#include "site_rules.h"
#include "text.h"

/* ---- the default lists ------------------------------------------------------------------------ */

/* Native functions, matched against the qualified name (demangled, without return type and
 * arguments) and the name as recorded. */
static const char *const skip_functions[] = {
    /* PyTorch's C++: stack capture, caching allocator, dispatcher and kernels, autograd engine,
     * Python bindings */
    "torch::*", "c10::*", "c10d::*", "at::*", "caffe2::*", "pybind11::*", "THP*",
    /* the C++ standard library and ABI */
    "std::*", "__gnu_cxx::*", "__cxxabiv1::*",
    /* the Python interpreter (C API and the static functions of its evaluation loop) */
    "_Py*", "Py[A-Z_]*", "pymain_*", "method_vectorcall*", "cfunction_*", "slot_tp_*",
    "vectorcall_*", "object_vacall", "wrapper_call", "call_function",
    /* the CUDA runtime and driver, NCCL, and the CUDA libraries that allocate for the caller */
    "cuda[A-Z]*", "cu[A-Z]*", "__cudart*", "cudart::*", "libcudart_static_*", "cublas*", "cudnn*",
    "cufft*", "curand*",
    "cusparse*", "cusolver*", "nvrtc*", "nccl[A-Z]*", "pnccl*", "thrust::*", "cub::*",
    /* the C library, threads, the dynamic loader */
    "_start", "__libc_*", "__clone*", "clone3", "start_thread", "pthread_*", "_dl_*", "__GI_*",
    /* what PyTorch's unwinder writes for an address outside every library */
    "<unwind unsupported>",
};

/* Shared objects, matched against a native frame's module path, and against its file when the
 * file is a library's path (PyTorch's dladdr mode). */
static const char *const skip_modules[] = {
    "*libcudart*", "*libcuda.so*", "*libnccl*", "*libcublas*", "*libcudnn*", "*libcufft*",
    "*libcurand*", "*libcusparse*", "*libcusolver*", "*libnvrtc*", "*libnvJitLink*",
    "*libnvToolsExt*", "*/bin/python*", "*libtorch*", "*libc10*", "*libshm*", "*libcaffe2*", "*/torch/_C.*",
    "*/torch/lib/*", "*libtriton*", "*libgomp*", "*libpython*", "*libstdc++*", "*libc++*",
    "*libgcc_s*", "*/libc.so*", "*/libc-*", "*libpthread*", "*/ld-linux*", "*/libdl.so*",
};

/* Native source files: PyTorch's (as its symbolizer writes them: base names or source paths) and
 * the interpreter's and the C library's. */
static const char *const skip_native_files[] = {
    "*/c10/*", "*/aten/src/*", "*/torch/csrc/*", "*/caffe2/*", "CUDACachingAllocator.cpp",
    "memory_snapshot.cpp", "Register*.cpp", "VariableType*.cpp", "python_*.cpp",
    "Functions.cpp", "*Objects/*.c", "*Python/*.c", "*Modules/*.c", "*Programs/*.c",
    "*/nptl/*", "*/csu/*", "*/sysdeps/*",
};

/* Python: torch's own Python (nn.Module's call plumbing, functional, optimizers, autograd) and
 * its compilers'. In an installed package (site-packages, dist-packages) the package's name
 * decides, so that a virtual environment under a folder named "torch" is not all PyTorch's;
 * elsewhere (a source checkout) the path does, as do generated code and frozen modules. The
 * standard library in a lib/python3.X folder is recognised in code (python_library). */
static const char *const skip_python_packages[] = {"torch", "functorch", "triton"};
static const char *const skip_python_files[] = {
    /* a checkout of PyTorch's sources: its package's folders and top-level modules, not every
     * path with a folder named torch in it */
    "*/torch/nn/*", "*/torch/optim/*", "*/torch/autograd/*", "*/torch/_*", "*/torch/utils/*",
    "*/torch/cuda/*", "*/torch/distributed/*", "*/torch/amp/*", "*/torch/fx/*", "*/torch/jit/*",
    "*/torch/export/*", "*/torch/compiler/*", "*/torch/functional.py", "*/torch/overrides.py",
    "*/torch/serialization.py", "*/torch/__init__.py", "*/torch/random.py", "*/torch/storage.py",
    "*/torch/library.py", "*/functorch/*", "*/triton/*", "<frozen *", "<eval_with_key>*",
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the process's rules ---------------------------------------------------------------------- */

static struct {
    char buf[RS_SITE_SKIP_MAX_PATTERNS * RS_SITE_SKIP_PATTERN_LEN];
    const char *pattern[RS_SITE_SKIP_MAX_PATTERNS];
    size_t n;
    int all_frames;
} rules;
static pthread_once_t rules_once = PTHREAD_ONCE_INIT;
/* Which rules the threads' remembered classifications were made under (frame_memo.h), and
 * whether they are remembered at all (rs_site_rules_remember). */
static atomic_uint rules_gen;
static atomic_int remember;

/* Splits `list` at commas into rules.pattern (blanks around a pattern dropped, empty ones
 * skipped); -1 when a pattern is too long or there are too many. */
static int parse_patterns(const char *list)
{
    size_t n = 0, used = 0;
    for (const char *p = list ? list : ""; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        if (!*p) break;
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
        if (len >= RS_SITE_SKIP_PATTERN_LEN || n == RS_SITE_SKIP_MAX_PATTERNS) return -1;
        memcpy(rules.buf + used, p, len);
        rules.buf[used + len] = '\0';
        rules.pattern[n++] = rules.buf + used;
        used += len + 1;
        p += len;
        while (*p && *p != ',') p++;
    }
    rules.n = n;
    return 0;
}

static void rules_from_environment(void)
{
    rs_options o;
    if (rs_options_load_one(&o, "RANKSNAP_SITE_SKIP", NULL) != RANKSNAP_OK) {
        RS_WARN(RS_SUB_ALL, "RANKSNAP_SITE_SKIP is ignored: %s", ranksnap_last_error());
        return;
    }
    if (parse_patterns(o.site_skip) != 0) {
        rules.n = 0;
        RS_WARN(RS_SUB_ALL, "RANKSNAP_SITE_SKIP is ignored: expected at most %d comma-separated "
                            "patterns of fewer than %d bytes each",
                RS_SITE_SKIP_MAX_PATTERNS, RS_SITE_SKIP_PATTERN_LEN);
    }
}

ranksnap_status rs_site_rules_set(const char *skip, int all_frames)
{
    /* The environment's value first, so that an explicit setting is never overwritten by it. */
    pthread_once(&rules_once, rules_from_environment);
    atomic_fetch_add(&rules_gen, 1);
    rules.all_frames = all_frames != 0;
    if (!skip) return RANKSNAP_OK;
    if (parse_patterns(skip) != 0) {
        rules.n = 0;
        return rs_error(RANKSNAP_ERR_OPTION,
                        "'%s': expected at most %d comma-separated patterns of fewer than %d "
                        "bytes each",
                        skip, RS_SITE_SKIP_MAX_PATTERNS, RS_SITE_SKIP_PATTERN_LEN);
    }
    return RANKSNAP_OK;
}

void rs_site_rules_remember(int on)
{
    atomic_store(&remember, on != 0);
}

int rs_site_rules_all_frames(void)
{
    pthread_once(&rules_once, rules_from_environment);
    return rules.all_frames;
}

/* ---- matching ----------------------------------------------------------------------------------- */

static int match_any(const char *const *patterns, size_t n, const char *text)
{
    if (!text || !*text) return 0;
    for (size_t i = 0; i < n; i++)
        if (fnmatch(patterns[i], text, FNM_NOESCAPE) == 0) return 1;
    return 0;
}

int rs_site_rules_is_ranksnaps(const rs_snap *s, const rs_snap_frame *f)
{
    /* __wrap_cudaMalloc & co. are ranksnap's too, though linked into the program (ranksnap::wrap) */
    if (strncmp(f->function, "ranksnap_", 9) == 0 || strncmp(f->function, "rs_", 3) == 0 ||
        strncmp(f->function, "__wrap_cuda", 11) == 0)
        return 1;
    if (f->module >= 0 && (size_t)f->module < s->n_modules &&
        strstr(s->modules[f->module].path, "libranksnap"))
        return 1;
    return 0;
}

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

static int is_python_file(const char *file)
{
    return ends_with(file, ".py") || ends_with(file, ".pyw") || file[0] == '<';
}

static int installed_package(const char *file)
{
    return strstr(file, "site-packages") || strstr(file, "dist-packages");
}

/* The path inside the last site-packages / dist-packages folder of `file`, NULL when none. */
static const char *inside_packages(const char *file)
{
    const char *in = NULL;
    for (const char *p = file; (p = strstr(p, "-packages")) != NULL; p += 9)
        if ((p[9] == '/' || p[9] == '\\') && p > file &&
            (strncmp(p - 4, "site", 4) == 0 || strncmp(p - 4, "dist", 4) == 0))
            in = p + 10;
    return in;
}

static int framework_python(const char *file)
{
    const char *in = inside_packages(file);
    if (!in) return match_any(skip_python_files, COUNT(skip_python_files), file);
    for (size_t i = 0; i < COUNT(skip_python_packages); i++) {
        size_t n = strlen(skip_python_packages[i]);
        if (strncmp(in, skip_python_packages[i], n) == 0 && (in[n] == '/' || in[n] == '\\'))
            return 1;
    }
    return 0;
}

/* The last part of a path (a path ending in a separator: from that separator's part on). */
static const char *base_name(const char *file)
{
    const char *base = file;
    for (const char *p = file; *p; p++)
        if ((*p == '/' || *p == '\\') && p[1]) base = p + 1;
    return base;
}

/* A wrapper torch.compile generated (Inductor's cache, TORCHINDUCTOR_CACHE_DIR or
 * /tmp/torchinductor_USER/xx/): its file is named by a code hash, "c" and 51 characters of
 * lower-case base32, and matched by that name, wherever the cache is. The glue puts the model's
 * lines it was compiled from in front of it (docs/PYTORCH.md, "Compiled models"); as a candidate
 * it would stand for the user's line above a model's in an installed package. */
static int inductor_generated(const char *file)
{
    const char *base = base_name(file);
    if (strlen(base) != 52 + 3 || strcmp(base + 52, ".py") != 0 || base[0] != 'c') return 0;
    for (int i = 1; i < 52; i++)
        if (!((base[i] >= 'a' && base[i] <= 'z') || (base[i] >= '2' && base[i] <= '7'))) return 0;
    return 1;
}

/* The standard library: lib/python3.X/ (Windows: Lib\) outside its site-packages. */
static int python_library(const char *file)
{
    if (installed_package(file)) return 0;
    return strstr(file, "lib/python3") || strstr(file, "lib64/python3") || strstr(file, "\\Lib\\") ||
           strstr(file, "/Lib/");
}

const char *rs_site_rules_display_file(const char *file)
{
    const char *in = inside_packages(file);
    if (in && *in) return in;
    return base_name(file);
}

/* ---- labels: the autograd node or the operator a framework frame stands for ------------------ */

static int ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* "torch::autograd::generated::AddmmBackward0::apply", "...::AddmmBackward0_apply_functional",
 * "torch::autograd::CopyBackwards::apply": the node's class. */
static char *node_label(const char *q)
{
    if (strncmp(q, "torch::autograd::", 17) != 0) return NULL;
    size_t len = strlen(q), end;
    if (ends_with(q, "::apply"))
        end = len - 7;
    else if (ends_with(q, "_apply_functional"))
        end = len - 17;
    else
        return NULL;
    size_t start = end;
    while (start > 0 && ident_char(q[start - 1])) start--;
    if (start == end || start < 2 || q[start - 1] != ':') return NULL;
    /* the engine's own apply (Node::operator() calls it) is no node of the user's graph */
    if (end - start == 4 && strncmp(q + start, "Node", 4) == 0) return NULL;
    char *out = malloc(end - start + 1);
    if (!out) return NULL;
    memcpy(out, q + start, end - start);
    out[end - start] = '\0';
    return out;
}

/* Overload names of PyTorch's operators that are written in lower case (the others start with a
 * capital: add_Tensor, div_Scalar, sum_dim_IntList). */
static const char *const lower_overloads[] = {"_memory_format", "_dtype_layout", "_dtype", "_dim",
                                              "_out", "_int", "_self", "_names", "_using_ints"};

/* "at::_ops::addmm::call" -> "aten::addmm"; the overload name is left out, as the profiler names
 * operators: from the first part that starts with a capital, then one of lower_overloads. at::_ops joins
 * name and overload with '_', so this is a best guess ("aten::sum" for sum_dim_IntList). */
static char *op_label(const char *q)
{
    if (strncmp(q, "at::_ops::", 10) != 0) return NULL;
    const char *name = q + 10, *sep = strstr(name, "::");
    if (!sep || (strcmp(sep, "::call") != 0 && strcmp(sep, "::redispatch") != 0)) return NULL;
    size_t len = (size_t)(sep - name);
    /* operator names are lower case: the first part that starts with a capital begins the
     * overload (pow_Tensor_Scalar, where_ScalarOther) */
    for (size_t i = 1; i < len; i++)
        if (name[i - 1] == '_' && name[i] >= 'A' && name[i] <= 'Z') {
            len = i - 1;
            break;
        }
    for (size_t k = 0; k < COUNT(lower_overloads); k++) {
        size_t w = strlen(lower_overloads[k]);
        if (len > w && strncmp(name + len - w, lower_overloads[k], w) == 0) {
            len -= w;
            break;
        }
    }
    if (len == 0) return NULL;
    char *out = malloc(len + 7);
    if (!out) return NULL;
    memcpy(out, "aten::", 6);
    memcpy(out + 6, name, len);
    out[len + 6] = '\0';
    return out;
}

/* ---- classification ----------------------------------------------------------------------------- */

static int user_skips(const char *name, const char *qualified, const char *file, const char *module)
{
    return match_any(rules.pattern, rules.n, name) || match_any(rules.pattern, rules.n, qualified) ||
           match_any(rules.pattern, rules.n, file) || match_any(rules.pattern, rules.n, module);
}

/* What a frame is from what it says: its function, file, module path ("" when none) and
 * whether it has a line — frame_memo.h's key, which must name everything read here. */
static void classify(const rs_snap *s, const rs_snap_frame *f, const char *module,
                     rs_site_rules_frame *out)
{
    memset(out, 0, sizeof *out);
    out->python = f->module < 0 && is_python_file(f->file);
    out->installed = out->python && installed_package(f->file);
    if (rs_site_rules_is_ranksnaps(s, f)) {
        out->kind = RS_SITE_FRAME_OWN;
        return;
    }
    if (out->python) {
        int skip = framework_python(f->file) || python_library(f->file) ||
                   inductor_generated(f->file) || user_skips(f->function, NULL, f->file, NULL);
        out->kind = skip ? RS_SITE_FRAME_SKIPPED : RS_SITE_FRAME_PYTHON;
        return;
    }
    out->name = rs_demangle(f->function);
    const char *name = out->name ? out->name : f->function;
    char qualified[512];
    rs_demangle_qualified(name, qualified, sizeof qualified);
    out->label = node_label(qualified);
    if (out->label) {
        out->label_kind = RS_SITE_LABEL_NODE;
    } else if ((out->label = op_label(qualified)) != NULL) {
        out->label_kind = RS_SITE_LABEL_OP;
    }
    int skip = match_any(skip_functions, COUNT(skip_functions), qualified) ||
               match_any(skip_functions, COUNT(skip_functions), name) ||
               match_any(skip_modules, COUNT(skip_modules), module) ||
               (strstr(f->file, ".so") && match_any(skip_modules, COUNT(skip_modules), f->file)) ||
               match_any(skip_native_files, COUNT(skip_native_files), f->file) ||
               user_skips(name, qualified, f->file, module);
    /* Without a module (PyTorch's frames), a C/C++ frame is the user's only with a source line:
     * PyTorch's symbolizer gives line 0 to everything of its release wheels, of the interpreter
     * and of the C++ runtime (execute_native_thread_routine in thread48.o, the nearest exported
     * symbols of stripped libraries), and an unresolved frame says nothing at all. */
    if (f->module < 0 && (f->line <= 0 || strcmp(f->function, "??") == 0)) skip = 1;
    out->kind = skip ? RS_SITE_FRAME_SKIPPED : RS_SITE_FRAME_NATIVE;
}

void rs_site_rules_classify(const rs_snap *s, uint32_t frame, rs_site_rules_frame *out)
{
    pthread_once(&rules_once, rules_from_environment);
    const rs_snap_frame *f = &s->frames[frame];
    const char *module = f->module >= 0 && (size_t)f->module < s->n_modules
                             ? s->modules[f->module].path
                             : "";
    if (!atomic_load_explicit(&remember, memory_order_relaxed)) {
        classify(s, f, module, out);
        return;
    }
    rs_frame_memo_key k;
    rs_frame_memo_key_init(&k, f->function, f->file, module, f->module < 0, f->line > 0,
                           rs_snap_frame_text_hash_of(f));
    unsigned gen = atomic_load(&rules_gen);
    if (rs_frame_memo_get(gen, &k, out)) return;
    classify(s, f, module, out);
    rs_frame_memo_put(gen, &k, out);
}

void rs_site_rules_frame_free(rs_site_rules_frame *info)
{
    free(info->name);
    free(info->label);
    info->name = info->label = NULL;
}
