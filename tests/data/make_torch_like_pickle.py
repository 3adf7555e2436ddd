#!/usr/bin/env python3
"""Writes PyTorch-like memory snapshots, one pickle per rank, without PyTorch.

The dicts have the shape torch.cuda.memory._dump_snapshot() writes (torch 2.11, as
docs/PYTORCH.md describes it): `segments` with `blocks`, `device_traces` (one list per device),
`allocator_settings`, `external_annotations`; trace entries with `action`, `addr`, `size`,
`stream`, `time_us`, `compile_context`, `user_metadata`, `frames`; frames innermost first.
Strings are shared objects, so pickle memoizes them as PyTorch's are.

--stacks all (PyTorch's default, what `_record_memory_history()` records) lays the frames out
as PyTorch 2.11 does: its C++ frames as its addr2line symbolizer writes them (names demangled,
file "??", "" or a base name, line 0; the names below are copied from real snapshots): the
stack capture (torch::unwind::unwind, CapturedTraceback::gather, gather_with_cpp), the caching
allocator, at::detail::empty_*, the dispatcher (wrap_kernel_functor_unboxed_, at::_ops::*,
VariableType) and the Python binding; each Python frame inserted before a
_PyEval_EvalFrameDefault, and, as Python 3.11+ runs inlined frames in one evaluation loop, the
outer Python frames after _start. The backward pass runs on the autograd engine's threads: its
stacks have no Python frame at all (C++ only: the autograd node, Engine::thread_main, __clone).
--stacks python keeps the Python frames alone; the backward pass then has none.

The trace is a small training loop run through a toy caching allocator (one block per segment,
cached segments reused by size): parameters first, then per step zero_grad, a forward pass over
the layers, a backward pass, and an optimizer step whose state is created in the first step.
Knobs make one rank's activations larger (--big-rank), one rank keep a tensor every step
(--leak-rank: outputs appended to a list), one rank run out of memory in the forward pass of a
given step (--oom-rank, --oom-step: the snapshot its except handler would dump), and the model
a package's (--model transformers: its forward in site-packages, called from train.py).

    make_torch_like_pickle.py OUTDIR [--ranks 4] [--steps 5] [--layers 4] [--stacks all] ...
Prints nothing; exit status 0. The tests run it with /usr/bin/python3 (no torch needed).
"""
import argparse
import os
import pickle

MIB = 1 << 20
TORCH = "/usr/local/lib/python3.11/site-packages/torch/"
LINEAR = TORCH + "nn/modules/linear.py"
FUNCTIONAL = TORCH + "nn/functional.py"
AUTOGRAD = TORCH + "autograd/graph.py"
ADAM = TORCH + "optim/adam.py"
OPTIMIZER = TORCH + "optim/optimizer.py"
MODULE = TORCH + "nn/modules/module.py"
TRAIN = "/home/user/project/train.py"
RUNPY = "/usr/lib/python3.11/runpy.py"
# the model: the user's own file, or a package's (--model transformers)
MODELS = {
    "own": ("/home/user/project/model.py", {"init": 20, "qkv": 31, "attn": 33, "mlp": 36}),
    "transformers": ("/usr/local/lib/python3.11/site-packages/transformers/models/gpt2/"
                     "modeling_gpt2.py", {"init": 148, "qkv": 212, "attn": 226, "mlp": 290}),
}


def frame(name, filename, line):
    return (name, filename, line)


def cpp(name, filename="??"):
    return (name, filename, 0)


# ---- PyTorch 2.11's C++ frames (stacks="all") ---------------------------------------------------

CAPTURE = [cpp("torch::unwind::unwind()"),
           cpp("torch::CapturedTraceback::gather(bool, bool, bool)"),
           cpp("torch::cuda::(anonymous namespace)::gather_with_cpp()", "memory_snapshot.cpp")]
ALLOCATOR = [
    cpp("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long, "
        "CUstream_st*)", "CUDACachingAllocator.cpp"),
    cpp("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, signed "
        "char, unsigned long, CUstream_st*)", ""),
    cpp("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)",
        "")]
