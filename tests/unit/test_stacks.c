/*
 * test_stacks.c — capture, interning and resolution of native stacks (rank/stacks.c).
 *
 * The helpers that capture are noinline and do work after the capture call, so that their frame
 * exists and the call cannot be a tail call: the tests know which function must come first.
 * Names, files and lines are checked where the build has libbacktrace; without it only exported
 * symbols resolve, so the checks fall back to the module. Build with -g.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "stacks.h"
#include "symbols.h"

static volatile uint32_t sink;
static volatile int int_sink;

static rs_stacks *new_stacks(rs_stacks_mode mode, int depth)
{
    rs_stacks *s = NULL;
    ranksnap_status st = rs_stacks_create(mode, depth, &s);
    CHECK_EQ_U64(st, RANKSNAP_OK);
    return s;
}

static int capture_line_a;
__attribute__((noinline)) static uint32_t capture_at_site_a(rs_stacks *s)
{
    capture_line_a = __LINE__ + 1;
    uint32_t id = rs_stacks_capture(s, 0);
    sink = id;
    return id;
}

__attribute__((noinline)) static uint32_t capture_at_site_b(rs_stacks *s)
{
    uint32_t id = rs_stacks_capture(s, 0);
    sink = id + 1;
    return id;
}

__attribute__((noinline)) static uint32_t capture_via_one_site(rs_stacks *s)
{
    uint32_t id = capture_at_site_a(s);
    sink = id + 3;
    return id;
}

/* An allocation helper the compiler inlines into its caller, as -O2/-O3 do with small static
 * helpers: the captured pc is in the caller's code, but its debug location is the helper's. */
static int inline_helper_line, inline_caller_line;
static inline __attribute__((always_inline)) uint32_t inlined_helper(rs_stacks *s)
{
    inline_helper_line = __LINE__ + 1;
    return rs_stacks_capture(s, 0);
}

__attribute__((noinline)) static uint32_t calls_inlined_helper(rs_stacks *s)
{
    inline_caller_line = __LINE__ + 1;
    uint32_t id = inlined_helper(s);
    sink = id + 4;
    return id;
}

/* Leaves out its own frame: the stack starts in its caller. */
__attribute__((noinline)) static uint32_t capture_skipping_self(rs_stacks *s)
{
    uint32_t id = rs_stacks_capture(s, 1);
    sink = id + 2;
    return id;
}

__attribute__((noinline)) static int capture_pcs_here(rs_stacks *s, uintptr_t *pcs)
{
    int n = rs_stacks_capture_pcs(s, 0, pcs);
    int_sink = n;
    return n;
}

__attribute__((noinline)) static uint32_t recurse_then_capture(rs_stacks *s, int levels)
{
    uint32_t id = levels > 0 ? recurse_then_capture(s, levels - 1) : rs_stacks_capture(s, 0);
    sink = id + (uint32_t)levels;
    return id;
}

