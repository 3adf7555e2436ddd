/*
 * state.c — state.h: the instance pointer, the process-wide counters, and what a forked child
 * of the process that started ranksnap sees of it (nothing).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "errors.h"
#include "log.h"
#include "state.h"

static _Atomic(rs_runtime *) rs_instance;
static atomic_int rs_forked;     /* a fork of the process that started ranksnap */
static atomic_long rs_owner_pid; /* that process */
static atomic_uint_fast64_t rs_intercepted_calls;
static atomic_int rs_started_once;
static atomic_int rs_abandoned;

rs_runtime *rs_state_get(void)
{
    return atomic_load_explicit(&rs_instance, memory_order_acquire);
}

/* In the child of a fork, the instance is the parent's: its threads (timer, dumper) are not
 * there, its locks may be held by threads that are not there, and its files, ranges and gather
 * are the rank's, which the parent goes on writing and joining. The child sees no instance. */
static void rs_state_atfork_child(void)
{
    atomic_store_explicit(&rs_instance, NULL, memory_order_release);
    atomic_store(&rs_forked, 1);
}

static void rs_state_register_atfork(void)
{
    int rc = pthread_atfork(NULL, NULL, rs_state_atfork_child);
    if (rc != 0)
        RS_WARN(RS_SUB_INIT, "pthread_atfork failed (%s): a forked child sees ranksnap's instance; "
                "its finalize and dumps are still refused (pid check)", strerror(rc));
}

void rs_state_publish(rs_runtime *rt)
{
    if (rt) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        atomic_store(&rs_started_once, 1);
        atomic_store(&rs_owner_pid, (long)getpid());
        (void)pthread_once(&once, rs_state_register_atfork);
    }
    atomic_store_explicit(&rs_instance, rt, memory_order_release);
}

int rs_state_forked(void)
{
    if (atomic_load(&rs_forked)) return 1;
    long owner = atomic_load(&rs_owner_pid);
    return owner != 0 && owner != (long)getpid();
}

ranksnap_status rs_state_not_running(const char *fn, int pass)
{
    if (pass && (rs_passthrough_on() || rs_state_forked())) return RANKSNAP_OK;
    if (rs_state_forked())
        return rs_error(RANKSNAP_ERR_NOT_INITIALIZED, "%s: this process is a fork of process %ld, "
                        "which runs ranksnap: ranksnap records and writes in that one only", fn,
                        atomic_load(&rs_owner_pid));
    return rs_error(RANKSNAP_ERR_NOT_INITIALIZED, "%s: call ranksnap_init() first", fn);
}

void rs_state_note_intercepted(void)
{
    atomic_fetch_add_explicit(&rs_intercepted_calls, 1, memory_order_relaxed);
}

uint64_t rs_state_intercepted(void)
{
    return (uint64_t)atomic_load_explicit(&rs_intercepted_calls, memory_order_relaxed);
}

int rs_state_ever_started(void)
{
    return atomic_load(&rs_started_once);
}

static atomic_int rs_gave_up_why; /* a ranksnap_status, 0 = not given up */

void rs_state_note_gave_up(ranksnap_status why)
{
    atomic_store_explicit(&rs_gave_up_why, (int)why, memory_order_release);
}

ranksnap_status rs_state_gave_up(void)
{
    return (ranksnap_status)atomic_load_explicit(&rs_gave_up_why, memory_order_acquire);
}

/* How the process is ending (format.h): noted by the exit path (ending.c), the dump on a fatal
 * signal and MPI_Abort, and copied into the ring file's header at once, which is what a SIGKILL
 * that follows leaves. Atomics, not a lock: the exit path may run inside a signal handler. */
static atomic_uint rs_end_flags;
static atomic_int rs_end_status, rs_end_abort_code;

void rs_state_note_end(uint32_t flags, int32_t value)
{
    if (rs_state_forked()) return; /* a fork's end is not the rank's */
    if (flags & RS_END_EXIT) atomic_store(&rs_end_status, value);
    if (flags & RS_END_MPI_ABORT) atomic_store(&rs_end_abort_code, value);
    uint32_t old = atomic_load(&rs_end_flags), sig = flags & RS_END_SIGNAL_MASK;
    flags &= ~RS_END_SIGNAL_MASK;
    /* the first fatal signal is the one that ended it; a later one is its echo */
    while (!atomic_compare_exchange_weak(&rs_end_flags, &old,
                                         old | flags | ((old & RS_END_SIGNAL_MASK) ? 0 : sig))) {
    }
    rs_runtime *rt = rs_state_get();
    if (rt && rt->ring_file) {
        rs_end e;
        rs_state_end(&e);
        rs_ring_file_end(rt->ring_file, &e);
    }
}

void rs_state_end(rs_end *out)
{
    out->status = atomic_load(&rs_end_status);
    out->abort_code = atomic_load(&rs_end_abort_code);
    out->flags = atomic_load(&rs_end_flags);
}

void ranksnap_abandon(void)
{
    atomic_store(&rs_abandoned, 1);
}

int rs_state_abandoned(void)
{
    return atomic_load(&rs_abandoned);
}
