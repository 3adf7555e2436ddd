/*
 * cpu.h — what ranksnap asks of the processor itself: a tick counter that can stand in for a
 * clock, and a pause for spin loops. x86-64 and aarch64 side by side; elsewhere each gives what
 * costs nothing (no counter: the clock reads clock_gettime; no pause).
 *
 * Inline: the allocator's lock and the recorder's clock use them on every allocation.
 */
#ifndef RANKSNAP_CPU_H
#define RANKSNAP_CPU_H

#include <stdint.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

/* The counter: the TSC on x86-64, the generic timer's virtual count on aarch64; 0 where there is
 * none. */
static inline uint64_t rs_cpu_ticks(void)
{
#if defined(__x86_64__)
    return (uint64_t)__rdtsc();
#elif defined(__aarch64__)
    uint64_t t;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(t));
    return t;
#else
    return 0;
#endif
}

/* 1 when rs_cpu_ticks counts at one rate, in every power state and in step across cores: only
 * such a counter can stand in for a clock. On x86-64 the invariant TSC (CPUID 0x80000007 EDX
 * bit 8). On aarch64 always: the generic timer counts the system counter, one fixed rate for
 * every core, and Linux lets user space read it (or, where an erratum forbids, traps the read
 * and answers it, slower but right). */
static inline int rs_cpu_ticks_steady(void)
{
#if defined(__x86_64__)
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid(0x80000000u, &eax, &ebx, &ecx, &edx) && eax >= 0x80000007u &&
           __get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx) && (edx & (1u << 8));
#elif defined(__aarch64__)
    return 1;
#else
    return 0;
#endif
}

/* One turn of a spin loop: tells the core (and its sibling thread) that this one waits. */
static inline void rs_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("pause");
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

#endif
