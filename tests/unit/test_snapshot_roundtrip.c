/*
 * test_snapshot_roundtrip.c — what the rank writes is what the collector reads, field by field,
 * and the history stays within its size budget (<= 24 bytes per event before stacks).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"
#include "check.h"
#include "clock.h"
#include "snapshot_fixture.h"
#include "symbols.h"

/* The stack id the file should carry for `id`: ids without a stack table become 0. */
static uint32_t expect_stack(const rs_snapshot_src *src, uint32_t id)
{
    if (!src->recorder || !src->symbols) return 0;
    return id <= rs_stacks_count(rs_recorder_stacks(src->recorder)) ? id : 0;
}

static void check_settings(const rs_snap *s, const rs_snapshot_src *src)
{
    CHECK_EQ_U64(s->allocator.memory_limit, src->memory_limit);
    CHECK_EQ_U64(s->allocator.max_split_size, rs_alloc_conf_max_split(&src->options->alloc_conf));
    CHECK_EQ_U64(s->allocator.min_block_size, 512);
    CHECK_EQ_U64(s->allocator.small_size, 1 << 20);
    CHECK_EQ_U64(s->allocator.small_buffer, 2 << 20);
    CHECK_EQ_U64(s->allocator.large_buffer, rs_alloc_conf_large_segment(&src->options->alloc_conf));
    CHECK_EQ_U64(s->allocator.min_large_alloc, 10 << 20);
    CHECK_EQ_U64(s->allocator.round_large, 2 << 20);
    CHECK_EQ_U64(s->recorder.max_entries, src->options->max_entries);
    CHECK(strcmp(s->recorder.stacks, "native") == 0);
    CHECK_EQ_U64(s->recorder.stack_depth, src->options->stack_depth);
}

static void check_totals(const rs_snap *s, const rs_snapshot_src *src)
{
    const rs_snap_totals *t = &s->totals;
    const ranksnap_stats *x = &src->stats;
    CHECK_EQ_U64(t->allocated_bytes_current, x->allocated_bytes);
    CHECK_EQ_U64(t->allocated_bytes_peak, x->allocated_bytes_peak);
    CHECK_EQ_U64(t->reserved_bytes_current, x->reserved_bytes);
    CHECK_EQ_U64(t->reserved_bytes_peak, x->reserved_bytes_peak);
    CHECK_EQ_U64(t->active_bytes_current, x->active_bytes);
    CHECK_EQ_U64(t->active_bytes_peak, x->active_bytes_peak);
    CHECK_EQ_U64(t->requested_bytes_current, x->requested_bytes);
    CHECK_EQ_U64(t->requested_bytes_peak, x->requested_bytes_peak);
    CHECK_EQ_U64(t->inactive_split_bytes, x->inactive_split_bytes);
    CHECK_EQ_U64(t->num_allocs, x->num_allocs);
    CHECK_EQ_U64(t->num_frees, x->num_frees);
    CHECK_EQ_U64(t->num_alloc_retries, x->num_alloc_retries);
    CHECK_EQ_U64(t->num_ooms, x->num_ooms);
    CHECK_EQ_U64(t->num_segment_allocs, x->num_segment_allocs);
    CHECK_EQ_U64(t->num_segment_frees, x->num_segment_frees);
    CHECK_EQ_U64(t->num_sync_all_streams, x->num_sync_all_streams);
    CHECK_EQ_U64(t->peak_time_us, x->peak_time_us);
    CHECK(t->peak_step == x->peak_step);
    CHECK_EQ_U64(t->events_recorded, x->events_recorded);
    CHECK_EQ_U64(t->events_dropped, x->events_dropped);
    CHECK_EQ_U64(t->device_total_bytes, x->device_total_bytes);
    CHECK_EQ_U64(t->device_used_bytes, src->device_used_bytes);
    CHECK_EQ_U64(t->memory_limit_bytes, x->memory_limit_bytes);
    CHECK_EQ_U64(t->outside_bytes_peak, src->outside_bytes_peak);
    CHECK_EQ_U64(t->outside_bytes_end, src->outside_bytes_end);
}

