/*
 * trigger_file.c — triggers published through RANKSNAP_DIR for ranks without MPI
 * (trigger_file.h).
 *
 * The file names the job and the attempt (launcher.h) beside the start step, so that a file left
 * by an earlier run or attempt in the same directory starts nothing. Readers see the old file or
 * the new one (atomic_file.c), and a start is taken once: only a later one than the last seen.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "errors.h"
#include "file_read.h"
#include "launcher.h"
#include "log.h"
#include "options.h"
#include "trigger_file.h"

/* This process's "ATTEMPT JOB" key. */
static void rs_trigger_key(char *buf, size_t n)
{
    char host[256], job[320];
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    rs_launcher_job(host, job, sizeof job);
    snprintf(buf, n, "%d %s", rs_launcher_attempt(), job);
}

void rs_trigger_file_publish(const char *dir, int64_t start)
{
    char path[RS_PATH_MAX + 32], key[400], text[480];
    snprintf(path, sizeof path, "%s/trigger.start", dir);
    rs_trigger_key(key, sizeof key);
    int n = snprintf(text, sizeof text, "%" PRId64 " %s\n", start, key);
    if (n < 0 || (size_t)n >= sizeof text || rs_atomic_file_write_ex(path, text, (size_t)n, 0) != RANKSNAP_OK)
        RS_WARN(RS_SUB_MPI, "trigger: cannot publish the start step for the other ranks: %s",
                ranksnap_last_error());
}

int rs_trigger_file_poll(const char *dir, int64_t *seen, int64_t *start)
{
    char path[RS_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/trigger.start", dir);
    struct stat sb;
    if (stat(path, &sb) != 0) return 0;
    char *buf = NULL;
    size_t len = 0;
    if (rs_file_read(path, 4096, &buf, &len) != RANKSNAP_OK) {
        rs_error_clear();
        return 0;
    }
    char key[400];
    rs_trigger_key(key, sizeof key);
    char *end = NULL;
    long long s = strtoll(buf, &end, 10);
    size_t kl = strlen(key);
    int ok = end != buf && *end == ' ' && strncmp(end + 1, key, kl) == 0 &&
             (end[1 + kl] == '\n' || end[1 + kl] == '\0') && s > *seen;
    free(buf);
    if (!ok) return 0;
    *seen = s;
    *start = s;
    RS_INFO(RS_SUB_MPI, "trigger: rank 0 published a range from step %lld", s);
    return 1;
}
