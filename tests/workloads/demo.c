/*
 * demo.c — ranksnap-demo: a data-parallel transformer training loop, shaped for memory.
 *
 * Each rank allocates through ranksnap's public API the way a data-parallel transformer step
 * does: parameters, gradients and Adam state (exp_avg, exp_avg_sq) once; per layer, in the
 * forward pass, the block's activations and attention scores, freed in reverse in the backward
 * pass; short-lived matmul workspaces; a bucketed all-reduce of the gradients at the end of each
 * step (MPI on the sim backend). Flags make one rank different, which is what ranksnap is for:
 *
 *   --diverge R:F     rank R's batch is F times larger (a constant offset)
 *   --leak R:BYTES    rank R keeps BYTES (or KiB, MiB, GiB) more every step (growth)
 *   --oom R           rank R's batch grows every step until it exceeds a memory cap
 *   --on-oom abort|continue   what a rank does on OOM (MPI_Abort, or skip the step and go on)
 *   --hang R:STEP:S   rank R sleeps S seconds before step STEP (a straggler)
 *   --kill R:STEP     rank R sends itself SIGKILL at step STEP (what the kernel's OOM killer does)
 *   --end R:STEP:HOW  rank R ends at step STEP before MPI_Finalize, HOW being: exit (exit(1)), exit0
 *                     (exit(0)), thread (exit(1) on another thread), handler (exit(1) in its
 *                     SIGUSR1 handler), _exit (_exit(1)), abort, mpi-abort (MPI_Abort, code 5),
 *                     exec (the process becomes /bin/true); or fork: it forks a child that
 *                     allocates through ranksnap and exit(1)s, waits for it and goes on
 *   --comm mpi|nccl   the gradient all-reduce: MPI on host buffers (any backend), or NCCL on the
 *                     device buffers (RANKSNAP_BACKEND=cuda, one GPU per rank: local rank % GPUs)
 *   --alloc ranksnap|cudaMalloc|cudaMallocAsync   who serves the tensors (the last two bypass
 *                     ranksnap: the anchors of the end-to-end benchmark; cuda builds only)
 *   --timing          rank 0 prints the median step time (device synchronized at each step end)
 *   --no-steps        never call ranksnap_step: the steps are found from the all-reduces
 *   --app-steps-from K  with --no-steps: from iteration K on, number the steps with
 *                     ranksnap_step(0), (1), ... (the program takes over after steps were found)
 *   --setup-bcasts N  N identical MPI_Bcast of one int before the loop (settings shared by rank 0)
 *   --layer-allreduces N[:varied]  N more all-reduces a step, one per layer, before the buckets:
 *                     of one float each (tensor-parallel layers of one width), or of 1 + layer
 *                     floats (layers of different widths)
 *   --pp N            N pipeline stages, ranks in stage-major order (stage = rank / (size / N)):
 *                     stage s keeps N - s microbatches of activations in flight, as under 1F1B, so
 *                     stage 0 is the heaviest by design; the gradient all-reduce runs over the
 *                     stage's data-parallel communicator (MPI_Comm_split), and each replica's
 *                     pipeline has its own communicator too, kept until the end as a real job's
 *   --stage-activations S:F  every rank of stage S (of --pp; without it every rank is stage 0)
 *                     keeps F times the block activations (a model change that makes one stage
 *                     heavier, as `ranksnap diff` shows against a run without it)
 *   --lib-comms N     before the job makes its communicators, a library makes N temporary pair
 *                     communicators (rank r with rank size-1-r: MPI_Comm_split), all-reduces once
 *                     on each and frees them (MPI_Comm_free)
 *   --iters N  --layers L  --hidden H  --batch B  --quiet
 *
 * MPI_Init starts ranksnap (the library's PMPI wrapper) and MPI_Finalize gathers and reports, so
 * the program itself only marks steps and annotates phases.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ranksnap.h"

#if defined(DEMO_WITH_NCCL)
#include <cuda_runtime_api.h>
#include <nccl.h>
static ncclComm_t nccl_;
#endif

#define DEMO_MAX_LAYERS 256
#define DEMO_BUCKET ((uint64_t)25 << 20) /* DDP's default bucket: 25 MiB */