EMPTY = [
    cpp("at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, "
        "c10::ScalarType, std::optional<c10::MemoryFormat>)"),
    cpp("at::detail::empty_cuda(c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>, "
        "std::optional<c10::MemoryFormat>)"),
    cpp("at::detail::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>, "
        "std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, "
        "std::optional<c10::MemoryFormat>)"),
    cpp("at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)")]
EVAL = cpp("_PyEval_EvalFrameDefault")
INTERPRETER = [cpp("PyEval_EvalCode"), cpp("PyRun_StringFlags"), cpp("_PyRun_SimpleFileObject"),
               cpp("_PyRun_AnyFileObject"), cpp("Py_RunMain"), cpp("Py_BytesMain"),
               cpp("__libc_init_first"), cpp("__libc_start_main"), cpp("_start")]
VEC = "std::vector<at::Tensor, std::allocator<at::Tensor> >&&"
ENGINE = [
    cpp("torch::autograd::Node::operator()(" + VEC + ")", ""),
    cpp("torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, "
        "torch::autograd::Node*, torch::autograd::InputBuffer&, "
        "std::shared_ptr<torch::autograd::ReadyQueue> const&)"),
    cpp("torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"),
    cpp("torch::autograd::Engine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> "
        "const&, bool)"),
    cpp("torch::autograd::python::PythonEngine::thread_init(int, "
        "std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)", ""),
    cpp("std::error_code::default_error_condition() const"),
    cpp("pthread_condattr_setpshared"),
    cpp("__clone")]


def kernel(op, args, register="RegisterCUDA_0.cpp", variable="VariableType_0.cpp"):
    """A structured CUDA kernel's output allocation, through the dispatcher up to at::_ops::OP."""
    base = op.split("_")[0]
    sig = "at::Tensor (" + args + ")"
    return [
        cpp("at::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, "
            "c10::TensorOptions const&)", register),
        cpp("at::(anonymous namespace)::structured_%s_out_cuda_functional::set_output_raw_strided("
            "long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, "
            "c10::ArrayRef<at::Dimname>)" % base, register),
        cpp("at::(anonymous namespace)::wrapper_CUDA_%s(%s)" % (op, args), register),
        cpp("c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<"
            "c10::CompileTimeFunctionPointer<%s, &at::(anonymous namespace)::wrapper_CUDA_%s>, "
            "at::Tensor, c10::guts::typelist::typelist<%s> >, %s>::call(c10::OperatorKernel*, "
            "c10::DispatchKeySet, %s)" % (sig, op, args, sig, args), register),
        cpp("at::_ops::%s::redispatch(c10::DispatchKeySet, %s)" % (op, args)),
        cpp("torch::autograd::VariableType::(anonymous namespace)::%s(c10::DispatchKeySet, %s)"
            % (op, args), variable),
        cpp("c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<"
            "c10::CompileTimeFunctionPointer<at::Tensor (c10::DispatchKeySet, %s), "
            "&torch::autograd::VariableType::(anonymous namespace)::%s>, at::Tensor, "
            "c10::guts::typelist::typelist<c10::DispatchKeySet, %s> >, at::Tensor "
            "(c10::DispatchKeySet, %s)>::call(c10::OperatorKernel*, c10::DispatchKeySet, %s)"
            % (args, op, args, args, args), variable),
        cpp("at::_ops::%s::call(%s)" % (op, args))]


T2 = "at::Tensor const&, at::Tensor const&"
T3S = "at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&"
# what each kind of allocation runs, innermost first, below its Python binding
OPS = {
    "linear": kernel("addmm", T3S) + [
        cpp("at::native::linear(at::Tensor const&, at::Tensor const&, std::optional<at::Tensor> "
            "const&)"),
        cpp("at::_ops::linear::call(at::Tensor const&, at::Tensor const&, "
            "std::optional<at::Tensor> const&)"),
        cpp("torch::autograd::THPVariable_linear(_object*, _object*, _object*)",
            "python_nn_functions.cpp")],
    "bmm": kernel("bmm", T2) + [
        cpp("torch::autograd::THPVariable_bmm(_object*, _object*, _object*)",
            "python_torch_functions_0.cpp")],
    "mul": kernel("mul_Tensor", T2) + [
        cpp("torch::autograd::THPVariable_mul(_object*, _object*, _object*)",
            "python_variable_methods.cpp"),
        cpp("PyDescr_IsData"), cpp("PyType_GetModule"), cpp("PyNumber_Multiply")],
    "empty": [
        cpp("at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>, "
            "std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, "
            "std::optional<c10::MemoryFormat>)"),
        cpp("at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA_memory_format_empty("
            "c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, "
            "std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)",
            "RegisterCUDA_0.cpp"),
        cpp("at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>, "
            "std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, "
            "std::optional<bool>, std::optional<c10::MemoryFormat>)"),
        cpp("torch::autograd::THPVariable_empty(_object*, _object*, _object*)",
            "python_torch_functions_0.cpp")],
}


