/*
 * atomic_file.c — writes a file so that readers see the old version or the new one, never half.
 *
 * The bytes go to `<path>.tmp.[<owner>.]<pid>.<n>` in the target's directory (rename is only
 * atomic within one file system), created with O_EXCL|O_NOFOLLOW so that a planted file or
 * symlink at that name is refused rather than written through, mode 0600 because snapshots name
 * hosts, paths and code. Then fsync (the data is durable before the name points at it), rename
 * over the target, and fsync the directory (the rename itself is durable). The counter keeps
 * concurrent writers of one process (the post-mortem thread and an explicit dump) off each
 * other's temporaries. Any failure unlinks the temporary and names the path, the step and errno.
 *
 * Only a regular file is ever replaced: a device node, a FIFO, a socket, a directory or a
 * symbolic link at the target is refused before anything is written (as root, `--html
 * /dev/null` would otherwise have replaced /dev/null with a 0600 file). A process that knows
 * which job it belongs to (rs_atomic_file_set_owner) puts that job and its host in its
 * temporaries' names, so that a later process of the same job on the same host can remove the
 * temporaries a SIGKILL left (rs_atomic_file_clean_stale) without touching anyone else's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"
#include "atomic_file.h"
#include "file_read.h"
#include "text.h"

static atomic_uint rs_tmp_counter;
/* "" or "<job tag>@<host tag>", set once at init (before other threads write) */
static char rs_tmp_owner[RS_ATOMIC_OWNER_MAX];

static ranksnap_status io_error(const char *path, const char *step, int err)
{
    return rs_error(RANKSNAP_ERR_IO, "%s: %s failed: %s", path, step, strerror(err));
}

static ranksnap_status fail_unlink(const char *path, const char *tmp, const char *step, int err)
{
    unlink(tmp);
    return io_error(path, step, err);
}

static int write_all(int fd, const unsigned char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (n == 0) {
            /* a regular file never takes zero bytes unless something is badly wrong */
            errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The directory part of `path` ("." when there is none), malloc'ed. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    size_t n = (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, path, n);
    d[n] = '\0';
    return d;
}

static ranksnap_status sync_dir(const char *path)
{
    char *dir = dir_of(path);
    if (!dir)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory for the directory name", path);
    int fd;
    do {
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        int err = errno;
        free(dir);
        return io_error(path, "opening its directory to fsync", err);
    }
    free(dir);
    if (fsync(fd) != 0) {
        int err = errno;
        close(fd);
        /* some file systems cannot fsync a directory; the rename is done either way */
        if (err == EINVAL || err == ENOTSUP) return RANKSNAP_OK;
        return io_error(path, "fsync of its directory", err);
    }
    if (close(fd) != 0 && errno != EINTR) return io_error(path, "closing its directory", errno);
    return RANKSNAP_OK;
}

void rs_atomic_file_set_owner(const char *job, const char *host)
{
    if (!job || !*job) {
        rs_tmp_owner[0] = '\0';
        return;
    }
    char jt[RS_TEXT_TAG_MAX], ht[RS_TEXT_TAG_MAX];
    rs_text_file_tag(jt, sizeof jt, job);
    rs_text_file_tag(ht, sizeof ht, host && *host ? host : "?");
    snprintf(rs_tmp_owner, sizeof rs_tmp_owner, "%s@%s", jt, ht);
}

/* Anything but a regular file at `path` is refused; a missing one is fine. */
static ranksnap_status check_target(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return RANKSNAP_OK;
        return io_error(path, "lstat", errno);
    }
    if (S_ISREG(st.st_mode)) return RANKSNAP_OK;
    return rs_error(RANKSNAP_ERR_IO, "%s: is %s; refusing to replace it with a regular file "
                    "(give the path of a regular file, or of none)", path, rs_file_kind(st.st_mode));
}

/* Moves `tmp` to `path` without ever replacing a file there: RENAME_NOREPLACE, else (a file
 * system without it) link + unlink, which fails on an existing name just the same, else (one
 * without hard links either) a look before the rename, the best such a file system allows. */
int rs_atomic_file_rename(const char *tmp, const char *path, int replace)
{
    if (replace) return rename(tmp, path);
#if defined(RENAME_NOREPLACE)
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) return -1;
#endif
    if (link(tmp, path) == 0) {
        unlink(tmp);
        return 0;
    }
    if (errno != EPERM && errno != ENOTSUP && errno != ENOSYS) return -1;
    struct stat st;
    if (lstat(path, &st) == 0) {
        errno = EEXIST;
        return -1;
    }
    return rename(tmp, path);
}

void rs_atomic_file_temp_name(const char *path, char *buf, size_t n)
{
    unsigned k = atomic_fetch_add(&rs_tmp_counter, 1u);
    if (rs_tmp_owner[0])
        snprintf(buf, n, "%s.tmp.%s.%ld.%u", path, rs_tmp_owner, (long)getpid(), k);
    else
        snprintf(buf, n, "%s.tmp.%ld.%u", path, (long)getpid(), k);
}

