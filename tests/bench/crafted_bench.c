/*
 * crafted_bench.c — the decoders on inputs made to hurt them, at 1 MB: how long each takes and
 * how much memory the process peaks at (docs/BENCHMARKS.md, "Crafted inputs").
 *
 * Every input of tests/unit/crafted_inputs.h (rings and PyTorch pickles whose keys aim at the
 * decoders' hash tables, sizes that overflow sums) scaled to about 1 MB, hostile .rsnap files
 * (lengths that claim 2^32 elements, nesting 1 MB deep), plain inputs of the same size for
 * comparison, the larger rings (100,000 and 300,000 frees), and any files named on the
 * command line. Each is made just before it is decoded, in a child process of its own whose peak
 * resident memory is reset when the decode begins (the process's own pages stay in it: the
 * baseline row shows how many); the child also times the summary every report starts with.
 * The promise checked in the last column: under 1 s and 64 MB for 1 MB of input.
 * usage: crafted_bench [FILE...]   (label bench: not run in CI)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crafted_inputs.h"
#include "decode.h"
#include "file_read.h"
#include "ring_decode.h"
#include "rsnap_decode.h"
#include "summary.h"
#include "torch_decode.h"

enum { K_RING, K_PICKLE, K_RSNAP, K_FILE, K_NONE };

typedef struct input {
    const char *name;
    int kind;
    unsigned char *buf;
    size_t len;
    const char *path; /* K_FILE */
} input;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct result {
    double decode_s, summary_s;
    double peak_mb; /* VmHWM since the decode began */
    int status;
} result;

/* The process's peak resident memory (VmHWM), in MB; -1 when /proc cannot say. */
static double peak_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lf kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb < 0 ? -1 : kb / 1024.0;
}

/* In the child: decode, summarise, report through the pipe. The peak is reset first (writing 5 to
 * clear_refs), so that it is the decode's: the input, the decoder's memory and the process's own
 * pages, not what the parent had resident when it forked. */
static void child(const input *in, int fd)
{
    result r = {0, 0, 0, 0};
    rs_snap *s = NULL;
    FILE *cr = fopen("/proc/self/clear_refs", "w");
    if (cr) {
        fputs("5", cr);
        fclose(cr);
    }
    double t0 = now_s();
    switch (in->kind) {
    case K_RING: r.status = rs_ring_decode(in->buf, in->len, in->name, &s); break;
    case K_PICKLE: r.status = rs_torch_decode(in->buf, in->len, in->name, NULL, &s); break;
    case K_RSNAP: r.status = rs_rsnap_decode(in->buf, in->len, in->name, &s); break;
    case K_FILE: r.status = rs_decode_file(in->path, NULL, &s); break;
    default: break;
    }
    r.decode_s = now_s() - t0;
    if (s) {
        rs_summary sum;
        t0 = now_s();
        rs_summary_of(s, &sum);
        r.summary_s = now_s() - t0;
    }
    r.peak_mb = peak_mb();
    rs_snap_free(s);
    ssize_t w = write(fd, &r, sizeof r);
    _exit(w == (ssize_t)sizeof r ? 0 : 1);
}

static void run(const input *in)
{
    int p[2];
    if (!in->buf && in->kind != K_FILE && in->kind != K_NONE) {
        printf("%-44s  (out of memory making it)\n", in->name);
        return;
    }
    if (pipe(p) != 0) return;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        child(in, p[1]);
    }
    close(p[1]);
    result r;
    memset(&r, 0, sizeof r);
    ssize_t got = read(p[0], &r, sizeof r);
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    double mb = r.peak_mb;
    double in_mb = (double)in->len / 1048576.0;
    if (got != (ssize_t)sizeof r || !WIFEXITED(status)) {
        printf("%-44s  %7.2f MB  crashed (status %d)\n", in->name, in_mb, status);
        return;
    }
    const char *res = r.status == RANKSNAP_OK ? "decoded" : r.status == RANKSNAP_ERR_FORMAT ? "refused" : "error";
    /* the promise holds per MB of input, 1 MB at least */
    double scale = in_mb > 1 ? in_mb : 1;
    int kept = r.decode_s + r.summary_s < 1.0 * scale && mb < 64.0 * scale;
    printf("%-44s  %7.2f MB  %9.3f s  %9.3f s  %8.1f MB  %-7s  %s\n", in->name, in_mb, r.decode_s,
           r.summary_s, mb, res, in->kind == K_NONE ? "" : kept ? "yes" : "NO");
}

/* n such that make(n) is about `target` bytes, from the size of a small one. */
static uint64_t scaled(unsigned char *(*make)(uint64_t, size_t *), size_t target)
{
    size_t len = 0;
    unsigned char *b = make(1000, &len);
    free(b);
    return len ? (uint64_t)((double)target / ((double)len / 1000.0)) : 1000;
}

static unsigned char *lines_12(uint64_t n, size_t *len)
{
    return crafted_pickle_lines(n, 15, len);
}

/* A plain snapshot pickle: allocations at addresses 4 KiB apart, on one stream. */
static uint64_t plain_address(uint64_t i)
{
    return 0x7f0000000000ull + (i << 12);
}

static unsigned char *plain_pickle(uint64_t n, size_t *len)
{
    return pk_keyed(n, PK_PLAIN, plain_address, len);
}