typedef struct demo_cfg {
    int iters, layers;
    uint64_t hidden, batch;
    int diverge_rank;
    double diverge_factor;
    int leak_rank;
    uint64_t leak_bytes;
    int oom_rank;
    int oom_abort;
    int hang_rank, hang_step, hang_seconds;
    int kill_rank, kill_step;
    int end_rank, end_step;
    char end_how[16];
    int nccl;
    int pp;
    int act_stage;
    double act_factor;
    int timing;
    int no_steps;
    int app_steps_from;
    int setup_bcasts;
    int lib_comms;
    int layer_allreduces, layers_varied;
    int quiet;
} demo_cfg;

static int rank_ = 0;
static MPI_Comm dp_comm_ = MPI_COMM_WORLD; /* the replicas of this rank's stage (--pp) */
static MPI_Comm pp_comm_ = MPI_COMM_NULL;  /* the stages of this rank's replica (--pp) */

/* --alloc: 0 ranksnap, 1 cudaMalloc/cudaFree, 2 cudaMallocAsync/cudaFreeAsync on stream 0 */
static int alloc_mode_;

static ranksnap_status demo_malloc(void **p, uint64_t n)
{
#if defined(DEMO_WITH_NCCL)
    if (alloc_mode_ == 1) return cudaMalloc(p, n) == cudaSuccess ? RANKSNAP_OK : RANKSNAP_ERR_OUT_OF_MEMORY;
    if (alloc_mode_ == 2)
        return cudaMallocAsync(p, n, 0) == cudaSuccess ? RANKSNAP_OK : RANKSNAP_ERR_OUT_OF_MEMORY;
#endif
    return ranksnap_malloc(p, n, NULL);
}

/* In the allocation helpers, so that ranksnap_malloc is called from the helper itself and the
 * snapshot's site is the helper's line, as before --alloc existed. */
#define DEMO_ALLOC(p, n) (alloc_mode_ ? demo_malloc((p), (n)) : ranksnap_malloc((p), (n), NULL))

static void demo_free(void *p)
{
#if defined(DEMO_WITH_NCCL)
    if (alloc_mode_ == 1) {
        if (p) cudaFree(p);
        return;
    }
    if (alloc_mode_ == 2) {
        if (p) cudaFreeAsync(p, 0);
        return;
    }
#endif
    ranksnap_free(p);
}

static void usage(void)
{
    fprintf(stderr, "usage: ranksnap-demo [--iters N] [--layers L] [--hidden H] [--batch B] "
                    "[--diverge R:F] [--leak R:BYTES] [--oom R] [--on-oom abort|continue] "
                    "[--hang R:STEP:SECONDS] [--no-steps] [--pp N] [--stage-activations S:F] "
                    "[--lib-comms N] [--quiet]\n");
}

static int bad(const char *flag, const char *v, const char *expected)
{
    if (rank_ == 0) fprintf(stderr, "ranksnap-demo: %s \"%s\": expected %s\n", flag, v ? v : "", expected);
    return -1;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (!*s || *end || errno || *s == '-') return -1;
    *out = x;
    return 0;
}

