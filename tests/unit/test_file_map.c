/*
 * test_file_map.c — input files mapped instead of copied (collector/decode/file_map.c): a file
 * truncated by another process while it is read reads as zeros past its new end and is said to
 * be cut short, so that a report names it instead of dying of SIGBUS; a real PyTorch pickle cut
 * while mapped fails to decode with that message; any other SIGBUS still kills; small files
 * are read, not mapped.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "decode.h"
#include "errors.h"
#include "file_map.h"
#include "file_read.h"
#include "scratch_dir.h"
#include "torch_decode.h"

static char g_dir[256];

/* `n` bytes of a pattern with no zero byte into dir/name. */
static void write_pattern(const char *path, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    for (size_t i = 0; f && i < n; i++) fputc(1 + (int)(i % 251), f);
    if (f) CHECK(fclose(f) == 0);
}

static void copy_file(const char *from, const char *to)
{
    char *buf = NULL;
    size_t len = 0;
    CHECK(rs_file_read(from, 0, &buf, &len) == RANKSNAP_OK);
    FILE *f = fopen(to, "wb");
    CHECK(f != NULL);
    if (f) {
        CHECK(fwrite(buf, 1, len, f) == len);
        CHECK(fclose(f) == 0);
    }
    free(buf);
}

TEST(a_file_truncated_while_mapped_reads_zeros_past_its_end_and_is_said_cut)
{
    char path[512];
    snprintf(path, sizeof path, "%s/cut.bin", g_dir);
    size_t n = 4 * RS_FILE_MAP_MIN;
    write_pattern(path, n);
    rs_file_mapped m;
    CHECK(rs_file_map(path, &m) == RANKSNAP_OK && m.mapped == 1 && m.len == n);
    rs_file_map_begin(&m);
    CHECK(truncate(path, 8192) == 0);
    /* the first pages are still the file's; the rest, past its new end, read as zeros */
    unsigned long sum = 0;
    for (size_t i = 0; i < n; i += 512) sum += (unsigned char)m.p[i];
    CHECK((unsigned char)m.p[100] == 1 + 100 % 251);
    CHECK(m.p[n - 1] == 0 && m.p[8192 + 4096] == 0);
    CHECK(sum > 0);
    CHECK(rs_file_map_end() == 1);
    /* the next watch starts clean */
    rs_file_map_begin(&m);
    CHECK(m.p[n - 1] == 0);
    CHECK(rs_file_map_end() == 0);
    rs_file_map_close(&m);
}

TEST(a_file_read_whole_while_mapped_is_not_said_cut)
{
    char path[512];
    snprintf(path, sizeof path, "%s/whole.bin", g_dir);
    write_pattern(path, RS_FILE_MAP_MIN + 1);
    rs_file_mapped m;
    CHECK(rs_file_map(path, &m) == RANKSNAP_OK && m.mapped == 1);
    rs_file_map_begin(&m);
    CHECK((unsigned char)m.p[RS_FILE_MAP_MIN] == 1 + RS_FILE_MAP_MIN % 251);
    CHECK(rs_file_map_end() == 0);
    rs_file_map_close(&m);
}

TEST(a_small_file_is_read_not_mapped)
{
    char path[512];
    snprintf(path, sizeof path, "%s/small.bin", g_dir);
    write_pattern(path, 1000);
    rs_file_mapped m;
    CHECK(rs_file_map(path, &m) == RANKSNAP_OK && m.mapped == 0 && m.len == 1000);
    CHECK((unsigned char)m.p[999] == 1 + 999 % 251);
    rs_file_map_close(&m);
    snprintf(path, sizeof path, "%s/absent.bin", g_dir);
    CHECK(rs_file_map(path, &m) == RANKSNAP_ERR_IO);
    CHECK(strstr(ranksnap_last_error(), "absent.bin") != NULL);
}

TEST(a_real_pickle_cut_while_mapped_does_not_decode_as_the_file)
{
    char path[512];
    snprintf(path, sizeof path, "%s/snapshot_rank0.pickle", g_dir);
    copy_file(RS_TEST_DATA_DIR "/oom_rank-3_gpt2.pickle", path);
    rs_file_mapped m;
    CHECK(rs_file_map(path, &m) == RANKSNAP_OK && m.mapped == 1);
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    rs_snap *s = NULL;
    /* whole: it decodes */
    rs_file_map_begin(&m);
    CHECK(rs_torch_decode(m.p, m.len, path, &o, &s) == RANKSNAP_OK && s && s->has_oom);
    CHECK(rs_file_map_end() == 0);
    rs_snap_free(s);
    s = NULL;
    /* rewritten in place (PyTorch's "wb") while mapped: zeros from its new end on */
    CHECK(truncate(path, 32768) == 0);
    rs_file_map_begin(&m);
    ranksnap_status st = rs_torch_decode(m.p, m.len, path, &o, &s);
    CHECK(rs_file_map_end() == 1);
    CHECK(st == RANKSNAP_ERR_FORMAT && s == NULL);
    rs_snap_free(s);
    rs_file_map_close(&m);
}

