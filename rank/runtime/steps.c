/*
 * steps.c — steps, recorded ranges and annotations: ranksnap_step (and the steps counted from a
 * collective, RANKSNAP_STEP_ON), the timer thread of time:A:B ranges, ranksnap_annotate_*,
 * ranksnap_record.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "comms.h"
#include "coord.h"
#include "errors.h"
#include "external_mode.h"
#include "external.h"
#include "held.h"
#include "live_report.h"
#include "log.h"
#include "outside.h"
#include "recorder.h"
#include "ring_file.h"
#include "schedule.h"
#include "state.h"
#include "step_how.h"
#include "steps.h"

/* Starts a recorded range at the current step: fresh history and peaks, so that the range's
 * snapshot and report are about the range, and what the rank holds then (held.c). Allocator lock
 * held. */
static void rs_range_begin_locked(rs_runtime *rt, int64_t at)
{
    rs_recorder_clear(rt->recorder);
    rs_recorder_set_enabled(rt->recorder, 1);
    rs_held_range_begin_locked(rt); /* and the recording flag, with the held events */
    rt->in_range = 1;
    rs_comms_range_begin();
    rt->range_hi = at - 1;
    rt->reported = 0;
    atomic_store(&rt->range_dumped, 0);
    if (rt->n_ranges < RS_MAX_RANGES) {
        rt->ranges[rt->n_ranges].begin = at;
        rt->ranges[rt->n_ranges].end = -1;
        rt->n_ranges++;
    } else {
        /* past RS_MAX_RANGES the last slot stands for every later range */
        rt->ranges[RS_MAX_RANGES - 1].end = -1;
    }
}

static void rs_range_end_locked(rs_runtime *rt, int64_t at)
{
    rs_recorder_set_enabled(rt->recorder, 0);
    atomic_store(&rt->recording, 0);
    rt->in_range = 0;
    rs_comms_range_end();
    if (rt->n_ranges > 0) rt->ranges[rt->n_ranges - 1].end = rs_steps_range_end(rt, at);
}

/* A range's end (one past its last step) never comes before its beginning, whatever the
 * numbering did meanwhile: a range is numbered as its steps were when it began, and when the
 * numbers go back (the program numbers its own steps after steps were found for it, or restarts
 * its count) the range ends one past the highest step it saw. */
int64_t rs_steps_range_end(const rs_runtime *rt, int64_t at)
{
    int64_t end = at > rt->range_hi ? at : rt->range_hi + 1;
    if (rt->n_ranges > 0 && end < rt->ranges[rt->n_ranges - 1].begin) end = rt->ranges[rt->n_ranges - 1].begin;
    return end;
}