static int parse_args(int argc, char **argv, demo_cfg *c)
{
    *c = (demo_cfg){.iters = 8, .layers = 8, .hidden = 1024, .batch = 2048, .diverge_rank = -1,
                    .diverge_factor = 1.0, .leak_rank = -1, .oom_rank = -1, .oom_abort = 1,
                    .hang_rank = -1, .kill_rank = -1, .end_rank = -1, .app_steps_from = -1,
                    .act_stage = -1, .act_factor = 1.0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x, y;
        if (!strcmp(a, "--quiet")) {
            c->quiet = 1;
            continue;
        }
        if (!strcmp(a, "--timing")) {
            c->timing = 1;
            continue;
        }
        if (!strcmp(a, "--no-steps")) {
            c->no_steps = 1;
            continue;
        }
        if (!v) return bad(a, NULL, "a value");
        i++;
        if (!strcmp(a, "--iters") || !strcmp(a, "--steps")) {
            if (parse_u64(v, &x) || x < 1 || x > 1000000) return bad(a, v, "a step count from 1 to 1000000");
            c->iters = (int)x;
        } else if (!strcmp(a, "--app-steps-from")) {
            if (parse_u64(v, &x) || x > 1000000) return bad(a, v, "an iteration from 0 to 1000000");
            c->app_steps_from = (int)x;
        } else if (!strcmp(a, "--lib-comms")) {
            if (parse_u64(v, &x) || x > 1000) return bad(a, v, "a count from 0 to 1000");
            c->lib_comms = (int)x;
        } else if (!strcmp(a, "--setup-bcasts")) {
            if (parse_u64(v, &x) || x > 1000) return bad(a, v, "a count from 0 to 1000");
            c->setup_bcasts = (int)x;
        } else if (!strcmp(a, "--layer-allreduces")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (n < 1 || n > 10000 || (*end && strcmp(end, ":varied"))) return bad(a, v, "N or N:varied, N from 1 to 10000");
            c->layer_allreduces = (int)n;
            c->layers_varied = *end != '\0';
        } else if (!strcmp(a, "--layers")) {
            if (parse_u64(v, &x) || x < 1 || x > DEMO_MAX_LAYERS) return bad(a, v, "1 to 256 layers");
            c->layers = (int)x;
        } else if (!strcmp(a, "--hidden")) {
            if (parse_u64(v, &c->hidden) || c->hidden < 8) return bad(a, v, "a hidden size of at least 8");
        } else if (!strcmp(a, "--batch")) {
            if (parse_u64(v, &c->batch) || c->batch < 1) return bad(a, v, "a positive batch size");
        } else if (!strcmp(a, "--pp")) {
            if (parse_u64(v, &x) || x < 1 || x > 4096) return bad(a, v, "a number of stages");
            c->pp = (int)x;
        } else if (!strcmp(a, "--stage-activations")) {
            char *end;
            long st = strtol(v, &end, 10);
            double f = *end == ':' ? strtod(end + 1, &end) : 0;
            if (st < 0 || st > 4095 || *end || !(f > 0) || f > 1000) return bad(a, v, "STAGE:FACTOR such as 2:1.2");
            c->act_stage = (int)st;
            c->act_factor = f;
        } else if (!strcmp(a, "--diverge")) {
            char *end;
            long r = strtol(v, &end, 10);
            double f = *end == ':' ? strtod(end + 1, &end) : 0;
            if (r < 0 || *end || !(f > 0)) return bad(a, v, "RANK:FACTOR such as 2:1.5");
            c->diverge_rank = (int)r;
            c->diverge_factor = f;
        } else if (!strcmp(a, "--leak")) {
            char buf[64];
            snprintf(buf, sizeof buf, "%s", v);
            char *colon = strchr(buf, ':');
            if (!colon) return bad(a, v, "RANK:BYTES such as 1:8MiB");
            *colon = '\0';
            /* bytes, or KiB/MiB/GiB */
            char *unit = colon + 1;
            while (*unit >= '0' && *unit <= '9') unit++;
            uint64_t scale = !*unit ? 1 : !strcmp(unit, "KiB") ? 1u << 10 : !strcmp(unit, "MiB") ? 1u << 20
                           : !strcmp(unit, "GiB") ? 1u << 30 : 0;
            char num[64];
            snprintf(num, sizeof num, "%.*s", (int)(unit - (colon + 1)), colon + 1);
            if (parse_u64(buf, &x) || !scale || parse_u64(num, &y) || y == 0 || y > UINT64_MAX / scale)
                return bad(a, v, "RANK:BYTES such as 1:8MiB");
            y *= scale;
            c->leak_rank = (int)x;
            c->leak_bytes = y;
        } else if (!strcmp(a, "--oom")) {
            if (parse_u64(v, &x)) return bad(a, v, "a rank");
            c->oom_rank = (int)x;
        } else if (!strcmp(a, "--on-oom")) {
            if (strcmp(v, "abort") && strcmp(v, "continue")) return bad(a, v, "abort or continue");
            c->oom_abort = !strcmp(v, "abort");
        } else if (!strcmp(a, "--hang")) {
            unsigned long long r, st, sec;
            char tail;
            if (sscanf(v, "%llu:%llu:%llu%c", &r, &st, &sec, &tail) != 3) return bad(a, v, "RANK:STEP:SECONDS");
            c->hang_rank = (int)r;
            c->hang_step = (int)st;
            c->hang_seconds = (int)sec;
        } else if (!strcmp(a, "--alloc")) {
            if (!strcmp(v, "ranksnap")) alloc_mode_ = 0;
#if defined(DEMO_WITH_NCCL)
            else if (!strcmp(v, "cudaMalloc")) alloc_mode_ = 1;
            else if (!strcmp(v, "cudaMallocAsync")) alloc_mode_ = 2;
#endif
            else return bad(a, v, "ranksnap, or in a cuda build cudaMalloc or cudaMallocAsync");
        } else if (!strcmp(a, "--comm")) {
            if (strcmp(v, "mpi") && strcmp(v, "nccl")) return bad(a, v, "mpi or nccl");
            c->nccl = !strcmp(v, "nccl");
#if !defined(DEMO_WITH_NCCL)
            if (c->nccl) return bad(a, v, "mpi (this demo was built without NCCL)");
#endif
        } else if (!strcmp(a, "--kill")) {
            unsigned long long r, st;
            char tail;
            if (sscanf(v, "%llu:%llu%c", &r, &st, &tail) != 2) return bad(a, v, "RANK:STEP");
            c->kill_rank = (int)r;
            c->kill_step = (int)st;
        } else if (!strcmp(a, "--end")) {
            static const char *const hows[] = {"exit", "exit0", "thread", "handler", "_exit", "abort",
                                               "mpi-abort", "exec", "fork", NULL};
            unsigned long long r, st;
            int at = 0;
            if (sscanf(v, "%llu:%llu:%n", &r, &st, &at) != 2 || !at) return bad(a, v, "RANK:STEP:HOW");
            int known = 0;
            for (int k = 0; hows[k]; k++) known |= !strcmp(v + at, hows[k]);
            if (!known)
                return bad(a, v, "RANK:STEP:HOW, HOW one of exit, exit0, thread, handler, _exit, "
                                 "abort, mpi-abort, exec, fork");
            c->end_rank = (int)r;
            c->end_step = (int)st;
            snprintf(c->end_how, sizeof c->end_how, "%s", v + at);
        } else {
            if (rank_ == 0) fprintf(stderr, "ranksnap-demo: unknown flag \"%s\"\n", a);
            usage();
            return -1;
        }
    }
    return 0;
}

