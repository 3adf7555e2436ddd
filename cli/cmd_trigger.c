/*
 * cmd_trigger.c — `ranksnap trigger [DIR]`: ask a running job to record a range now.
 *
 * Creates DIR/trigger (DIR: the argument, else RANKSNAP_DIR, else ./ranksnap-out), which rank 0
 * of the job looks for at each step boundary; it removes the file, picks a start step a few
 * steps ahead and tells every rank (rank/mpi/coord.c). Sending SIGUSR1 to rank 0 does the same.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_trigger.h"
#include "options.h"

static int run_trigger(const rs_cli_verb *verb, int argc, char **argv)
{
    if (argc == 1 && (!strcmp(argv[0], "-h") || !strcmp(argv[0], "--help"))) {
        rs_cli_usage(stdout, verb);
        return RS_EXIT_OK;
    }
    if (argc > 1 || (argc == 1 && argv[0][0] == '-'))
        return rs_cli_usage_error(verb, "expected at most one DIR, got '%s'", argv[argc > 1]);
    rs_options opts;
    if (argc == 0 && rs_options_load_one(&opts, "RANKSNAP_DIR", NULL) != RANKSNAP_OK) {
        fprintf(stderr, "ranksnap trigger: %s\n", ranksnap_last_error());
        return 2;
    }
    const char *dir = argc == 1 ? argv[0] : opts.dir;
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "ranksnap trigger: %s: %s (expected the RANKSNAP_DIR of a running job)\n",
                dir, stat(dir, &sb) != 0 ? strerror(errno) : "not a directory");
        return 1;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/trigger", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == EEXIST) {
            printf("ranksnap trigger: %s is already pending (the job has not reached a step boundary yet)\n", path);
            return 0;
        }
        fprintf(stderr, "ranksnap trigger: %s: %s\n", path, strerror(errno));
        return 1;
    }
    char line[64];
    int n = snprintf(line, sizeof line, "%lld\n", (long long)time(NULL));
    if (write(fd, line, (size_t)n) != n || close(fd) != 0) {
        fprintf(stderr, "ranksnap trigger: %s: %s\n", path, strerror(errno));
        unlink(path);
        return 1;
    }
    printf("ranksnap trigger: %s created; rank 0 starts a range at its next step boundary\n", path);
    return 0;
}

const rs_cli_verb rs_cmd_trigger = {
    "trigger", "[DIR]", "start recording on every rank of a running job at its next step",
    "  start recording on every rank of the job writing into DIR (default: RANKSNAP_DIR, else\n"
    "  ranksnap-out) at its next step boundary, for RANKSNAP_TRIGGER_STEPS steps; sending\n"
    "  SIGUSR1 to rank 0 does the same\n",
    run_trigger};
