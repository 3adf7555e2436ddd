/*
 * test_dlsym_next.c — dlsym(RTLD_NEXT, ...) through the dlsym that libranksnap.so takes over (the
 * trampoline of platform/trampoline.h) is still relative to the object that called it.
 *
 * Run with LD_PRELOAD="libranksnap.so libnext_probe_a.so libnext_probe_b.so" (next_probe.c): a's
 * next_probe() asks dlsym(RTLD_NEXT, "next_probe_name"), which must find b's, the next after a.
 * Were the caller taken to be libranksnap.so (a call instead of a jump, a return address lost),
 * the next would be a's own. Exits 77 where the process's dlsym is not ranksnap's (a build or a
 * processor without the trampoline), saying so.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    Dl_info info;
    if (!dladdr((void *)(uintptr_t)dlsym, &info) || !info.dli_fname ||
        !strstr(info.dli_fname, "libranksnap")) {
        printf("SKIPPED: the process's dlsym is %s's, not libranksnap.so's: nothing to check\n",
               info.dli_fname ? info.dli_fname : "an unknown object");
        return 77;
    }
    const char *(*probe)(void);
    *(void **)(&probe) = dlsym(RTLD_DEFAULT, "next_probe");
    if (!probe) {
        printf("FAIL: next_probe not found: preload libnext_probe_a.so and libnext_probe_b.so\n");
        return 1;
    }
    const char *got = probe();
    printf("a's dlsym(RTLD_NEXT) found %s's next_probe_name\n", got);
    if (strcmp(got, "b") != 0) {
        printf("FAIL: expected b's: the lookup was not relative to its caller\n");
        return 1;
    }
    return 0;
}
