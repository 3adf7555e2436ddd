/*
 * attempt.c — rank files and their attempts (attempt.h).
 *
 * The default is the newest complete attempt because a restart that is killed early (the job's
 * time ran out, the next failure came first) leaves a few files that say less than the attempt
 * before it; --attempt K picks any other.
 */
#include <stdio.h>
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

int rs_attempt_parse(const char *name, long *rank, int *attempt, char *tag, size_t tag_size,
                     const char **ext)
{
    int k;
    const char *p = rs_attempt_tail(name, &k);
    if (!p || *p != '.') return -1;
    const char *dot = strrchr(p, '.');
    if (strcmp(dot, ".rsnap") != 0 && strcmp(dot, ".ring") != 0 && strcmp(dot, ".pickle") != 0)
        return -1;
    /* between: nothing, or ".job-TAG" (a job's qualified names, dump.c) */
    size_t n = (size_t)(dot - p);
    if (n != 0 && (n <= 5 || strncmp(p, ".job-", 5) != 0 || (tag && n - 5 >= tag_size))) return -1;
    if (tag) snprintf(tag, tag_size, "%.*s", n ? (int)(n - 5) : 0, p + 5 * (n != 0));
    if (rank) *rank = strtol(name + 5, NULL, 10);
    if (attempt) *attempt = k;
    if (ext) *ext = dot;
    return 0;
}

int rs_attempt_is_rank_file(const char *name)
{
    return rs_attempt_parse(name, NULL, NULL, NULL, 0, NULL) == 0;
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
