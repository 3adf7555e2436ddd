/*
 * state.h — the process-wide ranksnap instance: the state every file of the runtime shares, the
 * pointer to it, and the counters that outlive an instance.
 *
 * Locking: one mutex, `lock`, is the only lock on the hot path: the allocators of every device
 * (devices.h) take it, and the observer runs with it held, so the recorder and the stack table
 * need none of their own; steps, annotations and dumps take it (rs_rt_lock) for their recorder
 * writes. Init and finalize (instance.c) are
 * serialised by their own mutex; the API reads the instance through an atomic pointer
 * (rs_state_get) so that a call racing with finalize sees either the instance or NULL.
 */
#ifndef RANKSNAP_STATE_H
#define RANKSNAP_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "backend.h"
#include "coord.h"
#include "devices.h"
#include "mutex.h"
#include "options.h"
#include "passthrough.h"
#include "ranksnap.h"
#include "recorder.h"
#include "step_detect.h"
#include "ring_file.h"
#include "schedule.h"
#include "snapshot_encode.h"
#include "stacks.h"
#include "text.h"

#define RS_MAX_RANGES 64
#define RS_DUMP_MAX_NAMES 8

/* A file name of RANKSNAP_DIR this process writes (dump.c). */
typedef struct rs_dump_name {
    char name[32];  /* "rank-00003.rsnap", "report.txt" */
    int qualified;  /* written under its job-qualified name */
    int ours;       /* this process wrote it, or init found this job's file there */
} rs_dump_name;

typedef struct rs_runtime {
    rs_options opts;
    rs_mutex lock;         /* the allocators' and the recorder's writers' (see above) */
    /* the devices the program allocated on (devices.c): by ordinal, and in order of first use */
    rs_rt_device *_Atomic devs[RS_MAX_DEVICES];
    int dev_order[RS_MAX_DEVICES];
    atomic_int n_devs;
    pthread_mutex_t devs_mu; /* serialises the making of a device */
    int devs_mu_ok;
    rs_block_map *block_map; /* shared by the devices' allocators: a free finds its device in O(1) */
    /* the first device's allocator, once made: any of them serves a free (they share the map) */
    rs_alloc *_Atomic any_alloc;
    /* One device is all the process can see (CUDA_VISIBLE_DEVICES, a one-GPU machine, the sim
     * backend with no CUDA runtime in the process): the current device is 0, never asked. */
    int one_device;
    /* sim backend: the cudaGetDevice of a CUDA runtime in the process (a test's stand-in), looked
     * up once at init; NULL when there is none */
    int (*sim_get_device)(int *);
    rs_backend_kind backend_kind; /* cuda or sim, resolved at init */
    rs_alloc_observer observer;   /* every device's allocator reports to it (alloc_api.c) */
    rs_stacks *stacks;     /* NULL with RANKSNAP_STACKS=none */
    rs_recorder *recorder;
    atomic_int recording;  /* mirrors the recorder's switch for the lock-free check */
    /* rank, world size and job: from init; ranksnap_set_identity may change them until this
     * rank wrote a file (dump.c, rs_dump_reidentify), from the thread that steps */
    int rank;
    int world_size;
    char host[256];
    char job[320];
    uint64_t memory_limit; /* RANKSNAP_MEMORY_LIMIT for this rank, on each of its devices */
    int64_t step;          /* guarded by `lock` */
    size_t n_ranges;       /* recorded step ranges, guarded by `lock` */
    rs_step_range ranges[RS_MAX_RANGES];
    /* device memory used outside the allocator, highest sample of each kind (rs_outside_of):
     * the process's own, or the device's when that was not known */
    uint64_t outside_peak[3];
    rs_coord *coord;       /* the ranks, over MPI (a world of one without) */
    rs_schedule sched;     /* RANKSNAP_STEPS plus triggered ranges */
    int in_range;          /* a scheduled range is being recorded (guarded by `lock`) */
    int64_t range_hi;      /* the highest step the last range saw (steps.c: where it may end) */
    int reported;          /* a range ended and was gathered; finalize need not repeat it */
    int range_tentative;   /* the last range began on tentative steps (guarded by `lock`) ... */
    int range_pending;     /* ... and ended on them: gathered once they are confirmed (steps.c) */
    atomic_int range_dumped; /* this rank's snapshot was written since the range began (an OOM
                              * dump): a rank abandoned in the range leaves that one */
    pthread_t timer;       /* drives time:A:B ranges */
    int timer_running;
    pthread_mutex_t timer_mu;
    pthread_cond_t timer_cv;
    int timer_stop;
    int timer_began_first; /* the first time range was due at init and began there */
    int64_t epoch_us;      /* init, on rank 0's time base (time:A:B counts from here) */
    char step_on_name[64]; /* RANKSNAP_STEP_ON's collective, "" = none */
    long step_on_every;
    long step_on_calls;
    int64_t step_on_next;
    /* how this rank's steps are numbered (steps.c): none yet, ranksnap_step, RANKSNAP_STEP_ON,
     * or found from the collectives (step_detect.c), which only the first two override */
    int step_source;             /* rs_step_source */
    int ring_step_source;        /* the step_source whose words the ring file has (steps.c) */
    char step_how[160];          /* said in the snapshot: "ncclAllReduce x3 per step" ... */
    char app_how[160];           /* the program's own words for its steps (ranksnap_steps_from),
                                  * "" = none; guarded by `lock` */
    int step_detect_off;         /* RANKSNAP_STEP_ON=none, or PyTorch's recorder */
    atomic_flag step_detect_busy; /* serialises the collectives' threads over `step_detect` */
    rs_step_detect step_detect;
    rs_ring_file *ring_file; /* RANKSNAP_RING=mmap */
    /* this job's names in RANKSNAP_DIR (dump.c; guarded by its mutex after init) */
    char job_tag[RS_TEXT_TAG_MAX]; /* rt->job as a part of a file name */
    int names_qualified;     /* the plain names hold another job's files */
    int plain_snap_ours;     /* the plain snapshot (.rsnap, .pickle) at init was this job's */
    int plain_ring_ours;     /* the plain rank-RRRRR.ring at init was this job's */
    size_t n_written;
    rs_dump_name written[RS_DUMP_MAX_NAMES];
    int postmortem;          /* signal handlers installed */
    int is_cuda;                     /* the backend is the CUDA one (the interposers serve only it) */
    struct {                         /* the last OOM of a request no allocator of ranksnap's
                                      * served (outside.c), under `lock`: the driver refused it,
                                      * or the framework's own limit did (ranksnap_framework_oom) */
        int has;
        uint64_t count;
        int device;
        uint32_t stack_id;
        int64_t step;
        rs_oom_info info;
        int dumped;                  /* its snapshot was written when it happened */
        int framework;               /* the framework's limit refused it, not the driver */
        int reported;                /* the framework reported it too (its error's message) */
    } drv_oom;
    struct rs_runtime *retired_next; /* list of retired instances (rs_instance_free_retired) */
} rs_runtime;