typedef struct model {
    int layers;
    void *param[DEMO_MAX_LAYERS], *grad[DEMO_MAX_LAYERS];
    void *exp_avg[DEMO_MAX_LAYERS], *exp_avg_sq[DEMO_MAX_LAYERS];
    void *act[DEMO_MAX_LAYERS], *scores[DEMO_MAX_LAYERS];
    void **leaked;
    int n_leaked;
} model;

/* One function per kind of tensor, never inlined or folded, so sites have names. */
__attribute__((noinline)) static ranksnap_status init_parameters(void **p, uint64_t n) { return DEMO_ALLOC(p, n); }
__attribute__((noinline)) static ranksnap_status adam_state(void **p, uint64_t n) { return DEMO_ALLOC(p, n); }
__attribute__((noinline)) static ranksnap_status grad_buffer(void **p, uint64_t n) { return DEMO_ALLOC(p, n); }
__attribute__((noinline)) static ranksnap_status block_activations(void **p, uint64_t n) { return DEMO_ALLOC(p, n); }
__attribute__((noinline)) static ranksnap_status attention_scores(void **p, uint64_t n) { return DEMO_ALLOC(p, n); }
__attribute__((noinline)) static ranksnap_status matmul_workspace(void **p, uint64_t n) { return DEMO_ALLOC(p, n); }
__attribute__((noinline)) static ranksnap_status allreduce_bucket(void **p, uint64_t n) { return DEMO_ALLOC(p, n); }
__attribute__((noinline)) static ranksnap_status leaky_cache(void **p, uint64_t n) { return DEMO_ALLOC(p, n); }

