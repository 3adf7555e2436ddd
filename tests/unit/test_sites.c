/*
 * test_sites.c — which frame a stack is charged to (collector/analyze/sites.c, site_rules.c,
 * demangle.c, frame_memo.c): C++ names demangled, the framework's and the runtimes' frames
 * looked past, Python frames before C/C++ ones, autograd nodes and operators for stacks with no
 * frame of the user's, allocation wrappers found from the data, the user's patterns, the paths
 * shown, and a frame classified once a process (whichever thread met it) until the rules change.
 *
 * Stacks are built by hand on synth_snapshot.h's snapshots; the mangled names are what g++ gives
 * for the declarations PyTorch's headers make (checked with c++filt), so that a native stack
 * through libtorch (ranksnap as PyTorch's pluggable allocator) reads as it does on a GPU.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "demangle.h"
#include "frame_memo.h"
#include "site_path.h"
#include "site_rules.h"
#include "sites.h"
#include "synth_snapshot.h"

#define PLUGGABLE_MALLOC "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator6mallocEmiP11CUstream_st"
#define EMPTY_CUDA "_ZN2at6detail10empty_cudaEN3c108ArrayRefIlEERKNS1_13TensorOptionsE"
#define ADDMM_OUT "_ZN2at6native14addmm_out_cudaERKNS_6TensorES3_S3_"
#define ADDMM_CALL "_ZN2at4_ops5addmm4callERKNS_6TensorES4_S4_"
#define MM_CALL "_ZN2at4_ops2mm4callERKNS_6TensorES4_"
#define MM_REDISPATCH "_ZN2at4_ops2mm10redispatchEN3c1014DispatchKeySetERKNS_6TensorES6_"
#define MM_BACKWARD "_ZN5torch8autograd9generated11MmBackward05applyEOi"
#define MODEL_FORWARD "_ZN7trainer5Model7forwardEi"

/* A snapshot with the modules of a PyTorch process: 0 the program (python), 1 libranksnap,
 * 2 libtorch_cuda, 3 libtorch_cpu, 4 libpython, 5 the user's own extension. */
static void init_process(synth *y)
{
    synth_init(y, 0, 1, "j");
    rs_snap *s = y->s;
    static const char *const paths[] = {"/usr/bin/python3.11", "/opt/ranksnap/lib/libranksnap.so.0",
                                        "/venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so",
                                        "/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so",
                                        "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0",
                                        "/home/u/proj/build/libtrainer.so"};
    for (size_t i = 0; i < s->n_modules; i++) {
        free(s->modules[i].path);
        free(s->modules[i].build_id);
    }
    s->n_modules = 6;
    s->modules = sy_xrealloc(s->modules, 6 * sizeof *s->modules);
    for (size_t i = 0; i < 6; i++)
        s->modules[i] = (rs_snap_module){sy_strdup(paths[i]), 0x7f0000000000 + (i << 32), sy_strdup("")};
}

/* A stack of the given frame indexes, innermost first; its id. */
static uint32_t stack_of(synth *y, const uint32_t *frames, size_t n)
{
    rs_snap *s = y->s;
    if (s->n_stacks == y->cap_stacks) {
        y->cap_stacks = y->cap_stacks ? 2 * y->cap_stacks : 8;
        s->stacks = sy_xrealloc(s->stacks, y->cap_stacks * sizeof *s->stacks);
    }
    rs_snap_stack *st = &s->stacks[s->n_stacks];
    st->n_frames = n;
    st->frames = sy_xrealloc(NULL, n * sizeof *st->frames);
    memcpy(st->frames, frames, n * sizeof *frames);
    return (uint32_t)++s->n_stacks;
}


/* The site and path of one allocation with the stack of frames f[0..n) of y, which it finishes. */
static void one_stack_site(synth *y, const uint32_t *f, size_t n, rs_site *site, char *path, size_t pn)
{
    uint32_t a = stack_of(y, f, n);
    synth_alloc(y, 4 * SY_MIB, a);
    rs_snap *s = synth_finish(y);
    site_path_of(s, a, site, path, pn);
    rs_snap_free(s);
}

#define ARROW " \xe2\x86\x92 "