static inline void rs_rt_lock(rs_runtime *rt)
{
    rs_mutex_lock(&rt->lock);
}
static inline void rs_rt_unlock(rs_runtime *rt)
{
    rs_mutex_unlock(&rt->lock);
}
/* For the crash path, which must not wait forever on a thread that died holding the lock. */
static inline int rs_rt_trylock(rs_runtime *rt)
{
    return rs_mutex_trylock(&rt->lock);
}

/* The running instance, or NULL (not initialised, finalised, or disabled). */
rs_runtime *rs_state_get(void);

/* What a call of `fn` that found no instance returns: RANKSNAP_ERR_NOT_INITIALIZED, saying why
 * (not started, or a forked child of the process that started it); RANKSNAP_OK for calls that
 * only record or tune (`pass`) while ranksnap passes calls through (RANKSNAP_DISABLE, or a start
 * that failed: instance.c) or in a forked child, so that the program runs as it would without
 * ranksnap. */
ranksnap_status rs_state_not_running(const char *fn, int pass);

/* For API calls that need the instance: declares `rt` or returns rs_state_not_running's error. */
#define RS_NEED(rt)                                                                                \
    rs_runtime *rt = rs_state_get();                                                           \
    if (!rt) return rs_state_not_running(__func__, 0)

/* The same for calls that only record or tune (see rs_state_not_running). */
#define RS_NEED_OR_PASS(rt)                                                                        \
    rs_runtime *rt = rs_state_get();                                                           \
    if (!rt) return rs_state_not_running(__func__, 1)

/* Makes `rt` (NULL: none) the instance the API sees; a non-NULL one also marks the process as
 * having started ranksnap (rs_state_ever_started). */
void rs_state_publish(rs_runtime *rt);

/* Counts one allocation call that reached ranksnap through an interposer or the PyTorch entry
 * points; finalize warns when a preloaded run counted none (outside.h). */
void rs_state_note_intercepted(void);
uint64_t rs_state_intercepted(void);
/* 1 once ranksnap has started in this process (by any route), even if finalised since. */
int rs_state_ever_started(void);
/* Marks that ranksnap gave up in this process, for `why`, and said so (an option that does not
 * parse, ...): it does not start later, and nothing guesses another reason for what was not
 * recorded. rs_state_gave_up: the reason, RANKSNAP_OK while it has not given up. */
void rs_state_note_gave_up(ranksnap_status why);
ranksnap_status rs_state_gave_up(void);
/* 1 in a forked child of the process that started ranksnap (a fork() after the start; or a pid
 * that is not that process's): nothing of ranksnap runs there — no instance (a fork handler
 * unpublishes it in the child), no finalize, no dump, no gather. */
int rs_state_forked(void);
/* 1 after ranksnap_abandon: finalize gathers nothing and leaves MPI to die with the process. */
int rs_state_abandoned(void);
/* Notes a part of how the process is ending (format.h's RS_END_* flags; `value` is the exit
 * status with RS_END_EXIT, the error code with RS_END_MPI_ABORT; a signal number in the low byte
 * counts only if none came before): kept for the snapshot and written into the ring file's header
 * at once. Nothing in a forked child. Async-signal-safe. */
void rs_state_note_end(uint32_t flags, int32_t value);
/* What was noted so far; all zero while the process is not ending. */
void rs_state_end(rs_end *out);

#endif