def forward_stack(op, python, stacks):
    """Innermost first: with stacks="all", the C++ frames of `op`, then the two innermost Python
    frames each before its _PyEval_EvalFrameDefault, the interpreter's frames down to _start,
    and the outer Python frames after it."""
    if stacks == "python":
        return list(python)
    out = CAPTURE + ALLOCATOR + EMPTY + OPS[op]
    for p in python[:2]:
        out += [p, EVAL]
    return out + INTERPRETER + list(python[2:])


def backward_stack(node, op, args, stacks):
    """The autograd engine's thread: no Python frame; C++ only with stacks="all"."""
    if stacks == "python":
        return []
    return CAPTURE + ALLOCATOR + EMPTY + kernel(op, args, variable="VariableType_3.cpp") + [
        cpp("torch::autograd::generated::%s_apply_functional(%s, std::array<bool, 3ul>, "
            "at::Tensor)" % (node, VEC), "Functions.cpp"),
        cpp("torch::autograd::generated::%s::apply(%s)" % (node, VEC))] + ENGINE


def accumulate_grad_stack(stacks):
    if stacks == "python":
        return []
    return CAPTURE + ALLOCATOR + EMPTY + kernel("new_empty_strided", T2) + [
        cpp("torch::autograd::utils::clone_obey_contract(at::Tensor const&, at::Tensor const&)", ""),
        cpp("torch::autograd::(anonymous namespace)::AccumulateGrad_apply_impl(" + VEC + ", "
            "at::Tensor&, at::Tensor&, long, std::function<void (at::Tensor&&)> const&)",
            "accumulate_grad.cpp"),
        cpp("torch::autograd::AccumulateGrad::apply(" + VEC + ")")] + ENGINE


def stacks_for(stacks, model):
    """Every kind of allocation's stack (innermost first)."""
    path, line = MODELS[model]
    outer = [frame("train_step", TRAIN, 41), frame("main", TRAIN, 77),
             frame("<module>", TRAIN, 90), frame("_run_code", RUNPY, 88)]
    call = [frame("_call_impl", MODULE, 1747), frame("_wrapped_call_impl", MODULE, 1736)]

    def fwd(op, *user):
        return forward_stack(op, list(user) + outer, stacks)

    return {
        "qkv": fwd("linear", frame("forward", LINEAR, 125), *call,
                   frame("forward", path, line["qkv"]), *call),
        "attn": fwd("bmm", frame("scaled_dot_product_attention", FUNCTIONAL, 5400),
                    frame("forward", path, line["attn"]), *call),
        "mlp": fwd("linear", frame("forward", LINEAR, 125), *call,
                   frame("forward", path, line["mlp"]), *call),
        "input": forward_stack("empty", [frame("train_step", TRAIN, 38)] + outer[1:], stacks),
        "loss": fwd("mul", frame("cross_entropy", FUNCTIONAL, 3462), frame("train_step", TRAIN, 40)),
        "keep": forward_stack("mul", [frame("train_step", TRAIN, 44)] + outer[1:], stacks),
        "param": forward_stack("empty", [frame("__init__", path, line["init"]),
                                         frame("main", TRAIN, 70), frame("<module>", TRAIN, 90)],
                               stacks),
        "grad": accumulate_grad_stack(stacks),
        "bwd_tmp": backward_stack("AddmmBackward0", "mm", T2, stacks),
        "opt_state": forward_stack("empty", [frame("_init_group", ADAM, 180),
                                             frame("step", OPTIMIZER, 485),
                                             frame("train_step", TRAIN, 43)] + outer[1:], stacks),
        "opt_tmp": forward_stack("mul", [frame("_multi_tensor_adam", ADAM, 520),
                                         frame("step", OPTIMIZER, 485),
                                         frame("train_step", TRAIN, 43)] + outer[1:], stacks),
    }