TEST(cxx_names_are_demangled_by_the_cxx_runtime_and_a_cut_one_is_kept)
{
    if (!rs_demangle_available()) {
        printf("skip: no C++ runtime (libstdc++.so.6, libc++abi.so.1) to demangle with\n");
        return;
    }
    char *d = rs_demangle(PLUGGABLE_MALLOC);
    CHECK(d && strcmp(d, "torch::cuda::CUDAPluggableAllocator::CUDAPluggableAllocator::malloc("
                         "unsigned long, int, CUstream_st*)") == 0);
    free(d);
    d = rs_demangle(MM_BACKWARD);
    CHECK(d && strcmp(d, "torch::autograd::generated::MmBackward0::apply(int&&)") == 0);
    free(d);
    /* the name the issue saw: cut at 63 bytes, no longer a name the runtime can read */
    CHECK(rs_demangle("_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator6") == NULL);
    CHECK(rs_demangle("block_activations") == NULL);
    CHECK(rs_demangle("_Zebra") == NULL);
}

TEST(a_demangled_name_gives_its_qualified_name_and_a_short_form)
{
    static const char *const qualified[][2] = {
        {"_object* torch::autograd::TypeError_to_NotImplemented_<&torch::autograd::THPVariable_mul>"
         "(_object*, _object*, _object*)",
         "torch::autograd::TypeError_to_NotImplemented_<&torch::autograd::THPVariable_mul>"},
        {"at::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, "
         "c10::TensorOptions const&)",
         "at::(anonymous namespace)::create_out"},
        {"void torch::autograd::AccumulateGrad::accumulateGrad<std::function<void (at::Tensor&&)> >"
         "(at::Tensor const&, at::Tensor&)",
         "torch::autograd::AccumulateGrad::accumulateGrad<std::function<void (at::Tensor&&)> >"},
        {"foo::Bar::operator()(int) const", "foo::Bar::operator()"},
        {"PyEval_EvalCode", "PyEval_EvalCode"},
        /* operators whose symbol holds the bytes the scan stops at, and words that only contain
         * "operator" */
        {"bool ns::operator<<(ns::A const&, int)", "ns::operator<<"},
        {"ns::V<int>::operator<(ns::V<int> const&) const", "ns::V<int>::operator<"},
        {"void sim::cooperator(int)", "sim::cooperator"},
        {"std::function<void (int)>::operator()(int) const", "std::function<void (int)>::operator()"},
        {"void (anonymous namespace)::run<(anonymous namespace)::Op>(int)",
         "(anonymous namespace)::run<(anonymous namespace)::Op>"},
    };
    for (size_t i = 0; i < sizeof qualified / sizeof qualified[0]; i++) {
        char q[256];
        rs_demangle_qualified(qualified[i][0], q, sizeof q);
        if (strcmp(q, qualified[i][1]) != 0) fprintf(stderr, "%s -> %s\n", qualified[i][0], q);
        CHECK(strcmp(q, qualified[i][1]) == 0);
    }
    char s[RS_SITE_FUNC_LEN];
    rs_demangle_short("trainer::Model::forward(int)", s, sizeof s);
    CHECK(strcmp(s, "trainer::Model::forward(int)") == 0);
    rs_demangle_short("at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)", s, sizeof s);
    CHECK(strcmp(s, "at::detail::empty_cuda(...)") == 0);
    rs_demangle_short("c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<"
                      "c10::CompileTimeFunctionPointer<at::Tensor (at::Tensor const&)> > >::call(int)", s, sizeof s);
    CHECK(strcmp(s, "c10::impl::wrap_kernel_functor_unboxed_<...>::call(...)") == 0);
}

/* The stack ranksnap records as PyTorch's pluggable allocator: 16 frames, all inside libtorch
 * and the interpreter. */
static uint32_t pluggable_stack(synth *y, uint32_t user_frame, int with_user)
{
    uint32_t f[16];
    size_t n = 0;
    f[n++] = sy_frame(y, "ranksnap_torch_malloc", "torch_pluggable.c", 40, 1);
    f[n++] = sy_frame(y, PLUGGABLE_MALLOC, "??", 0, 2);
    f[n++] = sy_frame(y, EMPTY_CUDA, "??", 0, 2);
    f[n++] = sy_frame(y, ADDMM_OUT, "??", 0, 2);
    f[n++] = sy_frame(y, ADDMM_CALL, "??", 0, 3);
    if (with_user) f[n++] = user_frame;
    f[n++] = sy_frame(y, "_ZN5torch8autograd19THPVariable_addmmEP7_objectS2_S2_", "??", 0, 3);
    f[n++] = sy_frame(y, "cfunction_call", "??", 0, 4);
    f[n++] = sy_frame(y, "_PyObject_MakeTpCall", "??", 0, 4);
    f[n++] = sy_frame(y, "_PyEval_EvalFrameDefault", "??", 0, 4);
    f[n++] = sy_frame(y, "PyEval_EvalCode", "??", 0, 4);
    f[n++] = sy_frame(y, "main", "??", 0, 0);
    return stack_of(y, f, n);
}

