/*
 * snapshot_fixture.h — a small but complete rank state for the snapshot tests.
 *
 * Three segments (large, small, and one on a stream the recorder never saw), blocks in every
 * state, stacks that resolve, one that does not (its pc is missing from the symbols) and one id
 * that does not exist, annotations, steps, an OOM. With `with_recorder` 0 the source has no
 * recorder and no symbols, as a rank that never recorded. Header-only so that each test stays a
 * single source file.
 */
#ifndef RANKSNAP_TEST_SNAPSHOT_FIXTURE_H
#define RANKSNAP_TEST_SNAPSHOT_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "rsnap_decode.h"
#include "snapshot_encode.h"

#define FX_MIB ((uint64_t)1 << 20)
#define FX_SEG0 0x7f3a00000000ull
#define FX_SEG1 0x7f3b00000000ull
#define FX_SEG2 0x7f3c00000000ull
#define FX_S1 ((void *)(uintptr_t)0x5551000)
#define FX_S2 ((void *)(uintptr_t)0x5552000)

typedef struct fixture {
    rs_options opt;
    rs_stacks *stacks;
    rs_recorder *rec;
    rs_symbols sym;
    rs_module_info modules[2];
    rs_frame_info frames[4];
    rs_block_info blocks0[3], blocks1[2], blocks2[1];
    rs_segment_info segs[3];
    rs_alloc_state state;
    rs_step_range ranges[2];
    rs_snapshot_src src;
    uint32_t stack_a, stack_b, stack_c;
} fixture;

static char fx_main_path[] = "";
static char fx_nccl_path[] = "/usr/lib/x86_64-linux-gnu/libnccl.so.2";
static char fx_fn[4][32] = {"alloc_weights", "build_layer", "forward", "ncclCommInitRank"};
static char fx_file[4][32] = {"model.c", "model.c", "train.c", "??"};

static void fx_frame(rs_frame_info *f, uint64_t pc, int32_t module, int i, int32_t line)
{
    f->pc = pc;
    f->module = module;
    f->function = fx_fn[i];
    f->file = fx_file[i];
    f->line = line;
}

static void fx_block(rs_block_info *b, uint64_t addr, uint64_t size, uint64_t req, uint8_t state,
                     uint32_t stack)
{
    b->addr = addr;
    b->size = size;
    b->requested_size = req;
    b->state = state;
    b->stack_id = stack;
}

