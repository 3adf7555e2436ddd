/*
 * errors.h — the thread's last error detail and the propagate-on-error macro.
 *
 * Errors are values (ranksnap_status). The code says what class of failure; the detail string
 * (ranksnap_last_error) says which file, option, rank or size. RS_CHECK makes the error path one
 * line, as NCCLCHECK does in NCCL.
 */
#ifndef RANKSNAP_ERRORS_H
#define RANKSNAP_ERRORS_H

#include "ranksnap.h"

#if defined(__GNUC__)
#define RS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define RS_PRINTF(a, b)
#endif

/* Sets the calling thread's detail message and returns `status`, so that error paths read
 * `return rs_error(RANKSNAP_ERR_IO, "%s: %s", path, strerror(errno));`. */
ranksnap_status rs_error(ranksnap_status status, const char *fmt, ...) RS_PRINTF(2, 3);
void rs_error_clear(void);

#define RS_CHECK(call)                                                                             \
    do {                                                                                           \
        ranksnap_status rs_check_st_ = (call);                                                     \
        if (rs_check_st_ != RANKSNAP_OK) return rs_check_st_;                                      \
    } while (0)

#endif