/* A step begins; `source` says who numbered it (rs_step_source). */
static ranksnap_status rs_steps_at(rs_runtime *rt, int64_t step)
{
    ranksnap_status st = RANKSNAP_OK;
    int64_t start;
    if (rs_coord_poll_trigger(rt->coord, step, rt->opts.dir, rt->opts.trigger_lag, &start)) {
        /* A start already passed (this rank ran ahead) begins at once: the snapshot's ranges
         * say which steps it really holds. */
        if (start < step) start = step;
        if (rs_schedule_add(&rt->sched, start, start + rt->opts.trigger_steps) != RANKSNAP_OK)
            RS_WARN(RS_SUB_RECORD, "trigger: %s", ranksnap_last_error());
    }
    int want = !rt->sched.time_based && !rt->sched.whole_run && rt->opts.record &&
               rs_schedule_contains(&rt->sched, step);
    /* a range recorded on tentative steps waits for them to be confirmed: a next range would
     * clear what it holds */
    if (want && !rt->in_range && rt->range_pending) {
        RS_INFO(RS_SUB_RECORD, "step %lld: the range before is not confirmed yet; not recording", (long long)step);
        want = 0;
    }
    int ended = 0;
    /* the communicators alive at a step are the job's (comms.h); a step guessed from a short
     * period may be a library's set-up calls on its own communicators, not the job's step */
    if (rt->step_source != RS_STEPS_TENTATIVE) rs_comms_moment();
    rs_devices_set_step(rt, step);
    if (want && !rt->in_range) rs_devices_reset_peak_stats(rt);
    ranksnap_stats s;
    /* a rank recorded natively (its framework allocates, not ranksnap) opened no device: the
     * framework's current one is the device its outside bytes are measured on; opened here,
     * before the runtime's lock, which opening takes */
    rs_rt_device *opened = NULL;
    if (rs_external_native() && rs_devices_count(rt) == 0) (void)rs_devices_get_current(rt, &opened);
    rs_devices_stats(rt, &s);
    rs_rt_lock(rt);
    rt->step = step;
    if (!rt->sched.time_based && !rt->sched.whole_run) {
        if (want && !rt->in_range) {
            rs_range_begin_locked(rt, step);
            rt->range_tentative = rt->step_source == RS_STEPS_TENTATIVE;
            RS_INFO(RS_SUB_RECORD, "recording from step %lld%s", (long long)step,
                    rt->range_tentative ? " (tentative steps)" : "");
        } else if (!want && rt->in_range) {
            rs_range_end_locked(rt, step);
            /* on tentative steps: gathered once the pattern found confirms them */
            ended = !rt->range_tentative;
            rt->range_pending = rt->range_tentative;
        }
    }
    if (step > rt->range_hi) rt->range_hi = step; /* after the range it ended, if it did */
    rs_outside_sample(rt, s.reserved_bytes, NULL, 0, NULL);
    rs_ring_file_step(rt->ring_file, step, s.allocated_bytes, s.allocated_bytes_peak, s.reserved_bytes_peak);
    /* A ring recovered after a SIGKILL says how its steps were numbered, as a snapshot would:
     * the words when the way changes, and every 1024 steps for their counts (made at every
     * step, they took a step found from the collectives from 1,200 instructions to 5,300); the
     * way out makes them anew (dump.c). */
    if (rt->ring_file && (rt->step_source != rt->ring_step_source || (step & 1023) == 0)) {
        rs_ring_file_steps_from(rt->ring_file, rs_steps_how(rt));
        rt->ring_step_source = rt->step_source;
    }
    rs_recorder_append_id(rt->recorder, RS_ACT_STEP, 0, (uint64_t)step, NULL, 0);
    rs_rt_unlock(rt);
    rs_external_step(rt, step); /* ranksnap torch mode: the framework's recorder (external.c) */
    if (ended) {
        RS_INFO(RS_SUB_RECORD, "recorded range ends before step %lld: gathering", (long long)step);
        st = rs_live_report_end_of_range(rt);
    }
    return st;
}

/* The tentative steps were not the step (a call broke their pattern, or the pattern found numbers
 * the steps otherwise): a range opened on them is dropped, recorded or not, and the steps are
 * unknown again until the next guess or the pattern found. */
static void rs_steps_drop_tentative(rs_runtime *rt, const char *why)
{
    rs_rt_lock(rt);
    int had = rt->range_tentative && (rt->in_range || rt->range_pending);
    if (had) {
        rs_recorder_set_enabled(rt->recorder, 0);
        atomic_store(&rt->recording, 0);
        rs_recorder_clear(rt->recorder);
        rt->in_range = 0;
        if (rt->n_ranges > 0) rt->n_ranges--;
    }
    rt->range_tentative = rt->range_pending = 0;
    rt->step = -1;
    rt->range_hi = -1;
    rs_rt_unlock(rt);
    if (had) RS_INFO(RS_SUB_RECORD, "the tentative steps %s: the range recorded on them is dropped", why);
}

/* The pattern found confirms the tentative steps: a range that ended on them is gathered now (every
 * rank of an SPMD job confirms at the same call). */
static void rs_steps_confirm_tentative(rs_runtime *rt)
{
    rs_rt_lock(rt);
    int pending = rt->range_pending;
    rt->range_tentative = rt->range_pending = 0;
    rs_rt_unlock(rt);
    if (!pending) return;
    RS_INFO(RS_SUB_RECORD, "the tentative steps are confirmed: gathering the range recorded on them");
    if (rs_live_report_end_of_range(rt) != RANKSNAP_OK)
        RS_WARN(RS_SUB_RECORD, "the range of the tentative steps: %s", ranksnap_last_error());
}

