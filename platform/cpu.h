/*
 * cpu.h — what ranksnap asks of the processor itself: a tick counter that can stand in for a
 * clock, a pause for spin loops, and return addresses without their pointer-authentication code.
 * x86-64 and aarch64 side by side; elsewhere each gives what costs nothing (no counter: the clock
 * reads clock_gettime; no pause; addresses as they are).
 *
 * Inline: the allocator's lock, the recorder's clock and the stack capture use them on every
 * allocation.
 */
#ifndef RANKSNAP_CPU_H
#define RANKSNAP_CPU_H

#include <stdint.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#elif defined(__aarch64__)
#include <sys/auxv.h>
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

/* 1 when the processor authenticates pointers (aarch64's HWCAP_PACA): a function built with
 * -mbranch-protection (distributions build theirs so) then saves its return address with a code
 * in the bits above the address, and an unwinder must strip it. Elsewhere the constant 0, which
 * the compiler folds before it lays out the code of a caller (an inline function's 0 moved the
 * blocks of the stack capture on x86-64). */
#if defined(__aarch64__)
static inline int rs_cpu_signs_return_addresses(void)
{
    return (getauxval(AT_HWCAP) & (1ul << 30)) != 0;
}
#else
#define rs_cpu_signs_return_addresses() 0
#endif

/* A return address read from a frame, as the address of the code: on aarch64 xpaclri strips the
 * pointer-authentication code (a hint: it changes nothing on a processor without it, nor on an
 * address that has none); elsewhere the address as it is. */
static inline uintptr_t rs_cpu_strip_pc(uintptr_t pc)
{
#if defined(__aarch64__)
    register uintptr_t x30 __asm__("x30") = pc;
    __asm__("hint #7" : "+r"(x30)); /* xpaclri, written so for any assembler */
    return x30;
#else
    return pc;
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
