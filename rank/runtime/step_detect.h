/*
 * step_detect.h — steps found from the period of a program's collective calls (step_detect.c).
 */
#ifndef RANKSNAP_STEP_DETECT_H
#define RANKSNAP_STEP_DETECT_H

#include <stddef.h>
#include <stdint.h>

#define RS_SD_MAX_PERIOD 64   /* collectives per step the detector can find */
#define RS_SD_HIST 128        /* tokens kept: a power of two above RS_SD_MAX_PERIOD */
#define RS_SD_REPEATS 3       /* a pattern seen this many times in a row is the step */
#define RS_SD_GIVE_UP 4096    /* calls after which a rank with no period stops looking */

/* The detector of one process; zero-initialised is a fresh one. Not thread-safe: the caller
 * serialises feeds. */
typedef struct rs_step_detect {
    uint64_t tok[RS_SD_HIST];          /* the last tokens, a ring indexed by call number */
    const char *name[RS_SD_HIST];      /* their collectives' names (static strings) */
    uint32_t run[RS_SD_MAX_PERIOD + 1]; /* run[p]: calls in a row equal to the one p calls before */
    uint64_t n;                        /* calls seen */
    int period;                        /* 0: looking, > 0: found, -1: gave up */
    int phase;                         /* calls of the current step matched so far */
    int lost;                          /* 1 after a call off the pattern, until its first call */
    int64_t step;                      /* the step under way, once found */
    uint64_t pat[RS_SD_MAX_PERIOD];
    const char *pat_name[RS_SD_MAX_PERIOD];
} rs_step_detect;

/* One call's token: the collective's name with its count, datatype and root or op. */
uint64_t rs_step_detect_token(const char *name, uint64_t count, uint64_t datatype, uint64_t extra);

/* Feeds one completed call. Returns the step that begins after it (the first time, the step
 * under way when the period was found, which may have begun a few calls before), or -1 when no
 * step begins here. O(1) once found or given up; before,
 * O(RS_SD_MAX_PERIOD) for at most RS_SD_GIVE_UP calls. */
int64_t rs_step_detect_feed(rs_step_detect *d, uint64_t token, const char *name);

/* "ncclAllReduce x3 per step" (names in the order of their first call in the step); "" until
 * found. */
void rs_step_detect_describe(const rs_step_detect *d, char *buf, size_t n);

#endif
