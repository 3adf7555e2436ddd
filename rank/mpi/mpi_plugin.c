/*
 * mpi_plugin.c — finding, opening and taking the MPI plugin (mpi_plugin.h).
 *
 * The one file of libranksnap.so that opens anything of MPI's. A plugin is taken only when it
 * is of this build (RS_MPI_ABI) and of the family of the MPI the process has: a plugin of the
 * other family would pass a communicator of the wrong size to every PMPI call. When the process
 * has no MPI library yet (a Python program that ranksnap joins to mpirun's world), the library
 * of the plugin's family is opened first, into the global scope, so that the plugin's PMPI_*
 * calls find it, as they find a program's own; one loaded by a module in a scope of its own
 * (mpi4py) is made global the same way.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "launcher.h"
#include "log.h"
#include "mpi_plugin.h"
#include "options.h"

#define RS_MP_ENTRY "ranksnap_mpi_plugin"

typedef const rs_mpi_ops *(*rs_mp_entry_fn)(void);
typedef int (*rs_mp_version_fn)(char *version, int *len);

static pthread_once_t rs_mp_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t rs_mp_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(const rs_mpi_ops *) rs_mp_ops;
static const rs_mpi_host *rs_mp_host; /* guarded by rs_mp_mu */

const char *rs_mpi_plugin_family_of(const char *v)
{
    if (!v) return NULL;
    if (strstr(v, "Open MPI") || strstr(v, "Spectrum MPI")) return "openmpi";
    if (strstr(v, "MPICH") || strstr(v, "Intel(R) MPI") || strstr(v, "MVAPICH")) return "mpich";
    return NULL;
}

static const char *rs_mp_family_name(const char *family)
{
    return !strcmp(family, "openmpi") ? "Open MPI" : !strcmp(family, "mpich") ? "MPICH" : family;
}

/* Once, on rank 0 (every rank has the same install and the same MPI): why there is no MPI. */
static void rs_mp_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void rs_mp_say(const char *fmt, ...)
{
    if (rs_launcher_rank(0) != 0) return;
    char why[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ranksnap: %s; going on without MPI (each rank writes its own file, and "
                    "`ranksnap report` compares them)\n", why);
}

/* ---- the MPI library the process has --------------------------------------------------------- */

static int rs_mp_find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    char *path = data;
    const char *name = info->dlpi_name, *slash = name ? strrchr(name, '/') : NULL;
    const char *base = slash ? slash + 1 : name;
    if (!base || strncmp(base, "libmpi", 6) != 0 || !strstr(base, ".so")) return 0;
    snprintf(path, 4096, "%s", name);
    return 1;
}

/* The loaded MPI library's path into `path` (4096 bytes), "" when there is none. */
static void rs_mp_find(char *path)
{
    path[0] = '\0';
    dl_iterate_phdr(rs_mp_find_cb, path);
}

int rs_mpi_plugin_process_has_mpi(void)
{
    char path[4096];
    rs_mp_find(path);
    return path[0] != '\0';
}

/* The family of the MPI library at `path` (loaded): "openmpi", "mpich", or "" when it is
 * neither; its version's first line into `version`. */
static const char *rs_mp_family_at(const char *path, char *version, size_t n)
{
    snprintf(version, n, "%s", path);
    void *h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    if (!h) return "";
    rs_mp_version_fn get = NULL;
    *(void **)(&get) = dlsym(h, "PMPI_Get_library_version");
    static char v[8192]; /* MPICH's MPI_MAX_LIBRARY_VERSION_STRING; under rs_mp_once */
    int len = 0;
    if (get && get(v, &len) == 0 && len > 0) {
        v[sizeof v - 1] = '\0';
        const char *s = v + strspn(v, " \n");
        snprintf(version, n, "%.*s", (int)strcspn(s, "\n"), s);
    }
    /* Open MPI's predefined objects are data symbols: the surest sign of its ABI */
    const char *family = dlsym(h, "ompi_mpi_comm_world") ? "openmpi" : rs_mpi_plugin_family_of(v);
    dlclose(h);
    return family ? family : "";
}

/* Opens the MPI library of `family` into the global scope; 0 and why into `why` when it cannot. */
static int rs_mp_open_mpi(const char *family, char *why, size_t n)
{
    static const char *const openmpi[] = {"libmpi.so.40", NULL};
    static const char *const mpich[] = {"libmpich.so.12", "libmpi.so.12", NULL};
    const char *const *names = !strcmp(family, "openmpi") ? openmpi : mpich;
    for (const char *const *name = names; *name; name++)
        if (dlopen(*name, RTLD_NOW | RTLD_GLOBAL)) return 1;
    const char *e = dlerror();
    snprintf(why, n, "cannot open %.32s's library %s: %s", rs_mp_family_name(family), names[0],
             e ? e : "not found");
    return 0;
}

/* ---- the plugin -------------------------------------------------------------------------------- */

