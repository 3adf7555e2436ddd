/*
 * test_atomic_file.c — snapshot files appear whole or not at all, private, with no temporaries
 * left behind, and every failure names the path and the step that failed. Tests run as root in
 * CI, where permission bits do not stop anything, so failures are forced with missing
 * directories, a regular file used as a directory, a directory in the target's place and
 * symlinks planted at the temporary names.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "atomic_file.h"

static char dir[] = "/tmp/ranksnap-atomic-XXXXXX";

static void path_in(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

/* Contents of `path` into buf (at most n bytes); returns the length or -1. */
static long read_all(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    long total = 0;
    for (;;) {
        ssize_t r = read(fd, buf + total, n - (size_t)total);
        if (r < 0) {
            close(fd);
            return -1;
        }
        if (r == 0) break;
        total += r;
        if ((size_t)total == n) break;
    }
    close(fd);
    return total;
}

/* Entries of the test directory other than "." and "..". */
static int count_entries(void)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

static int has_temporary(void)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".tmp.")) found = 1;
    closedir(d);
    return found;
}

TEST(atomic_write_creates_the_file_private_with_the_exact_bytes)
{
    char path[256], got[64];
    struct stat st;
    path_in(path, sizeof path, "a.rsnap");
    CHECK(rs_atomic_file_write(path, "hello snapshot", 14) == RANKSNAP_OK);
    CHECK(stat(path, &st) == 0);
    CHECK_EQ_U64(st.st_mode & 07777, 0600);
    CHECK_EQ_U64(read_all(path, got, sizeof got), 14);
    CHECK(memcmp(got, "hello snapshot", 14) == 0);
    CHECK(!has_temporary());
    unlink(path);
}

TEST(atomic_write_replaces_an_existing_file_by_rename)
{
    char path[256], keep[256], got[64];
    struct stat before, after;
    path_in(path, sizeof path, "b.rsnap");
    path_in(keep, sizeof keep, "b.old");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CHECK(write(fd, "old contents, longer than the new", 33) == 33);
    close(fd);
    /* a reader that opened the old file keeps seeing it whole: the old inode is not rewritten */
    CHECK(link(path, keep) == 0);
    CHECK(stat(path, &before) == 0);

    CHECK(rs_atomic_file_write(path, "new", 3) == RANKSNAP_OK);
    CHECK(stat(path, &after) == 0);
    CHECK(before.st_ino != after.st_ino);
    CHECK_EQ_U64(after.st_mode & 07777, 0600);
    CHECK_EQ_U64(read_all(path, got, sizeof got), 3);
    CHECK(memcmp(got, "new", 3) == 0);
    CHECK_EQ_U64(read_all(keep, got, sizeof got), 33);
    CHECK(!has_temporary());
    unlink(path);
    unlink(keep);
}

TEST(atomic_write_of_zero_bytes_creates_an_empty_file)
{
    char path[256], got[8];
    path_in(path, sizeof path, "empty.rsnap");
    CHECK(rs_atomic_file_write(path, "", 0) == RANKSNAP_OK);
    CHECK_EQ_U64(read_all(path, got, sizeof got), 0);
    unlink(path);
}

TEST(atomic_write_leaves_only_the_target_after_many_writes)
{
    char path[256];
    path_in(path, sizeof path, "many.rsnap");
    for (int i = 0; i < 20; i++) CHECK(rs_atomic_file_write(path, "x", 1) == RANKSNAP_OK);
    CHECK_EQ_U64(count_entries(), 1);
    unlink(path);
}

TEST(atomic_write_into_a_missing_directory_names_the_path)
{
    char path[256];
    path_in(path, sizeof path, "missing/rank-00000.rsnap");
    CHECK(rs_atomic_file_write(path, "x", 1) == RANKSNAP_ERR_IO);
    CHECK_STR_CONTAINS(ranksnap_last_error(), path);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "creating the temporary file");
    CHECK_STR_CONTAINS(ranksnap_last_error(), strerror(ENOENT));
    CHECK_EQ_U64(count_entries(), 0);
}

TEST(atomic_write_under_a_regular_file_names_the_path)
{
    char file[128], path[256];
    path_in(file, sizeof file, "plain");
    snprintf(path, sizeof path, "%s/rank-00000.rsnap", file);
    CHECK(rs_atomic_file_write(file, "x", 1) == RANKSNAP_OK);
    CHECK(rs_atomic_file_write(path, "x", 1) == RANKSNAP_ERR_IO);
    CHECK_STR_CONTAINS(ranksnap_last_error(), path);
    CHECK_STR_CONTAINS(ranksnap_last_error(), strerror(ENOTDIR));
    unlink(file);
}

