/*
 * state.c — state.h: the instance pointer and the process-wide counters.
 */
#include <stdatomic.h>

#include "state.h"

static _Atomic(rs_runtime *) rs_instance;
static atomic_uint_fast64_t rs_intercepted_calls;
static atomic_int rs_started_once;
static atomic_int rs_abandoned;

rs_runtime *rs_state_get(void)
{
    return atomic_load_explicit(&rs_instance, memory_order_acquire);
}

void rs_state_publish(rs_runtime *rt)
{
    if (rt) atomic_store(&rs_started_once, 1);
    atomic_store_explicit(&rs_instance, rt, memory_order_release);
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

void ranksnap_abandon(void)
{
    atomic_store(&rs_abandoned, 1);
}

int rs_state_abandoned(void)
{
    return atomic_load(&rs_abandoned);
}