/* A ring of plain allocations and frees, 1 MB. */
static unsigned char *plain_ring(size_t *len)
{
    cr_ring r;
    uint64_t n = (1048576 - RS_RING_HEADER_SIZE) / sizeof(rs_ring_event);
    if (cr_ring_init(&r, n, 1) != 0) return NULL;
    for (uint64_t i = 0; i < n; i++)
        cr_ring_event(&r, i % 2 ? RS_ACT_FREE_REQUESTED : RS_ACT_ALLOC, 0x7f0000000000ull + (i / 2 << 12),
                      512, i % 2);
    return cr_done(&r.b, len);
}

typedef struct maker {
    const char *name;
    int kind;
    unsigned char *(*make)(size_t *len);
} maker;

static const size_t mb_ = 1048576;
static unsigned char *m_ring_frees(size_t *len)
{
    return crafted_ring_frees((mb_ - RS_RING_HEADER_SIZE - sizeof(rs_ring_segment)) / sizeof(rs_ring_event), len);
}
static unsigned char *m_ring_100k(size_t *len) { return crafted_ring_frees(100000, len); }
static unsigned char *m_ring_300k(size_t *len) { return crafted_ring_frees(300000, len); }
static unsigned char *m_pickle_addresses(size_t *len)
{
    return crafted_pickle_addresses(scaled(crafted_pickle_addresses, mb_), len);
}
static unsigned char *m_pickle_100k(size_t *len) { return crafted_pickle_addresses(100000, len); }
static unsigned char *m_pickle_streams(size_t *len)
{
    return crafted_pickle_streams(scaled(crafted_pickle_streams, mb_), len);
}
static unsigned char *m_pickle_lines(size_t *len) { return crafted_pickle_lines(scaled(lines_12, mb_), 15, len); }
static unsigned char *m_pickle_memo(size_t *len) { return crafted_pickle_memo(scaled(crafted_pickle_memo, mb_), len); }
static unsigned char *m_rsnap_lengths(size_t *len) { return crafted_rsnap_lengths(mb_, len); }
static unsigned char *m_rsnap_deep(size_t *len) { return crafted_rsnap_deep(mb_, len); }
static unsigned char *m_pickle_plain(size_t *len) { return plain_pickle(scaled(plain_pickle, mb_), len); }
/* the same at 3 MB: a table that can be aimed at is quadratic, 9 times slower for 3 times more */
static unsigned char *m_pickle_streams3(size_t *len)
{
    return crafted_pickle_streams(scaled(crafted_pickle_streams, 3 * mb_), len);
}
static unsigned char *m_pickle_lines3(size_t *len) { return crafted_pickle_lines(scaled(lines_12, 3 * mb_), 15, len); }
static unsigned char *m_pickle_memo3(size_t *len) { return crafted_pickle_memo(scaled(crafted_pickle_memo, 3 * mb_), len); }

static const maker makers[] = {
    {"ring: frees at (i+1)<<30", K_RING, m_ring_frees},
    {"ring: plain allocs and frees", K_RING, plain_ring},
    {"ring: sizes overflowing every sum", K_RING, crafted_ring_overflow},
    {"ring: 100,000 frees at (i+1)<<30 (issue)", K_RING, m_ring_100k},
    {"ring: 300,000 frees at (i+1)<<30 (issue)", K_RING, m_ring_300k},
    {"pickle: addresses aimed at fmix64 seed 0", K_PICKLE, m_pickle_addresses},
    {"pickle: 100,000 of them (issue)", K_PICKLE, m_pickle_100k},
    {"pickle: streams aimed at the stream table", K_PICKLE, m_pickle_streams},
    {"pickle: lines aimed at the frame cache", K_PICKLE, m_pickle_lines},
    {"pickle: memo keys aimed at the memo table", K_PICKLE, m_pickle_memo},
    {"pickle: plain allocations", K_PICKLE, m_pickle_plain},
    {"pickle: streams aimed, 3 MB", K_PICKLE, m_pickle_streams3},
    {"pickle: lines aimed, 3 MB", K_PICKLE, m_pickle_lines3},
    {"pickle: memo keys aimed, 3 MB", K_PICKLE, m_pickle_memo3},
    {"rsnap: lengths claiming 2^32 - 1", K_RSNAP, m_rsnap_lengths},
    {"rsnap: 1 MB of nested arrays", K_RSNAP, m_rsnap_deep},
};

int main(int argc, char **argv)
{
    printf("%-44s  %10s  %11s  %11s  %11s  %-7s  %s\n", "input", "size", "decode", "summary",
           "peak RSS", "result", "<1 s, <64 MB per MB");
    input base = {"baseline (no decode: the process itself)", K_NONE, NULL, 0, NULL};
    run(&base);
    for (size_t i = 0; i < sizeof makers / sizeof makers[0]; i++) {
        input in = {makers[i].name, makers[i].kind, NULL, 0, NULL};
        in.buf = makers[i].make(&in.len);
        run(&in);
        free(in.buf);
    }
    for (int i = 1; i < argc; i++) {
        char *fb = NULL;
        size_t fl = 0;
        if (rs_file_read(argv[i], 0, &fb, &fl) != RANKSNAP_OK) {
            fprintf(stderr, "crafted_bench: %s\n", ranksnap_last_error());
            continue;
        }
        free(fb);
        const char *slash = strrchr(argv[i], '/');
        input in = {slash ? slash + 1 : argv[i], K_FILE, NULL, fl, argv[i]};
        run(&in);
    }
    return 0;
}