TEST(failed_rename_removes_the_temporary_and_keeps_the_target)
{
    char path[256], inner[256];
    path_in(path, sizeof path, "occupied.rsnap");
    path_in(inner, sizeof inner, "occupied.rsnap/inside");
    CHECK(mkdir(path, 0700) == 0);
    CHECK(rs_atomic_file_write(inner, "y", 1) == RANKSNAP_OK);
    /* a non-empty directory where the file should go: rename must fail */
    CHECK(rs_atomic_file_write(path, "x", 1) == RANKSNAP_ERR_IO);
    CHECK_STR_CONTAINS(ranksnap_last_error(), path);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "rename failed");
    CHECK(!has_temporary());
    struct stat st;
    CHECK(stat(inner, &st) == 0);
    unlink(inner);
    rmdir(path);
}

TEST(atomic_write_refuses_a_symlink_planted_at_the_temporary_name)
{
    char path[128], victim[128], link_path[256], got[32];
    path_in(path, sizeof path, "target.rsnap");
    path_in(victim, sizeof victim, "victim");
    CHECK(rs_atomic_file_write(victim, "precious", 8) == RANKSNAP_OK);
    /* temporaries are <path>.tmp.<pid>.<counter>; this process has used fewer than 500 */
    for (int i = 0; i < 500; i++) {
        snprintf(link_path, sizeof link_path, "%s.tmp.%ld.%d", path, (long)getpid(), i);
        CHECK(symlink(victim, link_path) == 0);
    }
    CHECK(rs_atomic_file_write(path, "attack", 6) == RANKSNAP_ERR_IO);
    CHECK_STR_CONTAINS(ranksnap_last_error(), path);
    CHECK_STR_CONTAINS(ranksnap_last_error(), strerror(EEXIST));
    CHECK_EQ_U64(read_all(victim, got, sizeof got), 8);
    CHECK(memcmp(got, "precious", 8) == 0);
    for (int i = 0; i < 500; i++) {
        snprintf(link_path, sizeof link_path, "%s.tmp.%ld.%d", path, (long)getpid(), i);
        unlink(link_path);
    }
    unlink(victim);
    CHECK_EQ_U64(count_entries(), 0);
}

/* Two writers replace one file while a reader reads it: the reader only ever sees one whole
 * version, never a mix or a short file. */
#define RACE_WRITES 100
static char race_path[256];
static char race_a[4096], race_b[1024];

static void *race_writer(void *arg)
{
    const char *content = arg;
    size_t len = content == race_a ? sizeof race_a : sizeof race_b;
    for (int i = 0; i < RACE_WRITES; i++)
        if (rs_atomic_file_write(race_path, content, len) != RANKSNAP_OK) return (void *)1;
    return NULL;
}

TEST(concurrent_writers_never_expose_a_partial_file)
{
    static char got[8192];
    pthread_t ta, tb;
    memset(race_a, 'a', sizeof race_a);
    memset(race_b, 'b', sizeof race_b);
    path_in(race_path, sizeof race_path, "race.rsnap");
    CHECK(rs_atomic_file_write(race_path, race_a, sizeof race_a) == RANKSNAP_OK);
    CHECK(pthread_create(&ta, NULL, race_writer, race_a) == 0);
    CHECK(pthread_create(&tb, NULL, race_writer, race_b) == 0);
    int torn = 0, reads = 0;
    for (int i = 0; i < 2000; i++) {
        long n = read_all(race_path, got, sizeof got);
        reads++;
        if (n == (long)sizeof race_a)
            torn += memcmp(got, race_a, sizeof race_a) != 0;
        else if (n == (long)sizeof race_b)
            torn += memcmp(got, race_b, sizeof race_b) != 0;
        else
            torn++;
    }
    void *ra = NULL, *rb = NULL;
    CHECK(pthread_join(ta, &ra) == 0);
    CHECK(pthread_join(tb, &rb) == 0);
    CHECK(ra == NULL && rb == NULL);
    CHECK_EQ_U64(torn, 0);
    CHECK(reads == 2000);
    CHECK_EQ_U64(count_entries(), 1);
    unlink(race_path);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(atomic_write_creates_the_file_private_with_the_exact_bytes);
    RUN(atomic_write_replaces_an_existing_file_by_rename);
    RUN(atomic_write_of_zero_bytes_creates_an_empty_file);
    RUN(atomic_write_leaves_only_the_target_after_many_writes);
    RUN(atomic_write_into_a_missing_directory_names_the_path);
    RUN(atomic_write_under_a_regular_file_names_the_path);
    RUN(failed_rename_removes_the_temporary_and_keeps_the_target);
    RUN(atomic_write_refuses_a_symlink_planted_at_the_temporary_name);
    RUN(concurrent_writers_never_expose_a_partial_file);
    rmdir(dir);
    return check_summary();
}