/* The program's own numbers: from its first ranksnap_step on, detection stops (a step it found
 * before stays in the history, the program's numbers follow). */
ranksnap_status ranksnap_step(int64_t step)
{
    RS_NEED_OR_PASS(rt);
    /* tentative steps never confirmed: what was recorded on them is not the program's range */
    if (rt->step_source == RS_STEPS_TENTATIVE) rs_steps_drop_tentative(rt, "give way to ranksnap_step");
    if (rt->step_source != RS_STEPS_APP) {
        /* a range opened on the steps found before ends by the rule of rs_steps_range_end */
        if ((rt->step_source == RS_STEPS_DETECTED || rt->step_source == RS_STEPS_TENTATIVE) && rt->step >= 0)
            snprintf(rt->step_how, sizeof rt->step_how, "ranksnap_step, after steps 0 to %lld were found",
                     (long long)rt->step);
        else
            snprintf(rt->step_how, sizeof rt->step_how, "ranksnap_step");
        rt->step_source = RS_STEPS_APP;
    }
    return rs_steps_at(rt, step);
}

/* The program's words for its steps: kept under the lock the dump reads them with. */
ranksnap_status ranksnap_steps_from(const char *how)
{
    RS_NEED_OR_PASS(rt);
    rs_rt_lock(rt);
    snprintf(rt->app_how, sizeof rt->app_how, "%s", how ? how : "");
    rs_rt_unlock(rt);
    return RANKSNAP_OK;
}

/* Steps found from the collectives (step_detect.c): the pattern found, and before it the tentative
 * step guessed from a short period, which the pattern confirms or not. A thread that finds another
 * feeding skips its call rather than wait, which only the rare job calling collectives from
 * several threads at once sees, as a call off the pattern. */
static void rs_steps_detect(rs_runtime *rt, const char *name, uint64_t count, uint64_t datatype, uint64_t extra)
{
    uint64_t tok = rs_step_detect_token(name, count, datatype, extra);
    if (atomic_flag_test_and_set_explicit(&rt->step_detect_busy, memory_order_acquire)) return;
    rs_step_detect *d = &rt->step_detect;
    int64_t step = rs_step_detect_feed(d, tok, name);
    int64_t guess = d->q_began;
    int was = rt->step_source, lost = d->q_lost, agrees = d->q_agrees;
    int first = step >= 0 && (was == RS_STEPS_NONE || was == RS_STEPS_TENTATIVE);
    if (first)
        rt->step_source = RS_STEPS_DETECTED;
    else if (was == RS_STEPS_NONE || was == RS_STEPS_TENTATIVE)
        rt->step_source = d->q_period > 0 ? RS_STEPS_TENTATIVE : RS_STEPS_NONE;
    atomic_flag_clear_explicit(&rt->step_detect_busy, memory_order_release);
    if (was == RS_STEPS_TENTATIVE && lost)
        rs_steps_drop_tentative(rt, "were broken by a call off their pattern");
    else if (was == RS_STEPS_TENTATIVE && first && !agrees)
        rs_steps_drop_tentative(rt, "differ from the pattern found");
    ranksnap_status st = RANKSNAP_OK;
    if (first) {
        RS_INFO(RS_SUB_RECORD, "steps %s; step %lld begins", rs_steps_how(rt), (long long)step);
        if (was == RS_STEPS_TENTATIVE && agrees) {
            rs_steps_confirm_tentative(rt);
            if (step == rt->step) return; /* the step the guess began already */
        }
        st = rs_steps_at(rt, step);
    } else if (step >= 0 && rt->step_source == RS_STEPS_DETECTED) {
        st = rs_steps_at(rt, step);
    } else if (rt->step_source == RS_STEPS_TENTATIVE && guess >= 0) {
        if (was != RS_STEPS_TENTATIVE || lost)
            RS_INFO(RS_SUB_RECORD, "steps %s; step %lld begins", rs_steps_how(rt), (long long)guess);
        st = rs_steps_at(rt, guess);
    } else {
        return;
    }
    if (st != RANKSNAP_OK) RS_WARN(RS_SUB_RECORD, "step %lld: %s", (long long)(first ? step : guess), ranksnap_last_error());
}

