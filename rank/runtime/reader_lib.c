/*
 * reader_lib.c — loading libranksnap_reader.so on demand (reader_lib.h).
 *
 * Only PyTorch jobs load it, once, at their first range end: C programs never do, and the
 * preloaded library stays as small as docs/ARCHITECTURE.md says. It is looked for next to the
 * object this code is in (dladdr: libranksnap.so in the build tree and in the install tree
 * alike), then by name (LD_LIBRARY_PATH, for a program linked with the static library).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "log.h"
#include "reader_api.h"
#include "reader_lib.h"

#define RS_READER_SONAME "libranksnap_reader.so"

static pthread_once_t rs_reader_once = PTHREAD_ONCE_INIT;
static rs_reader_decode_fn rs_reader_decode;
static rs_reader_last_error_fn rs_reader_error;
static char rs_reader_why[768];

static void *rs_reader_open(void)
{
    Dl_info self;
    char path[4096];
    if (dladdr((const void *)rs_reader_open, &self) && self.dli_fname) {
        const char *slash = strrchr(self.dli_fname, '/');
        int w = slash ? snprintf(path, sizeof path, "%.*s/%s", (int)(slash - self.dli_fname),
                                 self.dli_fname, RS_READER_SONAME)
                      : -1;
        if (w > 0 && (size_t)w < sizeof path) {
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h) return h;
        }
    }
    return dlopen(RS_READER_SONAME, RTLD_NOW | RTLD_LOCAL);
}

static void rs_reader_load(void)
{
    void *h = rs_reader_open();
    if (!h) {
        const char *e = dlerror();
        snprintf(rs_reader_why, sizeof rs_reader_why, "cannot load %s, the pickle reader of "
                 "PyTorch jobs, from libranksnap.so's folder or the library path: %s",
                 RS_READER_SONAME, e ? e : "not found");
        return;
    }
    rs_reader_abi_fn abi = NULL;
    *(void **)(&abi) = dlsym(h, "ranksnap_reader_abi");
    if (!abi || abi() != RS_READER_ABI) {
        snprintf(rs_reader_why, sizeof rs_reader_why, "%s is of another ranksnap build (ABI %d, "
                 "this library's %d): install both from one build", RS_READER_SONAME,
                 abi ? abi() : -1, RS_READER_ABI);
        dlclose(h);
        return;
    }
    *(void **)(&rs_reader_error) = dlsym(h, "ranksnap_reader_last_error");
    *(void **)(&rs_reader_decode) = dlsym(h, "ranksnap_reader_decode");
    if (!rs_reader_decode || !rs_reader_error) {
        snprintf(rs_reader_why, sizeof rs_reader_why, "%s lacks ranksnap_reader_decode", RS_READER_SONAME);
        rs_reader_decode = NULL;
        return;
    }
    RS_INFO(RS_SUB_DUMP, "loaded %s", RS_READER_SONAME);
}

ranksnap_status rs_reader_lib_decode(const char *buf, size_t len, const char *name, rs_snap **out)
{
    *out = NULL;
    pthread_once(&rs_reader_once, rs_reader_load);
    if (!rs_reader_decode) return rs_error(RANKSNAP_ERR_UNSUPPORTED, "%s", rs_reader_why);
    ranksnap_status st = rs_reader_decode(buf, len, name, out);
    /* the library keeps its own error detail: bring it over to this thread's */
    if (st != RANKSNAP_OK) return rs_error(st, "%s", rs_reader_error());
    return RANKSNAP_OK;
}
