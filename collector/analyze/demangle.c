/*
 * demangle.c — demangle.h: C++ names made readable for the sites and the reports.
 *
 * The demangler is the C++ runtime's own (abi::__cxa_demangle, C symbol __cxa_demangle): a
 * process that ran C++ already has it (every PyTorch process, a C++ program), and otherwise it is
 * loaded once from libstdc++ (or libc++abi) with dlopen, so that ranksnap links no C++. It runs in
 * the reader, once per distinct frame of a snapshot, never on a rank's allocation path. Without a
 * C++ runtime names stay mangled: still correct, only harder to read.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "text.h"

typedef char *(*cxa_demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

static cxa_demangle_fn demangler;
static pthread_once_t demangler_once = PTHREAD_ONCE_INIT;

static void load_demangler(void)
{
    static const char *const runtimes[] = {"libstdc++.so.6", "libc++abi.so.1", "libc++.so.1"};
    void *sym = dlsym(RTLD_DEFAULT, "__cxa_demangle");
    for (size_t i = 0; !sym && i < sizeof runtimes / sizeof runtimes[0]; i++) {
        /* Kept open for the process's life: the function is called again and again. */
        void *lib = dlopen(runtimes[i], RTLD_LAZY | RTLD_LOCAL);
        if (!lib) continue;
        sym = dlsym(lib, "__cxa_demangle");
        if (!sym) dlclose(lib);
    }
    /* dlsym gives a data pointer; POSIX guarantees it converts to the function it names. */
    memcpy(&demangler, &sym, sizeof demangler);
}

int rs_demangle_available(void)
{
    pthread_once(&demangler_once, load_demangler);
    return demangler != NULL;
}

char *rs_demangle(const char *name)
{
    /* Itanium names start with _Z (a few linkers add one more underscore) */
    if (!name || (strncmp(name, "_Z", 2) != 0 && strncmp(name, "__Z", 3) != 0)) return NULL;
    if (!rs_demangle_available()) return NULL;
    int status = -1;
    char *out = demangler(name[1] == '_' ? name + 1 : name, NULL, NULL, &status);
    if (status != 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* ---- the parts of a demangled name ----------------------------------------------------------- */

static const char ANON[] = "(anonymous namespace)";

/* Length of the operator's symbol at p, which follows the word "operator": "()", "[]", "<<=", ...;
 * 0 for a named operator (operator new, a conversion), whose name goes on as ordinary text. */
static size_t operator_symbol(const char *p)
{
    if ((p[0] == '(' && p[1] == ')') || (p[0] == '[' && p[1] == ']')) return 2;
    size_t k = 0;
    while (p[k] && strchr("<>=!+-*/%^&|~,", p[k])) k++;
    return k;
}

static int ident_byte(char c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Where the word "operator" starts at or after `from` (not inside a longer identifier:
 * "cooperator" is none), or SIZE_MAX. */
static size_t next_operator(const char *name, size_t from)
{
    for (const char *p = name + from; (p = strstr(p, "operator")) != NULL; p += 8)
        if (p == name || !ident_byte(p[-1])) return (size_t)(p - name);
    return SIZE_MAX;
}

/* Where the argument list starts (the first '(' outside template arguments that is neither
 * "(anonymous namespace)" nor part of an operator's name), or the end of the string; and the
 * start of the qualified name (after the return type: the last blank outside brackets before it).
 * The scan jumps from one byte that matters ("(<> ") to the next, and to each operator: this runs
 * once per C/C++ frame of every snapshot, on names hundreds of bytes long. */
static void split(const char *name, size_t *start, size_t *args)
{
    size_t angle = 0, i = 0, last_blank = SIZE_MAX, op = next_operator(name, 0);
    for (;;) {
        size_t j = i + strcspn(name + i, "(<> ");
        if (op < j) {
            i = op + 8;
            i += operator_symbol(name + i);
            op = next_operator(name, i);
            continue;
        }
        i = j;
        char c = name[i];
        if (!c) break;
        if (c == '(' && strncmp(name + i, ANON, sizeof ANON - 1) == 0) {
            i += sizeof ANON - 1;
            if (op < i) op = next_operator(name, i);
            continue;
        }
        if (c == '<') angle++;
        if (c == '>' && angle > 0) angle--;
        if (angle == 0 && c == '(') break;
        if (angle == 0 && c == ' ') last_blank = i;
        i++;
    }
    *args = i;
    *start = last_blank == SIZE_MAX ? 0 : last_blank + 1;
}

static void copy_range(char *out, size_t n, const char *p, size_t len)
{
    if (len >= n) len = n - 1;
    memcpy(out, p, len);
    out[len] = '\0';
}

void rs_demangle_qualified(const char *name, char *out, size_t n)
{
    size_t start, args;
    split(name, &start, &args);
    copy_range(out, n, name + start, args - start);
}

/* `name` with each template argument list at depth 0 written "<...>". */
static void without_template_args(const char *name, char *out, size_t n)
{
    size_t o = 0, angle = 0;
    for (size_t i = 0; name[i] && o + 1 < n; i++) {
        if (name[i] == 'o' && strncmp(name + i, "operator", 8) == 0 && angle == 0) {
            size_t k = 8 + operator_symbol(name + i + 8);
            for (size_t j = 0; j < k && o + 1 < n; j++) out[o++] = name[i + j];
            i += k - 1;
            continue;
        }
        char c = name[i];
        if (c == '<') {
            if (angle++ == 0)
                for (const char *t = "<...>"; *t && o + 1 < n; t++) out[o++] = *t;
            continue;
        }
        if (c == '>' && angle > 0) {
            angle--;
            continue;
        }
        if (angle == 0) out[o++] = c;
    }
    out[o] = '\0';
}

void rs_demangle_short(const char *name, char *out, size_t n)
{
    if (strlen(name) < n) {
        copy_range(out, n, name, strlen(name));
        return;
    }
    size_t start, args;
    split(name, &start, &args);
    char buf[1024];
    size_t len = args - start < sizeof buf - 8 ? args - start : sizeof buf - 8;
    memcpy(buf, name + start, len);
    if (name[args] == '(') {
        memcpy(buf + len, "(...)", 5);
        len += 5;
    }
    buf[len] = '\0';
    if (len < n) {
        copy_range(out, n, buf, len);
        return;
    }
    char shorter[1024];
    without_template_args(buf, shorter, sizeof shorter);
    rs_text_copy_head(out, n, shorter);
}