/* The wrappers (pmpi.c, nccl.c) report each completed collective. RANKSNAP_STEP_ON makes every
 * N-th call of the configured one a step boundary, numbered from 0; otherwise, unless the program
 * numbers its steps or detection is off, the call feeds the detector. */
void rs_steps_collective_done(const char *name, uint64_t count, uint64_t datatype, uint64_t extra)
{
    rs_runtime *rt = rs_state_get();
    if (!rt) return;
    if (!rt->step_on_every) {
        if (!rt->step_detect_off && rt->step_source != RS_STEPS_APP)
            rs_steps_detect(rt, name, count, datatype, extra);
        return;
    }
    if (strcmp(name, rt->step_on_name) != 0) return;
    if (++rt->step_on_calls % rt->step_on_every != 0) return;
    if (rt->step_source == RS_STEPS_APP) return;
    if (rt->step_source != RS_STEPS_STEP_ON) {
        rt->step_source = RS_STEPS_STEP_ON;
        snprintf(rt->step_how, sizeof rt->step_how, "RANKSNAP_STEP_ON=%s:%ld", rt->step_on_name, rt->step_on_every);
    }
    (void)rs_steps_at(rt, rt->step_on_next++);
}

/* Sleeps until `at_us` on rank 0's time base, or until stopped; 0 when stopped. */
static int rs_timer_sleep_until(rs_runtime *rt, int64_t at_us)
{
    int64_t local = at_us - rs_coord_clock_offset_us(rt->coord);
    struct timespec ts = {(time_t)(local / 1000000), (long)(local % 1000000) * 1000};
    pthread_mutex_lock(&rt->timer_mu);
    while (!rt->timer_stop)
        if (pthread_cond_timedwait(&rt->timer_cv, &rt->timer_mu, &ts) == ETIMEDOUT) break;
    int go = !rt->timer_stop;
    pthread_mutex_unlock(&rt->timer_mu);
    return go;
}

static void rs_timer_begin(rs_runtime *rt, const rs_range *r)
{
    rs_devices_reset_peak_stats(rt);
    rs_rt_lock(rt);
    rs_range_begin_locked(rt, rt->step < 0 ? 0 : rt->step);
    rs_rt_unlock(rt);
    RS_INFO(RS_SUB_RECORD, "time range %lld:%lld s: recording", (long long)r->begin, (long long)r->end);
}

/* time:A:B ranges start and stop recording on every rank at the same instant of rank 0's clock;
 * the gather that needs every rank at once waits for finalize, a point all ranks reach. */
static void *rs_timer_main(void *arg)
{
    rs_runtime *rt = arg;
    for (size_t i = 0; i < rt->sched.n; i++) {
        const rs_range *r = &rt->sched.r[i];
        if (i > 0 || !rt->timer_began_first) {
            if (!rs_timer_sleep_until(rt, rt->epoch_us + r->begin * 1000000)) return NULL;
            rs_timer_begin(rt, r);
        }
        if (r->end < 0) return NULL;
        if (!rs_timer_sleep_until(rt, rt->epoch_us + r->end * 1000000)) return NULL;
        rs_rt_lock(rt);
        rs_range_end_locked(rt, rt->step < 0 ? 0 : rt->step + 1);
        rs_rt_unlock(rt);
        RS_INFO(RS_SUB_RECORD, "time range %lld:%lld s: stopped", (long long)r->begin, (long long)r->end);
    }
    return NULL;
}

/* ---- time ranges -------------------------------------------------------------------------- */

