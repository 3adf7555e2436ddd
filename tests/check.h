/*
 * check.h — the tests' tiny check macros (mimalloc style: no framework).
 *
 * CHECK(cond) reports file:line and the expression and counts a failure, without stopping, so
 * one run shows every broken expectation; CHECK_EQ_U64 and CHECK_STR_EQ also print both values. TEST(name)
 * declares a test function; RUN(name) runs it and prints its name. main returns check_summary(),
 * which prints "N passed, M failed" and gives the exit code: 1 when any CHECK failed, inside a
 * RUN() or not (a check in main or in a mode's function must be able to fail the program too).
 */
#ifndef RANKSNAP_TEST_CHECK_H
#define RANKSNAP_TEST_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int check_failures_;
static int check_count_;
static int check_tests_passed_;
static int check_tests_failed_;
static int check_failures_in_runs_;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        check_count_++;                                                                            \
        if (!(cond)) {                                                                             \
            check_failures_++;                                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                                         \
    do {                                                                                           \
        unsigned long long check_a_ = (unsigned long long)(a), check_b_ = (unsigned long long)(b); \
        check_count_++;                                                                            \
        if (check_a_ != check_b_) {                                                                \
            check_failures_++;                                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%llu vs %llu)\n", __FILE__, __LINE__,  \
                    #a, #b, check_a_, check_b_);                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                                            \
    do {                                                                                           \
        const char *check_h_ = (hay);                                                              \
        check_count_++;                                                                            \
        if (!check_h_ || !strstr(check_h_, (needle))) {                                            \
            check_failures_++;                                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: \"%s\" does not contain \"%s\"\n", __FILE__,     \
                    __LINE__, check_h_ ? check_h_ : "(null)", (needle));                           \
        }                                                                                          \
    } while (0)

#define CHECK_STR_EQ(got, want)                                                                    \
    do {                                                                                           \
        const char *check_g_ = (got);                                                              \
        check_count_++;                                                                            \
        if (!check_g_ || strcmp(check_g_, (want)) != 0) {                                          \
            check_failures_++;                                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: \"%s\" is not \"%s\"\n", __FILE__, __LINE__,     \
                    check_g_ ? check_g_ : "(null)", (want));                                       \
        }                                                                                          \
    } while (0)

#define TEST(name) static void name(void)

#define RUN(name)                                                                                  \
    do {                                                                                           \
        int check_before_ = check_failures_;                                                       \
        name();                                                                                    \
        if (check_failures_ == check_before_) {                                                    \
            check_tests_passed_++;                                                                 \
            printf("ok   %s\n", #name);                                                            \
        } else {                                                                                   \
            check_tests_failed_++;                                                                 \
            check_failures_in_runs_ += check_failures_ - check_before_;                            \
            printf("FAIL %s\n", #name);                                                            \
        }                                                                                          \
        fflush(stdout);                                                                            \
    } while (0)

static inline int check_summary(void)
{
    int outside = check_failures_ - check_failures_in_runs_;
    printf("%d passed, %d failed\n", check_tests_passed_, check_tests_failed_);
    if (outside) printf("%d failed checks outside RUN()\n", outside);
    fflush(stdout);
    return check_tests_failed_ || check_failures_ ? 1 : 0;
}

#endif