static void check_segments(const rs_snap *s, const rs_snapshot_src *src)
{
    CHECK_EQ_U64(s->n_segments, src->state->n_segments);
    for (size_t i = 0; i < s->n_segments && i < src->state->n_segments; i++) {
        const rs_snap_segment *g = &s->segments[i];
        const rs_segment_info *x = &src->state->segments[i];
        CHECK_EQ_U64(g->addr, x->addr);
        CHECK_EQ_U64(g->total_size, x->total_size);
        CHECK_EQ_U64(g->allocated_size, x->allocated_size);
        CHECK_EQ_U64(g->active_size, x->active_size);
        CHECK_EQ_U64(g->requested_size, x->requested_size);
        CHECK_EQ_U64(s->streams[g->stream], (uintptr_t)x->stream);
        CHECK_EQ_U64(g->is_small, x->is_small);
        CHECK_EQ_U64(g->stack, expect_stack(src, x->stack_id));
        CHECK_EQ_U64(g->n_blocks, x->n_blocks);
        for (size_t k = 0; k < g->n_blocks && k < x->n_blocks; k++) {
            CHECK_EQ_U64(g->blocks[k].addr, x->blocks[k].addr);
            CHECK_EQ_U64(g->blocks[k].size, x->blocks[k].size);
            CHECK_EQ_U64(g->blocks[k].requested_size, x->blocks[k].requested_size);
            CHECK_EQ_U64(g->blocks[k].state, x->blocks[k].state);
            CHECK_EQ_U64(g->blocks[k].stack, expect_stack(src, x->blocks[k].stack_id));
        }
    }
}

/* Events in the file: a ring event flagged RS_EV_COMPLETED is a free_requested and its
 * free_completed (rank/recorder.h). */
static uint64_t expanded_count(const rs_recorder *r)
{
    uint64_t n = 0;
    for (uint64_t i = 0; r && i < rs_recorder_count(r); i++) {
        const rs_event *e = rs_recorder_at(r, i);
        n += 1 + (e->action == RS_ACT_FREE_REQUESTED && (e->flags & RS_EV_COMPLETED));
    }
    return n;
}

static void check_history(const rs_snap *s, const rs_snapshot_src *src)
{
    const rs_recorder *r = src->recorder;
    const rs_snap_history *h = &s->history;
    CHECK_EQ_U64(h->count, expanded_count(r));
    CHECK_EQ_U64(h->dropped, rs_recorder_dropped(r));
    CHECK_EQ_U64(h->capacity, rs_recorder_capacity(r));
    if (!r) return;
    for (size_t i = 0; i < rs_recorder_n_streams(r); i++)
        CHECK_EQ_U64(s->streams[i], (uintptr_t)rs_recorder_stream(r, i));
    uint64_t j = 0;
    for (uint64_t i = 0; i < rs_recorder_count(r) && j < h->count; i++) {
        const rs_event *e = rs_recorder_at(r, i);
        int two = e->action == RS_ACT_FREE_REQUESTED && (e->flags & RS_EV_COMPLETED);
        for (int k = 0; k <= two && j < h->count; k++, j++) {
            CHECK_EQ_U64(h->time_us[j], e->time_us);
            CHECK_EQ_U64(h->action[j], k ? RS_ACT_FREE_COMPLETED : e->action);
            CHECK_EQ_U64(h->addr[j], e->addr);
            CHECK_EQ_U64(h->size[j], e->size);
            CHECK_EQ_U64(s->streams[h->stream[j]], (uintptr_t)rs_recorder_stream(r, e->stream));
            CHECK_EQ_U64(h->stack[j], expect_stack(src, e->stack_id));
        }
    }
    CHECK_EQ_U64(j, h->count);
    CHECK_EQ_U64(s->n_strings, rs_recorder_n_strings(r));
    for (size_t i = 0; i < s->n_strings; i++)
        CHECK(strcmp(s->strings[i], rs_recorder_string(r, i)) == 0);
}

