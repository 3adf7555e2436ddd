/*
 * scratch_dir.h — a test program's scratch folder under /tmp, made before its first test and
 * removed after the last only when every check passed: a failure leaves its files to look at.
 */
#ifndef RANKSNAP_TEST_SCRATCH_DIR_H
#define RANKSNAP_TEST_SCRATCH_DIR_H

#include <stdio.h>
#include <stdlib.h>

/* /tmp/NAME.XXXXXX into dir; 0, or -1 with the reason on stderr. */
static inline int scratch_dir_make(char *dir, size_t size, const char *name)
{
    snprintf(dir, size, "/tmp/%s.XXXXXX", name);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return -1;
    }
    return 0;
}

/* Returns rc (check_summary()'s), having removed dir where it is 0. */
static inline int scratch_dir_done(const char *dir, int rc)
{
    if (rc == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
    return rc;
}

#endif
