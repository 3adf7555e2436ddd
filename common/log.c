/*
 * log.c — RANKSNAP_DEBUG / RANKSNAP_DEBUG_SUBSYS logging.
 *
 * Each line is formatted into a stack buffer and written with a single write(2), prefixed
 * "host:pid:rank ranksnap LEVEL", as NCCL prefixes its lines, so that lines of ranks sharing a
 * terminal stay whole. Level and mask are plain ints read without a lock: they are set once at
 * init, before other threads use ranksnap.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "text.h"

static int rs_log_level_ = RS_LOG_WARN;
static unsigned rs_log_mask_ = RS_SUB_ALL;
static int rs_log_rank_ = -1;
static char rs_log_host_[64];

void rs_log_configure(int level, unsigned subsys_mask, int rank)
{
    rs_log_level_ = level;
    rs_log_mask_ = subsys_mask;
    rs_log_rank_ = rank;
    if (gethostname(rs_log_host_, sizeof rs_log_host_) != 0) strcpy(rs_log_host_, "?");
    rs_log_host_[sizeof rs_log_host_ - 1] = '\0';
}

int rs_log_enabled(int level, unsigned subsys)
{
    return level <= rs_log_level_ && (subsys & rs_log_mask_) != 0;
}

void rs_log(int level, unsigned subsys, const char *fmt, ...)
{
    static const char *const names[] = {"NONE", "WARN", "INFO", "TRACE"};
    if (!rs_log_enabled(level, subsys)) return;
    if (!rs_log_host_[0] && gethostname(rs_log_host_, sizeof rs_log_host_) != 0)
        strcpy(rs_log_host_, "?");
    char line[1024];
    int n = snprintf(line, sizeof line, "%s:%d:%d ranksnap %s ", rs_log_host_, (int)getpid(),
                     rs_log_rank_, names[level < 0 ? 0 : level > 3 ? 3 : level]);
    if (n < 0) return;
    /* a message may carry names read from files: escaped (text.h), and one line whatever it holds */
    char msg[sizeof line];
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (m < 0) return;
    rs_text_escape(line + n, sizeof line - (size_t)n - 1, msg);
    size_t len = strlen(line);
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w; /* logging must never fail the caller */
}