static void rs_mp_take(const rs_mpi_ops *m, const char *have, const char *version, const char *what)
{
    if (!m) {
        rs_mp_say("%s found no MPI library in the process to bind to (an MPI loaded after the "
                  "plugin cannot be used)", what);
        return;
    }
    if (m->abi != RS_MPI_ABI) {
        rs_mp_say("%s is of another ranksnap build (plugin ABI %d, this library's %d): install "
                  "both from one build", what, m->abi, RS_MPI_ABI);
        return;
    }
    if (have && *have && strcmp(have, m->family) != 0) {
        rs_mp_say("%s is built for %s, and this process's MPI is %s (%s)", what,
                  rs_mp_family_name(m->family), rs_mp_family_name(have), version);
        return;
    }
    pthread_mutex_lock(&rs_mp_mu);
    atomic_store_explicit(&rs_mp_ops, m, memory_order_release);
    if (rs_mp_host) m->attach(rs_mp_host);
    pthread_mutex_unlock(&rs_mp_mu);
    char lib[256];
    m->library(lib, sizeof lib);
    RS_INFO(RS_SUB_MPI, "MPI plugin for %s: %s, on %s", rs_mp_family_name(m->family), what, lib);
}

/* `file` in the folder of the object this code is in (libranksnap.so in the build tree and in
 * an install alike), else by name alone (the library path). */
static void *rs_mp_open_plugin(const char *file, char *tried, size_t n)
{
    Dl_info self;
    snprintf(tried, n, "%s", file);
    if (dladdr((const void *)rs_mp_open_plugin, &self) && self.dli_fname) {
        const char *slash = strrchr(self.dli_fname, '/');
        if (slash) {
            snprintf(tried, n, "%.*s/%s", (int)(slash - self.dli_fname), self.dli_fname, file);
            void *h = dlopen(tried, RTLD_NOW | RTLD_LOCAL);
            if (h) return h;
        }
    }
    void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!h) snprintf(tried, n, "%s", file);
    return h;
}

static void rs_mp_load(void)
{
    rs_options o;
    /* a bad value stops ranksnap altogether, said by the runtime's own reading of the options */
    if (rs_options_load_one(&o, "RANKSNAP_MPI_PLUGIN", NULL) != RANKSNAP_OK)
        snprintf(o.mpi_plugin, sizeof o.mpi_plugin, "auto");
    rs_error_clear();
    const char *want = o.mpi_plugin;
    if (!strcmp(want, "none")) return;
    char lib_path[4096], version[512];
    rs_mp_find(lib_path);
    const char *have = lib_path[0] ? rs_mp_family_at(lib_path, version, sizeof version) : NULL;

    /* preloaded by ranksnap-run, or linked by the program (ranksnap::mpi) */
    rs_mp_entry_fn entry = NULL;
    *(void **)(&entry) = dlsym(RTLD_DEFAULT, RS_MP_ENTRY);
    if (entry) {
        rs_mp_take(entry(), have, have ? version : "", "the MPI plugin in the process");
        return;
    }

    int is_path = strchr(want, '/') != NULL;
    const char *family = NULL;
    if (!strcmp(want, "openmpi") || !strcmp(want, "mpich"))
        family = want;
    else if (have && *have)
        family = have;
    else if (!have)
        family = rs_launcher_mpi_family();
    if (!family && !(is_path && have)) {
        if (have)
            rs_mp_say("this process's MPI (%s) is neither Open MPI nor of MPICH's ABI, the two "
                      "ranksnap has plugins for", version);
        else if (is_path)
            rs_mp_say("RANKSNAP_MPI_PLUGIN=%s: the process has no MPI library, and its launcher "
                      "does not say which to open for the plugin", want);
        else if (rs_launcher_has_peers())
            rs_mp_say("the launcher does not say which MPI it runs (PMIx only): set "
                      "RANKSNAP_MPI_PLUGIN=openmpi or mpich");
        return;
    }

    char why[1024];
    if (have) {
        /* one that a module loaded in a scope of its own becomes global, for the plugin */
        (void)dlopen(lib_path, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    } else if (!rs_mp_open_mpi(family, why, sizeof why)) {
        rs_mp_say("%s", why);
        return;
    }
    char file[4096], tried[4096];
    if (is_path)
        snprintf(file, sizeof file, "%s", want);
    else
        snprintf(file, sizeof file, "libranksnap-mpi-%.32s.so", family);
    void *h = is_path ? dlopen(file, RTLD_NOW | RTLD_LOCAL) : rs_mp_open_plugin(file, tried, sizeof tried);
    if (!h) {
        const char *e = dlerror();
        rs_mp_say("no MPI plugin for %s (%s): %s", family ? rs_mp_family_name(family) : "this MPI",
                  have ? version : "opened for the launcher's world", e ? e : file);
        return;
    }
    *(void **)(&entry) = dlsym(h, RS_MP_ENTRY);
    if (!entry) {
        rs_mp_say("%s has no %s: not a ranksnap MPI plugin", is_path ? file : tried, RS_MP_ENTRY);
        return;
    }
    rs_mp_take(entry(), have, have ? version : "", is_path ? file : tried);
}

const rs_mpi_ops *rs_mpi_plugin(void)
{
    pthread_once(&rs_mp_once, rs_mp_load);
    return atomic_load_explicit(&rs_mp_ops, memory_order_acquire);
}

const rs_mpi_ops *rs_mpi_plugin_peek(void)
{
    return atomic_load_explicit(&rs_mp_ops, memory_order_acquire);
}

void rs_mpi_plugin_set_host(const rs_mpi_host *host)
{
    pthread_mutex_lock(&rs_mp_mu);
    rs_mp_host = host;
    const rs_mpi_ops *m = atomic_load_explicit(&rs_mp_ops, memory_order_acquire);
    if (m) m->attach(host);
    pthread_mutex_unlock(&rs_mp_mu);
}
