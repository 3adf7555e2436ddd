"""glue_cases.py — ranksnap's PyTorch glue (python/ranksnap/) in a process that ranksnap-run
started, on the stand-in torch: one behaviour per case, named as its ctest test.

    ranksnap-run --steps 2:4 python3 glue_cases.py CASE      (RANKSNAP_BACKEND=sim, RANKSNAP_DIR,
                                                              PYTHONPATH=tests/python/fake_torch)
Exit 0 when the case holds, 1 with what broke. Cases that need a second process to watch this
one (signals) are driven by tests/cli/torch_glue.sh.
"""
import glob
import os
import pickle
import stat
import sys
import time

import torch

MIB = 1 << 20
DIR = os.environ["RANKSNAP_DIR"]
HERE = os.path.abspath(__file__)
REAL = os.path.join(os.path.dirname(HERE), "..", "data", "snapshot_rank0.pickle")


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def glue():
    from ranksnap import _torch
    g = _torch.current()
    check(g is not None, "the glue was not installed when torch was imported")
    return g


def recording():
    return torch.cuda._allocator.ALLOCATOR.recording


def load(path):
    with open(path, "rb") as f:
        return pickle.load(f)


def steps_recording(n):
    """n optimizer steps, each allocating; whether PyTorch's recorder ran after each."""
    params = [torch.empty(MIB) for _ in range(2)]
    opt = torch.optim.SGD(params)
    seen = []
    for _ in range(n):
        x = torch.empty(3 * MIB)
        del x
        opt.step()
        seen.append(recording())
    return seen


def case_glue_starts_and_stops_the_recorder_on_the_range_steps():
    """--steps 2:4: PyTorch's recorder runs from the 2nd optimizer step to the 4th, no longer."""
    seen = steps_recording(6)
    check(seen == [False, True, True, False, False, False], f"recording after each step: {seen}")
    check(glue().steps.count == 6, f"steps counted: {glue().steps.count}")


def case_glue_records_every_range_of_the_schedule():
    """--steps 2:4,6:8 (torch_glue.sh): the recorder starts and stops twice, on the steps."""
    seen = steps_recording(9)
    want = [False, True, True, False, False, True, True, False, False]
    check(seen == want, f"recording after each step: {seen}, expected {want}")


def case_glue_counts_the_first_optimizer_only():
    """A second optimizer stepping in between does not advance the step count."""
    gen = torch.optim.SGD([torch.empty(MIB)])
    disc = torch.optim.SGD([torch.empty(MIB)])
    for _ in range(3):
        gen.step()
        disc.step()
        disc.step()
    check(glue().steps.count == 3, f"steps counted: {glue().steps.count}, expected 3 (the first optimizer's)")


def case_glue_manual_steps_replace_the_optimizer_count():
    import ranksnap
    opt = torch.optim.SGD([torch.empty(MIB)])
    ranksnap.step(2)
    check(recording(), "ranksnap.step(2) did not start the range 2:4")
    for _ in range(5):
        opt.step()  # counted no more
    check(recording(), "optimizer steps still count after ranksnap.step")
    ranksnap.step(4)
    check(not recording(), "ranksnap.step(4) did not end the range")


def _model():
    """A model of two layers whose calls allocate, with a generate that calls it per token."""
    from torch import nn

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(MIB)

        def forward(self, x):
            return torch.stand_in_op("Addmm", 2 * MIB, (x, self.weight))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.l0, self.l1 = Layer(), Layer()

        def forward(self, x):
            return self.l1(self.l0(x))

        @torch.no_grad()
        def generate(self, tokens):
            for _ in range(tokens):
                self(torch.empty(MIB))

    return Net()


def _steps_from():
    return load(os.path.join(DIR, "rank-00000.pickle"))["ranksnap"]


def _each_recording(n, call):
    seen = []
    for _ in range(n):
        call()
        seen.append(recording())
    return seen


RANGE_2_4 = [False, False, True, True, False, False]


def case_glue_steps_are_the_models_calls_when_no_optimizer_steps():
    """Inference under no_grad, no optimizer, --steps 2:4: the third and fourth calls of the model
    are recorded, and the pickle says what the steps were. A function compiled first (a library's
    helper, as some compile theirs on import) does not stop the search for the model."""
    torch.compile(lambda x: x)
    model = _model()
    with torch.no_grad():
        seen = _each_recording(6, lambda: model(torch.empty(MIB)))
    check(seen == RANGE_2_4, f"recording after each call: {seen}")
    m = _steps_from()
    check(m["ranges"] == [[2, 4]], f"ranges {m['ranges']}")
    check(m["steps_from"] == "calls of Net, the outermost module: no optimizer, gradients off", m["steps_from"])


def case_glue_a_model_called_again_with_no_backward_pass_is_inference():
    """Gradients on, but no backward pass between two calls: inference, numbered from the call
    that showed it (the second)."""
    model = _model()
    seen = _each_recording(6, lambda: model(torch.empty(MIB)))
    check(seen == RANGE_2_4, f"recording after each call: {seen}")
    check(_steps_from()["steps_from"] == "calls of Net, the outermost module: no optimizer, no backward pass",
          _steps_from()["steps_from"])


