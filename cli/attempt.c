/*
 * attempt.c — rank files and their attempts (attempt.h).
 *
 * The default is the newest complete attempt because a restart that is killed early (the job's
 * time ran out, the next failure came first) leaves a few files that say less than the attempt
 * before it; --attempt K picks any other.
 */
#include <stdlib.h>
#include <string.h>

#include "attempt.h"
#include "text.h"

/* The part after "rank-DIGITS": ".aK" then the extension, or the extension alone; NULL when the
 * name is not a rank file. *attempt gets K (0 without). */
static const char *rs_attempt_tail(const char *name, int *attempt)
{
    *attempt = 0;
    if (strncmp(name, "rank-", 5) != 0) return NULL;
    const char *p = name + 5, *digits = p;
    while (*p >= '0' && *p <= '9') p++;
    if (p == digits) return NULL;
    if (p[0] == '.' && p[1] == 'a' && p[2] >= '0' && p[2] <= '9') {
        long k = 0;
        const char *q = p + 2;
        while (*q >= '0' && *q <= '9' && k < 1000000) k = k * 10 + (*q++ - '0');
        if (*q == '.') {
            *attempt = (int)k;
            p = q;
        }
    }
    return p;
}

int rs_attempt_is_rank_file(const char *name)
{
    int attempt;
    const char *ext = rs_attempt_tail(name, &attempt);
    if (!ext || *ext != '.') return 0;
    /* rank-RRRRR[.aK][.job-TAG].EXT: a job's qualified names (dump.c) are rank files too */
    const char *dot = strrchr(ext, '.');
    return !strcmp(dot, ".rsnap") || !strcmp(dot, ".ring") || !strcmp(dot, ".pickle");
}

int rs_attempt_of_name(const char *path)
{
    int attempt = 0;
    (void)rs_attempt_tail(rs_text_basename(path), &attempt);
    return attempt;
}

int rs_attempt_choose(const int *attempt, const int *rank, const int *world, size_t n, int requested)
{
    if (requested >= 0) return requested;
    if (n == 0) return -1;
    int newest = -1, best = -1;
    for (size_t i = 0; i < n; i++)
        if (attempt[i] > newest) newest = attempt[i];
    /* from the newest down: an attempt is complete when its distinct ranks cover its world */
    for (int a = newest; a >= 0 && best < 0; a--) {
        int w = 0, ranks = 0, any = 0;
        for (size_t i = 0; i < n; i++) {
            if (attempt[i] != a) continue;
            any = 1;
            if (world[i] > w) w = world[i];
            int dup = 0;
            for (size_t j = 0; j < i && !dup; j++) dup = attempt[j] == a && rank[j] == rank[i];
            ranks += !dup;
        }
        if (any && ranks >= w) best = a;
    }
    return best >= 0 ? best : newest;
}
