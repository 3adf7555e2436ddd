/*
 * collect_main.c — the ranksnap-collect program: the MPI half of `ranksnap collect`
 * (cmd_collect.c), which checks the arguments and then becomes this program, so that only this
 * one links Open MPI. MPI is entered through PMPI_*, which no interposer of ranksnap's wraps: no
 * recording runtime starts here.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "atomic_file.h"
#include "attempt.h"
#include "cli.h"
#include "cmd_collect.h"
#include "cmd_report.h"
#include "errors.h"
#include "decode.h"
#include "file_map.h"
#include "text.h"

#define RS_COLLECT_CHUNK ((size_t)64 << 20)
#define RS_TAG_COUNT 901
#define RS_TAG_NAME 902
#define RS_TAG_SIZE 903
#define RS_TAG_DATA 904

static int make_dir(const char *dir)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0700) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(tmp, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

/* Whether the files `a` and `b` hold the same bytes, read through mappings. */
static int same_files(const char *a, const char *b)
{
    rs_file_mapped ma, mb;
    if (rs_file_map(a, &ma) != RANKSNAP_OK) return 0;
    if (rs_file_map(b, &mb) != RANKSNAP_OK) {
        rs_file_map_close(&ma);
        return 0;
    }
    int same = ma.len == mb.len && memcmp(ma.p, mb.p, ma.len) == 0;
    rs_file_map_close(&ma);
    rs_file_map_close(&mb);
    return same;
}

/* Gives one received file, whole in `w`'s temporary, its name in --to; a name already there
 * from this collection is kept once. */
static int store(rs_atomic_writer *w, const char *path, const char *name, int from_rank)
{
    if (access(path, F_OK) == 0) {
        if (same_files(path, w->tmp)) {
            rs_atomic_file_abort(w);
            return 0;
        }
        char shown[600];
        fprintf(stderr, "ranksnap collect: %s came from more than one node (again from rank %d); "
                        "the last one is kept\n", rs_text_escape(shown, sizeof shown, name), from_rank);
    }
    if (rs_atomic_file_commit(w, 1, 1, NULL) != RANKSNAP_OK) {
        fprintf(stderr, "ranksnap collect: %s\n", ranksnap_last_error());
        return -1;
    }
    return 0;
}

/* One of this rank's files, mapped, with its first bytes checked: a file that is not what its
 * name says is named here and not sent (its bytes would only be refused by the report). */
static int open_rank_file(const char *path, int rank, rs_file_mapped *m)
{
    if (rs_file_map(path, m) != RANKSNAP_OK) {
        fprintf(stderr, "ranksnap collect: rank %d: %s\n", rank, ranksnap_last_error());
        return -1;
    }
    rs_file_map_begin(m);
    ranksnap_status st = rs_decode_check_head(path, m->p, m->len);
    if (rs_file_map_end() || st != RANKSNAP_OK) {
        fprintf(stderr, "ranksnap collect: rank %d: %s; not collected\n", rank,
                st != RANKSNAP_OK ? ranksnap_last_error() : "cut short while it was read");
        rs_file_map_close(m);
        return -1;
    }
    return 0;
}

/* Every rank sends the rank files of its --from (what `ranksnap report DIR` reads: .rsnap, .ring
 * and PyTorch jobs' .pickle, attempts and jobs' names included: attempt.h) to rank 0, which writes
 * them into --to (atomically, 0600; a name already received from another node is kept once) and
 * then prints the report over --to. */
