/*
 * step_detect.h — steps found from the period of a program's collective calls (step_detect.c).
 */
#ifndef RANKSNAP_STEP_DETECT_H
#define RANKSNAP_STEP_DETECT_H

#include <stddef.h>
#include <stdint.h>

#define RS_SD_MAX_PERIOD 4096 /* collectives per step the detector can find */
#define RS_SD_REPEATS 3       /* a pattern seen this many times in a row is the step ... */
#define RS_SD_MIN_SPAN 128    /* ... and over at least this many calls: shorter repeats inside a
                               * step (equal buckets, one call per layer) are not the step */
#define RS_SD_HIST 16384      /* tokens kept: a power of two >= RS_SD_REPEATS * RS_SD_MAX_PERIOD */
#define RS_SD_GRAM 16         /* calls hashed together to propose a period */
#define RS_SD_TABLE 16384     /* slots of the table of grams' last calls (a power of two) */
#define RS_SD_CANDS 8         /* periods verified at once */
#define RS_SD_NAMES 32        /* collectives' names told apart */
/* Periods short enough that RS_SD_REPEATS repetitions come before RS_SD_MIN_SPAN calls: these
 * are guessed early (the tentative step) and confirmed, or not, by the pattern found later. */
#define RS_SD_QUICK_MAX ((RS_SD_MIN_SPAN - 1) / RS_SD_REPEATS)
#define RS_SD_QUICK_CALLS 4096 /* calls without a guess after which guessing stops (a program of no
                                * short period pays its O(RS_SD_QUICK_MAX) cost no longer) */

/* A period being verified: `run` calls in a row equal to the call `p` before. */
typedef struct rs_sd_cand {
    uint32_t p;
    uint32_t run;
} rs_sd_cand;

/* The detector of one process; zero-initialised is a fresh one (about 300 KiB: keep it off the
 * stack). Not thread-safe: the caller serialises feeds. */
typedef struct rs_step_detect {
    uint64_t n;                       /* calls seen */
    uint64_t tok[RS_SD_HIST];         /* the last tokens, a ring indexed by call number */
    uint8_t name_at[RS_SD_HIST];      /* their names, as indexes into `names` */
    const char *names[RS_SD_NAMES];   /* the collectives' names (static strings), first seen first */
    uint64_t name_calls[RS_SD_NAMES]; /* calls of each name ... */
    uint64_t name_last[RS_SD_NAMES];  /* ... its last call's number, the gap before it ... */
    uint64_t name_gap[RS_SD_NAMES];
    uint64_t name_regular[RS_SD_NAMES]; /* ... and how many of its calls came at the same gap */
    int n_names;
    uint64_t first_tok;               /* the program's first call */
    uint64_t gram;                    /* hash of the last RS_SD_GRAM tokens */
    uint64_t gram_out;                /* what the oldest of them weighs in `gram` */
    uint64_t table[RS_SD_TABLE];      /* a gram's hash (high half) and its last call (low half) */
    rs_sd_cand cand[RS_SD_CANDS];
    int n_cand;
    /* the step, once found */
    int period;                       /* 0: looking, > 0: calls per step */
    int phase;                        /* calls of the current step matched so far */
    int64_t step;                     /* the step under way */
    uint64_t since_step;              /* calls since the last step began */
    uint64_t found_at;                /* calls seen when the current pattern was found */
    uint64_t before;                  /* calls before the first step's pattern (set-up) */
    uint64_t steps_seen;              /* steps completed on a found pattern */
    uint64_t skipped;                 /* calls off the pattern since it was found */
    int changes;                      /* times the pattern was lost and another found */
    uint64_t pat[RS_SD_MAX_PERIOD];
    uint8_t pat_name[RS_SD_MAX_PERIOD];
    uint16_t fail[RS_SD_MAX_PERIOD];  /* scratch: the pattern's failure function */
    /* The tentative step, while no pattern is found: the smallest period of at most
     * RS_SD_QUICK_MAX calls that repeated RS_SD_REPEATS times, numbered as the found pattern
     * would number it, followed until a call breaks it. Read after each feed: */
    int64_t q_began;                  /* the tentative step that began at this call, -1: none */
    int q_lost;                       /* 1: the tentative pattern stopped making steps here */
    int q_agrees;                     /* set when the pattern is found: 1 when it is the
                                       * tentative one with the same numbers */
    int q_period;                     /* 0: no tentative pattern */
    int q_phase;
    int64_t q_step;
    int q_breaks;                     /* tentative patterns broken: each doubles the calls the
                                       * next one needs (a run of equal calls inside a step) */
    int q_done;                       /* the pattern was found, or none guessed for
                                       * RS_SD_QUICK_CALLS calls: no more guessing */
    uint64_t q_since;                 /* the call after the last broken guess */
    uint64_t q_since_step;            /* calls since the last tentative step began */
    uint64_t q_pat[RS_SD_QUICK_MAX];  /* the guessed pattern, from a step's first call */
    uint8_t q_pat_name[RS_SD_QUICK_MAX];
    uint32_t q_run[RS_SD_QUICK_MAX + 1];
} rs_step_detect;

/* One call's token: the collective's name with its count, datatype and root or op. */
uint64_t rs_step_detect_token(const char *name, uint64_t count, uint64_t datatype, uint64_t extra);

/* Feeds one completed call. Returns the step that begins after it (when a pattern is found, the
 * step under way, which may have begun a few calls before), or -1 when no step begins here.
 * The numbers only grow: a pattern found again after it was lost continues them. */
int64_t rs_step_detect_feed(rs_step_detect *d, uint64_t token, const char *name);

/* Once found: "ncclAllReduce x3 per step, 40 steps, 2 calls before, 0 off the pattern" (names
 * in the order of their first call in the step); while only a tentative step is followed,
 * "ncclAllReduce x1 per step, tentative (40 calls; 128 confirm)"; "" else. */
void rs_step_detect_describe(const rs_step_detect *d, char *buf, size_t n);

/* While none is found: why, and the RANKSNAP_STEP_ON=NAME:COUNT the calls seen suggest ("no
 * repeating pattern in 90 collectives; try RANKSNAP_STEP_ON=MPI_Allreduce:1"). */
void rs_step_detect_explain(const rs_step_detect *d, char *buf, size_t n);

#endif