def case_glue_a_generate_call_is_one_step():
    """model.generate(3) calls the model three times: each generate is one step."""
    model = _model()
    seen = _each_recording(6, lambda: model.generate(3))
    check(seen == RANGE_2_4, f"recording after each generate: {seen}")
    check(glue().steps.calls == 6, f"step units counted: {glue().steps.calls}")
    check(_steps_from()["steps_from"] == "generate calls of Net: no optimizer", _steps_from()["steps_from"])


def case_glue_training_with_gradient_accumulation_keeps_the_optimizers_steps():
    """Four micro-batches (a call and its backward each) per optimizer step: the model's calls
    are never steps, the optimizer's are."""
    model = _model()
    opt = torch.optim.SGD(list(model.parameters()))

    def iteration():
        for _ in range(4):
            model(torch.empty(MIB)).backward()
        opt.step()

    seen = _each_recording(6, iteration)
    check(seen == [False, True, True, False, False, False], f"recording after each optimizer step: {seen}")
    check(glue().steps.given == -1, f"a call of the model was taken for a step: {glue().steps.given}")
    check(_steps_from()["steps_from"] == "optimizer steps (SGD)", _steps_from()["steps_from"])


def case_glue_evaluation_before_training_continues_its_step_numbers():
    """Two calls under no_grad (steps 0 and 1), then training: the optimizer's steps go on from
    step 2, and the pickle says both."""
    model = _model()
    opt = torch.optim.SGD(list(model.parameters()))
    with torch.no_grad():
        model(torch.empty(MIB))
        model(torch.empty(MIB))
    at = []
    for _ in range(4):
        model(torch.empty(MIB)).backward()
        opt.step()
        at.append(glue().at_step)
    check(at == [2, 3, 4, 5], f"steps after each optimizer step: {at}")
    m = _steps_from()
    check(m["ranges"] == [[2, 4]], f"ranges {m['ranges']}")
    check(m["steps_from"] == "optimizer steps (SGD) from step 2; steps 0-1 were calls of the outermost module",
          m["steps_from"])


def case_glue_compiled_models_calls_are_steps_and_compile_gives_no_warning():
    """torch.compile(model) before its first call: the compiled model's calls are the steps, and
    no global module hook of ranksnap's is left for OptimizedModule to warn about."""
    import warnings
    model = torch.compile(_model())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            seen = _each_recording(6, lambda: model(torch.empty(MIB)))
    check(seen == RANGE_2_4, f"recording after each call: {seen}")
    check(not [w for w in caught if "global hooks" in str(w.message)], [str(w.message) for w in caught])
    check(_steps_from()["steps_from"] == "calls of Net (compiled), the outermost module: no optimizer, "
          "gradients off", _steps_from()["steps_from"])


def case_glue_compiled_frames_are_named_by_their_source_in_both_passes():
    """A generated wrapper's line, in the forward and under torch/_functorch's compiled backward:
    the model's frames come first (the backward's innermost named "backward of ..."), the
    generated frame stays after them; other stacks are left as they were."""
    from torch._inductor.codecache import PyCodeCache
    gen = "/tmp/torchinductor_u/c2/c2abc.py"
    trace = ('  File "/job/model.py", line 80, in forward\n    x = self.mlp(x)\n'
             '  File "/job/model.py", line 44, in forward\n    return self.fc(x)\n')
    PyCodeCache.linemaps[gen] = ([10], [trace])
    call = {"name": "call", "filename": gen, "line": 12}
    aot = {"name": "backward", "filename": "/site/torch/_functorch/_aot_autograd/runtime_wrappers.py", "line": 2}
    user = {"name": "main", "filename": "/job/train.py", "line": 9}
    snap = {"segments": [], "device_traces": [[{"action": "alloc", "frames": [call, user]},
                                                {"action": "alloc", "frames": [call, aot]},
                                                {"action": "alloc", "frames": [user]}]]}
    glue().generated.name_snapshot(snap)
    fw, bw, plain = (e["frames"] for e in snap["device_traces"][0])
    check([(f["name"], f["line"]) for f in fw] == [("forward", 44), ("forward", 80), ("call", 12), ("main", 9)], fw)
    check([f["name"] for f in bw][:3] == ["backward of forward", "forward", "call"], bw)
    check(plain == [user], plain)


def case_glue_train_without_an_optimizer():
    """For torch_glue.sh: a model trained by hand (no torch.optim): no step can be told."""
    model = _model()
    for _ in range(5):
        model(torch.empty(MIB)).backward()