/* The site and path of one allocation through pluggable_stack (with the user's C++ frame `user`
 * in model.cpp:47 when not NULL), under the rules of the moment. */
static void pluggable_site(const char *user, rs_site *site, char *path, size_t n)
{
    synth y;
    init_process(&y);
    uint32_t frame = user ? sy_frame(&y, user, "/home/u/proj/src/model.cpp", 47, 5) : 0;
    uint32_t stack = pluggable_stack(&y, frame, user != NULL);
    synth_alloc(&y, 4 * SY_MIB, stack);
    rs_snap *s = synth_finish(&y);
    site_path_of(s, stack, site, path, n);
    rs_snap_free(s);
}

/* Without a frame of the user's it is named after its operator; with one above libtorch, that
 * frame is the site and the operator is under it. Never a mangled name, never the allocator. */
TEST(a_native_stack_through_libtorch_is_named_after_the_users_frame_or_its_operator)
{
    static const struct {
        const char *user, *site, *path;
    } cases[] = {{NULL, "aten::addmm", "aten::addmm"},
                 {MODEL_FORWARD, "trainer::Model::forward(int)",
                  "trainer::Model::forward(int) (model.cpp:47)" ARROW "aten::addmm"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rs_site site;
        char path[1024];
        pluggable_site(cases[i].user, &site, path, sizeof path);
        if (rs_demangle_available()) {
            if (strcmp(path, cases[i].path) != 0) fprintf(stderr, "%s\n", path);
            CHECK(strcmp(site.function, cases[i].site) == 0 && strcmp(path, cases[i].path) == 0);
        }
        CHECK(strncmp(site.function, "_Z", 2) != 0 || cases[i].user);
        CHECK(!strstr(path, "Pluggable") && !strstr(path, "_ZN5torch"));
    }
}

TEST(a_native_backward_stack_is_named_after_its_autograd_node_and_operator)
{
    if (!rs_demangle_available()) {
        printf("skip: no C++ runtime to demangle with\n");
        return;
    }
    synth y;
    init_process(&y);
    uint32_t f[] = {sy_frame(&y, "ranksnap_torch_malloc", "torch_pluggable.c", 40, 1),
                    sy_frame(&y, PLUGGABLE_MALLOC, "??", 0, 2), sy_frame(&y, EMPTY_CUDA, "??", 0, 2),
                    sy_frame(&y, MM_REDISPATCH, "??", 0, 3), sy_frame(&y, MM_CALL, "??", 0, 3),
                    sy_frame(&y, MM_BACKWARD, "??", 0, 3), sy_frame(&y, "start_thread", "??", 0, -1),
                    sy_frame(&y, "__clone3", "??", 0, -1)};
    rs_site site;
    char path[1024];
    one_stack_site(&y, f, sizeof f / sizeof f[0], &site, path, sizeof path);
    CHECK(strcmp(site.function, "MmBackward0") == 0);
    CHECK(strcmp(path, "MmBackward0" ARROW "aten::mm") == 0);
}

TEST(a_python_frame_beats_an_inner_cxx_frame_of_the_user)
{
    synth y;
    init_process(&y);
    uint32_t f[] = {sy_frame(&y, "ranksnap_torch_malloc", "torch_pluggable.c", 40, 1),
                    sy_frame(&y, MODEL_FORWARD, "/home/u/proj/src/model.cpp", 47, 5),
                    sy_frame(&y, "forward", "/home/u/proj/model.py", 31, -1),
                    sy_frame(&y, "_call_impl", "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", 1747, -1),
                    sy_frame(&y, "train_step", "/home/u/proj/train.py", 41, -1)};
    rs_site site;
    char path[1024];
    one_stack_site(&y, f, sizeof f / sizeof f[0], &site, path, sizeof path);
    CHECK(strcmp(site.function, "forward") == 0 && site.line == 31);
    CHECK(strcmp(path, "forward (model.py:31)") == 0);
}

/* n stacks allocating through alloc_buffer (util.c:10), each from its own caller line; and one
 * more helper called from one line only. */
static rs_snap *through_a_helper(int n, uint32_t *stacks, uint32_t *single)
{
    synth y;
    synth_init(&y, 0, 1, "j");
    uint32_t helper = sy_frame(&y, "alloc_buffer", "src/util.c", 10, 0);
    uint32_t once = sy_frame(&y, "make_workspace", "src/util.c", 20, 0);
    for (int i = 0; i < n; i++) {
        char fn[32];
        snprintf(fn, sizeof fn, "layer_%d", i);
        uint32_t f[] = {1, 2, helper, sy_frame(&y, fn, "src/model.c", 100 + i, 0), 3};
        stacks[i] = stack_of(&y, f, 5);
        synth_alloc(&y, SY_MIB, stacks[i]);
    }
    uint32_t g[] = {1, 2, once, sy_frame(&y, "train_step", "src/train.c", 50, 0), 3};
    *single = stack_of(&y, g, 5);
    synth_alloc(&y, SY_MIB, *single);
    return synth_finish(&y);
}

TEST(an_allocation_wrapper_is_found_from_the_data_and_looked_past)
{
    uint32_t st[4], single;
    rs_snap *s = through_a_helper(4, st, &single);
    rs_site site;
    char path[512];
    for (int i = 0; i < 4; i++) {
        site_path_of(s, st[i], &site, path, sizeof path);
        CHECK(site.line == 100 + i && strstr(site.function, "layer_"));
    }
    /* a helper called from one line only is no wrapper: its own line is the site */
    site_path_of(s, single, &site, path, sizeof path);
    CHECK(strcmp(site.function, "make_workspace") == 0);
    rs_snap_free(s);
    /* two stacks are no evidence: the helper stays the site */
    s = through_a_helper(2, st, &single);
    site_path_of(s, st[0], &site, path, sizeof path);
    CHECK(strcmp(site.function, "alloc_buffer") == 0);
    rs_snap_free(s);
}

TEST(the_users_patterns_skip_frames_by_function_file_or_library)
{
    synth y;
    init_process(&y);
    uint32_t user = sy_frame(&y, MODEL_FORWARD, "/home/u/proj/src/model.cpp", 47, 5);
    uint32_t f[] = {sy_frame(&y, "ranksnap_malloc", "alloc_api.c", 10, 1), user,
                    sy_frame(&y, "run_epoch", "/home/u/proj/src/loop.cpp", 12, 5), 
                    sy_frame(&y, "main", "/home/u/proj/src/main.cpp", 3, 0)};
    uint32_t a = stack_of(&y, f, 4);
    synth_alloc(&y, SY_MIB, a);
    rs_snap *s = synth_finish(&y);
    /* a C++ program of the user's, not python */
    free(s->modules[0].path);
    s->modules[0].path = sy_strdup("/home/u/proj/build/train");
    static const char *const patterns[] = {"trainer::Model::*", "*/model.cpp", "*libtrainer*",
                                           " *model.cpp , ,"};
    static const char *const expect[] = {"run_epoch", "run_epoch", "main", "run_epoch"};
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
        CHECK(rs_site_rules_set(patterns[i], 0) == RANKSNAP_OK);
        rs_site site;
        char path[512];
        site_path_of(s, a, &site, path, sizeof path);
        if (strcmp(site.function, expect[i]) != 0) fprintf(stderr, "'%s': %s\n", patterns[i], path);
        CHECK(strcmp(site.function, expect[i]) == 0);
    }
    /* too long a pattern is refused, naming what was expected, and leaves none */
    char big[400];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK(rs_site_rules_set(big, 0) == RANKSNAP_ERR_OPTION);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "comma-separated patterns");
    CHECK(rs_site_rules_set("", 0) == RANKSNAP_OK);
    rs_site site;
    char path[512];
    site_path_of(s, a, &site, path, sizeof path);
    if (rs_demangle_available()) CHECK(strcmp(site.function, "trainer::Model::forward(int)") == 0);
    rs_snap_free(s);
}

