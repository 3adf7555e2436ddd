/*
 * test_driver_race.c — the driver layer's books (rank/intercept/driver.c) against the driver's
 * own, when several threads make a process's first driver calls at once.
 *
 *   test_driver_race MODE LIBRANKSNAP FAKE_DIR OUT [ROUNDS]
 *
 * Run by ctest, it is the parent: it starts ROUNDS fresh processes of itself (ranksnap starts once
 * per process, so each round must be a new one), each with LIBRANKSNAP preloaded in front of the
 * fake driver of FAKE_DIR (tests/gpu/fake_cuda_driver.c, which counts what it holds), and checks
 * what each child's snapshot says the program holds at the driver — the holders' bytes
 * (totals.outside_labels) and the history's outside_alloc/outside_free events replayed to the end
 * — against the fake driver's own count, byte for byte. The seed is printed; DRIVER_RACE_SEED
 * replays it (round r runs seed + r).
 *
 * MODE start: eight threads, released together by a barrier, each make a 64 MiB cuMemAlloc their
 * first driver call: 512 MiB held, all of it recorded.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#undef cuGetProcAddress

#include "check.h"
#include "format.h"
#include "rsnap_decode.h"
#include "snapshot.h"

#define MiB ((size_t)1 << 20)
#define THREADS 8

static size_t (*fake_held)(int device);
static void (*fake_set_device)(int device);

/* ---- the child: one process, its threads ------------------------------------------------------ */

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

typedef struct worker {
    int id, device;
    uint64_t rng;
    int failures;
} worker;

static pthread_barrier_t barrier;
static worker workers[THREADS];

#define FAIL(w, ...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, "thread %d: ", (w)->id);                                                   \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        (w)->failures++;                                                                           \
    } while (0)

static void *start_thread(void *arg)
{
    worker *w = arg;
    fake_set_device(w->device);
    /* half the threads come a little later, at a seeded moment of ranksnap's start */
    unsigned spins = next_rand(&w->rng) & 1 ? (unsigned)(next_rand(&w->rng) % 200000) : 0;
    pthread_barrier_wait(&barrier);
    for (volatile unsigned i = 0; i < spins; i++) {
    }
    CUdeviceptr p = 0;
    CUresult r = cuMemAlloc_v2(&p, 64 * MiB);
    if (r != CUDA_SUCCESS) FAIL(w, "its first cuMemAlloc of 64 MiB answered %d", (int)r);
    return NULL;
}

static int child(const char *mode, uint64_t seed, const char *dir)
{
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (drv) {
        *(void **)&fake_held = dlsym(drv, "fake_driver_held_bytes");
        *(void **)&fake_set_device = dlsym(drv, "fake_driver_set_device");
    }
    if (!fake_held || !fake_set_device) return fprintf(stderr, "not the fake driver\n"), 2;
    (void)mode;
    pthread_barrier_init(&barrier, NULL, THREADS);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i].id = i;
        workers[i].device = i & 1;
        workers[i].rng = (seed + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(i + 1) << 32;
        pthread_create(&t[i], NULL, start_thread, &workers[i]);
    }
    int failures = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        failures += workers[i].failures;
    }
    ranksnap_status (*dump)(const char *);
    *(void **)&dump = dlsym(RTLD_DEFAULT, "ranksnap_dump");
    char path[4096];
    snprintf(path, sizeof path, "%s/end.rsnap", dir);
    if (!dump || dump(path) != RANKSNAP_OK) failures++, fprintf(stderr, "no snapshot written\n");
    snprintf(path, sizeof path, "%s/driver-held", dir);
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%zu\n", fake_held(-1)) < 0 || fclose(f) != 0)
        failures++, fprintf(stderr, "%s: %s\n", path, strerror(errno));
    return failures ? 1 : 0;
}

/* ---- the parent: the rounds, and what each child's snapshot says ----------------------------- */

/* The outside bytes live at the end of the history: the held events, then every outside_alloc
 * and outside_free (an allocation at a live key replaces it, a free of no live key is nothing). */
static uint64_t replayed_outside(const rs_snap *s, uint64_t *ooms)
{
    const rs_snap_history *h = &s->history;
    size_t cap = 64;
    while (cap < 2 * h->count + 2) cap *= 2;
    uint64_t *key = calloc(cap, sizeof *key), *size = calloc(cap, sizeof *size);
    uint64_t live = 0;
    *ooms = 0;
    for (uint64_t i = 0; key && size && i < h->count; i++) {
        uint8_t a = h->action[i];
        if (a == RS_ACT_OOM) ++*ooms;
        if (a != RS_ACT_OUTSIDE_ALLOC && a != RS_ACT_OUTSIDE_FREE) continue;
        size_t j = (size_t)((h->addr[i] + 1) * 0x9e3779b97f4a7c15ull >> 20) & (cap - 1);
        while (key[j] && key[j] != h->addr[i] + 1) j = (j + 1) & (cap - 1);
        if (key[j] == h->addr[i] + 1) live -= size[j];
        key[j] = h->addr[i] + 1;
        size[j] = a == RS_ACT_OUTSIDE_ALLOC ? h->size[i] : 0;
        live += size[j];
    }
    free(key);
    free(size);
    return live;
}