static void check_stack_tables(const rs_snap *s, const rs_snapshot_src *src)
{
    if (!src->recorder || !src->symbols) {
        CHECK_EQ_U64(s->n_stacks, 0);
        CHECK_EQ_U64(s->n_frames, 0);
        CHECK_EQ_U64(s->n_modules, 0);
        return;
    }
    const rs_stacks *st = rs_recorder_stacks(src->recorder);
    const rs_symbols *sym = src->symbols;
    CHECK_EQ_U64(s->n_stacks, rs_stacks_count(st));
    for (uint32_t id = 1; id <= s->n_stacks; id++) {
        int n = 0;
        const uintptr_t *pcs = rs_stacks_get(st, id, &n);
        /* each pc stands for its inline levels (symbols.h), one frame for a pc not resolved */
        size_t want = 0, at = 0;
        for (int k = 0; k < n; k++) {
            int levels;
            want += rs_symbols_find(sym, pcs[k], &levels) >= 0 ? (size_t)levels : 1;
        }
        CHECK_EQ_U64(s->stacks[id - 1].n_frames, want);
        for (int k = 0; k < n; k++) {
            int levels;
            long x = rs_symbols_find(sym, pcs[k], &levels);
            for (int l = 0; l < (x < 0 ? 1 : levels) && at < s->stacks[id - 1].n_frames; l++, at++) {
                const rs_snap_frame *f = &s->frames[s->stacks[id - 1].frames[at]];
                CHECK_EQ_U64(f->pc, pcs[k]);
                if (x < 0) {
                    CHECK(strcmp(f->function, "??") == 0 && strcmp(f->file, "??") == 0);
                    CHECK(f->module == -1 && f->line == 0);
                } else {
                    const rs_frame_info *g = &sym->frames[x + l];
                    CHECK(strcmp(f->function, g->function) == 0);
                    CHECK(strcmp(f->file, g->file) == 0);
                    CHECK(f->module == g->module);
                    CHECK(f->line == g->line);
                }
            }
        }
    }
    CHECK_EQ_U64(s->n_modules, sym->n_modules);
    for (size_t i = 0; i < s->n_modules && i < sym->n_modules; i++) {
        CHECK(strcmp(s->modules[i].path, sym->modules[i].path) == 0);
        CHECK_EQ_U64(s->modules[i].base, sym->modules[i].base);
        CHECK(strcmp(s->modules[i].build_id, sym->modules[i].build_id) == 0);
    }
}

/* Every field of the decoded snapshot against the source it was encoded from. */
static void check_matches_src(const rs_snap *s, const rs_snapshot_src *src)
{
    CHECK_EQ_U64(s->version, RSNAP_FORMAT_VERSION);
    CHECK_EQ_U64(s->rank, src->rank);
    CHECK_EQ_U64(s->world_size, src->world_size);
    CHECK(strcmp(s->host, src->host) == 0);
    CHECK(s->pid == src->pid);
    CHECK(strcmp(s->job, src->job) == 0);
    CHECK_EQ_U64(s->complete, src->complete);
    CHECK_EQ_U64(s->time_us, src->time_us);
    CHECK_EQ_U64(s->device.index, src->device.index);
    CHECK(strcmp(s->device.name, src->device.name) == 0);
    CHECK(strcmp(s->device.uuid, src->device.uuid) == 0);
    CHECK_EQ_U64(s->device.total_bytes, src->device.total_bytes);
    CHECK(strcmp(s->backend, src->backend) == 0);
    check_settings(s, src);

    CHECK(s->time.clock_offset_us == src->clock_offset_us);
    CHECK(s->time.clock_uncertainty_us == src->clock_uncertainty_us);
    CHECK(s->time.current_step == src->current_step);
    CHECK_EQ_U64(s->time.n_ranges, src->n_ranges);
    for (size_t i = 0; i < s->time.n_ranges && i < src->n_ranges; i++) {
        CHECK(s->time.ranges[i].begin == src->ranges[i].begin);
        CHECK(s->time.ranges[i].end == src->ranges[i].end);
    }
    check_totals(s, src);
    check_segments(s, src);
    check_history(s, src);
    check_stack_tables(s, src);

    CHECK_EQ_U64(s->has_oom, src->has_oom);
    if (s->has_oom) {
        const rs_oom_info *o = &src->oom;
        CHECK_EQ_U64(s->oom.requested, o->requested);
        CHECK_EQ_U64(s->oom.rounded, o->rounded);
        CHECK_EQ_U64(s->oom.device_free, o->device_free);
        CHECK_EQ_U64(s->oom.device_total, o->device_total);
        CHECK_EQ_U64(s->oom.allocated, o->allocated);
        CHECK_EQ_U64(s->oom.reserved, o->reserved);
        CHECK_EQ_U64(s->oom.memory_limit, o->memory_limit);
        CHECK_EQ_U64(s->oom.time_us, o->time_us);
        CHECK_EQ_U64(s->streams[s->oom.stream], (uintptr_t)o->stream);
        CHECK_EQ_U64(s->oom.stack, expect_stack(src, src->oom_stack_id));
        CHECK(s->oom.step == src->oom_step);
    }
}