/* A writer that rewrites the pickle in place (truncate, then write it again) while readers
 * decode it through rs_decode_file: every decode is the whole file or an error naming it. */
typedef struct rewriter {
    const char *path;
    const char *data;
    size_t len;
    atomic_int stop;
} rewriter;

static void *rewrite(void *arg)
{
    rewriter *w = arg;
    while (!atomic_load(&w->stop)) {
        int fd = open(w->path, O_WRONLY | O_TRUNC);
        if (fd < 0) break;
        for (size_t done = 0; done < w->len;) {
            size_t k = w->len - done < 65536 ? w->len - done : 65536;
            ssize_t r = write(fd, w->data + done, k);
            if (r <= 0) break;
            done += (size_t)r;
        }
        close(fd);
    }
    return NULL;
}

TEST(a_pickle_rewritten_while_reports_read_it_is_read_whole_or_named_never_a_crash)
{
    char path[512];
    snprintf(path, sizeof path, "%s/rewritten.pickle", g_dir);
    copy_file(RS_TEST_DATA_DIR "/oom_rank-3_gpt2.pickle", path);
    char *data = NULL;
    size_t len = 0;
    CHECK(rs_file_read(path, 0, &data, &len) == RANKSNAP_OK && len >= RS_FILE_MAP_MIN);
    rewriter w = {path, data, len, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, rewrite, &w) == 0);
    int whole = 0, named = 0, cut = 0, other = 0;
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    for (int i = 0; i < 200; i++) {
        rs_snap *s = NULL;
        ranksnap_status st = rs_decode_file(path, &o, &s);
        if (st == RANKSNAP_OK && s && s->has_oom)
            whole++;
        else if (st != RANKSNAP_OK && strstr(ranksnap_last_error(), "rewritten.pickle"))
            named++, cut += strstr(ranksnap_last_error(), "cut short") != NULL;
        else
            other++;
        rs_snap_free(s);
    }
    atomic_store(&w.stop, 1);
    CHECK(pthread_join(t, NULL) == 0);
    printf("     200 decodes while rewritten: %d whole, %d failed naming the file (%d of them cut "
           "short while mapped)\n", whole, named, cut);
    CHECK(other == 0);
    free(data);
}

/* In a child: `how` 0 reads a page past the end of a truncated mapping nobody watches, 1 sends
 * itself SIGBUS. Returns the signal that ended it, 1000 + its status when it exited. */
static int child_sigbus(int how)
{
    char path[512];
    snprintf(path, sizeof path, "%s/unwatched.bin", g_dir);
    write_pattern(path, 2 * RS_FILE_MAP_MIN);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        /* a sanitizer's report of the signal would read as this test's failure */
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, STDERR_FILENO);
        if (rs_file_map_enable() != RANKSNAP_OK) _exit(3);
        if (how == 0) {
            int fd = open(path, O_RDONLY);
            const volatile char *p = mmap(NULL, 2 * RS_FILE_MAP_MIN, PROT_READ, MAP_PRIVATE, fd, 0);
            if (p == MAP_FAILED || truncate(path, 0) != 0) _exit(4);
            (void)p[RS_FILE_MAP_MIN];
        } else {
            kill(getpid(), SIGBUS);
        }
        _exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
    return WIFSIGNALED(status) ? WTERMSIG(status) : 1000 + WEXITSTATUS(status);
}

#if defined(__SANITIZE_ADDRESS__)
#define RS_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RS_TEST_ASAN 1
#endif
#endif

TEST(a_sigbus_that_is_not_a_watched_mapping_still_kills)
{
    /* what handled SIGBUS before gets it: the default, which kills with it, or under
     * AddressSanitizer its report, which exits with an error */
#ifdef RS_TEST_ASAN
    int a = child_sigbus(0), b = child_sigbus(1);
    CHECK(a != 1000 && a != -1 && b != 1000 && b != -1);
#else
    CHECK(child_sigbus(0) == SIGBUS);
    CHECK(child_sigbus(1) == SIGBUS);
#endif
}

int main(void)
{
    if (scratch_dir_make(g_dir, sizeof g_dir, "ranksnap-file-map") != 0) return 1;
    CHECK(rs_file_map_enable() == RANKSNAP_OK);
    CHECK(rs_file_map_enable() == RANKSNAP_OK); /* once is enough; again is nothing */
    RUN(a_file_truncated_while_mapped_reads_zeros_past_its_end_and_is_said_cut);
    RUN(a_file_read_whole_while_mapped_is_not_said_cut);
    RUN(a_small_file_is_read_not_mapped);
    RUN(a_real_pickle_cut_while_mapped_does_not_decode_as_the_file);
    RUN(a_pickle_rewritten_while_reports_read_it_is_read_whole_or_named_never_a_crash);
    RUN(a_sigbus_that_is_not_a_watched_mapping_still_kills);
    return scratch_dir_done(g_dir, check_summary());
}