/* Returns 0 on success. */
static int fixture_init(fixture *f, int with_recorder)
{
    memset(f, 0, sizeof *f);
    rs_options_defaults(&f->opt);
    f->opt.max_entries = 64;
    f->opt.stack_depth = 16;
    f->opt.max_split_size = UINT64_MAX;

    if (with_recorder) {
        static const uintptr_t a[] = {0x401000, 0x402000, 0x7f0000001000};
        static const uintptr_t b[] = {0x401000, 0x403000};
        static const uintptr_t c[] = {0x999999, 0x403000};
        if (rs_stacks_create(RS_STACKS_NATIVE, 16, &f->stacks) != RANKSNAP_OK) return -1;
        if (rs_recorder_create(64, f->stacks, &f->rec) != RANKSNAP_OK) return -1;
        rs_recorder_set_enabled(f->rec, 1);
        f->stack_a = rs_stacks_intern(f->stacks, a, 3);
        f->stack_b = rs_stacks_intern(f->stacks, b, 2);
        f->stack_c = rs_stacks_intern(f->stacks, c, 2);
        if (!f->stack_a || !f->stack_b || !f->stack_c) return -1;

        fx_frame(&f->frames[0], 0x401000, 0, 0, 42);
        fx_frame(&f->frames[1], 0x402000, 0, 1, 77);
        fx_frame(&f->frames[2], 0x403000, 0, 2, 12);
        fx_frame(&f->frames[3], 0x7f0000001000, 1, 3, 0);
        f->modules[0].path = fx_main_path;
        f->modules[0].base = 0x400000;
        strcpy(f->modules[0].build_id, "0123456789abcdef0123456789abcdef01234567");
        f->modules[1].path = fx_nccl_path;
        f->modules[1].base = 0x7f0000000000;
        f->sym.n_modules = 2;
        f->sym.modules = f->modules;
        f->sym.n_frames = 4;
        f->sym.frames = f->frames;

        rs_recorder *r = f->rec;
        rs_recorder_append_id(r, RS_ACT_STEP, 0, 10, NULL, 0);
        rs_recorder_append_id(r, RS_ACT_SEGMENT_ALLOC, FX_SEG0, 20 * FX_MIB, FX_S1, f->stack_a);
        rs_recorder_append_id(r, RS_ACT_ALLOC, FX_SEG0, 4 * FX_MIB, FX_S1, f->stack_a);
        uint32_t fwd = rs_recorder_intern_string(r, "forward");
        rs_recorder_append_id(r, RS_ACT_ANNOTATION_BEGIN, fwd, 0, NULL, 0);
        rs_recorder_append_id(r, RS_ACT_ALLOC, FX_SEG0 + 4 * FX_MIB, 2 * FX_MIB, FX_S1,
                              f->stack_b);
        rs_recorder_append_id(r, RS_ACT_SEGMENT_ALLOC, FX_SEG1, 2 * FX_MIB, NULL, f->stack_c);
        rs_recorder_append_id(r, RS_ACT_ALLOC, FX_SEG1, 512, NULL, f->stack_c);
        rs_recorder_append_id(r, RS_ACT_FREE_REQUESTED, FX_SEG0 + 4 * FX_MIB, 2 * FX_MIB, FX_S1,
                              f->stack_b);
        rs_recorder_append_id(r, RS_ACT_ANNOTATION_END, fwd, 0, NULL, 0);
        uint32_t opt_ann = rs_recorder_intern_string(r, "optimizer");
        rs_recorder_append_id(r, RS_ACT_ANNOTATION_BEGIN, opt_ann, 0, NULL, 0);
        rs_recorder_append_id(r, RS_ACT_STEP, 0, 11, NULL, 0);
        rs_recorder_append_id(r, RS_ACT_OOM, 3 * FX_MIB, 40 * FX_MIB, FX_S1, f->stack_b);
        rs_recorder_append_id(r, RS_ACT_ANNOTATION_END, opt_ann, 0, NULL, 0);
    }

    fx_block(&f->blocks0[0], FX_SEG0, 4 * FX_MIB, 4 * FX_MIB - 100, RS_BLOCK_ACTIVE_ALLOCATED,
             f->stack_a);
    fx_block(&f->blocks0[1], FX_SEG0 + 4 * FX_MIB, 2 * FX_MIB, 2 * FX_MIB,
             RS_BLOCK_ACTIVE_AWAITING_FREE, f->stack_b);
    fx_block(&f->blocks0[2], FX_SEG0 + 6 * FX_MIB, 14 * FX_MIB, 0, RS_BLOCK_INACTIVE, 0);
    fx_block(&f->blocks1[0], FX_SEG1, 512, 300, RS_BLOCK_ACTIVE_ALLOCATED, f->stack_c);
    fx_block(&f->blocks1[1], FX_SEG1 + 512, 2 * FX_MIB - 512, 0, RS_BLOCK_INACTIVE, 0);
    /* stack id 99 does not exist: the writer must not let it through */
    fx_block(&f->blocks2[0], FX_SEG2, 20 * FX_MIB, 20 * FX_MIB, RS_BLOCK_ACTIVE_ALLOCATED, 99);

    rs_segment_info *g = f->segs;
    g[0] = (rs_segment_info){FX_SEG0, 20 * FX_MIB, 4 * FX_MIB, 6 * FX_MIB, 4 * FX_MIB - 100,
                             FX_S1, 0, 0, f->stack_a, 3, f->blocks0};
    g[1] = (rs_segment_info){FX_SEG1, 2 * FX_MIB, 512, 512, 300, NULL, 0, 1, f->stack_c, 2,
                             f->blocks1};
    g[2] = (rs_segment_info){FX_SEG2, 20 * FX_MIB, 20 * FX_MIB, 20 * FX_MIB, 20 * FX_MIB, FX_S2,
                             0, 0, 0, 1, f->blocks2};
    f->state.n_segments = 3;
    f->state.segments = g;

    f->ranges[0] = (rs_step_range){10, 15};
    f->ranges[1] = (rs_step_range){100, -1};

    rs_snapshot_src *s = &f->src;
    s->rank = 1;
    s->world_size = 4;
    s->host = "node07";
    s->pid = 4242;
    s->job = "job-77";
    s->device.index = 1;
    strcpy(s->device.name, "ranksnap-sim");
    strcpy(s->device.uuid, "GPU-00000000-0000-0000-0000-000000000001");
    s->device.total_bytes = 80ull << 30;
    s->backend = "sim";
    s->options = &f->opt;
    s->memory_limit = 16ull << 30;
    s->complete = 1;
    s->clock_offset_us = -1234;
    s->clock_uncertainty_us = 17;
    s->n_ranges = 2;
    s->ranges = f->ranges;
    s->current_step = 11;
    s->stats = (ranksnap_stats){
        .allocated_bytes = 24 * FX_MIB + 512,
        .allocated_bytes_peak = 30 * FX_MIB,
        .requested_bytes = 24 * FX_MIB + 200,
        .requested_bytes_peak = 29 * FX_MIB,
        .reserved_bytes = 42 * FX_MIB,
        .reserved_bytes_peak = 62 * FX_MIB,
        .active_bytes = 26 * FX_MIB + 512,
        .active_bytes_peak = 31 * FX_MIB,
        .inactive_split_bytes = 16 * FX_MIB - 512,
        .num_allocs = 3,
        .num_frees = 1,
        .num_alloc_retries = 1,
        .num_ooms = 1,
        .num_segment_allocs = 4,
        .num_segment_frees = 1,
        .num_sync_all_streams = 2,
        .peak_time_us = 1700000000123456ull,
        .peak_step = 10,
        .events_recorded = 13,
        .events_dropped = 0,
        .device_total_bytes = 80ull << 30,
        .memory_limit_bytes = 16ull << 30,
    };
    s->device_used_bytes = 50 * FX_MIB;
    s->outside_bytes_peak = 8 * FX_MIB;
    s->outside_bytes_end = 6 * FX_MIB;
    s->has_oom = 1;
    s->oom = (rs_oom_info){3 * FX_MIB, 20 * FX_MIB, 40 * FX_MIB, 80ull << 30, 24 * FX_MIB,
                           42 * FX_MIB, 16ull << 30, 1700000000200000ull, FX_S1, 11};
    s->oom_stack_id = f->stack_b;
    s->oom_step = 11;
    s->state = &f->state;
    s->recorder = f->rec;
    s->symbols = with_recorder ? &f->sym : NULL;
    s->time_us = 1700000000300000ull;
    return 0;
}

static void fixture_free(fixture *f)
{
    rs_recorder_destroy(f->rec);
    rs_stacks_destroy(f->stacks);
}

/* Encodes the fixture; returns NULL (and leaves *len 0) on failure. */
static char *fixture_encode(const fixture *f, size_t *len)
{
    char *buf = NULL;
    *len = 0;
    if (rs_snapshot_encode(&f->src, &buf, len) != RANKSNAP_OK) return NULL;
    return buf;
}

/* The fixture made and encoded (with its recorder): NULL, *len 0, when either fails. */
static inline char *fixture_encoded(fixture *f, size_t *len)
{
    *len = 0;
    if (fixture_init(f, 1) != 0) return NULL;
    return fixture_encode(f, len);
}

#endif
