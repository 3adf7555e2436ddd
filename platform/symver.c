/*
 * symver.c — symver.h: the C library's functions by symbol version.
 *
 * dlsym moved from libdl into libc in glibc 2.34 (version GLIBC_2.34); before that it had only
 * the version of x86-64's first glibc (GLIBC_2.2.5), which libc keeps for programs built then.
 */
#include <dlfcn.h>
#include <stddef.h>

#include "symver.h"

const char *const rs_symver_dlsym[] = {"GLIBC_2.34", "GLIBC_2.2.5", NULL};

void *rs_symver_next(const char *name, const char *const *versions)
{
    for (; versions && *versions; versions++) {
        void *f = dlvsym(RTLD_NEXT, name, *versions);
        if (f) return f;
    }
    return NULL;
}