TEST(all_frames_names_the_innermost_frame_that_is_not_ranksnaps)
{
    CHECK(rs_site_rules_set(NULL, 1) == RANKSNAP_OK && rs_site_rules_all_frames());
    rs_site site;
    char path[1024];
    pluggable_site(NULL, &site, path, sizeof path);
    if (rs_demangle_available())
        CHECK(strncmp(site.function, "torch::cuda::CUDAPluggableAllocator::", 37) == 0);
    CHECK(rs_site_rules_set(NULL, 0) == RANKSNAP_OK && !rs_site_rules_all_frames());
}

TEST(torch_is_a_package_not_any_folder_named_torch)
{
    /* a virtual environment in /opt/torch: transformers is the model's code, torch is PyTorch's,
     * torch_geometric is neither */
    synth y;
    synth_init(&y, 0, 1, "j");
    const char *venv = "/opt/torch/.venv/lib/python3.12/site-packages/";
    char act[256], mod[256], geo[256];
    snprintf(act, sizeof act, "%stransformers/activations.py", venv);
    snprintf(mod, sizeof mod, "%storch/nn/modules/module.py", venv);
    snprintf(geo, sizeof geo, "%storch_geometric/nn/conv.py", venv);
    uint32_t f[] = {sy_frame(&y, "_call_impl", mod, 1790, -1), sy_frame(&y, "forward", act, 66, -1),
                    sy_frame(&y, "run_rank", "/opt/torch/work/train.py", 49, -1)};
    rs_site site;
    char path[1024];
    one_stack_site(&y, f, 3, &site, path, sizeof path);
    if (strcmp(path, "run_rank (train.py:49)" ARROW "forward (transformers/activations.py:66)") != 0) fprintf(stderr, "%s\n", path);
    CHECK(strcmp(path, "run_rank (train.py:49)" ARROW "forward (transformers/activations.py:66)") == 0);
    synth_init(&y, 0, 1, "j");
    uint32_t g[] = {sy_frame(&y, "propagate", geo, 12, -1), sy_frame(&y, "run_rank", "/opt/torch/work/train.py", 49, -1)};
    one_stack_site(&y, g, 2, &site, path, sizeof path);
    CHECK(strcmp(site.function, "propagate") == 0);
}

