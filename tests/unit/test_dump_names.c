/*
 * test_dump_names — the names a rank's own dumps take in RANKSNAP_DIR: a snapshot the program
 * writes itself with ranksnap_dump(PATH) under the rank's plain name is this process's file, and
 * the write at finalize replaces it instead of taking it for another job's (seen on the H100:
 * PyTorch's pluggable allocator, dumped by the script, left rank-RRRRR.job-TAG.rsnap beside it).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ranksnap.h"

/* One rank in a child: allocates, dumps to `path` itself, finalizes. 0 when every call worked. */
static int child(const char *dir, const char *path)
{
    setenv("RANKSNAP_DIR", dir, 1);
    setenv("RANKSNAP_BACKEND", "sim", 1);
    setenv("RANKSNAP_REPORT", "0", 1);
    setenv("RANKSNAP_JOB", "names-test", 1);
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    unsetenv("RANKSNAP_STEPS");
    if (ranksnap_init(NULL) != RANKSNAP_OK) return 1;
    void *p = NULL;
    if (ranksnap_malloc(&p, 1 << 20, NULL) != RANKSNAP_OK) return 2;
    if (ranksnap_dump(path) != RANKSNAP_OK) return 3;
    if (ranksnap_free(p) != RANKSNAP_OK) return 4;
    return ranksnap_finalize() == RANKSNAP_OK ? 0 : 5;
}

/* Runs child(dir, path) in a fresh process; its exit status. */
static int run_child(const char *dir, const char *path)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) _exit(child(dir, path));
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

/* How many entries of `dir` start with `prefix`. */
static int count_prefixed(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    closedir(d);
    return n;
}

static void remove_dir(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

static void fresh_dir(char *dir, size_t n, const char *tag)
{
    snprintf(dir, n, "/tmp/rs-dump-names-%s-%d", tag, (int)getpid());
    remove_dir(dir);
}

TEST(a_dump_to_the_ranks_own_name_is_replaced_at_finalize_not_sidestepped)
{
    char dir[256], path[512];
    fresh_dir(dir, sizeof dir, "plain");
    /* spelt another way than RANKSNAP_DIR/rank-00000.rsnap: the same file all the same */
    snprintf(path, sizeof path, "%s/./rank-00000.rsnap", dir);
    CHECK(mkdir(dir, 0700) == 0);
    CHECK_EQ_U64(run_child(dir, path), 0);
    CHECK_EQ_U64(count_prefixed(dir, "rank-00000.rsnap"), 1);
    CHECK_EQ_U64(count_prefixed(dir, "rank-00000.job-"), 0);
    remove_dir(dir);
}

TEST(a_dump_to_another_path_leaves_the_ranks_own_name_to_finalize)
{
    char dir[256], path[512];
    fresh_dir(dir, sizeof dir, "other");
    snprintf(path, sizeof path, "%s/mine.rsnap", dir);
    CHECK(mkdir(dir, 0700) == 0);
    CHECK_EQ_U64(run_child(dir, path), 0);
    CHECK_EQ_U64(count_prefixed(dir, "mine.rsnap"), 1);
    CHECK_EQ_U64(count_prefixed(dir, "rank-00000.rsnap"), 1);
    CHECK_EQ_U64(count_prefixed(dir, "rank-00000.job-"), 0);
    remove_dir(dir);
}

int main(void)
{
    RUN(a_dump_to_the_ranks_own_name_is_replaced_at_finalize_not_sidestepped);
    RUN(a_dump_to_another_path_leaves_the_ranks_own_name_to_finalize);
    return check_summary();
}