static uint64_t labelled_outside(const rs_snap *s)
{
    uint64_t sum = 0;
    /* what a pool keeps is sampled from its attributes, not taken by the program's calls */
    for (size_t i = 0; i < s->totals.n_outside_labels; i++)
        if (strcmp(s->totals.outside_labels[i].label, "cuda_pool_cached") != 0)
            sum += s->totals.outside_labels[i].bytes;
    return sum;
}

/* `dir` made (with its parents) and emptied of an earlier run's files. */
static int fresh_dir(const char *dir)
{
    char path[4400];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) return 0;
        *p = '/';
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST) return 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    return 1;
}

/* The child's output, shown when its round failed. */
static void show_log(const char *dir)
{
    char path[4200], line[1024];
    snprintf(path, sizeof path, "%s/log", dir);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) fputs(line, stderr);
    if (f) fclose(f);
}

static int run_round(const char *self, const char *mode, const char *lib, const char *fake,
                     const char *out, uint64_t seed, int round)
{
    char dir[4096], arg[32];
    snprintf(dir, sizeof dir, "%s/%s-%d", out, mode, round);
    if (!fresh_dir(dir)) return fprintf(stderr, "%s: %s\n", dir, strerror(errno)), 0;
    snprintf(arg, sizeof arg, "%" PRIu64, seed);
    pid_t pid = fork();
    if (pid == 0) {
        char log[4200];
        snprintf(log, sizeof log, "%s/log", dir);
        if (!freopen(log, "w", stdout) || dup2(fileno(stdout), 2) < 0) _exit(126);
        setenv("LD_PRELOAD", lib, 1);
        setenv("LD_LIBRARY_PATH", fake, 1);
        setenv("RANKSNAP_DIR", dir, 1);
        setenv("RANKSNAP_REPORT", "0", 1);
        execl(self, self, "--child", mode, arg, dir, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return fprintf(stderr, "fork: %s\n", strerror(errno)), 0;
    int ok = 1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "round %d (seed %" PRIu64 "): the child failed (status %d)\n", round, seed, status);
        ok = 0;
    }
    char path[4200];
    unsigned long long driver = 0;
    snprintf(path, sizeof path, "%s/driver-held", dir);
    FILE *f = fopen(path, "r");
    if (!f || fscanf(f, "%llu", &driver) != 1) {
        fprintf(stderr, "round %d (seed %" PRIu64 "): %s not written\n", round, seed, path);
        ok = 0;
    }
    if (f) fclose(f);
    snprintf(path, sizeof path, "%s/end.rsnap", dir);
    rs_snap *s = NULL;
    if (rs_rsnap_decode_file(path, &s) != RANKSNAP_OK) {
        fprintf(stderr, "round %d (seed %" PRIu64 "): %s\n", round, seed, ranksnap_last_error());
        show_log(dir);
        return 0;
    }
    uint64_t ooms = 0, labelled = labelled_outside(s), replayed = replayed_outside(s, &ooms);
    if (labelled != driver || replayed != driver) {
        fprintf(stderr, "round %d (seed %" PRIu64 "): the driver holds %llu bytes; the snapshot's holders say "
                "%" PRIu64 ", its history %" PRIu64 "\n", round, seed, driver, labelled, replayed);
        ok = 0;
    }
    uint64_t want_ooms = 0;
    if (ooms != want_ooms) {
        fprintf(stderr, "round %d (seed %" PRIu64 "): %" PRIu64 " OOMs recorded, expected %" PRIu64 "\n",
                round, seed, ooms, want_ooms);
        ok = 0;
    }
    rs_snap_free(s);
    if (!ok) show_log(dir);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--child"))
        return child(argv[2], strtoull(argv[3], NULL, 10), argv[4]);
    if (argc < 5 || strcmp(argv[1], "start")) {
        fprintf(stderr, "usage: test_driver_race start LIBRANKSNAP FAKE_DIR OUT [ROUNDS]\n");
        return 2;
    }
    int rounds = argc > 5 ? atoi(argv[5]) : 10;
    const char *env = getenv("DRIVER_RACE_SEED");
    uint64_t seed = env && *env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 16;
    printf("%s: %d rounds, seed %" PRIu64 " (DRIVER_RACE_SEED=%" PRIu64 " replays them)\n", argv[1],
           rounds, seed, seed);
    fflush(stdout);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return fprintf(stderr, "/proc/self/exe: %s\n", strerror(errno)), 1;
    self[n] = '\0';
    int passed = 0;
    for (int r = 0; r < rounds; r++) {
        int ok = run_round(self, argv[1], argv[2], argv[3], argv[4], seed + (uint64_t)r, r);
        CHECK(ok);
        passed += ok;
    }
    printf("%s: %d of %d rounds held what the driver held, byte for byte\n", argv[1], passed, rounds);
    return check_summary();
}
