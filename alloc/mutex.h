/*
 * mutex.h — the allocator's lock, a futex mutex (Drepper, "Futexes Are Tricky", mutex 3): 0 free,
 * 1 held, 2 held and maybe waited on.
 *
 * Its own header because the allocators of a rank's devices share one (alloc.h, rs_alloc_config's
 * lock) with the runtime, whose recorder writes are serialised by it. Uncontended, lock and unlock
 * are one atomic read-modify-write each, as in glibc's pthread_mutex, but inline: glibc's pair of
 * calls through the PLT, with their checks of the mutex kind, cost ~55 instructions per call, a
 * tenth of a warm malloc+free pair. Contended, a waiter spins briefly (the critical sections are
 * ~100 ns) and then sleeps in the kernel. The acquire/release orderings are what ThreadSanitizer
 * sees, so it checks the allocator's state as it did under pthread_mutex. Not recursive.
 */
#ifndef RANKSNAP_MUTEX_H
#define RANKSNAP_MUTEX_H

#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu.h"

typedef struct rs_mutex {
    atomic_int v;
} rs_mutex;

#define RS_MUTEX_INIT {0}

static inline void rs_futex(atomic_int *addr, int op, int val)
{
    syscall(SYS_futex, (int *)addr, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

__attribute__((noinline, unused)) static void rs_mutex_lock_slow(rs_mutex *m)
{
    for (int i = 0; i < 128; i++) {
        rs_cpu_relax();
        int c = atomic_load_explicit(&m->v, memory_order_relaxed);
        if (c == 0 && atomic_compare_exchange_weak_explicit(&m->v, &c, 1, memory_order_acquire,
                                                            memory_order_relaxed))
            return;
        if (c == 2) break; /* others already sleep: queue behind them */
    }
    /* Mark the lock contended; whoever releases it then wakes a sleeper. */
    while (atomic_exchange_explicit(&m->v, 2, memory_order_acquire) != 0)
        rs_futex(&m->v, FUTEX_WAIT, 2);
}

static inline void rs_mutex_lock(rs_mutex *m)
{
    int c = 0;
    if (!atomic_compare_exchange_strong_explicit(&m->v, &c, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        rs_mutex_lock_slow(m);
}

/* 1 if the lock was free and is now held; for the crash path, which must not wait forever on a
 * thread that died holding it. */
static inline int rs_mutex_trylock(rs_mutex *m)
{
    int c = 0;
    return atomic_compare_exchange_strong_explicit(&m->v, &c, 1, memory_order_acquire,
                                                   memory_order_relaxed);
}

static inline void rs_mutex_unlock(rs_mutex *m)
{
    if (atomic_exchange_explicit(&m->v, 0, memory_order_release) == 2)
        rs_futex(&m->v, FUTEX_WAKE, 1);
}

#endif
