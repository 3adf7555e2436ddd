/*
 * test_identity — a rank's identity from the framework's process group (ranksnap_set_identity):
 * it names the files when given before the start; it renames a running rank until that rank
 * wrote a file, and never after; in a PyTorch job a process started as one of several without
 * its rank does not start before it is given (Lightning's launcher exports no RANK).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ranksnap.h"

/* The launcher variables the runtime reads, all unset: a program started on its own. */
static void clear_launcher(const char *dir)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
                                       "PMI_RANK", "PMI_SIZE", "PMIX_SIZE", "SLURM_PROCID",
                                       "SLURM_NTASKS", "SLURM_LOCALID", "RANK", "WORLD_SIZE",
                                       "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                       "RANKSNAP_STEPS", "RANKSNAP_RECORDER", NULL};
    for (const char *const *v = vars; *v; v++) unsetenv(*v);
    setenv("RANKSNAP_DIR", dir, 1);
    setenv("RANKSNAP_BACKEND", "sim", 1);
    setenv("RANKSNAP_REPORT", "0", 1);
    setenv("RANKSNAP_JOB", "own-job", 1);
}

/* Runs fn(dir) in a fresh process (the runtime is one per process); its exit status. */
static int in_child(int (*fn)(const char *dir), const char *dir)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        clear_launcher(dir);
        _exit(fn(dir));
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

static int exists(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* fn in a child with a fresh RANKSNAP_DIR; the child's exit status. */
static int in_fresh_dir(int (*fn)(const char *dir), const char *tag)
{
    char dir[256], cmd[512];
    snprintf(dir, sizeof dir, "/tmp/rs-identity-%s-%d", tag, (int)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    int st = in_child(fn, dir);
    CHECK(system(cmd) == 0);
    return st;
}

TEST(identity_out_of_range_is_refused)
{
    CHECK(ranksnap_set_identity(-1, 2, NULL) == RANKSNAP_ERR_INVALID_ARGUMENT);
    CHECK(ranksnap_set_identity(2, 2, NULL) == RANKSNAP_ERR_INVALID_ARGUMENT);
    CHECK(ranksnap_set_identity(0, 0, NULL) == RANKSNAP_ERR_INVALID_ARGUMENT);
    CHECK(ranksnap_set_identity(0, 2, "") == RANKSNAP_ERR_INVALID_ARGUMENT);
}

static int before_init(const char *dir)
{
    char job[64];
    if (ranksnap_job(job, sizeof job) != RANKSNAP_OK || strcmp(job, "own-job") != 0) return 1;
    if (ranksnap_set_identity(3, 4, "agreed") != RANKSNAP_OK) return 2;
    if (ranksnap_init(NULL) != RANKSNAP_OK) return 3;
    if (ranksnap_job(job, sizeof job) != RANKSNAP_OK || strcmp(job, "agreed") != 0) return 4;
    if (ranksnap_job(job, 3) != RANKSNAP_ERR_INVALID_ARGUMENT) return 5;
    if (ranksnap_dump(NULL) != RANKSNAP_OK) return 6;
    ranksnap_finalize();
    return exists(dir, "rank-00003.rsnap") ? 0 : 7;
}

TEST(identity_given_before_the_start_names_the_files)
{
    CHECK_EQ_U64(in_fresh_dir(before_init, "before"), 0);
}

static int running(const char *dir)
{
    setenv("RANKSNAP_RING", "memory", 1); /* a ring file would be a file of rank 0's already */
    if (ranksnap_init(NULL) != RANKSNAP_OK) return 1;
    /* rank 0 of 1 of its own job, as a program started on its own; then the group says 2 of 3 */
    if (ranksnap_set_identity(2, 3, "agreed") != RANKSNAP_OK) return 2;
    if (ranksnap_dump(NULL) != RANKSNAP_OK) return 3;
    if (!exists(dir, "rank-00002.rsnap") || exists(dir, "rank-00000.rsnap")) return 4;
    /* its file is written under rank 2: it stays rank 2 */
    if (ranksnap_set_identity(1, 3, "agreed") != RANKSNAP_ERR_UNSUPPORTED) return 5;
    if (ranksnap_set_identity(2, 3, "other") != RANKSNAP_ERR_UNSUPPORTED) return 6;
    if (ranksnap_set_identity(2, 3, "agreed") != RANKSNAP_OK) return 7;
    if (ranksnap_set_identity(2, 3, NULL) != RANKSNAP_OK) return 8;
    ranksnap_finalize();
    return 0;
}

TEST(identity_of_a_running_rank_changes_until_it_wrote_a_file)
{
    CHECK_EQ_U64(in_fresh_dir(running, "running"), 0);
}

static int torch_without_rank(const char *dir)
{
    (void)dir;
    setenv("RANKSNAP_RECORDER", "torch", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("RANKSNAP_STEPS", "100:101", 1); /* no range: there is no framework to record it */
    if (ranksnap_init(NULL) != RANKSNAP_ERR_NOT_INITIALIZED) return 1;
    if (!strstr(ranksnap_last_error(), "not recording yet")) return 2;
    /* not a failure that sticks: the identity starts it */
    if (ranksnap_set_identity(1, 2, NULL) != RANKSNAP_OK) return 3;
    if (ranksnap_init(NULL) != RANKSNAP_OK) return 4;
    char job[64];
    if (ranksnap_job(job, sizeof job) != RANKSNAP_OK || strcmp(job, "own-job") != 0) return 5;
    ranksnap_finalize();
    return 0;
}

TEST(torch_process_started_without_its_rank_waits_for_it)
{
    CHECK_EQ_U64(in_fresh_dir(torch_without_rank, "torch"), 0);
}

int main(void)
{
    RUN(identity_out_of_range_is_refused);
    RUN(identity_given_before_the_start_names_the_files);
    RUN(identity_of_a_running_rank_changes_until_it_wrote_a_file);
    RUN(torch_process_started_without_its_rank_waits_for_it);
    return check_summary();
}
