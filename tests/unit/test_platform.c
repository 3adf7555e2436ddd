/*
 * test_platform.c — platform/: what depends on the processor and the C library, on the processor
 * this build is for (CI also runs it on aarch64, under qemu-user).
 *
 * The fast clock (common/clock.h) runs on the processor's counter where it is steady: always on
 * aarch64, on x86-64 where the TSC is invariant. It is checked once calibrated, against the wall
 * clock it stands in for.
 *
 * glibc gives each processor its own symbol versions. Every version that rank/intercept/driver.c
 * may look dlsym up by must find it here, each on its own, where this glibc is as new as the
 * version: the processor's first version everywhere (a glibc older than 2.34, as on RHEL 8 or
 * Ubuntu 20.04, has only that one), GLIBC_2.34 from glibc 2.34 on.
 */
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <stdlib.h>

#include "check.h"
#include "clock.h"
#include "symver.h"

typedef void *(*dlsym_fn)(void *, const char *);

/* 1 when this glibc is at least as new as `version` ("GLIBC_2.34") */
static int glibc_has(const char *version)
{
    unsigned major = 0, minor = 0, have_major = 0, have_minor = 0;
    if (sscanf(version, "GLIBC_%u.%u", &major, &minor) != 2) return 0;
    if (sscanf(gnu_get_libc_version(), "%u.%u", &have_major, &have_minor) != 2) return 0;
    return have_major > major || (have_major == major && have_minor >= minor);
}

TEST(dlsym_is_found_by_each_of_its_versions_alone)
{
    const char *const *v = rs_symver_dlsym;
    for (; *v; v++) {
        const char *one[] = {*v, NULL};
        dlsym_fn f;
        *(void **)(&f) = rs_symver_next("dlsym", one);
        printf("dlsym@%s: %s (glibc %s)\n", *v, f ? "found" : "not found", gnu_get_libc_version());
        /* the last is the processor's first version, which every glibc has */
        if (!v[1] || glibc_has(*v)) CHECK(f != NULL);
        /* and it is dlsym: it finds what the name alone finds */
        if (f) CHECK(f(RTLD_DEFAULT, "strtoull") == (void *)(uintptr_t)strtoull);
    }
#if defined(__x86_64__) || defined(__aarch64__)
    CHECK(v - rs_symver_dlsym >= 2);
#endif
}

TEST(a_version_this_glibc_lacks_finds_nothing)
{
    const char *none[] = {"GLIBC_0.0", NULL};
    CHECK(rs_symver_next("dlsym", none) == NULL);
    const char *first = NULL;
    for (const char *const *v = rs_symver_dlsym; *v; v++) first = *v;
    const char *then[] = {"GLIBC_0.0", first, NULL};
    CHECK(rs_symver_next("dlsym", then) != NULL);
}

#if defined(__x86_64__)
/* 1 when /proc/cpuinfo has `word` on a line of flags */
static int cpuinfo_has(const char *word)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    int has = 0;
    while (f && !has && fgets(line, sizeof line, f))
        has = !strncmp(line, "flags", 5) && strstr(line, word) != NULL;
    if (f) fclose(f);
    return has;
}
#endif

TEST(fast_clock_runs_on_the_counter_where_it_is_steady)
{
    rs_fastclock c;
    rs_fastclock_init(&c);
#if defined(__x86_64__) || defined(__aarch64__)
    CHECK(rs_cpu_ticks() != 0);
#endif
#if defined(__aarch64__)
    CHECK(c.can_tsc);
#endif
#if defined(__x86_64__)
    /* Linux reads the same CPUID bit for its nonstop_tsc flag */
    if (cpuinfo_has(" nonstop_tsc")) CHECK(c.can_tsc);
#endif
    CHECK(c.can_tsc == rs_cpu_ticks_steady());
    /* read until the counter's rate is measured (20 ms of the wall clock), two seconds at most;
     * the times handed out meanwhile never go back */
    uint64_t last = 0, back = 0;
    for (double end = rs_now_mono_s() + 2.0; c.can_tsc && !c.use_tsc && rs_now_mono_s() < end;) {
        uint64_t t = rs_fastclock_now_us(&c);
        back += t < last;
        last = t;
    }
    CHECK_EQ_U64(back, 0);
    CHECK(c.use_tsc == c.can_tsc);
    /* then it extrapolates the wall clock: within a millisecond of clock_gettime around it */
    uint64_t before = rs_now_us(), t = rs_fastclock_now_us(&c), after = rs_now_us();
    if (t + 1000 < before || t > after + 1000)
        fprintf(stderr, "fast clock %llu, wall clock %llu..%llu\n", (unsigned long long)t,
                (unsigned long long)before, (unsigned long long)after);
    CHECK(t + 1000 >= before && t <= after + 1000);
}

int main(void)
{
    RUN(dlsym_is_found_by_each_of_its_versions_alone);
    RUN(a_version_this_glibc_lacks_finds_nothing);
    RUN(fast_clock_runs_on_the_counter_where_it_is_steady);
    return check_summary();
}
