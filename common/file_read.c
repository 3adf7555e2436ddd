/*
 * file_read.c — rs_file_read (file_read.h): a whole regular file into memory, never blocking on
 * a FIFO or reading a device for ever.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"
#include "file_read.h"

const char *rs_file_kind(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a regular file";
}

int rs_file_open_regular(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        rs_error(RANKSNAP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        rs_error(RANKSNAP_ERR_IO, "%s: cannot stat: %s", path, strerror(err));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        rs_error(RANKSNAP_ERR_IO, "%s: is %s, expected a regular file", path, rs_file_kind(st.st_mode));
        return -1;
    }
    return fd;
}

ranksnap_status rs_file_read(const char *path, uint64_t max_bytes, char **buf, size_t *len)
{
    if (!path || !buf || !len)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_file_read: NULL argument");
    *buf = NULL;
    *len = 0;
    int fd = rs_file_open_regular(path);
    if (fd < 0) return RANKSNAP_ERR_IO;
    struct stat st;
    if (fstat(fd, &st) != 0) st.st_size = 0;
    uint64_t limit = max_bytes ? max_bytes : (uint64_t)SIZE_MAX - 1;
    if ((uint64_t)st.st_size > limit) {
        close(fd);
        return rs_error(RANKSNAP_ERR_FORMAT, "%s: %llu bytes, more than the %llu this reader takes",
                        path, (unsigned long long)st.st_size, (unsigned long long)limit);
    }
    /* Room for what fstat said, one byte more to see the end without a second buffer, and the
     * terminating NUL. */
    size_t cap = (size_t)st.st_size + 2, n = 0;
    char *b = malloc(cap);
    if (!b) {
        close(fd);
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory to read %llu bytes", path,
                        (unsigned long long)st.st_size);
    }
    for (;;) {
        if (n + 1 == cap) {
            /* the file grew while we read it */
            if ((uint64_t)n >= limit) {
                free(b);
                close(fd);
                return rs_error(RANKSNAP_ERR_FORMAT, "%s: grew past the %llu bytes this reader takes",
                                path, (unsigned long long)limit);
            }
            size_t nc = cap <= SIZE_MAX / 2 ? cap * 2 : 0;
            char *nb = nc ? realloc(b, nc) : NULL;
            if (!nb) {
                free(b);
                close(fd);
                return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory to read past %zu bytes",
                                path, n);
            }
            b = nb;
            cap = nc;
        }
        ssize_t got = read(fd, b + n, cap - 1 - n);
        if (got < 0) {
            if (errno == EINTR) continue;
            int err = errno;
            free(b);
            close(fd);
            return rs_error(RANKSNAP_ERR_IO, "%s: read failed after %zu bytes: %s", path, n,
                            strerror(err));
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    close(fd);
    b[n] = '\0';
    *buf = b;
    *len = n;
    return RANKSNAP_OK;
}