def case_glue_range_end_writes_a_pytorch_pickle_with_the_ranksnap_key():
    """The range's file: 0600, written whole (no temporary left), PyTorch 2.11's keys at every
    level (taken from a real snapshot) plus "ranksnap" with the rank, the range and its steps."""
    opt = torch.optim.SGD([torch.empty(MIB)])
    keep = []
    for _ in range(5):
        keep.append(torch.empty(2 * MIB))
        opt.step()
    path = os.path.join(DIR, "rank-00000.pickle")
    check(os.path.exists(path), f"{path} missing: {os.listdir(DIR)}")
    check(stat.S_IMODE(os.stat(path).st_mode) == 0o600, "not 0600")
    check(not glob.glob(os.path.join(DIR, "*.tmp*")), "a temporary file was left")
    snap, real = load(path), load(REAL)
    check(set(snap) == set(real) | {"ranksnap"}, f"top-level keys {sorted(snap)}")
    seg, rseg = snap["segments"][0], real["segments"][0]
    check(set(seg) == set(rseg), f"segment keys {sorted(seg)} vs {sorted(rseg)}")
    check(set(seg["blocks"][0]) == set(rseg["blocks"][0]), "block keys")
    check(snap["allocator_settings"].keys() == real["allocator_settings"].keys(), "allocator_settings")
    trace = snap["device_traces"][0]
    alloc = [e for e in trace if e["action"] == "alloc"]
    check(alloc and list(alloc[0]) == list(real["device_traces"][0][0]), f"trace entry keys {list(alloc[0])}")
    check(any(f["filename"] == HERE for f in alloc[0]["frames"]), "no frame of this script")
    m = snap["ranksnap"]
    check(m["rank"] == 0 and m["world_size"] == 1 and m["ranges"] == [[2, 4]], f"metadata {m}")
    check([s for s, _ in m["steps"]] == [2, 3], f"steps {m['steps']}")
    check(m["reason"] == "range_end" and m["recorder"]["stacks"] == "python", f"metadata {m}")


def _oom(nbytes):
    try:
        torch.empty(nbytes)  # this line is the request
    except torch.cuda.OutOfMemoryError as e:
        return e
    fail("no OutOfMemoryError")


def case_glue_oom_dumps_the_request_and_the_error_reaches_the_script():
    """In the range: PyTorch's own oom entry, with this script's line; the OutOfMemoryError is
    the one PyTorch raised, untouched."""
    opt = torch.optim.SGD([torch.empty(MIB)])
    opt.step()
    opt.step()
    check(recording(), "not recording at step 2")
    torch.cuda.set_per_process_memory_fraction(0.001)
    err = _oom(512 * MIB)
    check(type(err) is torch.cuda.OutOfMemoryError and str(err).startswith("CUDA out of memory"),
          f"the error changed: {type(err)} {err}")
    snap = load(os.path.join(DIR, "rank-00000.pickle"))
    ooms = [e for e in snap["device_traces"][0] if e["action"] == "oom"]
    check(len(ooms) == 1 and ooms[0]["size"] == 512 * MIB, f"oom entries {ooms}")
    check(any(f["filename"] == HERE and f["name"] == "_oom" for f in ooms[0]["frames"]), "no line")
    check(snap["ranksnap"]["reason"] == "oom", snap["ranksnap"]["reason"])
    # the cap PyTorch's observer reported (set_per_process_memory_fraction)
    check(snap["ranksnap"]["memory_limit_bytes"] == int(0.001 * (80 << 30)),
          f"limit {snap['ranksnap']['memory_limit_bytes']}")


def case_glue_oom_outside_the_range_adds_the_request_with_its_stack():
    """Not recording (before step 2): PyTorch wrote no entry; the glue adds one, with the Python
    stack of the request, in PyTorch's shape."""
    torch.empty(MIB)
    torch.cuda.set_per_process_memory_fraction(0.001)
    err = _oom(256 * MIB)
    check(isinstance(err, torch.cuda.OutOfMemoryError), "no OutOfMemoryError")
    snap = load(os.path.join(DIR, "rank-00000.pickle"))
    ooms = [e for e in snap["device_traces"][0] if e["action"] == "oom"]
    check(len(ooms) == 1, f"oom entries {ooms}")
    e = ooms[0]
    check(set(e) == {"action", "device_free", "size", "stream", "time_us", "compile_context",
                     "user_metadata", "frames"}, f"keys {sorted(e)}")
    check(e["size"] >= 256 * MIB, f"size {e['size']}")
    check(any(f["filename"] == HERE and f["name"] == "_oom" for f in e["frames"]), "no line")


def case_glue_oom_observer_never_raises_in_place_of_the_error():
    """A dump that fails (RANKSNAP_DIR is a file) still leaves the script PyTorch's error."""
    torch.empty(MIB)
    torch.cuda.set_per_process_memory_fraction(0.001)
    err = _oom(256 * MIB)
    check(type(err) is torch.cuda.OutOfMemoryError and str(err).startswith("CUDA out of memory"),
          f"the error changed: {type(err)} {err}")


def case_glue_bad_option_runs_unrecorded():
    """A bad RANKSNAP_* value (torch_glue.sh sets one): the steps run, nothing records."""
    seen = steps_recording(5)
    check(seen == [False] * 5, f"recording after each step: {seen}")