TEST(files_are_shown_as_people_read_them_and_windows_torch_is_torch)
{
    CHECK(strcmp(rs_site_rules_display_file("/usr/lib/python3/dist-packages/transformers/models/gpt2/"
                                            "modeling_gpt2.py"), "transformers/models/gpt2/modeling_gpt2.py") == 0);
    CHECK(strcmp(rs_site_rules_display_file("D:\\Dev\\a2\\cs336_basics\\model.py"), "model.py") == 0);
    CHECK(strcmp(rs_site_rules_display_file("/home/u/train.py"), "train.py") == 0);
    CHECK(strcmp(rs_site_rules_display_file("train.py"), "train.py") == 0);
    synth y;
    synth_init(&y, 0, 1, "j");
    uint32_t f[] = {sy_frame(&y, "einsum", "D:\\Dev\\a2\\.venv\\Lib\\site-packages\\torch\\functional.py", 373, -1),
                    sy_frame(&y, "forward", "D:\\Dev\\a2\\cs336_basics\\model.py", 102, -1)};
    uint32_t a = stack_of(&y, f, 2);
    synth_alloc(&y, SY_MIB, a);
    rs_snap *s = synth_finish(&y);
    rs_site site;
    char path[512];
    site_path_of(s, a, &site, path, sizeof path);
    if (strcmp(path, "forward (model.py:102)") != 0) fprintf(stderr, "%s\n", path);
    CHECK(strcmp(path, "forward (model.py:102)") == 0);
    rs_snap_free(s);
}

/* The frames of a snapshot of init_process's modules that the memo must keep apart: the user's
 * C++ function in their library and in libtorch, a native frame without a module with a line
 * and without one, and a Python line. Their indexes in *f, in the order given by `rev`. */
static rs_snap *memo_frames(int rev, uint32_t *f)
{
    synth y;
    init_process(&y);
    static const struct {
        const char *function, *file;
        int line, module;
    } fr[] = {{MODEL_FORWARD, "/home/u/proj/src/model.cpp", 47, 5},
              {MODEL_FORWARD, "/home/u/proj/src/model.cpp", 47, 2},
              {"step_fn", "/home/u/proj/src/step.cpp", 12, -1},
              {"step_fn", "/home/u/proj/src/step.cpp", 0, -1},
              {"forward", "/home/u/proj/model.py", 30, -1}};
    for (size_t k = 0; k < 5; k++) {
        size_t i = rev ? 4 - k : k;
        f[i] = sy_frame(&y, fr[i].function, fr[i].file, fr[i].line, fr[i].module);
    }
    uint32_t a = stack_of(&y, f, 5);
    synth_alloc(&y, SY_MIB, a);
    return synth_finish(&y);
}

