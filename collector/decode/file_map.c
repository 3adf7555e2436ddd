/*
 * file_map.c — file_map.h: mapping input files, and the SIGBUS handler that keeps a truncated
 * one from killing the process.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"
#include "file_map.h"
#include "file_read.h"

static atomic_int g_enabled;
static struct sigaction g_old;
static uintptr_t g_page;

/* The mapping this thread reads; the handler runs on the thread whose read faulted. */
static _Thread_local const char *t_watch;
static _Thread_local size_t t_watch_len;
static _Thread_local volatile sig_atomic_t t_cut;

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    const char *a = si->si_addr;
    if (si->si_code == BUS_ADRERR && t_watch && a >= t_watch && a < t_watch + t_watch_len) {
        void *page = (void *)((uintptr_t)a & ~(g_page - 1));
        /* mmap is a plain system call on Linux, safe here; the read then runs again, on zeros */
        if (mmap(page, g_page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == page) {
            t_cut = 1;
            return;
        }
    }
    /* Not ours: the disposition before, which a fault meets when its read runs again and a
     * signal sent with kill() when it is raised again (it is blocked until this returns). */
    (void)sigaction(SIGBUS, &g_old, NULL);
    if (si->si_code <= 0) (void)raise(sig);
}

ranksnap_status rs_file_map_enable(void)
{
    if (atomic_load(&g_enabled)) return RANKSNAP_OK;
    long page = sysconf(_SC_PAGESIZE);
    g_page = page > 0 ? (uintptr_t)page : 4096;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &g_old) != 0)
        return rs_error(RANKSNAP_ERR_IO, "cannot install the SIGBUS handler: %s", strerror(errno));
    atomic_store(&g_enabled, 1);
    return RANKSNAP_OK;
}

ranksnap_status rs_file_map(const char *path, rs_file_mapped *m)
{
    memset(m, 0, sizeof *m);
    if (atomic_load(&g_enabled)) {
        int fd = rs_file_open_regular(path);
        if (fd < 0) return RANKSNAP_ERR_IO;
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_size >= (off_t)RS_FILE_MAP_MIN &&
            (uint64_t)st.st_size <= SIZE_MAX) {
            /* no MAP_POPULATE: its walk of every page holds the process's memory lock, which
             * the other threads' mprotect (malloc growing their heaps) needs; with it a report's
             * two threads used up to a fifth more CPU. The decoder's own page faults map 16
             * pages of the page cache each. */
            void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (p != MAP_FAILED) {
                close(fd);
                m->p = p;
                m->len = (size_t)st.st_size;
                m->mapped = 1;
                return RANKSNAP_OK;
            }
        }
        close(fd); /* small, or not mappable: read */
    }
    char *buf = NULL;
    RS_CHECK(rs_file_read(path, 0, &buf, &m->len));
    m->p = buf;
    return RANKSNAP_OK;
}

void rs_file_map_begin(const rs_file_mapped *m)
{
    t_cut = 0;
    t_watch_len = m->mapped ? m->len : 0;
    t_watch = m->mapped ? m->p : NULL;
}

int rs_file_map_end(void)
{
    t_watch = NULL;
    t_watch_len = 0;
    return t_cut != 0;
}

void rs_file_map_close(rs_file_mapped *m)
{
    if (m->mapped)
        (void)munmap((void *)m->p, m->len);
    else
        free((void *)m->p);
    memset(m, 0, sizeof *m);
}
