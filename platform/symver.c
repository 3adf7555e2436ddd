/*
 * symver.c — symver.h: the C library's functions by symbol version.
 *
 * glibc's symbol versions are per processor: each port starts at the version of its first
 * release, and a function added or moved later has the version of that release. dlsym moved from
 * libdl into libc in glibc 2.34 (GLIBC_2.34); before, it had only the port's first version, which
 * libc keeps for the programs built then: GLIBC_2.2.5 on x86-64, GLIBC_2.17 on aarch64. A glibc
 * older than 2.34 (RHEL 8, Ubuntu 20.04) has only that one.
 */
#include <dlfcn.h>
#include <stddef.h>

#include "symver.h"

const char *const rs_symver_dlsym[] = {
    "GLIBC_2.34",
#if defined(__x86_64__)
    "GLIBC_2.2.5",
#elif defined(__aarch64__)
    "GLIBC_2.17",
#endif
    NULL};

void *rs_symver_next(const char *name, const char *const *versions)
{
    for (; versions && *versions; versions++) {
        void *f = dlvsym(RTLD_NEXT, name, *versions);
        if (f) return f;
    }
    return NULL;
}
