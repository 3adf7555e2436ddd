/*
 * next_probe.c — two small libraries for test_dlsym_next.c, built from this file as
 * libnext_probe_a.so (NEXT_PROBE_NAME "a") and libnext_probe_b.so ("b"), each defining
 * next_probe_name() and next_probe(), which asks dlsym(RTLD_NEXT, "next_probe_name"): the
 * definition in an object after this one's, as an interposing library finds the function it
 * wraps.
 */
#define _GNU_SOURCE
#include <dlfcn.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT const char *next_probe_name(void);
EXPORT const char *next_probe(void);

const char *next_probe_name(void)
{
    return NEXT_PROBE_NAME;
}

const char *next_probe(void)
{
    const char *(*next)(void);
    *(void **)(&next) = dlsym(RTLD_NEXT, "next_probe_name");
    return next ? next() : "none";
}