def frames_of(st):
    # A fresh dict per frame and list per entry, as PyTorch builds them; the strings are shared.
    return [{"name": n, "filename": f, "line": l} for (n, f, l) in st]


def round_block(size):
    return 512 if size < 512 else (size + 511) // 512 * 512


def segment_size(rounded):
    if rounded <= MIB:
        return 2 * MIB
    return (rounded + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)


class Allocator:
    """One block per segment; a freed segment is cached and reused for the same segment size."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.segments = {}  # address -> dict(size, block: None or (size, requested, stack), stack)
        self.cached = {}    # segment size -> [address]
        self.next_addr = 0x7F0000000000
        self.trace = []
        self.time_us = 1_700_000_000_000_000
        self.live = {}      # address -> requested size

    def record(self, action, addr, size, st, **extra):
        self.time_us += 7
        # PyTorch 2.11 makes a new str for compile_context in every entry (pickle writes it
        # each time, memoized); "" is CPython's one empty str (a memo GET after the first)
        entry = {"action": action, "addr": addr, "size": size, "stream": 0,
                 "time_us": self.time_us, "compile_context": "".join(("N/", "A")), "user_metadata": "",
                 "frames": frames_of(st) if st else []}
        if action == "oom":
            del entry["addr"]
            entry["device_free"] = extra["device_free"]
        self.trace.append(entry)

    def reserved(self):
        return sum(s["size"] for s in self.segments.values())

    def malloc(self, size, st):
        rounded = round_block(size)
        seg = segment_size(rounded)
        if self.cached.get(seg):
            addr = self.cached[seg].pop()
        else:
            if self.reserved() + seg > self.capacity:
                # PyTorch frees every cached segment and retries before it gives up.
                for s, addrs in list(self.cached.items()):
                    for a in addrs:
                        self.record("segment_free", a, s, self.segments[a]["stack"])
                        del self.segments[a]
                    self.cached[s] = []
                if self.reserved() + seg > self.capacity:
                    self.record("oom", 0, size, st,
                                device_free=self.capacity - self.reserved())
                    raise MemoryError(size)
            addr = self.next_addr
            self.next_addr += seg + 2 * MIB
            self.segments[addr] = {"size": seg, "block": None, "stack": st}
            self.record("segment_alloc", addr, seg, st)
        self.segments[addr]["block"] = (rounded, size, st)
        self.live[addr] = size
        self.record("alloc", addr, size, st)
        return addr

    def free(self, addr):
        size = self.live.pop(addr)
        st = self.segments[addr]["block"][2]
        self.record("free_requested", addr, size, st)
        self.record("free_completed", addr, size, st)
        self.segments[addr]["block"] = None
        self.cached.setdefault(self.segments[addr]["size"], []).append(addr)

    def state(self):
        out = []
        for addr in sorted(self.segments):
            s = self.segments[addr]
            blocks = []
            allocated = requested = 0
            if s["block"]:
                rounded, req, st = s["block"]
                blocks.append({"address": addr, "size": rounded, "requested_size": req,
                               "state": "active_allocated", "frames": frames_of(st)})
                allocated, requested = rounded, req
                if s["size"] > rounded:
                    blocks.append({"address": addr + rounded, "size": s["size"] - rounded,
                                   "requested_size": 0, "state": "inactive", "frames": []})
            else:
                blocks.append({"address": addr, "size": s["size"], "requested_size": 0,
                               "state": "inactive", "frames": []})
            out.append({"device": 0, "address": addr, "total_size": s["size"],
                        "allocated_size": allocated, "active_size": allocated,
                        "requested_size": requested, "stream": 0,
                        "segment_type": "small" if s["size"] <= 2 * MIB else "large",
                        "segment_pool_id": (0, 0), "is_expandable": False,
                        "frames": frames_of(s["stack"]), "blocks": blocks})
        return out


def train(args, rank):
    st = stacks_for(args.stacks, args.model)
    a = Allocator(args.capacity_mib * MIB)
    act = args.act_kib * 1024
    factor = args.big_factor if rank == args.big_rank else 1.0
    params = [a.malloc(args.param_kib * 1024 + 4096 * i, st["param"]) for i in range(2 * args.layers)]
    grads, opt_state, kept = [], [], []
    try:
        for step in range(args.steps):
            for g in grads:  # zero_grad(set_to_none=True)
                a.free(g)
            grads = []
            x = a.malloc(act, st["input"])
            acts = []
            for layer in range(args.layers):
                if rank == args.oom_rank and step == args.oom_step and layer == args.layers // 2:
                    a.malloc(args.capacity_mib * MIB * 4, st["mlp"])
                acts.append(a.malloc(int(3 * act * factor), st["qkv"]))
                acts.append(a.malloc(int(act * factor), st["attn"]))
                acts.append(a.malloc(int(4 * act * factor), st["mlp"]))
            loss = a.malloc(4, st["loss"])
            if rank == args.leak_rank:  # outputs.append(out): kept across steps
                kept.append(a.malloc(args.leak_kib * 1024, st["keep"]))
            for layer in reversed(range(args.layers)):
                tmp = a.malloc(int(4 * act * factor), st["bwd_tmp"])
                grads.append(a.malloc(args.param_kib * 1024 + 4096 * (2 * layer), st["grad"]))
                grads.append(a.malloc(args.param_kib * 1024 + 4096 * (2 * layer + 1), st["grad"]))
                a.free(tmp)
                for _ in range(3):
                    a.free(acts.pop())
            a.free(loss)
            a.free(x)
            if step == 0:  # Adam's exp_avg and exp_avg_sq, created lazily
                for i in range(len(params)):
                    opt_state.append(a.malloc(args.param_kib * 1024 + 4096 * i, st["opt_state"]))
                    opt_state.append(a.malloc(args.param_kib * 1024 + 4096 * i, st["opt_state"]))
            tmp = a.malloc(args.param_kib * 1024, st["opt_tmp"])
            a.free(tmp)
    except MemoryError:
        pass  # the except handler dumps: what is alive at the OOM stays in the state
    a.record("snapshot", 0, 0, None)
    return {
        "segments": a.state(),
        "device_traces": [a.trace, []],
        "allocator_settings": {
            "PYTORCH_CUDA_ALLOC_CONF": "",
            "max_split_size": (1 << 64) - 1,  # SIZE_MAX: a LONG1 of 9 bytes
            "garbage_collection_threshold": 0.0,
            "expandable_segments": False,
            "pinned_num_register_threads": 1,
            "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {},
        },
        "external_annotations": [],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("outdir")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--act-kib", type=int, default=1536, help="activation unit, KiB")
    p.add_argument("--param-kib", type=int, default=512)
    p.add_argument("--big-rank", type=int, default=2, help="-1: none")
    p.add_argument("--big-factor", type=float, default=1.5)
    p.add_argument("--oom-rank", type=int, default=3, help="-1: none")
    p.add_argument("--oom-step", type=int, default=3)
    p.add_argument("--leak-rank", type=int, default=-1, help="keeps --leak-kib every step; -1: none")
    p.add_argument("--leak-kib", type=int, default=1024)
    p.add_argument("--stacks", choices=("all", "python"), default="all",
                   help="what _record_memory_history(stacks=...) records")
    p.add_argument("--model", choices=sorted(MODELS), default="own",
                   help="own: the user's model.py; transformers: a package's modeling file")
    p.add_argument("--capacity-mib", type=int, default=4096)
    p.add_argument("--protocol", type=int, default=4)
    p.add_argument("--name", default="snapshot_rank{rank}.pickle")
    p.add_argument("--oom-name", default=None, help="file name of the OOM rank (default --name)")
    p.add_argument("--only-rank", type=int, default=-1, help="write this rank only")
    args = p.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    for rank in range(args.ranks):
        if args.only_rank >= 0 and rank != args.only_rank:
            continue
        snap = train(args, rank)
        name = args.oom_name if (rank == args.oom_rank and args.oom_name) else args.name
        with open(os.path.join(args.outdir, name.format(rank=rank)), "wb") as f:
            pickle.dump(snap, f, protocol=args.protocol)


if __name__ == "__main__":
    main()
