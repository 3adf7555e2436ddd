/* clock.h — the time base of events: wall-clock microseconds since the epoch, as PyTorch's
 * time_us, so that ranks on different hosts can be put on rank 0's time base later.
 *
 * rs_now_us reads CLOCK_REALTIME: ~20-25 ns through the vDSO, which was most of the cost of
 * recording an event (three per malloc+free pair). rs_fastclock gives the same clock for
 * ~1/3 of that where the processor has a steady counter (x86-64's invariant TSC, aarch64's generic
 * timer: platform/cpu.h), as PyTorch's getApproximateTime does: it reads the counter (the "TSC"
 * below) and extrapolates from the last CLOCK_REALTIME anchor. The anchor is renewed every
 * RS_FASTCLOCK_ANCHOR_NS or so (one clock_gettime per millisecond of events), and the TSC rate
 * is measured against CLOCK_REALTIME over the whole life of the clock, so the extrapolation
 * error stays at nanoseconds; NTP slewing is followed at each anchor, and a step of the wall
 * clock is taken at the next anchor (and restarts the rate measurement). Until the rate has
 * been measured over RS_FASTCLOCK_CALIBRATE_NS, and wherever there is no steady counter, every
 * read is a plain clock_gettime, so the first events of a short run are exact.
 * Returned times never step back by less than a millisecond (a re-anchor correcting a tiny
 * extrapolation error would otherwise reorder events that the ring holds in order); a real
 * step of the wall clock backwards is passed on, as clock_gettime would.
 *
 * Not thread-safe: one owner (the recorder, under the allocator lock).
 */
#ifndef RANKSNAP_CLOCK_H
#define RANKSNAP_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "cpu.h"

static inline uint64_t rs_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Monotonic seconds, for deadlines. */
static inline double rs_now_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline uint64_t rs_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

#define RS_FASTCLOCK_ANCHOR_NS 1000000u      /* renew the anchor after ~1 ms of TSC ticks */
#define RS_FASTCLOCK_CALIBRATE_NS 20000000u  /* measure the rate over >= 20 ms first      */
#define RS_FASTCLOCK_SHIFT 32                /* mult: ns per tick, 32.32 fixed point      */

typedef struct rs_fastclock {
    int use_tsc;          /* 1: extrapolate from the anchor; 0: clock_gettime every time  */
    int can_tsc;          /* the TSC is invariant: calibration may switch use_tsc on      */
    uint64_t anchor_tsc;  /* TSC and CLOCK_REALTIME (ns) read together at the last anchor */
    uint64_t anchor_ns;
    uint64_t span;        /* ticks after the anchor that the extrapolation may cover      */
    uint64_t mult;        /* ns per tick << RS_FASTCLOCK_SHIFT                             */
    uint64_t base_tsc;    /* start of the rate measurement                                */
    uint64_t base_ns;
    uint64_t last_us;     /* the last time handed out                                     */
} rs_fastclock;

static inline uint64_t rs_fastclock_ticks(void)
{
    return rs_cpu_ticks();
}

/* CLOCK_REALTIME in ns with the TSC read right before and after it; 0 if the two reads are too
 * far apart (preempted, or an interrupt) to pair the tick count with the time. */
static inline uint64_t rs_fastclock_pair(uint64_t max_ticks, uint64_t *tsc)
{
    for (int tries = 0; tries < 4; tries++) {
        uint64_t t0 = rs_fastclock_ticks();
        uint64_t ns = rs_now_ns();
        uint64_t t1 = rs_fastclock_ticks();
        if (t1 - t0 <= max_ticks) {
            *tsc = t0 + (t1 - t0) / 2;
            return ns;
        }
    }
    return 0;
}

