/*
 * errors.c — status names and the per-thread detail of the last error.
 *
 * The detail lives in a thread-local buffer so that concurrent ranks' threads never see each
 * other's messages and no allocation is needed on an error path (OOM included).
 */
#include <stdarg.h>
#include <stdio.h>

#include "errors.h"
#include "text.h"

static _Thread_local char rs_last_error_buf[1024];

ranksnap_status rs_error(ranksnap_status status, const char *fmt, ...)
{
    /* Details name files, hosts and jobs read from files: the terminal that prints one must not
     * obey it (text.h). Formatted apart first, since an argument may be the previous detail. */
    char raw[sizeof rs_last_error_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    rs_text_escape(rs_last_error_buf, sizeof rs_last_error_buf, raw);
    return status;
}

void rs_error_clear(void)
{
    rs_last_error_buf[0] = '\0';
}

const char *ranksnap_last_error(void)
{
    return rs_last_error_buf;
}

const char *ranksnap_strerror(ranksnap_status status)
{
    switch (status) {
    case RANKSNAP_OK: return "success";
    case RANKSNAP_ERR_INVALID_ARGUMENT: return "invalid argument";
    case RANKSNAP_ERR_OUT_OF_MEMORY: return "out of device memory";
    case RANKSNAP_ERR_HOST_MEMORY: return "out of host memory";
    case RANKSNAP_ERR_NOT_INITIALIZED: return "ranksnap is not initialized";
    case RANKSNAP_ERR_OPTION: return "invalid RANKSNAP_* option";
    case RANKSNAP_ERR_BACKEND: return "device backend error";
    case RANKSNAP_ERR_UNKNOWN_POINTER: return "pointer not allocated by ranksnap";
    case RANKSNAP_ERR_IO: return "I/O error";
    case RANKSNAP_ERR_FORMAT: return "malformed snapshot";
    case RANKSNAP_ERR_UNSUPPORTED: return "not supported in this build";
    case RANKSNAP_ERR_MPI: return "MPI error";
    case RANKSNAP_ERR_DISABLED: return "ranksnap is disabled (RANKSNAP_DISABLE=1)";
    }
    return "unknown ranksnap status";
}

const char *ranksnap_version(void)
{
    return RANKSNAP_VERSION_STRING;
}