ranksnap_status rs_steps_timer_start(rs_runtime *rt)
{
    /* A range due now (time:0:N begins at init) begins here, not on the thread: a run shorter
     * than the thread's start would otherwise reach finalize, which stops the thread, before it
     * began the range that covers the whole run. */
    if (rt->sched.n > 0 &&
        rt->epoch_us + rt->sched.r[0].begin * 1000000 <= (int64_t)rs_now_us() + rs_coord_clock_offset_us(rt->coord)) {
        rs_timer_begin(rt, &rt->sched.r[0]);
        rt->timer_began_first = 1;
    }
    pthread_condattr_t ca;
    if (pthread_mutex_init(&rt->timer_mu, NULL) != 0 || pthread_condattr_init(&ca) != 0)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "RANKSNAP_STEPS=time:...: cannot create the timer");
    /* the deadlines are wall-clock times (rank 0's epoch), so the condition waits on CLOCK_REALTIME */
    pthread_condattr_setclock(&ca, CLOCK_REALTIME);
    int rc = pthread_cond_init(&rt->timer_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "RANKSNAP_STEPS=time:...: cannot create the timer");
    if (pthread_create(&rt->timer, NULL, rs_timer_main, rt) != 0)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "RANKSNAP_STEPS=time:...: cannot start the timer thread");
    rt->timer_running = 1;
    return RANKSNAP_OK;
}

void rs_steps_timer_stop(rs_runtime *rt)
{
    if (!rt->timer_running) return;
    pthread_mutex_lock(&rt->timer_mu);
    rt->timer_stop = 1;
    pthread_cond_broadcast(&rt->timer_cv);
    pthread_mutex_unlock(&rt->timer_mu);
    pthread_join(rt->timer, NULL);
    rt->timer_running = 0;
    pthread_cond_destroy(&rt->timer_cv);
    pthread_mutex_destroy(&rt->timer_mu);
}

static ranksnap_status rs_annotate(rs_action act, const char *name, const char *fn)
{
    if (!name) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "%s: name is NULL", fn);
    rs_runtime *rt = rs_state_get();
    if (!rt)
        return rs_passthrough_on() ? RANKSNAP_OK
                                   : rs_error(RANKSNAP_ERR_NOT_INITIALIZED, "%s: call ranksnap_init() first", fn);
    ranksnap_status st = RANKSNAP_OK;
    rs_rt_lock(rt);
    if (rs_recorder_enabled(rt->recorder)) {
        uint32_t idx = rs_recorder_intern_string(rt->recorder, name);
        if (idx == UINT32_MAX)
            st = rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: could not store annotation \"%s\"", fn, name);
        else
            rs_recorder_append_id(rt->recorder, act, idx, 0, NULL, 0);
    }
    rs_rt_unlock(rt);
    return st;
}

ranksnap_status ranksnap_annotate_begin(const char *name)
{
    return rs_annotate(RS_ACT_ANNOTATION_BEGIN, name, "ranksnap_annotate_begin");
}

ranksnap_status ranksnap_annotate_end(const char *name)
{
    return rs_annotate(RS_ACT_ANNOTATION_END, name, "ranksnap_annotate_end");
}

ranksnap_status ranksnap_record(int on)
{
    RS_NEED_OR_PASS(rt);
    rs_rt_lock(rt);
    int was = rs_recorder_enabled(rt->recorder);
    if (on && !was) rs_comms_range_begin();
    if (!on && was) rs_comms_range_end();
    if (on && !was && rt->n_ranges < RS_MAX_RANGES) {
        rt->ranges[rt->n_ranges].begin = rt->step < 0 ? 0 : rt->step;
        rt->ranges[rt->n_ranges].end = -1;
        rt->n_ranges++;
        rt->range_hi = rt->ranges[rt->n_ranges - 1].begin - 1;
    } else if (!on && was && rt->n_ranges > 0 && rt->ranges[rt->n_ranges - 1].end < 0) {
        rt->ranges[rt->n_ranges - 1].end = rs_steps_range_end(rt, rt->step < 0 ? 0 : rt->step);
    }
    rs_recorder_set_enabled(rt->recorder, on ? 1 : 0);
    atomic_store(&rt->recording, on ? 1 : 0);
    rs_rt_unlock(rt);
    return RANKSNAP_OK;
}

int ranksnap_is_recording(void)
{
    rs_runtime *rt = rs_state_get();
    return rt ? atomic_load(&rt->recording) : 0;
}