static rs_snap *roundtrip(const rs_snapshot_src *src)
{
    char *buf = NULL;
    size_t len = 0;
    rs_snap *s = NULL;
    CHECK(rs_snapshot_encode(src, &buf, &len) == RANKSNAP_OK);
    if (!buf) return NULL;
    ranksnap_status st = rs_rsnap_decode(buf, len, "roundtrip", &s);
    if (st != RANKSNAP_OK) fprintf(stderr, "decode: %s\n", ranksnap_last_error());
    CHECK(st == RANKSNAP_OK);
    free(buf);
    return s;
}

TEST(snapshot_without_recorder_roundtrips_every_field)
{
    fixture f;
    CHECK(fixture_init(&f, 0) == 0);
    rs_snap *s = roundtrip(&f.src);
    CHECK(s != NULL);
    if (s) {
        check_matches_src(s, &f.src);
        /* the default stream first, then the streams the segments name */
        CHECK_EQ_U64(s->n_streams, 3);
        CHECK_EQ_U64(s->streams[0], 0);
        CHECK_EQ_U64(s->history.count, 0);
    }
    rs_snap_free(s);
    fixture_free(&f);
}

TEST(snapshot_with_recorder_roundtrips_history_stacks_and_symbols)
{
    fixture f;
    CHECK(fixture_init(&f, 1) == 0);
    rs_snap *s = roundtrip(&f.src);
    CHECK(s != NULL);
    if (s) {
        check_matches_src(s, &f.src);
        CHECK_EQ_U64(s->history.count, 13);
        CHECK_EQ_U64(s->n_stacks, 3);
        /* the pc missing from the symbols got an unresolved frame of its own */
        CHECK_EQ_U64(s->n_frames, 5);
        CHECK_EQ_U64(s->n_strings, 2);
        /* the stack id that does not exist was written as "no stack" */
        CHECK_EQ_U64(s->segments[2].blocks[0].stack, 0);
        /* FX_S2 is in no event: appended after the recorder's streams */
        CHECK_EQ_U64(s->streams[s->segments[2].stream], (uintptr_t)FX_S2);
    }
    rs_snap_free(s);
    fixture_free(&f);
}

/* What NVML listed on the device and what the outside bytes are measured against travel in the
 * file; a file without them (written before they existed, or where NVML listed nothing) reads
 * with nothing listed and the measure unsaid. */
