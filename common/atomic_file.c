/*
 * atomic_file.c — writes a file so that readers see the old version or the new one, never half.
 *
 * The bytes go to `<path>.tmp.<pid>.<n>` in the target's directory (rename is only atomic within
 * one file system), created with O_EXCL|O_NOFOLLOW so that a planted file or symlink at that
 * name is refused rather than written through, mode 0600 because snapshots name hosts, paths and
 * code. Then fsync (the data is durable before the name points at it), rename over the target,
 * and fsync the directory (the rename itself is durable). The counter keeps concurrent writers
 * of one process (the post-mortem thread and an explicit dump) off each other's temporaries.
 * Any failure unlinks the temporary and names the path, the step and errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"
#include "atomic_file.h"

static atomic_uint rs_tmp_counter;

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

ranksnap_status rs_atomic_file_write(const char *path, const void *buf, size_t len)
{
    return rs_atomic_file_write_ex(path, buf, len, 1);
}

ranksnap_status rs_atomic_file_write_ex(const char *path, const void *buf, size_t len, int durable)
{
    if (!path || !*path || (!buf && len))
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_atomic_file_write: %s",
                        !path || !*path ? "empty path" : "NULL buffer");

    unsigned n = atomic_fetch_add(&rs_tmp_counter, 1u);
    size_t tlen = strlen(path) + 64;
    char *tmp = malloc(tlen);
    if (!tmp)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory for the temporary name", path);
    snprintf(tmp, tlen, "%s.tmp.%ld.%u", path, (long)getpid(), n);

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

    ranksnap_status st = RANKSNAP_OK;
    if (write_all(fd, buf, len) != 0) {
        int err = errno;
        close(fd);
        st = fail_unlink(path, tmp, "writing", err);
    } else if (durable && fsync(fd) != 0) {
        int err = errno;
        close(fd);
        st = fail_unlink(path, tmp, "fsync", err);
    } else if (close(fd) != 0 && errno != EINTR) {
        /* on Linux EINTR from close still closes the descriptor, and the data is already synced */
        st = fail_unlink(path, tmp, "close", errno);
    } else if (rename(tmp, path) != 0) {
        st = fail_unlink(path, tmp, "rename", errno);
    }
    free(tmp);
    RS_CHECK(st);
    return durable ? sync_dir(path) : RANKSNAP_OK;
}