static inline void rs_fastclock_init(rs_fastclock *c)
{
    c->use_tsc = 0;
    c->can_tsc = rs_cpu_ticks_steady();
    c->last_us = 0;
    c->mult = 0;
    c->span = 0;
    c->base_tsc = 0;
    c->base_ns = c->can_tsc ? rs_fastclock_pair(UINT64_MAX, &c->base_tsc) : 0;
    c->anchor_ns = c->base_ns;
    c->anchor_tsc = c->base_tsc;
}

static inline uint64_t rs_fastclock_monotone(rs_fastclock *c, uint64_t us)
{
    if (us < c->last_us && c->last_us - us < 1000u) return c->last_us;
    c->last_us = us;
    return us;
}

/* The out-of-line part: a plain read while calibrating, or a new anchor. Not inline, so that
 * the fast path stays a few instructions; `unused` for the files that include this header and
 * never read the clock this way. */
__attribute__((noinline, unused)) static uint64_t rs_fastclock_slow(rs_fastclock *c)
{
    if (!c->can_tsc) return rs_fastclock_monotone(c, rs_now_us());
    /* A pair whose TSC reads lie more than 2 µs apart (4096 ticks until the rate is known) was
     * interrupted: it would misdate every event up to the next anchor. */
    uint64_t max_ticks = c->mult ? (UINT64_C(2000) << RS_FASTCLOCK_SHIFT) / c->mult : 4096u;
    uint64_t tsc, ns = rs_fastclock_pair(max_ticks, &tsc);
    if (ns == 0) return rs_fastclock_monotone(c, rs_now_us()); /* try again next time */
    uint64_t dns = ns - c->base_ns, dt = tsc - c->base_tsc;
    if (ns < c->base_ns || tsc < c->base_tsc || dt == 0) {
        /* The wall clock stepped back (or the TSC did): measure the rate afresh. */
        c->base_ns = ns;
        c->base_tsc = tsc;
        c->use_tsc = 0;
        return rs_fastclock_monotone(c, ns / 1000u);
    }
    if (dns >= RS_FASTCLOCK_CALIBRATE_NS) {
        /* dns < 2^64 >> 32 holds for 136 years of a measurement; keep it exact anyway. */
        uint64_t mult = dns < (UINT64_C(1) << 31) ? (dns << RS_FASTCLOCK_SHIFT) / dt
                                                  : (uint64_t)((double)dns / (double)dt * 4294967296.0);
        if (c->mult && (mult > c->mult + c->mult / 1000 || mult < c->mult - c->mult / 1000)) {
            /* 0.1% off the earlier measurement: far beyond NTP's slewing (0.05%), so the wall
             * clock stepped. Start measuring again from here; the anchor is still exact. */
            c->base_ns = ns;
            c->base_tsc = tsc;
            c->use_tsc = 0;
            c->mult = 0;
            return rs_fastclock_monotone(c, ns / 1000u);
        }
        c->mult = mult;
        c->use_tsc = mult != 0;
        /* mult < 2^33 (a tick is < 2 ns above 500 MHz), span * mult < 2^64 for spans < 2^31. */
        uint64_t span = ((uint64_t)RS_FASTCLOCK_ANCHOR_NS << RS_FASTCLOCK_SHIFT) / (mult ? mult : 1);
        c->span = span < (UINT64_C(1) << 30) ? span : (UINT64_C(1) << 30);
    }
    c->anchor_ns = ns;
    c->anchor_tsc = tsc;
    return rs_fastclock_monotone(c, ns / 1000u);
}

/* Wall-clock µs since the epoch. */
static inline uint64_t rs_fastclock_now_us(rs_fastclock *c)
{
    if (c->use_tsc) {
        uint64_t d = rs_fastclock_ticks() - c->anchor_tsc;
        if (d < c->span) /* also false for a TSC read behind the anchor (d wraps around) */
            return rs_fastclock_monotone(
                c, (c->anchor_ns + ((d * c->mult) >> RS_FASTCLOCK_SHIFT)) / 1000u);
    }
    return rs_fastclock_slow(c);
}

#endif
