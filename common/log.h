/*
 * log.h — logging by level and subsystem, NCCL style.
 *
 * RANKSNAP_DEBUG=WARN|INFO|TRACE and RANKSNAP_DEBUG_SUBSYS=INIT,ALLOC,RECORD,DUMP,MPI,ALL pick what
 * is printed; every line is prefixed with host, pid and rank: "host:pid:rank ranksnap INFO ...".
 * Lines go to stderr in one write() each so that ranks sharing a terminal do not interleave.
 */
#ifndef RANKSNAP_LOG_H
#define RANKSNAP_LOG_H

#include "errors.h"

enum rs_log_level { RS_LOG_NONE = 0, RS_LOG_WARN = 1, RS_LOG_INFO = 2, RS_LOG_TRACE = 3 };
enum rs_log_subsys {
    RS_SUB_INIT = 1u << 0,
    RS_SUB_ALLOC = 1u << 1,
    RS_SUB_RECORD = 1u << 2,
    RS_SUB_DUMP = 1u << 3,
    RS_SUB_MPI = 1u << 4,
    RS_SUB_ALL = 0xffffffffu
};

void rs_log_configure(int level, unsigned subsys_mask, int rank);
int rs_log_enabled(int level, unsigned subsys);
void rs_log(int level, unsigned subsys, const char *fmt, ...) RS_PRINTF(3, 4);

#define RS_WARN(sub, ...) rs_log(RS_LOG_WARN, (sub), __VA_ARGS__)
#define RS_INFO(sub, ...) rs_log(RS_LOG_INFO, (sub), __VA_ARGS__)
#define RS_TRACE(sub, ...) rs_log(RS_LOG_TRACE, (sub), __VA_ARGS__)

#endif