static int collect(const rs_collect_args *a)
{
    const char *from = a->from, *to = a->to;
    int json = a->json;
    if (PMPI_Init(NULL, NULL) != MPI_SUCCESS) {
        fprintf(stderr, "ranksnap collect: MPI_Init failed (run it under mpirun)\n");
        return 1;
    }
    int rank = 0, size = 1, code = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    /* this rank's files */
    char **names = NULL;
    int n = 0, cap = 0;
    DIR *d = opendir(from);
    if (!d) {
        fprintf(stderr, "ranksnap collect: rank %d: --from %s: %s\n", rank, from, strerror(errno));
    } else {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!rs_attempt_is_rank_file(e->d_name)) continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                char **v = realloc(names, (size_t)cap * sizeof *v);
                if (!v) break;
                names = v;
            }
            if (!(names[n] = strdup(e->d_name))) break;
            n++;
        }
        closedir(d);
    }
    if (rank == 0 && make_dir(to) != 0) {
        fprintf(stderr, "ranksnap collect: --to %s: %s\n", to, strerror(errno));
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    size_t received = 0;
    if (rank != 0) {
        PMPI_Send(&n, 1, MPI_INT, 0, RS_TAG_COUNT, MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", from, names[i]);
            rs_file_mapped m;
            uint64_t len64 = open_rank_file(path, rank, &m) == 0 ? m.len : 0;
            int nl = (int)strlen(names[i]) + 1;
            PMPI_Send(names[i], nl, MPI_CHAR, 0, RS_TAG_NAME, MPI_COMM_WORLD);
            PMPI_Send(&len64, 1, MPI_UINT64_T, 0, RS_TAG_SIZE, MPI_COMM_WORLD);
            if (!len64) continue;
            rs_file_map_begin(&m);
            for (size_t off = 0; off < len64; off += RS_COLLECT_CHUNK) {
                size_t part = len64 - off < RS_COLLECT_CHUNK ? len64 - off : RS_COLLECT_CHUNK;
                PMPI_Send(m.p + off, (int)part, MPI_BYTE, 0, RS_TAG_DATA, MPI_COMM_WORLD);
            }
            if (rs_file_map_end())
                fprintf(stderr, "ranksnap collect: rank %d: %s was cut short while it was sent: the "
                                "copy is not the file\n", rank, path);
            rs_file_map_close(&m);
        }
    } else {
        for (int i = 0; i < n; i++) {
            char path[4200], out[4200];
            snprintf(path, sizeof path, "%s/%s", from, names[i]);
            snprintf(out, sizeof out, "%s/%s", to, names[i]);
            rs_file_mapped m;
            if (open_rank_file(path, 0, &m) != 0) continue;
            rs_atomic_writer w;
            rs_file_map_begin(&m);
            ranksnap_status st = rs_atomic_file_begin(out, &w);
            if (st == RANKSNAP_OK) st = rs_atomic_file_append(&w, m.p, m.len);
            int cut = rs_file_map_end();
            rs_file_map_close(&m);
            if (st != RANKSNAP_OK || cut) {
                fprintf(stderr, "ranksnap collect: rank 0: %s\n",
                        cut ? "a file was cut short while it was copied; not collected" : ranksnap_last_error());
                if (st == RANKSNAP_OK) rs_atomic_file_abort(&w);
                continue;
            }
            if (store(&w, out, names[i], 0) == 0) received++;
        }
        /* a chunk at a time, straight into the file's temporary: memory stays at one chunk
         * whatever the files' sizes */
        char *chunk = malloc(RS_COLLECT_CHUNK);
        if (!chunk) {
            fprintf(stderr, "ranksnap collect: no memory for a chunk of %zu bytes\n", RS_COLLECT_CHUNK);
            PMPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (int r = 1; r < size; r++) {
            int count = 0;
            PMPI_Recv(&count, 1, MPI_INT, r, RS_TAG_COUNT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (int i = 0; i < count; i++) {
                char name[512], out[4200];
                uint64_t len64 = 0;
                PMPI_Recv(name, (int)sizeof name, MPI_CHAR, r, RS_TAG_NAME, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                name[sizeof name - 1] = '\0';
                PMPI_Recv(&len64, 1, MPI_UINT64_T, r, RS_TAG_SIZE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                /* names come from another node: only the file names we write, never a path */
                int keep = len64 && rs_attempt_is_rank_file(name) && !strchr(name, '/');
                rs_atomic_writer w;
                snprintf(out, sizeof out, "%s/%s", to, name);
                if (keep && rs_atomic_file_begin(out, &w) != RANKSNAP_OK) {
                    fprintf(stderr, "ranksnap collect: %s\n", ranksnap_last_error());
                    keep = 0;
                }
                for (uint64_t off = 0; off < len64; off += RS_COLLECT_CHUNK) {
                    size_t part = len64 - off < RS_COLLECT_CHUNK ? (size_t)(len64 - off) : RS_COLLECT_CHUNK;
                    PMPI_Recv(chunk, (int)part, MPI_BYTE, r, RS_TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    if (keep && rs_atomic_file_append(&w, chunk, part) != RANKSNAP_OK) {
                        fprintf(stderr, "ranksnap collect: %s\n", ranksnap_last_error());
                        keep = 0; /* the rest is received and dropped */
                    }
                }
                if (keep && store(&w, out, name, r) == 0) received++;
            }
        }
        free(chunk);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    if (rank == 0) {
        fprintf(stderr, "ranksnap collect: %zu files from %d node%s into %s\n", received, size,
                size == 1 ? "" : "s", to);
        code = received ? rs_cmd_report_dir(to, json) : RS_EXIT_FAILED;
    }
    PMPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    PMPI_Finalize();
    return code;
}

int main(int argc, char **argv)
{
    rs_collect_args a;
    int code = RS_EXIT_OK;
    if (rs_collect_parse(&rs_cmd_collect, argc - 1, argv + 1, &a, &code) != 0) return code;
    (void)rs_file_map_enable(); /* when it fails, files are read, as before */
    return collect(&a);
}