TEST(snapshot_keeps_what_nvml_listed_and_reads_a_file_without_it)
{
    fixture f;
    CHECK(fixture_init(&f, 0) == 0);
    /* the older file: none of the keys is written */
    char *buf = NULL;
    size_t len = 0;
    CHECK(rs_snapshot_encode(&f.src, &buf, &len) == RANKSNAP_OK);
    CHECK(buf && !memmem(buf, len, "outside_of", 10) && !memmem(buf, len, "processes", 9));
    rs_snap *s = NULL;
    CHECK(buf && rs_rsnap_decode(buf, len, "older", &s) == RANKSNAP_OK);
    free(buf);
    if (s) {
        CHECK_EQ_U64(s->totals.outside_of, RS_OUTSIDE_UNSAID);
        CHECK_EQ_U64(s->totals.outside_why, RS_OUTSIDE_WHY_UNSAID);
        CHECK(s->totals.outside_why_detail == NULL);
        CHECK_EQ_U64(s->device.processes, 0);
        CHECK_EQ_U64(s->device.others_bytes, 0);
        CHECK_EQ_U64(s->device.own_bytes, 0);
    }
    rs_snap_free(s);

    /* this process's own, found among two */
    f.src.outside_of = RS_OUTSIDE_PROCESS;
    f.src.share = (rs_device_share){.listed = 1, .processes = 2, .own_known = 1,
                                    .own_bytes = 352 * FX_MIB, .others_bytes = 608 * FX_MIB,
                                    .others_unknown = 1};
    s = roundtrip(&f.src);
    CHECK(s != NULL);
    if (s) {
        CHECK_EQ_U64(s->totals.outside_of, RS_OUTSIDE_PROCESS);
        CHECK_EQ_U64(s->device.processes, 2);
        CHECK_EQ_U64(s->device.own_bytes, 352 * FX_MIB);
        CHECK_EQ_U64(s->device.others_bytes, 608 * FX_MIB);
        CHECK_EQ_U64(s->device.others_unknown, 1);
    }
    rs_snap_free(s);

    /* the device's whole use, and why: the words and NVML's own */
    f.src.outside_of = RS_OUTSIDE_DEVICE;
    f.src.outside_why = RS_OUTSIDE_WHY_PID_NOT_LISTED;
    f.src.outside_why_detail = "this process (pid 7) is not among the 2 processes";
    f.src.share = (rs_device_share){.listed = 1, .processes = 2};
    s = roundtrip(&f.src);
    CHECK(s != NULL);
    if (s) {
        CHECK_EQ_U64(s->totals.outside_of, RS_OUTSIDE_DEVICE);
        CHECK_EQ_U64(s->totals.outside_why, RS_OUTSIDE_WHY_PID_NOT_LISTED);
        CHECK(s->totals.outside_why_detail &&
              !strcmp(s->totals.outside_why_detail, "this process (pid 7) is not among the 2 processes"));
        CHECK_EQ_U64(s->device.own_bytes, 0);
    }
    rs_snap_free(s);
    fixture_free(&f);
}

TEST(snapshot_keeps_the_allocator_settings_and_a_crash_flag)
{
    fixture f;
    char why[128];
    CHECK(fixture_init(&f, 1) == 0);
    const char *given = "max_split_size_mb:64, expandable_segments:True,roundup_power2_divisions:"
                        "[256:1,>:4],large_segment_size_mb:40,per_process_memory_fraction:0.3";
    CHECK(rs_alloc_conf_parse(&f.opt.alloc_conf, given, 0, why, sizeof why) == 0);
    f.src.complete = 0;
    f.src.has_oom = 0;
    rs_snap *s = roundtrip(&f.src);
    CHECK(s != NULL);
    if (s) {
        check_matches_src(s, &f.src);
        const rs_alloc_conf *c = &s->allocator.conf;
        CHECK_EQ_U64(s->allocator.max_split_size, 64 * FX_MIB);
        CHECK_EQ_U64(s->allocator.large_buffer, 40 * FX_MIB);
        CHECK(c->expandable_segments == 1);
        CHECK(memcmp(c->roundup_divisions, f.opt.alloc_conf.roundup_divisions,
                     sizeof c->roundup_divisions) == 0);
        CHECK(c->has_fraction && c->memory_fraction == 0.3);
        CHECK(strcmp(c->text, given) == 0);
        CHECK_EQ_U64(s->complete, 0);
        CHECK_EQ_U64(s->has_oom, 0);
    }
    rs_snap_free(s);
    fixture_free(&f);
}

TEST(snapshot_of_a_wrapped_ring_reports_dropped_events)
{
    fixture f;
    CHECK(fixture_init(&f, 1) == 0);
    for (int i = 0; i < 200; i++)
        rs_recorder_append_id(f.rec, RS_ACT_ALLOC, FX_SEG0 + (uint64_t)i * 512, 512, FX_S1,
                              f.stack_a);
    rs_snap *s = roundtrip(&f.src);
    CHECK(s != NULL);
    if (s) {
        check_matches_src(s, &f.src);
        CHECK_EQ_U64(s->history.count, 64);
        CHECK_EQ_U64(s->history.dropped, 213 - 64);
        CHECK_EQ_U64(s->history.addr[63], FX_SEG0 + 199 * 512);
    }
    rs_snap_free(s);
    fixture_free(&f);
}