static char *self_exe(void)
{
    static char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

/* The resolved frame of `pc`, or NULL (a failed check) when it is not in the table. */
static const rs_frame_info *frame_of(const rs_symbols *sym, uintptr_t pc)
{
    int levels;
    long i = rs_symbols_find(sym, pc, &levels);
    CHECK(i >= 0 && levels >= 1);
    return i >= 0 ? &sym->frames[i] : NULL;
}

static const char *module_path(const rs_symbols *sym, const rs_frame_info *f)
{
    if (!f || f->module < 0 || (size_t)f->module >= sym->n_modules) return "";
    return sym->modules[f->module].path;
}

TEST(create_rejects_depth_outside_1_to_64_and_unknown_modes)
{
    rs_stacks *s = NULL;
    CHECK_EQ_U64(rs_stacks_create(RS_STACKS_NATIVE, 0, &s), RANKSNAP_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "expected a depth from 1 to 64");
    CHECK_EQ_U64(rs_stacks_create(RS_STACKS_NATIVE, RS_MAX_STACK_DEPTH + 1, &s),
                 RANKSNAP_ERR_INVALID_ARGUMENT);
    CHECK_EQ_U64(rs_stacks_create((rs_stacks_mode)7, 16, &s), RANKSNAP_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "expected native, fp, python or none");
    CHECK(s == NULL);
    CHECK_EQ_U64(rs_stacks_create(RS_STACKS_FP, RS_MAX_STACK_DEPTH, &s), RANKSNAP_OK);
    CHECK(s != NULL);
    CHECK_EQ_U64(rs_stacks_mode_of(s), RS_STACKS_FP);
    rs_stacks_destroy(s);
}

TEST(intern_gives_one_id_per_distinct_array_numbered_from_1)
{
    rs_stacks *s = new_stacks(RS_STACKS_NONE, 16);
    uintptr_t a[3] = {0x1000, 0x2000, 0x3000};
    uintptr_t b[3] = {0x1000, 0x2000, 0x3001};
    uintptr_t a_copy[3] = {0x1000, 0x2000, 0x3000};
    uint32_t ia = rs_stacks_intern(s, a, 3);
    uint32_t ib = rs_stacks_intern(s, b, 3);
    uint32_t ia2 = rs_stacks_intern(s, a_copy, 3);
    uint32_t prefix = rs_stacks_intern(s, a, 2);
    CHECK_EQ_U64(ia, 1);
    CHECK_EQ_U64(ib, 2);
    CHECK_EQ_U64(ia2, ia);
    CHECK_EQ_U64(prefix, 3);
    CHECK_EQ_U64(rs_stacks_count(s), 3);
    int n = 0;
    const uintptr_t *got = rs_stacks_get(s, ib, &n);
    CHECK_EQ_U64(n, 3);
    CHECK(got && memcmp(got, b, sizeof b) == 0);
    CHECK(rs_stacks_get(s, 0, &n) == NULL && n == 0);
    CHECK(rs_stacks_get(s, 4, &n) == NULL && n == 0);
    CHECK_EQ_U64(rs_stacks_intern(s, a, 0), 0);
    CHECK_EQ_U64(rs_stacks_intern(NULL, a, 3), 0);
    rs_stacks_destroy(s);
}

TEST(intern_keeps_every_stack_findable_across_rehashes)
{
    rs_stacks *s = new_stacks(RS_STACKS_NONE, 8);
    enum { N = 20000 };
    size_t mem_before = rs_stacks_memory_bytes(s);
    for (uintptr_t i = 0; i < N; i++) {
        uintptr_t pcs[4] = {0x400000 + i * 16, 0x500000, 0x600000 + (i % 7), i};
        CHECK_EQ_U64(rs_stacks_intern(s, pcs, 4), i + 1);
    }
    CHECK_EQ_U64(rs_stacks_count(s), N);
    for (uintptr_t i = 0; i < N; i++) {
        uintptr_t pcs[4] = {0x400000 + i * 16, 0x500000, 0x600000 + (i % 7), i};
        CHECK_EQ_U64(rs_stacks_intern(s, pcs, 4), i + 1);
    }
    CHECK_EQ_U64(rs_stacks_count(s), N);
    CHECK(rs_stacks_memory_bytes(s) >= mem_before + (size_t)N * 4 * sizeof(uintptr_t));
    CHECK_EQ_U64(rs_stacks_failed(s), 0);
    rs_stacks_destroy(s);
}

TEST(intern_cuts_stacks_longer_than_the_depth)
{
    rs_stacks *s = new_stacks(RS_STACKS_NONE, 4);
    uintptr_t pcs[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    uint32_t id = rs_stacks_intern(s, pcs, 10);
    int n = 0;
    const uintptr_t *got = rs_stacks_get(s, id, &n);
    CHECK_EQ_U64(n, 4);
    CHECK(got && got[3] == 4);
    CHECK_EQ_U64(rs_stacks_intern(s, pcs, 4), id);
    rs_stacks_destroy(s);
}

TEST(table_that_cannot_grow_gives_id_0_counts_it_and_keeps_old_stacks)
{
    rs_stacks *s = new_stacks(RS_STACKS_NONE, 8);
    uintptr_t first[2] = {0x10, 0x20};
    uint32_t id = rs_stacks_intern(s, first, 2);
    CHECK_EQ_U64(id, 1);
    rs_stacks_fail_allocs_after(s, 0);
    /* Fill until the next stack needs a growth; every later new stack must fail cleanly. */
    uint32_t failed_at = 0;
    for (uintptr_t i = 0; i < 5000 && !failed_at; i++) {
        uintptr_t pcs[2] = {0x1000 + i, 0x2000};
        if (rs_stacks_intern(s, pcs, 2) == 0) failed_at = (uint32_t)i + 1;
    }
    CHECK(failed_at > 0);
    CHECK_EQ_U64(rs_stacks_failed(s), 1);
    uintptr_t again[2] = {0x9999, 0x2000};
    CHECK_EQ_U64(rs_stacks_intern(s, again, 2), 0);
    CHECK_EQ_U64(rs_stacks_failed(s), 2);
    CHECK_EQ_U64(rs_stacks_intern(s, first, 2), id);
    CHECK_EQ_U64(rs_stacks_capture(s, 0), 0); /* mode none */
    /* Each kind of growth (slots, entries, pool) fails on its own turn without losing data. */
    for (uint64_t budget = 0; budget < 6; budget++) {
        rs_stacks *t = new_stacks(RS_STACKS_NONE, 64);
        rs_stacks_fail_allocs_after(t, budget);
        uint64_t stored = 0;
        for (uintptr_t i = 0; i < 3000; i++) {
            uintptr_t pcs[64];
            for (int k = 0; k < 64; k++) pcs[k] = i * 64 + (uintptr_t)k;
            uint32_t got = rs_stacks_intern(t, pcs, 64);
            if (got) {
                stored++;
                CHECK_EQ_U64(got, stored);
            }
        }
        CHECK(rs_stacks_failed(t) > 0);
        CHECK_EQ_U64(rs_stacks_count(t), stored);
        for (uint32_t k = 1; k <= stored; k++) {
            int n = 0;
            const uintptr_t *p = rs_stacks_get(t, k, &n);
            CHECK(p && n == 64 && p[0] % 64 == 0 && p[63] == p[0] + 63);
        }
        rs_stacks_destroy(t);
    }
    rs_stacks_destroy(s);
}

TEST(capture_from_one_call_site_twice_gives_the_same_id)
{
    /* Depth 2 keeps only capture_at_site_a and the one line of capture_via_one_site that calls
     * it, so the two calls below reach rs_stacks_capture through the same call sites. */
    rs_stacks *s = new_stacks(RS_STACKS_NATIVE, 2);
    uint32_t first = capture_via_one_site(s);
    uint32_t second = capture_via_one_site(s);
    CHECK(first != 0);
    CHECK_EQ_U64(first, second);
    CHECK_EQ_U64(rs_stacks_count(s), 1);
    int n = 0;
    CHECK(rs_stacks_get(s, first, &n) != NULL && n == 2);
    rs_stacks_destroy(s);
}

TEST(capture_from_different_call_sites_gives_different_ids)
{
    rs_stacks *s = new_stacks(RS_STACKS_NATIVE, 16);
    uint32_t a = capture_at_site_a(s);
    uint32_t b = capture_at_site_b(s);
    uint32_t a_elsewhere = capture_at_site_a(s);
    CHECK(a != 0 && b != 0 && a_elsewhere != 0);
    CHECK(a != b);
    CHECK(a != a_elsewhere); /* same helper, called from another line of this test */
    CHECK_EQ_U64(rs_stacks_count(s), 3);
    rs_stacks_destroy(s);
}

TEST(capture_keeps_at_most_depth_frames)
{
    rs_stacks *s = new_stacks(RS_STACKS_NATIVE, 5);
    uint32_t id = recurse_then_capture(s, 20);
    int n = 0;
    CHECK(rs_stacks_get(s, id, &n) != NULL);
    CHECK_EQ_U64(n, 5);
    rs_stacks_destroy(s);

    s = new_stacks(RS_STACKS_NATIVE, RS_MAX_STACK_DEPTH);
    id = recurse_then_capture(s, 100);
    CHECK(rs_stacks_get(s, id, &n) != NULL);
    CHECK_EQ_U64(n, RS_MAX_STACK_DEPTH);
    rs_stacks_destroy(s);
}

TEST(mode_none_captures_nothing)
{
    rs_stacks *s = new_stacks(RS_STACKS_NONE, 16);
    uintptr_t pcs[RS_MAX_STACK_DEPTH];
    CHECK_EQ_U64(rs_stacks_capture(s, 0), 0);
    CHECK_EQ_U64(rs_stacks_capture_pcs(s, 0, pcs), 0);
    CHECK_EQ_U64(rs_stacks_count(s), 0);
    CHECK_EQ_U64(rs_stacks_failed(s), 0);
    rs_stacks_destroy(s);
}

TEST(capture_starts_at_the_caller_and_skip_leaves_out_its_frames)
{
    rs_stacks *s = new_stacks(RS_STACKS_NATIVE, 16);
    uint32_t a = capture_at_site_a(s);
    uint32_t skipped = capture_skipping_self(s);
    uintptr_t raw[RS_MAX_STACK_DEPTH];
    int n_raw = capture_pcs_here(s, raw);
    CHECK(n_raw >= 2);
    rs_symbols sym;
    CHECK_EQ_U64(rs_symbols_resolve(s, &sym), RANKSNAP_OK);
    int n = 0;
    const uintptr_t *pa = rs_stacks_get(s, a, &n);
    CHECK(pa && n >= 2);
    const uintptr_t *ps = rs_stacks_get(s, skipped, &n);
    CHECK(ps && n >= 2);
    if (pa && ps && rs_symbols_have_file_lines()) {
        const rs_frame_info *f = frame_of(&sym, pa[0]);
        CHECK_STR_CONTAINS(f ? f->function : NULL, "capture_at_site_a");
        f = frame_of(&sym, pa[1]);
        CHECK_STR_CONTAINS(f ? f->function : NULL, "capture_starts_at_the_caller");
        f = frame_of(&sym, ps[0]);
        CHECK_STR_CONTAINS(f ? f->function : NULL, "capture_starts_at_the_caller");
        /* rs_stacks_capture_pcs is not interned, so resolve its first pc on its own. */
        rs_stacks *t = new_stacks(RS_STACKS_NONE, 16);
        rs_symbols sym2;
        rs_stacks_intern(t, raw, n_raw);
        CHECK_EQ_U64(rs_symbols_resolve(t, &sym2), RANKSNAP_OK);
        f = frame_of(&sym2, raw[0]);
        CHECK_STR_CONTAINS(f ? f->function : NULL, "capture_pcs_here");
        f = frame_of(&sym2, raw[1]);
        CHECK_STR_CONTAINS(f ? f->function : NULL, "capture_starts_at_the_caller");
        rs_symbols_free(&sym2);
        rs_stacks_destroy(t);
    } else if (pa) {
        CHECK_EQ_U64(strcmp(module_path(&sym, frame_of(&sym, pa[0])), self_exe()), 0);
    }
    rs_symbols_free(&sym);
    rs_stacks_destroy(s);
}

TEST(resolve_names_function_file_and_line_of_each_frame)
{
    rs_stacks *s = new_stacks(RS_STACKS_NATIVE, 16);
    uint32_t id = capture_at_site_a(s);
    rs_symbols sym;
    CHECK_EQ_U64(rs_symbols_resolve(s, &sym), RANKSNAP_OK);
    int n = 0;
    const uintptr_t *pcs = rs_stacks_get(s, id, &n);
    CHECK(pcs && n >= 2);
    CHECK(sym.n_frames >= (size_t)n);
    /* sorted by pc; a pc in inlined code has several frames in a row (its inline levels) */
    for (size_t i = 1; i < sym.n_frames; i++) CHECK(sym.frames[i - 1].pc <= sym.frames[i].pc);
    for (size_t i = 0; i < sym.n_frames; i++) {
        CHECK(sym.frames[i].function && sym.frames[i].function[0]);
        CHECK(sym.frames[i].file && sym.frames[i].file[0]);
        CHECK(sym.frames[i].line >= 0);
    }
    if (pcs) {
        const rs_frame_info *f = frame_of(&sym, pcs[0]);
        CHECK_EQ_U64(strcmp(module_path(&sym, f), self_exe()), 0);
        if (rs_symbols_have_file_lines() && f) {
            CHECK_STR_CONTAINS(f->function, "capture_at_site_a");
            CHECK_STR_CONTAINS(f->file, "test_stacks.c");
            CHECK_EQ_U64(f->line, capture_line_a); /* pc - 1: the call, not the next line */
            const rs_frame_info *g = frame_of(&sym, pcs[1]);
            CHECK_STR_CONTAINS(g ? g->function : NULL, "resolve_names_function_file_and_line");
            CHECK_STR_CONTAINS(g ? g->file : NULL, "test_stacks.c");
            CHECK(g && g->line > capture_line_a);
        }
    }
    int levels = 7;
    CHECK_EQ_U64(rs_symbols_find(&sym, 1, &levels), (unsigned long long)-1);
    CHECK_EQ_U64(levels, 0);
    CHECK_EQ_U64(rs_symbols_find(NULL, pcs ? pcs[0] : 0, &levels), (unsigned long long)-1);
    rs_symbols_free(&sym);
    CHECK(sym.frames == NULL && sym.n_frames == 0 && sym.modules == NULL);
    rs_stacks_destroy(s);
}

/* One pc, two frames: the inlined helper (its own line), then the function it was inlined into
 * (the line of the call), so that a site can look past the helper to its caller. */
TEST(resolve_gives_a_pc_in_inlined_code_one_frame_per_inline_level)
{
    if (!rs_symbols_have_file_lines()) {
        printf("skipped: this build resolves without libbacktrace (no inline levels)\n");
        return;
    }
    rs_stacks *s = new_stacks(RS_STACKS_NATIVE, 16);
    uint32_t id = calls_inlined_helper(s);
    rs_symbols sym;
    CHECK_EQ_U64(rs_symbols_resolve(s, &sym), RANKSNAP_OK);
    int n = 0, levels = 0;
    const uintptr_t *pcs = rs_stacks_get(s, id, &n);
    CHECK(pcs && n >= 2);
    long i = pcs ? rs_symbols_find(&sym, pcs[0], &levels) : -1;
    CHECK(i >= 0 && levels >= 2);
    if (i >= 0 && levels >= 2) {
        const rs_frame_info *in = &sym.frames[i], *out = &sym.frames[i + 1];
        CHECK_EQ_U64(in->pc, out->pc);
        CHECK_STR_CONTAINS(in->function, "inlined_helper");
        CHECK_EQ_U64(in->line, inline_helper_line);
        CHECK_STR_CONTAINS(out->function, "calls_inlined_helper");
        CHECK_EQ_U64(out->line, inline_caller_line);
        CHECK_STR_CONTAINS(out->file, "test_stacks.c");
    }
    rs_symbols_free(&sym);
    rs_stacks_destroy(s);
}

TEST(resolve_lists_the_executable_with_its_build_id_and_load_base)
{
    rs_stacks *s = new_stacks(RS_STACKS_NATIVE, 16);
    uint32_t id = capture_at_site_b(s);
    rs_symbols sym;
    CHECK_EQ_U64(rs_symbols_resolve(s, &sym), RANKSNAP_OK);
    int n = 0;
    const uintptr_t *pcs = rs_stacks_get(s, id, &n);
    const rs_frame_info *f = pcs ? frame_of(&sym, pcs[0]) : NULL;
    CHECK(f && f->module >= 0 && (size_t)f->module < sym.n_modules);
    if (f && f->module >= 0) {
        const rs_module_info *m = &sym.modules[f->module];
        CHECK_EQ_U64(strcmp(m->path, self_exe()), 0);
        CHECK_EQ_U64(strlen(m->build_id), 40); /* gcc/ld default: a 20-byte SHA-1 */
        CHECK_EQ_U64(strspn(m->build_id, "0123456789abcdef"), strlen(m->build_id));
        Dl_info di;
        CHECK(dladdr((void *)(pcs[0] - 1), &di) != 0);
        CHECK_EQ_U64(m->base, (uintptr_t)di.dli_fbase);
        CHECK(m->base <= f->pc);
    }
    for (size_t i = 0; i < sym.n_modules; i++)
        for (size_t j = i + 1; j < sym.n_modules; j++)
            CHECK(strcmp(sym.modules[i].path, sym.modules[j].path) != 0 ||
                  sym.modules[i].base != sym.modules[j].base);
    rs_symbols_free(&sym);
    rs_stacks_destroy(s);
}

TEST(resolve_of_unknown_pcs_gives_question_marks_and_no_module)
{
    rs_stacks *s = new_stacks(RS_STACKS_NONE, 4);
    uintptr_t pcs[2] = {0, 0x10};
    CHECK(rs_stacks_intern(s, pcs, 2) != 0);
    rs_symbols sym;
    CHECK_EQ_U64(rs_symbols_resolve(s, &sym), RANKSNAP_OK);
    CHECK_EQ_U64(sym.n_frames, 2);
    CHECK_EQ_U64(sym.n_modules, 0);
    for (size_t i = 0; i < sym.n_frames; i++) {
        CHECK_EQ_U64(sym.frames[i].module, (unsigned long long)-1);
        CHECK_EQ_U64(strcmp(sym.frames[i].function, "??"), 0);
        CHECK_EQ_U64(strcmp(sym.frames[i].file, "??"), 0);
        CHECK_EQ_U64(sym.frames[i].line, 0);
    }
    rs_symbols_free(&sym);
    rs_stacks_destroy(s);

    s = new_stacks(RS_STACKS_NATIVE, 4);
    CHECK_EQ_U64(rs_symbols_resolve(s, &sym), RANKSNAP_OK);
    CHECK(sym.n_frames == 0 && sym.n_modules == 0);
    rs_symbols_free(&sym);
    rs_stacks_destroy(s);
}

/* Frame pointers are trustworthy only where every frame was built with -fno-omit-frame-pointer;
 * the CMake build does not force that on this test, so the walk may stop after the first frame.
 * The first frame holds regardless: rs_stacks_capture keeps a frame pointer of its own, and the
 * return address next to it is the call site in its caller. A walk must never crash, and must
 * stop at the depth. */
TEST(fp_mode_always_gets_the_callers_frame_and_stops_at_the_depth)
{
    rs_stacks *s = new_stacks(RS_STACKS_FP, 16);
    uint32_t id = capture_at_site_a(s);
    uint32_t deep = recurse_then_capture(s, 30);
    CHECK(id != 0 && deep != 0);
    int n = 0;
    CHECK(rs_stacks_get(s, deep, &n) != NULL && n >= 1 && n <= 16);
    const uintptr_t *pcs = rs_stacks_get(s, id, &n);
    CHECK(pcs && n >= 1);
    rs_symbols sym;
    CHECK_EQ_U64(rs_symbols_resolve(s, &sym), RANKSNAP_OK);
    const rs_frame_info *f = pcs ? frame_of(&sym, pcs[0]) : NULL;
    CHECK_EQ_U64(strcmp(module_path(&sym, f), self_exe()), 0);
    if (f && rs_symbols_have_file_lines()) CHECK_STR_CONTAINS(f->function, "capture_at_site_a");
    rs_symbols_free(&sym);
    rs_stacks_destroy(s);
}

#if defined(__aarch64__)
/* Signs the return address it saves in its frame (pac-ret: pointer authentication, as code built
 * with -mbranch-protection=standard does, the default of several distributions); a processor or
 * emulator with pointer authentication then keeps a code in the address's top bits. */
__attribute__((noinline, target("branch-protection=pac-ret"))) static int
capture_in_a_signed_frame(rs_stacks *s, uintptr_t *pcs, uintptr_t *ret)
{
    *ret = (uintptr_t)__builtin_return_address(0); /* the compiler strips its code */
    int n = capture_pcs_here(s, pcs);
    int_sink = n;
    return n;
}
#endif

/* The frame of a function that signs its return address gives its caller's plain address, in
 * both modes: the pcs are looked up as addresses of code. */
TEST(a_signed_return_address_is_captured_as_the_callers_plain_address)
{
#if defined(__aarch64__)
    rs_stacks_mode modes[] = {RS_STACKS_FP, RS_STACKS_NATIVE};
    for (int m = 0; m < 2; m++) {
        rs_stacks *s = new_stacks(modes[m], 16);
        uintptr_t pcs[16] = {0}, ret = 0;
        /* capture_pcs_here's return into capture_in_a_signed_frame, then the signed one */
        int n = capture_in_a_signed_frame(s, pcs, &ret);
        CHECK(n >= 3);
        if (n >= 3 && pcs[2] != ret)
            fprintf(stderr, "mode %d: %#lx where the caller's %#lx was expected\n", (int)modes[m],
                    (unsigned long)pcs[2], (unsigned long)ret);
        CHECK(n >= 3 && pcs[2] == ret);
        rs_stacks_destroy(s);
    }
#else
    printf("(no pointer authentication on this processor: nothing to strip)\n");
#endif
}

struct thread_capture {
    rs_stacks *native, *fp;
    uint32_t native_id, fp_id;
};

static void *capture_on_thread(void *arg)
{
    struct thread_capture *tc = arg;
    tc->native_id = capture_at_site_a(tc->native);
    tc->fp_id = capture_at_site_b(tc->fp);
    return NULL;
}

TEST(capture_works_on_threads_other_than_main)
{
    struct thread_capture tc = {new_stacks(RS_STACKS_NATIVE, 32), new_stacks(RS_STACKS_FP, 32), 0,
                                0};
    pthread_t th;
    CHECK_EQ_U64(pthread_create(&th, NULL, capture_on_thread, &tc), 0);
    CHECK_EQ_U64(pthread_join(th, NULL), 0);
    int n = 0;
    CHECK(tc.native_id != 0);
    CHECK(rs_stacks_get(tc.native, tc.native_id, &n) != NULL && n >= 2);
    CHECK(tc.fp_id != 0);
    CHECK(rs_stacks_get(tc.fp, tc.fp_id, &n) != NULL && n >= 1);
    rs_stacks_destroy(tc.native);
    rs_stacks_destroy(tc.fp);
}

int main(void)
{
    RUN(create_rejects_depth_outside_1_to_64_and_unknown_modes);
    RUN(intern_gives_one_id_per_distinct_array_numbered_from_1);
    RUN(intern_keeps_every_stack_findable_across_rehashes);
    RUN(intern_cuts_stacks_longer_than_the_depth);
    RUN(table_that_cannot_grow_gives_id_0_counts_it_and_keeps_old_stacks);
    RUN(capture_from_one_call_site_twice_gives_the_same_id);
    RUN(capture_from_different_call_sites_gives_different_ids);
    RUN(capture_keeps_at_most_depth_frames);
    RUN(mode_none_captures_nothing);
    RUN(capture_starts_at_the_caller_and_skip_leaves_out_its_frames);
    RUN(resolve_names_function_file_and_line_of_each_frame);
    RUN(resolve_gives_a_pc_in_inlined_code_one_frame_per_inline_level);
    RUN(resolve_lists_the_executable_with_its_build_id_and_load_base);
    RUN(resolve_of_unknown_pcs_gives_question_marks_and_no_module);
    RUN(fp_mode_always_gets_the_callers_frame_and_stops_at_the_depth);
    RUN(capture_works_on_threads_other_than_main);
    RUN(a_signed_return_address_is_captured_as_the_callers_plain_address);
    return check_summary();
}