/* Another thread classifying the second snapshot's frames: what it finds (kinds), and how many
 * frames the table held after it. */
typedef struct classify_job {
    rs_snap *s;
    const uint32_t *frames;
    const uint8_t *kind;
    int wrong;
    size_t held_before, held_after;
} classify_job;

static void *classify_on_a_thread(void *arg)
{
    classify_job *j = arg;
    j->held_before = rs_frame_memo_count();
    for (int i = 0; i < 5; i++) {
        rs_site_rules_frame info;
        rs_site_rules_classify(j->s, j->frames[i], &info);
        j->wrong += info.kind != j->kind[i];
        if (i == 0 && rs_demangle_available() && (!info.name || !strstr(info.name, "trainer::Model::forward")))
            j->wrong++;
        rs_site_rules_frame_free(&info);
    }
    j->held_after = rs_frame_memo_count();
    return NULL;
}

/* A frame met before (another snapshot's strings, on another thread: a report's threads share
 * the table) is classified as it was, from what it says, and the user's new patterns are obeyed
 * at once. */
TEST(a_frame_is_classified_once_a_process_and_again_when_the_rules_change)
{
    CHECK(rs_site_rules_set("", 0) == RANKSNAP_OK);
    rs_site_rules_remember(1);
    uint32_t fa[5], fb[5];
    rs_snap *a = memo_frames(0, fa), *b = memo_frames(1, fb);
    static const uint8_t kind[5] = {RS_SITE_FRAME_NATIVE, RS_SITE_FRAME_SKIPPED,
                                    RS_SITE_FRAME_NATIVE, RS_SITE_FRAME_SKIPPED,
                                    RS_SITE_FRAME_PYTHON};
    rs_site_rules_frame info;
    for (int i = 0; i < 5; i++) {
        rs_site_rules_classify(a, fa[i], &info);
        CHECK(info.kind == kind[i]);
        rs_site_rules_frame_free(&info);
    }
    size_t held = rs_frame_memo_count();
    CHECK(held >= 5);
    classify_job job = {b, fb, kind, 0, 0, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, classify_on_a_thread, &job) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(job.wrong == 0);
    /* the first thread's frames there already, all five found, none classified again */
    CHECK(job.held_before == held && job.held_after == held);
    CHECK(rs_site_rules_set("*/model.cpp", 0) == RANKSNAP_OK);
    rs_site_rules_classify(b, fb[0], &info);
    CHECK(info.kind == RS_SITE_FRAME_SKIPPED);
    rs_site_rules_frame_free(&info);
    CHECK(rs_frame_memo_count() == 1);
    CHECK(rs_site_rules_set("", 0) == RANKSNAP_OK);
    rs_site_rules_classify(a, fa[0], &info);
    CHECK(info.kind == RS_SITE_FRAME_NATIVE);
    rs_site_rules_frame_free(&info);
    /* off (a rank's library): nothing more is remembered */
    rs_site_rules_remember(0);
    CHECK(rs_site_rules_set("", 0) == RANKSNAP_OK);
    for (int i = 1; i < 3; i++) {
        rs_site_rules_classify(b, fb[i], &info);
        CHECK(info.kind == kind[i]);
        rs_site_rules_frame_free(&info);
    }
    CHECK(rs_frame_memo_count() == 1); /* what the table held: no frame added, none cleared */
    rs_snap_free(a);
    rs_snap_free(b);
}

int main(void)
{
    RUN(cxx_names_are_demangled_by_the_cxx_runtime_and_a_cut_one_is_kept);
    RUN(a_demangled_name_gives_its_qualified_name_and_a_short_form);
    RUN(a_native_stack_through_libtorch_is_named_after_the_users_frame_or_its_operator);
    RUN(a_native_backward_stack_is_named_after_its_autograd_node_and_operator);
    RUN(a_python_frame_beats_an_inner_cxx_frame_of_the_user);
    RUN(an_allocation_wrapper_is_found_from_the_data_and_looked_past);
    RUN(the_users_patterns_skip_frames_by_function_file_or_library);
    RUN(all_frames_names_the_innermost_frame_that_is_not_ranksnaps);
    RUN(torch_is_a_package_not_any_folder_named_torch);
    RUN(files_are_shown_as_people_read_them_and_windows_torch_is_torch);
    RUN(a_frame_is_classified_once_a_process_and_again_when_the_rules_change);
    return check_summary();
}