TEST(delta_columns_survive_wraparound_and_large_jumps)
{
    fixture f;
    CHECK(fixture_init(&f, 1) == 0);
    static const uint64_t addrs[] = {0, UINT64_MAX, 5, (uint64_t)INT64_MAX + 1, 1, INT64_MAX,
                                     UINT64_MAX - 1, 0x7f3a00000000ull, 0x1000};
    for (size_t i = 0; i < sizeof addrs / sizeof addrs[0]; i++)
        rs_recorder_append_id(f.rec, RS_ACT_SEGMENT_FREE, addrs[i], UINT64_MAX - i, FX_S2, 0);
    rs_snap *s = roundtrip(&f.src);
    CHECK(s != NULL);
    if (s) check_matches_src(s, &f.src);
    rs_snap_free(s);
    fixture_free(&f);
}

TEST(snapshot_file_written_atomically_reads_back)
{
    fixture f;
    char dir[] = "/tmp/ranksnap-roundtrip-XXXXXX", path[128];
    CHECK(fixture_init(&f, 1) == 0);
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/rank-00001.rsnap", dir);
    size_t len;
    char *buf = fixture_encode(&f, &len);
    CHECK(buf != NULL);
    CHECK(rs_atomic_file_write(path, buf, len) == RANKSNAP_OK);
    rs_snap *s = NULL;
    CHECK(rs_rsnap_decode_file(path, &s) == RANKSNAP_OK);
    if (s) check_matches_src(s, &f.src);
    rs_snap_free(s);
    free(buf);
    unlink(path);
    rmdir(dir);
    fixture_free(&f);
}

/* ---- size budget -------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Waits until the clock moved `us` microseconds, so that time deltas look like a training
 * loop's: bursts of allocations microseconds apart, pauses of tens to hundreds between layers. */
static void spin_us(uint64_t us)
{
    uint64_t end = rs_now_us() + us;
    while (rs_now_us() < end) {
    }
}

#define SIZE_EVENTS 100000
#define SIZE_SEGMENTS 4
#define SIZE_SITES 300
#define SIZE_LIVE 256

typedef struct live_block {
    uint64_t addr, size;
    uint32_t stack;
} live_block;

/* A synthetic trace shaped like a training step: four 20 MiB segments on two streams, tensors
 * of 512 B to 8 MiB (rounded to 512 B) bump-allocated inside them, freed mostly in LIFO order
 * (free_requested then free_completed), 300 distinct allocation sites with a skewed popularity,
 * a step marker every 2,000 events. */