ranksnap_status rs_atomic_file_begin(const char *path, rs_atomic_writer *w)
{
    memset(w, 0, sizeof *w);
    w->fd = -1;
    if (!path || !*path) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_atomic_file_write: empty path");
    RS_CHECK(check_target(path));
    size_t tlen = strlen(path) + RS_ATOMIC_TMP_EXTRA;
    char *tmp = malloc(tlen);
    if (!tmp) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory for the temporary name", path);
    rs_atomic_file_temp_name(path, tmp, tlen);
    int fd;
    do {
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        ranksnap_status st = rs_error(RANKSNAP_ERR_IO, "%s: creating the temporary file %s "
                                      "failed: %s", path, tmp, strerror(errno));
        free(tmp);
        return st;
    }
    w->path = path;
    w->tmp = tmp;
    w->fd = fd;
    return RANKSNAP_OK;
}

ranksnap_status rs_atomic_file_append(rs_atomic_writer *w, const void *buf, size_t len)
{
    if (w->fd < 0) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_atomic_file_append: no file");
    if (!buf && len) {
        rs_atomic_file_abort(w);
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_atomic_file_write: NULL buffer");
    }
    if (write_all(w->fd, buf, len) == 0) return RANKSNAP_OK;
    int err = errno;
    const char *path = w->path;
    rs_atomic_file_abort(w);
    return io_error(path, "writing", err);
}

void rs_atomic_file_abort(rs_atomic_writer *w)
{
    if (w->fd >= 0) close(w->fd);
    if (w->tmp) unlink(w->tmp);
    free(w->tmp);
    w->tmp = NULL;
    w->fd = -1;
}

ranksnap_status rs_atomic_file_commit(rs_atomic_writer *w, int durable, int replace, int *existed)
{
    if (existed) *existed = 0;
    if (w->fd < 0) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_atomic_file_commit: no file");
    const char *path = w->path, *tmp = w->tmp;
    int fd = w->fd;
    w->fd = -1;
    ranksnap_status st = RANKSNAP_OK;
    if (durable && fsync(fd) != 0) {
        int err = errno;
        close(fd);
        st = fail_unlink(path, tmp, "fsync", err);
    } else if (close(fd) != 0 && errno != EINTR) {
        /* on Linux EINTR from close still closes the descriptor, and the data is already synced */
        st = fail_unlink(path, tmp, "close", errno);
    } else if (rs_atomic_file_rename(tmp, path, replace) != 0) {
        int err = errno;
        if (existed && err == EEXIST) *existed = 1;
        st = fail_unlink(path, tmp, replace ? "rename" : "rename (without replacing)", err);
    }
    free(w->tmp);
    w->tmp = NULL;
    RS_CHECK(st);
    return durable ? sync_dir(path) : RANKSNAP_OK;
}

static ranksnap_status write_file(const char *path, const void *buf, size_t len, int durable,
                                  int replace, int *existed)
{
    if (existed) *existed = 0;
    if (!path || !*path || (!buf && len))
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_atomic_file_write: %s",
                        !path || !*path ? "empty path" : "NULL buffer");
    rs_atomic_writer w;
    RS_CHECK(rs_atomic_file_begin(path, &w));
    RS_CHECK(rs_atomic_file_append(&w, buf, len));
    return rs_atomic_file_commit(&w, durable, replace, existed);
}

ranksnap_status rs_atomic_file_write(const char *path, const void *buf, size_t len)
{
    return write_file(path, buf, len, 1, 1, NULL);
}

ranksnap_status rs_atomic_file_write_ex(const char *path, const void *buf, size_t len, int durable)
{
    return write_file(path, buf, len, durable, 1, NULL);
}

ranksnap_status rs_atomic_file_create(const char *path, const void *buf, size_t len, int durable,
                                      int *existed)
{
    return write_file(path, buf, len, durable, 0, existed);
}

/* The pid of `name` when it is `<base>.tmp.<owner>.<pid>.<n>`, else 0. */
static long stale_pid(const char *name, const char *prefix, size_t prefix_len)
{
    if (strncmp(name, prefix, prefix_len) != 0) return 0;
    const char *p = name + prefix_len;
    char *end;
    errno = 0;
    long pid = strtol(p, &end, 10);
    if (errno || end == p || *end != '.' || pid <= 0) return 0;
    p = end + 1;
    strtoul(p, &end, 10);
    if (end == p || *end) return 0;
    return pid;
}

size_t rs_atomic_file_clean_stale(const char *path)
{
    if (!rs_tmp_owner[0] || !path || !*path) return 0;
    char *dir = dir_of(path);
    if (!dir) return 0;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t plen = strlen(base) + strlen(rs_tmp_owner) + 8;
    char *prefix = malloc(plen);
    DIR *d = prefix ? opendir(dir) : NULL;
    size_t removed = 0;
    if (d) {
        snprintf(prefix, plen, "%s.tmp.%s.", base, rs_tmp_owner);
        size_t n = strlen(prefix);
        int dfd = dirfd(d);
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            long pid = stale_pid(e->d_name, prefix, n);
            if (pid == 0 || pid == (long)getpid()) continue;
            struct stat st;
            /* this user's regular files only, and only of a process that no longer exists (its
             * job and host are in the name: the pid is one of this host's) */
            if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
                st.st_uid != geteuid())
                continue;
            if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
            if (unlinkat(dfd, e->d_name, 0) == 0) removed++;
        }
        closedir(d);
    }
    free(prefix);
    free(dir);
    return removed;
}