/* --end: the ways a rank's process ends before MPI_Finalize that ranksnap must tell apart. */
static void *exit_on_a_thread(void *arg)
{
    (void)arg;
    exit(1);
}

static void exit_in_a_handler(int sig)
{
    (void)sig;
    exit(1);
}

static void end_rank(const char *how)
{
    fprintf(stderr, "ranksnap-demo: rank %d ends: %s\n", rank_, how);
    fflush(stderr);
    if (!strcmp(how, "exit")) exit(1);
    if (!strcmp(how, "exit0")) exit(0);
    if (!strcmp(how, "_exit")) _exit(1);
    if (!strcmp(how, "abort")) abort();
    if (!strcmp(how, "mpi-abort")) MPI_Abort(MPI_COMM_WORLD, 5);
    if (!strcmp(how, "exec")) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    if (!strcmp(how, "handler")) {
        signal(SIGUSR1, exit_in_a_handler);
        raise(SIGUSR1);
    }
    if (!strcmp(how, "thread")) {
        pthread_t t;
        if (pthread_create(&t, NULL, exit_on_a_thread, NULL) == 0) pthread_join(t, NULL);
    }
    if (!strcmp(how, "fork")) {
        /* a helper process: it allocates and fails; the rank waits for it and goes on */
        pid_t pid = fork();
        if (pid == 0) {
            void *p = NULL;
            (void)ranksnap_malloc(&p, 1 << 20, NULL);
            exit(1);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 1) {
            fprintf(stderr, "ranksnap-demo: rank %d: the forked child did not exit(1)\n", rank_);
            exit(3);
        }
        return;
    }
    for (;;) pause(); /* not reached: each way above ends the process */
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int fail(const char *what, ranksnap_status st)
{
    fprintf(stderr, "ranksnap-demo: rank %d: %s: %s\n", rank_, what, ranksnap_last_error());
    return st == RANKSNAP_ERR_OUT_OF_MEMORY ? 2 : 1;
}

#define TRY(what, call)                                                                            \
    do {                                                                                           \
        ranksnap_status st_ = (call);                                                              \
        if (st_ != RANKSNAP_OK) return fail(what, st_);                                            \
    } while (0)

/* One training step; the block activations are `act_factor` times their size. Returns 0, 1
 * (error) or 2 (out of memory). */
static int train_step(const demo_cfg *c, model *m, uint64_t batch, double act_factor, int step)
{
    const uint64_t act = batch * c->hidden * 4, scores = batch * c->hidden * 2;
    const uint64_t block = (uint64_t)((double)act * act_factor);
    int rc = 0;
    ranksnap_annotate_begin("forward");
    int l = 0;
    ranksnap_status st;
    for (; l < m->layers; l++) {
        void *ws = NULL;
        if ((st = block_activations(&m->act[l], block)) != RANKSNAP_OK) { rc = fail("block_activations", st); break; }
        if ((st = attention_scores(&m->scores[l], scores)) != RANKSNAP_OK) { rc = fail("attention_scores", st); break; }
        if ((st = matmul_workspace(&ws, act / 2 + 4096)) != RANKSNAP_OK) { rc = fail("matmul_workspace", st); break; }
        demo_free(ws);
    }
    ranksnap_annotate_end("forward");
    if (rc == 0) {
        ranksnap_annotate_begin("backward");
        for (l = m->layers - 1; l >= 0; l--) {
            void *ws = NULL;
            if ((st = matmul_workspace(&ws, act / 2 + 4096)) != RANKSNAP_OK) {
                rc = fail("matmul_workspace", st);
                break;
            }
            demo_free(ws);
            demo_free(m->scores[l]);
            demo_free(m->act[l]);
            m->scores[l] = m->act[l] = NULL;
        }
        ranksnap_annotate_end("backward");
    }
    /* whatever the step left behind after a failure is freed, as autograd would */
    for (l = 0; l < m->layers; l++) {
        demo_free(m->scores[l]);
        demo_free(m->act[l]);
        m->scores[l] = m->act[l] = NULL;
    }
    if (rc) return rc;

    /* bucketed all-reduce of the gradients: a staging bucket per 25 MiB of gradients, after the
     * layers' own all-reduces (--layer-allreduces) */
    ranksnap_annotate_begin("allreduce");
    for (int k = 0; k < c->layer_allreduces; k++) {
        static float layer[10001];
        MPI_Allreduce(MPI_IN_PLACE, layer, c->layers_varied ? 1 + k : 1, MPI_FLOAT, MPI_SUM, dp_comm_);
    }
    uint64_t grad_bytes = (uint64_t)m->layers * c->hidden * c->hidden * 4;
    float host[256];
    for (uint64_t done = 0; done < grad_bytes; done += DEMO_BUCKET) {
        void *bucket = NULL;
        uint64_t n = grad_bytes - done < DEMO_BUCKET ? grad_bytes - done : DEMO_BUCKET;
        TRY("allreduce_bucket", allreduce_bucket(&bucket, n));
#if defined(DEMO_WITH_NCCL)
        if (c->nccl) {
            /* the bucket is device memory from ranksnap's cuda backend: reduce it in place */
            if (ncclAllReduce(bucket, bucket, n / 4, ncclFloat, ncclSum, nccl_, 0) != ncclSuccess ||
                cudaStreamSynchronize(0) != cudaSuccess) {
                fprintf(stderr, "ranksnap-demo: rank %d: ncclAllReduce failed\n", rank_);
                demo_free(bucket);
                return 1;
            }
            demo_free(bucket);
            continue;
        }
#endif
        /* the host stand-in reduces a count that grows with the bucket, as a bucket's
         * all-reduce does: a step's collectives are told apart by their counts */
        int count = (int)(n >> 17) < 1 ? 1 : (int)(n >> 17) > 256 ? 256 : (int)(n >> 17);
        for (int i = 0; i < count; i++) host[i] = (float)(rank_ + step);
        MPI_Allreduce(MPI_IN_PLACE, host, count, MPI_FLOAT, MPI_SUM, dp_comm_);
        demo_free(bucket);
    }
    ranksnap_annotate_end("allreduce");

    if (rank_ == c->leak_rank) {
        void **grown = realloc(m->leaked, (size_t)(m->n_leaked + 1) * sizeof *grown);
        if (!grown) return fail("realloc", RANKSNAP_ERR_HOST_MEMORY);
        m->leaked = grown;
        TRY("leaky_cache", leaky_cache(&m->leaked[m->n_leaked], c->leak_bytes));
        m->n_leaked++;
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* The rank is known from the launcher before MPI_Init, for the flags that must act early:
     * Open MPI's mpirun, or MPICH's Hydra, says it. */
    const char *er = getenv("OMPI_COMM_WORLD_RANK");
    if (!er) er = getenv("PMI_RANK");
    if (er) rank_ = atoi(er);
    demo_cfg c;
    if (parse_args(argc, argv, &c)) return 2;
    const uint64_t weight = c.hidden * c.hidden * 4;
    if (c.oom_rank >= 0 && !getenv("RANKSNAP_MEMORY_LIMIT")) {
        /* the OOM rank gets a cap that its growing batch crosses after a few steps */
        uint64_t steady = (uint64_t)c.layers * (4 * weight + c.batch * c.hidden * 6) + 2 * DEMO_BUCKET;
        char limit[64];
        snprintf(limit, sizeof limit, "%d:%" PRIu64, c.oom_rank, steady * 2);
        setenv("RANKSNAP_MEMORY_LIMIT", limit, 1);
    }
#if defined(DEMO_WITH_NCCL)
    if (c.nccl) {
        /* one GPU per rank, chosen before MPI_Init, where ranksnap's cuda backend takes the
         * current device */
        const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        if (!lr) lr = getenv("MPI_LOCALRANKID");
        int ndev = 0;
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
            fprintf(stderr, "ranksnap-demo: --comm nccl needs a GPU\n");
            return 2;
        }
        cudaSetDevice((lr ? atoi(lr) : 0) % ndev);
    }
#endif
    MPI_Init(&argc, &argv);
    int size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* what a library does to check its links: short-lived, all alive at once (distinct handles)
     * and gone before the job's own */
    MPI_Comm *pairs = calloc((size_t)c.lib_comms + 1, sizeof *pairs);
    if (!pairs) return fail("calloc", RANKSNAP_ERR_HOST_MEMORY);
    for (int k = 0; k < c.lib_comms; k++)
        MPI_Comm_split(MPI_COMM_WORLD, rank_ < size - 1 - rank_ ? rank_ : size - 1 - rank_, rank_, &pairs[k]);
    for (int k = 0; k < c.lib_comms; k++) {
        int one = 1;
        MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_SUM, pairs[k]);
    }
    for (int k = 0; k < c.lib_comms; k++) MPI_Comm_free(&pairs[k]);
    free(pairs);
    int stage = 0;
    if (c.pp > 1) {
        if (size % c.pp) {
            if (rank_ == 0) fprintf(stderr, "ranksnap-demo: --pp %d does not divide %d ranks\n", c.pp, size);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        int dp = size / c.pp;
        stage = rank_ / dp;
        /* the stage's replicas, and the pipeline of each replica (unused here; a real job has
         * it for its point-to-point sends) */
        MPI_Comm_split(MPI_COMM_WORLD, stage, rank_, &dp_comm_);
        MPI_Comm_split(MPI_COMM_WORLD, rank_ % dp, rank_, &pp_comm_);
    }
#if defined(DEMO_WITH_NCCL)
    if (c.nccl) {
        ncclUniqueId id;
        if (rank_ == 0 && ncclGetUniqueId(&id) != ncclSuccess) MPI_Abort(MPI_COMM_WORLD, 4);
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (ncclCommInitRank(&nccl_, size, id, rank_) != ncclSuccess) {
            fprintf(stderr, "ranksnap-demo: rank %d: ncclCommInitRank failed\n", rank_);
            MPI_Abort(MPI_COMM_WORLD, 4);
        }
        /* NCCL needs real device memory: the sim backend's addresses are not */
        void *probe = NULL;
        struct cudaPointerAttributes pa;
        if (demo_malloc(&probe, 512) != RANKSNAP_OK ||
            cudaPointerGetAttributes(&pa, probe) != cudaSuccess || pa.type != cudaMemoryTypeDevice) {
            if (rank_ == 0) fprintf(stderr, "ranksnap-demo: --comm nccl needs RANKSNAP_BACKEND=cuda\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        demo_free(probe);
    }
#endif

    for (int k = 0; k < c.setup_bcasts; k++) {
        int setting = rank_ == 0 ? c.iters : 0;
        MPI_Bcast(&setting, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    model m;
    memset(&m, 0, sizeof m);
    m.layers = c.layers;
    int rc = 0;
    for (int l = 0; l < c.layers && !rc; l++) {
        ranksnap_status st;
        if ((st = init_parameters(&m.param[l], weight)) != RANKSNAP_OK ||
            (st = grad_buffer(&m.grad[l], weight)) != RANKSNAP_OK ||
            (st = adam_state(&m.exp_avg[l], weight)) != RANKSNAP_OK ||
            (st = adam_state(&m.exp_avg_sq[l], weight)) != RANKSNAP_OK)
            rc = fail("model state", st) == 2 ? 2 : 1;
    }
    double *step_s = calloc((size_t)c.iters, sizeof *step_s);
    if (!step_s) return fail("calloc", RANKSNAP_ERR_HOST_MEMORY);
    for (int s = 0; s < c.iters && rc != 1; s++) {
        double t0 = MPI_Wtime();
        if (rank_ == c.hang_rank && s == c.hang_step) sleep((unsigned)c.hang_seconds);
        if (rank_ == c.kill_rank && s == c.kill_step) raise(SIGKILL);
        if (rank_ == c.end_rank && s == c.end_step) end_rank(c.end_how);
        if (!c.no_steps) ranksnap_step(s);
        else if (c.app_steps_from >= 0 && s >= c.app_steps_from) ranksnap_step(s - c.app_steps_from);
        uint64_t batch = c.batch;
        if (c.pp > 1) batch *= (uint64_t)(c.pp - stage); /* microbatches in flight under 1F1B */
        if (rank_ == c.diverge_rank) batch = (uint64_t)((double)batch * c.diverge_factor);
        if (rank_ == c.oom_rank) batch = batch * (uint64_t)(s + 1);
        int r = rc ? rc : train_step(&c, &m, batch, stage == c.act_stage ? c.act_factor : 1.0, s);
        if (r == 2 && c.oom_abort) {
            fprintf(stderr, "ranksnap-demo: rank %d ran out of memory at step %d; aborting the job\n", rank_, s);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        if (r == 1) rc = 1;
        /* a rank that skipped its step still takes part in the collectives of the others */
        if (r == 2) {
            float host[256] = {0};
            uint64_t grad_bytes = (uint64_t)c.layers * weight;
            for (uint64_t d = 0; d < grad_bytes; d += DEMO_BUCKET) {
#if defined(DEMO_WITH_NCCL)
                if (c.nccl) {
                    /* the parameters' gradient buffer stands in for the skipped bucket */
                    uint64_t n = grad_bytes - d < DEMO_BUCKET ? grad_bytes - d : DEMO_BUCKET;
                    if (n > weight) n = weight;
                    ncclAllReduce(m.grad[0], m.grad[0], n / 4, ncclFloat, ncclSum, nccl_, 0);
                    cudaStreamSynchronize(0);
                    continue;
                }
#endif
                uint64_t n = grad_bytes - d < DEMO_BUCKET ? grad_bytes - d : DEMO_BUCKET;
                int count = (int)(n >> 17) < 1 ? 1 : (int)(n >> 17) > 256 ? 256 : (int)(n >> 17);
                MPI_Allreduce(MPI_IN_PLACE, host, count, MPI_FLOAT, MPI_SUM, dp_comm_);
            }
        }
#if defined(DEMO_WITH_NCCL)
        if (c.timing) cudaDeviceSynchronize();
#endif
        step_s[s] = MPI_Wtime() - t0;
    }
    if (!c.no_steps) ranksnap_step(c.iters); /* closes a range that ends with the last step */
    else if (c.app_steps_from >= 0) ranksnap_step(c.iters - c.app_steps_from);
    if (c.timing && rank_ == 0 && c.iters > 1) {
        /* the first step warms every cache: it is left out */
        qsort(step_s + 1, (size_t)c.iters - 1, sizeof *step_s, cmp_double);
        printf("ranksnap-demo: median step time %.3f ms over %d steps (first step %.3f ms)\n",
               step_s[1 + (c.iters - 1) / 2] * 1e3, c.iters - 1, step_s[0] * 1e3);
    }
    free(step_s);

    ranksnap_stats st;
    if (!c.quiet && ranksnap_get_stats(&st) == RANKSNAP_OK)
        printf("ranksnap-demo: rank %d: peak allocated %" PRIu64 " bytes, peak reserved %" PRIu64
               " bytes, %" PRIu64 " allocs, %" PRIu64 " OOMs\n", rank_, st.allocated_bytes_peak,
               st.reserved_bytes_peak, st.num_allocs, st.num_ooms);
    fflush(stdout);
    for (int l = 0; l < c.layers; l++) {
        demo_free(m.param[l]);
        demo_free(m.grad[l]);
        demo_free(m.exp_avg[l]);
        demo_free(m.exp_avg_sq[l]);
    }
    for (int i = 0; i < m.n_leaked; i++) demo_free(m.leaked[i]);
    free(m.leaked);
#if defined(DEMO_WITH_NCCL)
    if (c.nccl) ncclCommDestroy(nccl_);
#endif
    if (dp_comm_ != MPI_COMM_WORLD) MPI_Comm_free(&dp_comm_);
    if (pp_comm_ != MPI_COMM_NULL) MPI_Comm_free(&pp_comm_);
    MPI_Finalize();
    return rc == 1 ? 1 : 0;
}