def case_glue_pluggable_route_swaps_the_allocator_before_cuda():
    """RANKSNAP_RECORDER=ranksnap: ranksnap's allocator as PyTorch's pluggable one, from the
    preloaded libranksnap.so, and no recorder of PyTorch's."""
    alloc = torch.cuda.memory.get_current_allocator()
    check(alloc is not None, "no pluggable allocator")
    check(os.path.basename(alloc.path).startswith("libranksnap.so"), alloc.path)
    check((alloc.alloc_fn_name, alloc.free_fn_name) == ("ranksnap_torch_malloc", "ranksnap_torch_free"),
          "entry points")
    check(glue().mode == "ranksnap", glue().mode)


def case_glue_annotate_is_pytorchs_record_function():
    import ranksnap
    opt = torch.optim.SGD([torch.empty(MIB)])
    opt.step()
    opt.step()
    with ranksnap.annotate("forward"):
        torch.empty(MIB)
    names = [(a["name"], a["stage"]) for a in torch.cuda._allocator.ALLOCATOR.annotations]
    check(names == [("forward", "START"), ("forward", "END")], names)


def case_glue_names_the_backward_by_the_models_layers_on_the_fast_path():
    """--steps 2:4,6:8 (torch_glue.sh), a GPT-2-shaped model of 12 layers: the backward is named
    by the model's layers, not by their submodules (a hook on every module call would cost a
    host-bound step 8-19%); the global module hook that finds the model goes at the range's
    first step, so that the other module calls keep PyTorch's fast path; no hook is left after a
    range, and the next range finds the model again; a node that is the output of two modules is
    named by the inner one."""
    from torch import nn
    from torch.nn.modules import module as mm

    def op(name, x, *params):
        return torch.stand_in_op(name, x.nbytes, (x,) + params)

    class Linear(nn.Module):
        def __init__(self, nbytes):
            super().__init__()
            self.weight = nn.Parameter(nbytes)

        def forward(self, x):
            return op("Addmm", x, self.weight)

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn, self.c_proj = Linear(3 * 4096), Linear(4096)

        def forward(self, x):
            return self.c_proj(op("Sdpa", self.c_attn(x)))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc, self.c_proj = Linear(4 * 4096), Linear(4 * 4096)

        def forward(self, x):
            return self.c_proj(op("Gelu", self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn, self.ln_2, self.mlp = Linear(64), Attn(), Linear(64), MLP()

        def forward(self, x):
            x = op("Add", self.attn(self.ln_1(x)))
            return op("Add", self.mlp(self.ln_2(x)))

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = Linear(1 << 16)

        def forward(self, x):
            return self.proj(x)  # its output is its submodule's

    class GPT(nn.Module):
        def __init__(self, layers):
            super().__init__()
            self.wte = Linear(1 << 16)
            self.h = nn.Module()  # a container that is never called, as a ModuleList
            for i in range(layers):
                setattr(self.h, str(i), Block())
            self.head = Head()

        def forward(self, x):
            x = self.wte(x)
            for block in self.h.children():
                x = block(x)
            return self.head(x)

    model = GPT(12)
    opt = torch.optim.SGD(list(model.parameters()))
    hooks = []
    for step in range(9):
        loss = torch.stand_in_op("NllLoss", 512, (model(torch.empty(MIB)),))
        loss.backward()
        del loss
        opt.step()
        hooks.append((len(mm._global_forward_pre_hooks), len(mm._global_forward_hooks),
                      sorted(n for n, m in model.named_modules() if m._forward_hooks)))
    # not the model (its output is the head's), nor the blocks' layer norms (1/16 of their
    # largest sibling) or their parts (a budget of 18 for its 113 modules)
    layers = sorted(["wte", "head", "head.proj"] + [f"h.{i}" for i in range(12)])
    # after steps 1..9: each range records two steps, the first of which finds the model
    want = [(0, 0, []), (1, 0, []), (0, 0, layers), (0, 0, []), (0, 0, []),
            (1, 0, []), (0, 0, layers), (0, 0, []), (0, 0, [])]
    check(hooks == want, "global pre-hooks, global forward hooks, hooked modules after each step:\n"
          + "\n".join(map(str, hooks)))
    snap = load(os.path.join(DIR, "rank-00000.pickle"))
    names = {f["name"] for e in snap["device_traces"][0] for f in e["frames"]}
    check({"backward of h.3 (Block)", "backward of wte (Linear)"} <= names, sorted(names))
    check(not [n for n in names if n.startswith("backward of h.3.")], sorted(names))
    # the head's output is its projection's: the projection names the node
    check("backward of head.proj (Linear)" in names and "backward of head (Head)" not in names, sorted(names))


def case_glue_sys_exit_in_a_thread_is_not_the_programs_end():
    """sys.exit(3) in a thread ends the thread: the program does not end failing for it (it
    would leave without the range's gather); in the main thread it does, but from Python 3.12
    only when nothing catches it."""
    import threading
    g = glue()
    t = threading.Thread(target=sys.exit, args=(3,))
    t.start()
    t.join()
    check(not g._failing(), "a thread's sys.exit(3) taken for the program's")
    try:
        sys.exit(3)
    except SystemExit:
        pass
    if hasattr(sys, "monitoring"):
        # 3.12+: only the SystemExit that leaves the main thread's outermost frame ends it
        check(not g._failing(), "a sys.exit(3) the program caught taken for its end")
    else:
        check(g._failing(), "the main thread's sys.exit(3) not seen")
    g.exit_code = None  # this program ends well


def _traceback_files(fn):
    """The files of the traceback that the exception fn() raises prints."""
    import traceback
    try:
        fn()
    except BaseException as e:  # noqa: BLE001 — SystemExit too
        return [f.filename for f in traceback.extract_tb(e.__traceback__)]
    fail(f"{fn} raised nothing")


def case_glue_leaves_no_frame_in_the_scripts_tracebacks():
    """The calls the glue wraps (the backward pass in a range, init_process_group, new_group,
    DeviceMesh, sys.exit) raise into the script with a traceback of the script's and torch's
    frames only: ranksnap is never read as part of the failure."""
    import ranksnap
    from torch import nn
    from torch.distributed import device_mesh
    glue_dir = os.path.dirname(os.path.dirname(os.path.abspath(ranksnap.__file__)))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(MIB)

        def forward(self, x):
            return torch.stand_in_op("Addmm", x.nbytes, (x, self.weight))

    model = Net()
    opt = torch.optim.SGD(list(model.parameters()))
    for _ in range(2):
        torch.stand_in_op("NllLoss", 512, (model(torch.empty(MIB)),)).backward()
        opt.step()
    check(recording() and glue().names.real_backward is not None, "the backward is not named in the range")
    loss = torch.stand_in_op("NllLoss", 512, (model(torch.empty(MIB)),), grad_nbytes=512 * MIB)
    torch.cuda.set_per_process_memory_fraction(0.001)
    calls = {
        "an out-of-memory in the backward pass": loss.backward,
        "new_group before any process group": lambda: torch.distributed.new_group(ranks=[0]),
        "init_process_group with a bad init_method":
            lambda: torch.distributed.init_process_group("gloo", init_method="tcp://nowhere"),
        "a DeviceMesh whose process group cannot be made":
            lambda: device_mesh.DeviceMesh("cuda", [0], mesh_dim_names=("dp",)),
        "sys.exit": lambda: sys.exit(5),
    }
    for what, fn in calls.items():
        files = _traceback_files(fn)
        check(files and files[0] == HERE, f"{what}: the traceback does not start in the script: {files}")
        ours = [f for f in files if f.startswith(glue_dir + os.sep)]
        check(not ours, f"{what}: ranksnap's frames in the script's traceback: {ours}")


def case_glue_reads_the_out_of_memory_error_of_cuda_malloc_async():
    """backend:cudaMallocAsync's OutOfMemoryError (_async_oom.py): its figures read from the
    message as PyTorch's format_size writes them, with how far each may be from the exact one;
    the limit PyTorch has before a fraction is set read as none; a message without the request's
    line read with its size unknown, and another error not read at all; the error found behind a
    SystemExit raised while handling it, handed over once, innermost frame first."""
    from ranksnap import _async_oom
    msg = ("Allocation on device 1 would exceed allowed memory. (out of memory)\n"
           "Currently allocated     : 200.50 MiB\n"
           "Requested               : 64.00 MiB\n"
           "Device limit            : 139.80 GiB\n"
           "Free (according to CUDA): 138.12 GiB\n"
           "PyTorch limit (set by user-supplied memory fraction)\n"
           "                        : 250.00 MiB")
    got = _async_oom.parse(msg)
    want = {"device": 1, "allocated": 200 * MIB + MIB // 2, "requested": 64 * MIB,
            "device_total": round(139.80 * 1024 * MIB), "device_free": round(138.12 * 1024 * MIB),
            "limit": 250 * MIB, "rounding": 5243, "unread": []}
    check(got == want, f"{got} is not {want}")
    small = msg.replace("64.00 MiB", "512 bytes").replace("200.50 MiB", "1.50 KiB")
    got = _async_oom.parse(small.replace("250.00 MiB", "17179869184.00 GiB"))
    check(got["requested"] == 512 and got["allocated"] == 1536 and got["limit"] == 0 and
          got["rounding"] == 6, got)
    got = _async_oom.parse(msg.replace("Requested               : 64.00 MiB\n", ""))
    check(got["requested"] == 0 and got["unread"] == ["requested"], got)
    check(_async_oom.parse("CUDA out of memory. Tried to allocate more than 1EB memory.") is None,
          "another error read as the backend's")

    reported, said = [], []
    watch = _async_oom.Watch((torch.OutOfMemoryError,), lambda o, f: reported.append((o, f)),
                             said.append)

    def request():
        raise torch.OutOfMemoryError(msg)

    try:
        try:
            request()
        except torch.OutOfMemoryError:
            sys.exit(1)
    except SystemExit as e:
        ended = e
    watch.ended_by(None, ended, ended.__context__)
    check(len(reported) == 1 and reported[0][0]["requested"] == 64 * MIB, reported)
    frames = reported[0][1]
    check(frames[0][0] is request.__code__ and frames[0][1] == request.__code__.co_firstlineno + 1,
          f"the innermost frame is not where the request raised: {frames[:2]}")
    check(frames[-1][0].co_name == "case_glue_reads_the_out_of_memory_error_of_cuda_malloc_async",
          frames)
    watch.ended_by(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate more than 1EB memory."))
    check(len(reported) == 1 and len(said) == 1 and "not the one" in said[0], said)


def case_sigterm_child():
    """For torch_glue.sh: records (steps 2:...), then either sleeps (GIL released, as in a
    collective) or spins in Python (GIL held), until the driver's SIGTERM."""
    opt = torch.optim.SGD([torch.empty(MIB)])
    keep = []
    for _ in range(3):
        keep.append(torch.empty(2 * MIB))
        opt.step()
    os.makedirs(DIR, mode=0o700, exist_ok=True)
    ready = os.path.join(DIR, "ready")
    end = time.time() + 60
    if sys.argv[2] == "sleep":
        open(ready, "w").close()
        time.sleep(60)  # the driver waits until this thread is in the sleep (/proc/PID/wchan)
    else:
        while time.time() < end:
            if ready:  # said from inside the loop: the driver's signal finds it spinning
                open(ready, "w").close()
                ready = None
    sys.exit(3)


def case_glue_identity_is_taken_when_the_process_group_is_made():
    """Started as one of two without a rank (LOCAL_RANK=1, WORLD_SIZE=2, torch_glue.sh): ranksnap
    does not start on the first allocation; init_process_group gives the rank, and the next
    allocation starts it as rank 1 of 2, before any step."""
    import ctypes
    lib = ctypes.CDLL(None)
    stats = ctypes.create_string_buffer(4096)
    x = torch.empty(MIB)  # noqa: F841
    check(lib.ranksnap_get_stats(stats) == 4, "ranksnap started before its rank was known")
    torch.distributed.init_process_group("gloo", init_method="file://" + os.path.join(DIR, "pg"),
                                         rank=1, world_size=2)
    check(glue().identity is not None and glue().identity[:2] == (1, 2),
          f"identity after init_process_group: {glue().identity}")
    y = torch.empty(MIB)  # noqa: F841
    check(lib.ranksnap_get_stats(stats) == 0, "not started by the first allocation after it")


def _train_small_model(steps):
    """A model of four layers trained for `steps` optimizer steps, each with its backward."""
    from torch import nn

    class Linear(nn.Module):
        def __init__(self, nbytes):
            super().__init__()
            self.weight = nn.Parameter(nbytes)

        def forward(self, x):
            return torch.stand_in_op("Addmm", x.nbytes, (x, self.weight))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            for i in range(4):
                setattr(self, f"l{i}", Linear(MIB))

        def forward(self, x):
            for layer in self.children():
                x = layer(x)
            return x

    model = Net()
    opt = torch.optim.SGD(list(model.parameters()))
    for _ in range(steps):
        loss = torch.stand_in_op("NllLoss", 512, (model(torch.empty(MIB)),))
        loss.backward()
        del loss
        opt.step()


def _said_during(fn):
    """What the glue wrote on stderr while fn ran (it writes through sys.stderr)."""
    import io
    real, sys.stderr = sys.stderr, io.StringIO()
    try:
        fn()
        return sys.stderr.getvalue()
    finally:
        said, sys.stderr = sys.stderr.getvalue(), real
        real.write(said)


def case_glue_says_once_which_names_are_off_when_torch_lacks_a_private_call():
    """--steps 2:4,6:8 (torch_glue.sh), a PyTorch whose torch._C has neither
    _cuda_setMemoryMetadata nor _current_autograd_node (a release that renamed them): the steps
    run and the pickles are written, the backward is left unnamed, and one line for each
    capability says which names are off and why, once for the two ranges."""
    del torch._C._cuda_setMemoryMetadata
    del torch._C._current_autograd_node
    said = _said_during(lambda: _train_small_model(9))
    want = ["ranksnap: naming the backward pass by the model's layers is off: "
            "torch._C._cuda_setMemoryMetadata is missing (torch ",
            "ranksnap: naming an out-of-memory in the backward pass by its layer is off: "
            "torch._C._current_autograd_node is missing (torch "]
    for w in want:
        check(said.count(w) == 1, f"{w!r} said {said.count(w)} times in:\n{said}")
    snap = load(os.path.join(DIR, "rank-00000.pickle"))
    names = {f["name"] for e in snap["device_traces"][0] for f in e["frames"]}
    check(not [n for n in names if n.startswith("backward of")], sorted(names))


def case_glue_says_names_are_off_when_a_private_call_raises():
    """A PyTorch whose autograd Node.register_prehook raises (a signature that changed): every
    named module's hook fails, the user's steps do not, and one line says the backward's names
    are off, with the error; the same for a DeviceMesh whose layout cannot be read (the roles)."""
    from torch.autograd import graph

    def renamed(self, fn):
        raise AttributeError("'Node' object has no attribute 'register_prehook'")
    graph.Node.register_prehook = renamed
    said = _said_during(lambda: _train_small_model(5))
    w = ("ranksnap: naming the backward pass by the model's layers is off: AttributeError: "
         "'Node' object has no attribute 'register_prehook' (torch ")
    check(said.count(w) == 1, f"{w!r} said {said.count(w)} times in:\n{said}")
    check(os.path.exists(os.path.join(DIR, "rank-00000.pickle")), "no pickle")
    # a DeviceMesh whose layout cannot be read: the mesh is made, the roles are off, and said
    from torch.distributed import device_mesh

    def unreadable(mesh):
        raise AttributeError("'DeviceMesh' object has no attribute 'mesh'")
    device_mesh.DeviceMesh.mesh = property(unreadable)
    torch.distributed.init_process_group("gloo", init_method="file://" + os.path.join(DIR, "pg"),
                                         rank=0, world_size=1)
    said = _said_during(lambda: device_mesh.init_device_mesh("cuda", (1,), mesh_dim_names=("dp",)))
    w = ("ranksnap: finding the ranks' roles from torch's DeviceMesh and process groups is off: "
         "AttributeError: 'DeviceMesh' object has no attribute 'mesh' (torch ")
    check(said.count(w) == 1 and "set RANKSNAP_GROUPS" in said, said)


def case_glue_says_once_when_its_own_code_fails_in_a_hook():
    """ranksnap's own code failing inside a hook (a bug of ranksnap's, not PyTorch's) keeps the
    script's calls going and is said once, as ranksnap's, with where: in the hook that finds the
    steps from the model's calls, and in a part of a call the glue wraps."""
    from ranksnap import _wrap

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")
    glue().steps._unit = broken
    model = _model()
    said = _said_during(lambda: [model(torch.empty(MIB)) for _ in range(3)])
    w = ("ranksnap: finding the steps from the model's calls is off: ranksnap's own code failed "
         "(RuntimeError: a bug at _steps.py:")
    check(said.count(w) == 1 and "please report it" in said, said)

    def add(a, b):
        return a + b
    wrapped = _wrap.around(add, before=broken, after=broken)
    said = _said_during(lambda: check([wrapped(1, 2) for _ in range(3)] == [3, 3, 3], "wrong result"))
    w = ".<locals>.add is off: ranksnap's own code failed (RuntimeError: a bug at _wrap.py:"
    check(said.startswith("ranksnap: ranksnap's part of __main__.") and said.count(w) == 1 and
          said.count("\n") == 1, said)


# Each private call of PyTorch's that the glue uses, taken away (FAKE_TORCH_WITHOUT, set by
# torch_glue.sh from this table): the capabilities that must then say they are off, and nothing
# else. "nothing" takes nothing away: every capability works and none is said off.
WITHOUT = {
    "nothing": ("", []),
    "set_memory_metadata": ("torch._C._cuda_setMemoryMetadata", ["backward"]),
    "get_memory_metadata": ("torch._C._cuda_getMemoryMetadata", ["oom"]),
    "current_autograd_node": ("torch._C._current_autograd_node", ["oom"]),
    "oom_observer": ("torch._C._cuda_attach_out_of_memory_observer", ["oom dump"]),
    "lazy_call": ("torch.cuda._lazy_call", ["oom dump"]),
    "record_memory_history": ("torch.cuda.memory._record_memory_history", ["recorder"]),
    "snapshot": ("torch.cuda.memory._snapshot", ["snapshot"]),
    "default_store": ("torch.distributed.distributed_c10d._get_default_store", ["job id"]),
    "dynamo_counters": ("torch._dynamo.utils.counters", ["compiled"]),
    "stack_frames_for_code": ("torch._inductor.codecache.PyCodeCache.stack_frames_for_code",
                              ["generated"]),
    "node_register_prehook": ("torch.autograd.graph.Node.register_prehook",
                              ["backward", "model steps"]),
    "node_metadata": ("torch.autograd.graph.Node.metadata", ["backward"]),
    "graph_capture_begin": ("torch.cuda.CUDAGraph.capture_begin", ["graphs"]),
    "graph_pool": ("torch.cuda.CUDAGraph.pool", ["graphs"]),
    "device_mesh_layout": ("torch.distributed.device_mesh.DeviceMesh.mesh", ["roles"]),
    "module_forward_pre_hook": ("torch.nn.modules.module.register_module_forward_pre_hook",
                                ["model steps", "backward", "before"]),
    "optimizer_step_post_hook": ("torch.optim.optimizer.register_optimizer_step_post_hook",
                                 ["optimizer steps"]),
}


def _every_capability():
    """A job that uses every capability of the glue: a process group and a mesh (identity, job
    id, roles), a CUDA graph captured before the range (its pool's name), compiled code's line
    map, a model of four layers trained 9 steps over --steps 2:4,6:8 (steps, recorder, the
    backward's names, the names of what came before), then an out-of-memory (its snapshot).
    Returns the range's pickle (None when none was written) and the OOM's reason."""
    import shutil
    from torch.distributed import device_mesh
    import torch._dynamo.utils  # noqa: F401  (as a compiled job has it loaded)
    from torch._inductor.codecache import PyCodeCache
    torch.distributed.init_process_group("gloo", init_method="file://" + os.path.join(DIR, "pg"),
                                         rank=0, world_size=1)
    device_mesh.init_device_mesh("cuda", (1,), mesh_dim_names=("dp",))
    kept = []
    if hasattr(torch.cuda.CUDAGraph, "capture_begin"):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            kept.append(torch.empty(MIB))
    PyCodeCache.linemaps["/tmp/torchinductor_u/c2/c2abc.py"] = ([10], ['  File "/job/m.py", line 8, in f\n'])
    _train_small_model(9)
    path = os.path.join(DIR, "rank-00000.pickle")
    snap = None
    if os.path.exists(path):
        shutil.copy(path, path + ".range")
        snap = load(path + ".range")
    torch.cuda.set_per_process_memory_fraction(0.001)
    err = _oom(512 * MIB)
    check(isinstance(err, torch.cuda.OutOfMemoryError), f"the error changed: {type(err)} {err}")
    torch.cuda.set_per_process_memory_fraction(1.0)
    reason = load(path)["ranksnap"].get("reason") if os.path.exists(path) else None
    return snap, reason


def case_glue_goes_on_without(slug):
    """FAKE_TORCH_WITHOUT took WITHOUT[slug]'s call away: the job runs to its end (this returns),
    the capabilities left work, and the pickles list what was said off. torch_glue.sh checks that
    each line it prints below appears exactly once on stderr, and no other capability's."""
    from ranksnap import _off
    call, caps = WITHOUT[slug]
    check(os.environ.get("FAKE_TORCH_WITHOUT", "") == call, "FAKE_TORCH_WITHOUT not set")
    snap, oom_reason = _every_capability()
    works = lambda cap: cap not in caps  # noqa: E731
    if works("optimizer steps"):
        check(glue().steps.count == 9, f"optimizer steps counted: {glue().steps.count}")
    if works("optimizer steps") and works("snapshot"):
        check(snap is not None, "no pickle at the range's end")
        m = snap["ranksnap"]
        if works("recorder"):
            check([s[0] for s in m["steps"]] == [6, 7], m["steps"])
        frames = [f for e in snap["device_traces"][0] for f in e["frames"]]
        blocks = [f for s in snap["segments"] for b in s["blocks"] for f in b.get("frames", [])]
        seg_frames = [f for s in snap["segments"] for f in s.get("frames", [])]
        if works("recorder"):
            check(frames, "no history recorded")
        if works("recorder") and works("backward"):
            check(any(f["name"].startswith("backward of l") for f in frames),
                  sorted({f["name"] for f in frames}))
        if works("before") and works("recorder"):
            check(any(f["name"].startswith("parameter l") for f in blocks),
                  sorted({f["name"] for f in blocks}))
        if works("roles"):
            check(m.get("communicators"), "no communicators in the pickle")
        if works("graphs"):
            check(any(f["name"] == "capture_begin" for f in seg_frames), "the graph's pool is unnamed")
        # the pickle says what was off when it was written: the lines said so far
        check(len(m.get("off", [])) == len(caps) and
              all(any(_off.CAPS[c][0] in line for line in m["off"]) for c in caps),
              f"the pickle's off: {m.get('off')}, expected {caps}")
    if works("oom dump") and works("snapshot"):
        check(oom_reason == "oom", f"the OOM's pickle has reason {oom_reason}")
    if works("generated"):
        snap = {"segments": [], "device_traces": [[{"action": "alloc", "frames": [
            {"name": "call", "filename": "/tmp/torchinductor_u/c2/c2abc.py", "line": 12}]}]]}
        glue().generated.name_snapshot(snap)
        check(snap["device_traces"][0][0]["frames"][0]["filename"] == "/job/m.py", snap)
    check(sorted(_off._said) == sorted(caps), f"said off: {sorted(_off._said)}, expected {sorted(caps)}")
    for cap in caps:
        print(f"want: {_off.CAPS[cap][0]} is off: ")
    print(f"call: {call.rsplit('.', 1)[-1] if call else ''}")


if __name__ == "__main__":
    if sys.argv[1] == "call_of":  # for torch_glue.sh, before it starts the case
        print(WITHOUT[sys.argv[2]][0])
        sys.exit(0)
    if sys.argv[1].startswith("glue_goes_on_without_"):
        case_glue_goes_on_without(sys.argv[1][len("glue_goes_on_without_"):])
    else:
        globals()["case_" + sys.argv[1]]()
    print("ok:", sys.argv[1])