static void synthetic_trace(rs_recorder *r, const uint32_t *sites)
{
    static live_block live[SIZE_LIVE];
    uint64_t top[SIZE_SEGMENTS];
    size_t n_live = 0;
    uint64_t events = 0;
    void *streams[2] = {FX_S1, FX_S2};
    for (int g = 0; g < SIZE_SEGMENTS; g++) {
        top[g] = 0;
        rs_recorder_append_id(r, RS_ACT_SEGMENT_ALLOC, FX_SEG0 + (uint64_t)g * (32 * FX_MIB),
                              20 * FX_MIB, streams[g & 1], sites[0]);
        events++;
    }
    while (events < SIZE_EVENTS) {
        if (events % 2000 == 0) {
            rs_recorder_append_id(r, RS_ACT_STEP, 0, events / 2000, NULL, 0);
            events++;
        }
        uint64_t x = rng();
        spin_us(x % 50 == 0 ? 20 + x % 180 : x % 4);
        int g = (int)((x >> 8) % SIZE_SEGMENTS);
        uint64_t base = FX_SEG0 + (uint64_t)g * (32 * FX_MIB);
        uint64_t size = ((x >> 16) % 4 == 0 ? ((x >> 20) % (8 * FX_MIB)) : ((x >> 20) % 65536));
        size = (size + 511) / 512 * 512;
        if (size == 0) size = 512;
        int do_alloc = n_live == 0 || (n_live < SIZE_LIVE && (x >> 40) % 100 < 52);
        if (do_alloc && top[g] + size <= 20 * FX_MIB) {
            /* skewed popularity: a few sites allocate most tensors */
            uint64_t u = (x >> 32) % 1000;
            uint32_t stack = sites[(u * u * u / 1000000) % SIZE_SITES];
            live[n_live++] = (live_block){base + top[g], size, stack};
            top[g] += size;
            rs_recorder_append_id(r, RS_ACT_ALLOC, base + top[g] - size, size, streams[g & 1],
                                  stack);
            events++;
        } else if (n_live > 0) {
            /* mostly the newest, sometimes an older one */
            size_t k = (x >> 44) % 8 == 0 ? (size_t)((x >> 48) % n_live) : n_live - 1;
            live_block b = live[k];
            live[k] = live[--n_live];
            rs_recorder_append_id(r, RS_ACT_FREE_REQUESTED, b.addr, b.size, FX_S1, b.stack);
            rs_recorder_append_id(r, RS_ACT_FREE_COMPLETED, b.addr, b.size, FX_S1, b.stack);
            events += 2;
            for (int s = 0; s < SIZE_SEGMENTS; s++) top[s] = 0;
            for (size_t i = 0; i < n_live; i++) {
                int s = (int)((live[i].addr - FX_SEG0) / (32 * FX_MIB));
                uint64_t end = live[i].addr + live[i].size - (FX_SEG0 + (uint64_t)s * 32 * FX_MIB);
                if (end > top[s]) top[s] = end;
            }
        } else {
            /* the chosen segment is full and nothing is live: start over */
            top[g] = 0;
        }
    }
}

TEST(history_costs_at_most_24_bytes_per_event_before_stacks)
{
    fixture f;
    CHECK(fixture_init(&f, 1) == 0);
    rs_recorder_destroy(f.rec);
    f.rec = NULL;
    CHECK(rs_recorder_create(SIZE_EVENTS + 16, f.stacks, &f.rec) == RANKSNAP_OK);
    rs_recorder_set_enabled(f.rec, 1);
    f.src.recorder = f.rec;
    uint32_t sites[SIZE_SITES];
    for (int i = 0; i < SIZE_SITES; i++) {
        uintptr_t pcs[3] = {0x401000 + (uintptr_t)i * 0x40, 0x402000, 0x403000};
        sites[i] = rs_stacks_intern(f.stacks, pcs, 3);
    }
    /* the same recorder tables with and without events: the difference is the history alone */
    rs_recorder_append_id(f.rec, RS_ACT_ALLOC, 0, 0, FX_S2, 0);
    rs_recorder_clear(f.rec);
    size_t empty_len = 0, full_len = 0;
    char *empty = fixture_encode(&f, &empty_len);
    synthetic_trace(f.rec, sites);
    uint64_t n = expanded_count(f.rec);
    char *full = fixture_encode(&f, &full_len);
    CHECK(empty && full);
    CHECK(n >= SIZE_EVENTS);
    double per_event = (double)(full_len - empty_len) / (double)n;
    printf("history: %" PRIu64 " events in %zu bytes, %.2f bytes per event (file %zu bytes)\n", n,
           full_len - empty_len, per_event, full_len);
    CHECK(per_event <= 24.0);

    rs_snap *s = NULL;
    CHECK(rs_rsnap_decode(full, full_len, "synthetic", &s) == RANKSNAP_OK);
    if (s) check_matches_src(s, &f.src);
    rs_snap_free(s);
    free(empty);
    free(full);
    fixture_free(&f);
}

int main(void)
{
    RUN(snapshot_without_recorder_roundtrips_every_field);
    RUN(snapshot_with_recorder_roundtrips_history_stacks_and_symbols);
    RUN(snapshot_keeps_what_nvml_listed_and_reads_a_file_without_it);
    RUN(snapshot_keeps_the_allocator_settings_and_a_crash_flag);
    RUN(snapshot_of_a_wrapped_ring_reports_dropped_events);
    RUN(delta_columns_survive_wraparound_and_large_jumps);
    RUN(snapshot_file_written_atomically_reads_back);
    RUN(history_costs_at_most_24_bytes_per_event_before_stacks);
    return check_summary();
}
