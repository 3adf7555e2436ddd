/*
 * demo.c — a small "training loop" that allocates the way a transformer step does, through
 * ranksnap's public API: parameters and optimizer state once, per step activations that grow
 * layer by layer in the forward pass and are freed in reverse in the backward pass, short-lived
 * workspaces, gradients that live from the first backward on. It marks steps and annotates the
 * phases, then writes this rank's snapshot, so `ranksnap summary` has something real to show.
 *
 *   demo [--steps N] [--layers L] [--hidden H] [--batch B] [--out PATH] [--quiet]
 *
 * Sizes are in bytes of fp32 elements; the defaults need about 1 GiB of the (simulated) device.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ranksnap.h"

typedef struct demo_cfg {
    int steps;
    int layers;
    uint64_t hidden;
    uint64_t batch;
    const char *out;
    int quiet;
} demo_cfg;

#define DEMO_MAX_LAYERS 256

static int demo_fail(const char *what, ranksnap_status st)
{
    fprintf(stderr, "demo: %s: %s: %s\n", what, ranksnap_strerror(st), ranksnap_last_error());
    return 1;
}

/* Separate, non-inlined functions so that the snapshot's stacks name real allocation sites. */
__attribute__((noinline)) static ranksnap_status alloc_parameters(void **p, uint64_t bytes)
{
    return ranksnap_malloc(p, bytes, NULL);
}

__attribute__((noinline)) static ranksnap_status alloc_optimizer_state(void **p, uint64_t bytes)
{
    return ranksnap_malloc(p, bytes, NULL);
}

__attribute__((noinline)) static ranksnap_status alloc_activation(void **p, uint64_t bytes)
{
    return ranksnap_malloc(p, bytes, NULL);
}

__attribute__((noinline)) static ranksnap_status alloc_workspace(void **p, uint64_t bytes)
{
    return ranksnap_malloc(p, bytes, NULL);
}

__attribute__((noinline)) static ranksnap_status alloc_gradient(void **p, uint64_t bytes)
{
    return ranksnap_malloc(p, bytes, NULL);
}

static int parse_u64(const char *flag, const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v ? v : "", &end, 10);
    if (!v || !*v || *end || errno || x == 0) {
        fprintf(stderr, "demo: %s expects a positive integer, got \"%s\"\n", flag, v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_args(int argc, char **argv, demo_cfg *c)
{
    c->steps = 6;
    c->layers = 8;
    c->hidden = 4096;
    c->batch = 2048;
    c->out = NULL;
    c->quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x;
        if (!strcmp(a, "--steps")) {
            if (parse_u64(a, v, &x) || x > 1000000) return -1;
            c->steps = (int)x, i++;
        } else if (!strcmp(a, "--layers")) {
            if (parse_u64(a, v, &x) || x > DEMO_MAX_LAYERS) return -1;
            c->layers = (int)x, i++;
        } else if (!strcmp(a, "--hidden")) {
            if (parse_u64(a, v, &c->hidden)) return -1;
            i++;
        } else if (!strcmp(a, "--batch")) {
            if (parse_u64(a, v, &c->batch)) return -1;
            i++;
        } else if (!strcmp(a, "--out")) {
            if (!v) {
                fprintf(stderr, "demo: --out expects a path\n");
                return -1;
            }
            c->out = v, i++;
        } else if (!strcmp(a, "--quiet")) {
            c->quiet = 1;
        } else {
            fprintf(stderr, "demo: unknown flag \"%s\"\n"
                            "usage: demo [--steps N] [--layers L] [--hidden H] [--batch B] "
                            "[--out PATH] [--quiet]\n", a);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    demo_cfg c;
    if (parse_args(argc, argv, &c)) return 2;
    ranksnap_status st = ranksnap_init(NULL);
    if (st != RANKSNAP_OK) return demo_fail("ranksnap_init", st);

    void *params[DEMO_MAX_LAYERS] = {0}, *grads[DEMO_MAX_LAYERS] = {0}, *acts[DEMO_MAX_LAYERS] = {0};
    void *momentum = NULL;
    const uint64_t weight = c.hidden * c.hidden * 4;   /* one layer's fp32 weights  */
    const uint64_t act = c.batch * c.hidden * 4;       /* one layer's activations   */
    int rc = 0;

    for (int l = 0; l < c.layers; l++)
        if ((st = alloc_parameters(&params[l], weight)) != RANKSNAP_OK) { rc = demo_fail("parameters", st); goto out; }

    for (int s = 0; s < c.steps; s++) {
        ranksnap_step(s);
        ranksnap_annotate_begin("forward");
        for (int l = 0; l < c.layers; l++) {
            void *ws = NULL;
            if ((st = alloc_activation(&acts[l], act)) != RANKSNAP_OK) { rc = demo_fail("activation", st); goto out; }
            /* a matmul workspace and a small bias buffer that die at once */
            if ((st = alloc_workspace(&ws, act / 4 + 512 * (uint64_t)(l + 1))) != RANKSNAP_OK) { rc = demo_fail("workspace", st); goto out; }
            ranksnap_free(ws);
        }
        ranksnap_annotate_end("forward");
        ranksnap_annotate_begin("backward");
        for (int l = c.layers - 1; l >= 0; l--) {
            if (!grads[l] && (st = alloc_gradient(&grads[l], weight)) != RANKSNAP_OK) { rc = demo_fail("gradient", st); goto out; }
            ranksnap_free(acts[l]);
            acts[l] = NULL;
        }
        ranksnap_annotate_end("backward");
        ranksnap_annotate_begin("optimizer");
        if (!momentum && (st = alloc_optimizer_state(&momentum, weight * (uint64_t)c.layers)) != RANKSNAP_OK) { rc = demo_fail("optimizer", st); goto out; }
        ranksnap_annotate_end("optimizer");
    }

    ranksnap_stats stats;
    ranksnap_get_stats(&stats);
    if ((st = ranksnap_dump(c.out)) != RANKSNAP_OK) { rc = demo_fail("ranksnap_dump", st); goto out; }
    if (!c.quiet)
        printf("demo: %d steps, peak allocated %" PRIu64 " bytes, peak reserved %" PRIu64
               " bytes, %" PRIu64 " allocs, %" PRIu64 " events; snapshot %s\n",
               c.steps, stats.allocated_bytes_peak, stats.reserved_bytes_peak, stats.num_allocs,
               stats.events_recorded, c.out ? c.out : "written to RANKSNAP_DIR");
out:
    for (int l = 0; l < c.layers; l++) {
        ranksnap_free(params[l]);
        ranksnap_free(grads[l]);
        ranksnap_free(acts[l]);
    }
    ranksnap_free(momentum);
    ranksnap_finalize();
    return rc;
}
