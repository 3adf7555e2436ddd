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
#include "file_read.h"
#include "text.h"

#define RS_COLLECT_CHUNK ((size_t)1 << 30)
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

/* Writes one received file into --to; a name already there from this collection is kept once. */
static int store(const char *to, const char *name, const char *buf, size_t len, int from_rank)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", to, name);
    if (access(path, F_OK) == 0) {
        char *old = NULL;
        size_t old_len = 0;
        if (rs_file_read(path, 0, &old, &old_len) == RANKSNAP_OK) {
            int same = old_len == len && memcmp(old, buf, len) == 0;
            free(old);
            if (same) return 0;
        }
        char shown[600];
        fprintf(stderr, "ranksnap collect: %s came from more than one node (again from rank %d); "
                        "the last one is kept\n", rs_text_escape(shown, sizeof shown, name), from_rank);
    }
    if (rs_atomic_file_write(path, buf, len) != RANKSNAP_OK) {
        fprintf(stderr, "ranksnap collect: %s\n", ranksnap_last_error());
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
            char path[4200], *buf = NULL;
            size_t len = 0;
            snprintf(path, sizeof path, "%s/%s", from, names[i]);
            uint64_t len64 = 0;
            if (rs_file_read(path, 0, &buf, &len) == RANKSNAP_OK) {
                len64 = len;
            } else {
                fprintf(stderr, "ranksnap collect: rank %d: %s\n", rank, ranksnap_last_error());
                buf = NULL;
            }
            int nl = (int)strlen(names[i]) + 1;
            PMPI_Send(names[i], nl, MPI_CHAR, 0, RS_TAG_NAME, MPI_COMM_WORLD);
            PMPI_Send(&len64, 1, MPI_UINT64_T, 0, RS_TAG_SIZE, MPI_COMM_WORLD);
            for (size_t off = 0; off < len64; off += RS_COLLECT_CHUNK) {
                size_t part = len64 - off < RS_COLLECT_CHUNK ? len64 - off : RS_COLLECT_CHUNK;
                PMPI_Send(buf + off, (int)part, MPI_BYTE, 0, RS_TAG_DATA, MPI_COMM_WORLD);
            }
            free(buf);
        }
    } else {
        for (int i = 0; i < n; i++) {
            char path[4200], *buf = NULL;
            size_t len = 0;
            snprintf(path, sizeof path, "%s/%s", from, names[i]);
            if (rs_file_read(path, 0, &buf, &len) != RANKSNAP_OK) {
                fprintf(stderr, "ranksnap collect: rank 0: %s\n", ranksnap_last_error());
                continue;
            }
            if (store(to, names[i], buf, len, 0) == 0) received++;
            free(buf);
        }
        for (int r = 1; r < size; r++) {
            int count = 0;
            PMPI_Recv(&count, 1, MPI_INT, r, RS_TAG_COUNT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (int i = 0; i < count; i++) {
                char name[512];
                uint64_t len64 = 0;
                PMPI_Recv(name, (int)sizeof name, MPI_CHAR, r, RS_TAG_NAME, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                name[sizeof name - 1] = '\0';
                PMPI_Recv(&len64, 1, MPI_UINT64_T, r, RS_TAG_SIZE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                char *buf = malloc(len64 ? len64 : 1);
                for (size_t off = 0; off < len64; off += RS_COLLECT_CHUNK) {
                    size_t part = len64 - off < RS_COLLECT_CHUNK ? len64 - off : RS_COLLECT_CHUNK;
                    PMPI_Recv(buf ? buf + off : NULL, buf ? (int)part : 0, MPI_BYTE, r, RS_TAG_DATA,
                              MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                }
                if (!buf) {
                    fprintf(stderr, "ranksnap collect: no memory for %s from rank %d\n", name, r);
                    continue;
                }
                /* names come from another node: only the file names we write, never a path */
                if (len64 && rs_attempt_is_rank_file(name) && !strchr(name, '/') && store(to, name, buf, len64, r) == 0)
                    received++;
                free(buf);
            }
        }
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
    return collect(&a);
}
