"""_names.py — names for the bytes that PyTorch's recorder leaves without a Python stack under
ranksnap's default settings (RANKSNAP_STACKS=python): the backward pass, the OOM's own request
when it is made there, and the blocks that were alive before the range began (docs/PYTORCH.md,
"Names for the backward pass and for what came before").

The backward pass runs on PyTorch's autograd threads, which have no Python frame: PyTorch records
its allocations with an empty stack. What PyTorch does record with each trace entry, the OOM's
included, is the allocator's user metadata of the allocating thread
(torch._C._cuda_setMemoryMetadata, a thread_local string of c10/cuda/CUDACachingAllocator.cpp
copied into every TraceEntry). So, only while a range records:

- during the range's first step, a global module forward pre-hook
  (register_module_forward_pre_hook) finds each model the script calls, names its modules
  (named_modules, once per model) and chooses the parts that name the backward (_units: the
  model split by parameter count into a sixth of its modules at most, small parts left to their
  caller); the hook goes at the first optimizer step, since any global module hook sends every
  module call of the process down PyTorch's slow path;
- a forward hook on each chosen module (Module.register_forward_hook) puts a pre-hook on the
  autograd node of the call's output (Node.register_prehook); the node runs first in that
  module's backward, on the autograd thread, and the pre-hook sets the metadata to a short key
  ("rs:12": it fits std::string's inline buffer, so that the copy into every trace entry
  allocates nothing) standing for "backward of NAME (Class)" with the module's forward line and
  the user's line that called the model;
- torch.autograd.backward (what Tensor.backward calls) is wrapped so that the root's node sets
  "backward of NllLossBackward0" with the line that called backward(): what runs before the
  first module's node (a loss computed in the script) has its autograd node and that line.

At the dump the keys become frames: every trace entry, and every block of the snapshot's
segments, that has no frame gets the frames its key stands for; a block that the range never
allocated is "allocated before step N", named by the parameter, gradient or optimizer state it
holds when the glue finds its storage among the models it saw and the first optimizer's state.
The pickle so carries the names in PyTorch's own fields, which ranksnap's reports and PyTorch's
memory_viz read alike. Everything here catches its exceptions: names are never why a step fails.
But names lost are said: the private calls used here (torch._C's metadata and autograd-node calls,
Node.metadata and register_prehook, dynamo's counters) can change in any PyTorch release, and when
one is missing or raises, one line per capability and process says which names are off and why
(_off.py).
"""
import functools
import heapq
import importlib
import os
import sys
import weakref

from . import _off, _wrap

_OWN_DIR = os.path.dirname(os.path.abspath(__file__))

# A named module call costs the host some tens of us (registering the pre-hook on its node alone
# takes 12 us, the autograd engine calling it in Python 7 us), where a host-bound step takes about
# 180 us per module call (a transformers GPT-2 on an H200): naming at most one module in six (8
# of GPT-2's 86) keeps such a step near 3% (docs/BENCHMARKS.md); a small model gets its every
# module named. A part under 1/_SMALL of its largest sibling is left to its caller.
_SHARE = 6
_MIN_UNITS = 16
_SMALL = 16


def _installed(path):
    return "site-packages" in path or "dist-packages" in path or path.startswith("<")


def _users(path, torch_dir):
    """Whether a source file is the user's own code: not an installed package's, not torch's,
    not ranksnap's."""
    return not _installed(path) and not path.startswith(_OWN_DIR) and not path.startswith(torch_dir)


def _frame(name, filename, line):
    return {"name": name, "filename": filename, "line": int(line or 0)}


class Names:
    def __init__(self, torch, compiled=None):
        self.torch = torch
        self.compile_called = compiled or (lambda: False)  # torch.compile was called (_steps.py)
        self._bind()
        self.torch_dir = os.path.dirname(os.path.abspath(getattr(torch, "__file__", "") or ".")) + os.sep
        self.table = {}          # key -> frames (innermost first)
        self.keys = {}           # (module id, caller code, caller line) -> key
        self.roots = weakref.WeakValueDictionary()   # id -> a module called with no parent running
        self.names = weakref.WeakKeyDictionary()      # module -> its qualified name ("" for a root)
        # id -> (weakref, qualified name) of each parameter as its model held it when found: FSDP2
        # swaps a module's shards (what the optimizer holds) for all-gathered copies while it runs
        self.params = {}
        self.handles = []        # this range's hooks
        self.finding = None      # the global pre-hook that finds the range's models
        self.found = set()       # ids of the modules of the models found in this range
        self.setters = {}        # key -> the pre-hook that sets it
        self.real_backward = None
        self.step = None
        self.optimizer = None    # a weakref to the optimizer whose steps are counted

    def _bind(self):
        """torch._C's private calls, looked up at each range's start (a script may patch torch
        after importing it)."""
        c = getattr(self.torch, "_C", None)
        self.set_md = getattr(c, "_cuda_setMemoryMetadata", None)
        self.get_md = getattr(c, "_cuda_getMemoryMetadata", None)
        self.current_node = getattr(c, "_current_autograd_node", None)

    # ---- the range ---------------------------------------------------------------------------

    def begin(self, step, optimizer):
        """At the first step of a range: hooks in, names of the range's start kept."""
        self.step = step
        self.optimizer = optimizer
        if self.real_backward is not None:
            return
        self._bind()
        if self.current_node is None:
            _off.off("oom", "torch._C._current_autograd_node is missing")
        elif self.get_md is None:
            _off.off("oom", "torch._C._cuda_getMemoryMetadata is missing")
        if self.set_md is None:
            _off.off("backward", "torch._C._cuda_setMemoryMetadata is missing")
        try:
            # the models are still found without the metadata call: their parameters' names
            if not self._compiled():
                mod = importlib.import_module("torch.nn.modules.module")
                self.finding = mod.register_module_forward_pre_hook(self._on_call)
        except Exception as e:  # no model is found: neither its parts nor its parameters named
            _off.off("backward", e)
            _off.off("before", e)
        if self.set_md is None:
            return
        try:
            autograd = self.torch.autograd
            real = autograd.backward
            autograd.backward = _wrap.around(real, before=lambda tensors, *a, **k: self._on_backward(tensors))
            self.real_backward = real
        except Exception as e:
            _off.off("backward", e)

    def stepped(self):
        """At every step: the range's first step has called its models, so the search ends."""
        _wrap.drop(self.finding)
        self.finding = None

    def end(self):
        """After the dump: hooks out, this thread's metadata cleared (the autograd threads' is
        left as it is: PyTorch copies it only into recorded entries, and the next range sets it
        anew before any of its backward allocations)."""
        self.stepped()
        for h in self.handles:
            _wrap.drop(h)
        self.handles = []
        self.found = set()
        if self.real_backward is not None:
            self.torch.autograd.backward = self.real_backward
            self.real_backward = None
        try:
            if self.set_md is not None:
                self.set_md("")
        except Exception as e:
            _off.off("backward", e)

    # ---- hooks -------------------------------------------------------------------------------

    def _key(self, frames):
        key = f"rs:{len(self.table)}"
        self.table[key] = frames
        return key

    def _on_call(self, module, args):
        """Before each module call of the range's first step (the outermost first): a module of
        no model found yet is a model called by the script, whose modules are named once, and
        whose chosen modules get the forward hook."""
        try:
            if id(module) in self.found:
                return None
            self.roots[id(module)] = module
            modules = list(module.named_modules())
            for n, m in modules:
                self.names.setdefault(m, n)
                self.found.add(id(m))
            base = getattr(self.torch.nn.Module, "forward", None)
            units = _units(module, max(_MIN_UNITS, len(modules) // _SHARE), base) \
                if self.set_md is not None else ()
            for m in units:
                self.handles.append(m.register_forward_hook(self._on_forward))
            for n, p in module.named_parameters():
                self.params[id(p)] = (weakref.ref(p), n)
        except Exception as e:
            _off.off("backward", e)
        return None

    def _compiled(self):
        """Whether torch.compile made a graph in this process: dynamo guards on the global module
        hooks, so adding them at a range's start and removing them at its end would recompile
        every compiled module twice a range. Such a job gets the labels of the loss's node, of
        the OOM and of what came before the range, not the modules' names."""
        if self.compile_called():
            # a compiled model that has not run yet: it will compile, and warns of a global hook
            return True
        dynamo = sys.modules.get("torch._dynamo.utils")
        try:
            return dynamo is not None and dynamo.counters["stats"]["unique_graphs"] > 0
        except Exception as e:
            _off.off("compiled", e)
            return False

    def _name_of(self, module):
        name = self.names.get(module) or "the model"
        return f"backward of {name} ({type(module).__name__})"

    def _on_forward(self, module, args, output):
        try:
            node = _grad_fn(output)
            if node is None:
                return None
            # a module whose output is its submodule's (a wrapper, a head around a projection):
            # the innermost module names the node's backward. The mark is kept in the C++
            # node's metadata dict, as the Python object of a node does not outlive the hook.
            mark = node.metadata
            if "ranksnap" in mark:
                return None
            # the line that called the module, past torch's own (Module.__call__, Sequential's
            # and DDP's forward) and a package's __call__ around the call (transformers'
            # GradientCheckpointingLayer), whose lines reports look past
            f = sys._getframe(1)
            while f is not None and (f.f_code.co_filename.startswith(self.torch_dir) or
                                     (f.f_code.co_name == "__call__" and _installed(f.f_code.co_filename))):
                f = f.f_back
            if f is None:
                return None
            ck = (id(module), f.f_code, f.f_lineno)
            key = self.keys.get(ck)
            if key is None:
                frames = [_frame(self._name_of(module), f.f_code.co_filename, f.f_lineno)]
                if _installed(f.f_code.co_filename):
                    u = _user_frame(f.f_back, self.torch_dir)
                    if u is not None:
                        frames.append(u)
                key = self._key(frames)
                self.keys[ck] = key
            mark["ranksnap"] = key
            node.register_prehook(self._setter(key))
        except Exception as e:
            _off.off("backward", e)
        return None

    def _setter(self, key):
        fn = self.setters.get(key)
        if fn is None:
            fn = self.setters[key] = functools.partial(_set, self.set_md, key)
        return fn

    def _on_backward(self, tensors):
        try:
            t = tensors[0] if isinstance(tensors, (list, tuple)) and tensors else tensors
            node = getattr(t, "grad_fn", None)
            if node is None:
                return
            u = _user_frame(sys._getframe(1), self.torch_dir) or _frame("backward", "", 0)
            ck = ("backward", u["filename"], u["line"], node.name())
            key = self.keys.get(ck)
            if key is None:
                key = self._key([_frame(f"backward of {node.name()}", u["filename"], u["line"])])
                self.keys[ck] = key
            # marked too: a hook on the loss's node (FSDP's root all-gather) runs before the
            # pre-hook, while the autograd thread still holds the previous backward's last key
            node.metadata.setdefault("ranksnap", key)
            node.register_prehook(self._setter(key))
        except Exception as e:
            _off.off("backward", e)

    # ---- out of memory -----------------------------------------------------------------------

    def oom_frames(self):
        """On the allocating thread, in PyTorch's OOM observer: the frames the failing request is
        named by in the backward pass — the module whose output node is running (its mark: a
        hook of that node, such as FSDP's all-gather before a layer's backward, runs before the
        node's pre-hook sets the key), else its thread's key, else the autograd node running."""
        try:
            node = self.current_node() if self.current_node is not None else None
            frames = None
            if node is not None:
                try:
                    frames = self.table.get(_mark(node))
                except Exception as e:  # a node without metadata: the thread's key may still say
                    _off.off("oom", e)
            if frames is None and self.get_md is not None:
                frames = self.table.get(self.get_md())
            if node is None:
                return frames
            # the node that failed, in the module's (or the loss's) backward it belongs to
            name = f"backward of {node.name()}"
            if not frames:
                return [_frame(name, "", 0)]
            if frames[0]["name"] == name:
                return frames
            return [_frame(f"{node.name()} in {frames[0]['name']}", frames[0]["filename"],
                           frames[0]["line"])] + frames[1:]
        except Exception as e:
            _off.off("oom", e)
            return None

    def oom_request(self, frames, named):
        """The failing request's frames: its Python frames, followed by the backward's name when
        every one of them is torch's or a package's (a hook that runs in the backward pass, FSDP's
        all-gather for one) — such a stack says what ran, not for which layer or line."""
        if not named:
            return frames
        if not frames:
            return named
        if any(_users(f.get("filename", ""), self.torch_dir) for f in frames):
            return frames
        return frames + named

    # ---- the dump ----------------------------------------------------------------------------

    def name_snapshot(self, snap):
        """Frames for what has none: trace entries by their key, blocks by the entry that
        allocated them in the range, else as bytes of before the range."""
        table = self.table
        by_addr = {}
        for trace in snap.get("device_traces", []):
            for e in trace:
                if e.get("frames"):
                    continue
                frames = table.get(e.get("user_metadata"))
                if frames is not None:
                    e["frames"] = frames
                if e.get("action") == "alloc":
                    by_addr[e.get("addr")] = frames
        before = None
        label = f"allocated before step {self.step}" if self.step is not None else \
            "allocated before recording"
        for seg in snap.get("segments", []):
            for b in seg.get("blocks", []):
                if b.get("frames") or b.get("state") == "inactive":
                    continue
                addr = b.get("address")
                if addr in by_addr:
                    if by_addr[addr] is not None:
                        b["frames"] = by_addr[addr]
                    continue
                if before is None:
                    before = self._tensors_by_address()
                what = before.get(addr)
                b["frames"] = [_frame(f"{what} ({label})" if what else label, "", 0)]
        return snap

    def _tensors_by_address(self):
        """Storage address -> "parameter NAME", "gradient of NAME", "optimizer state K of
        NAME", for the models seen and the counted optimizer: a few hundred look-ups, once a
        dump."""
        out = {}

        def put(t, what):
            # a DTensor (FSDP2's sharded parameter, its gradient and optimizer state): the
            # rank's shard is the tensor whose storage the allocator holds
            local = getattr(t, "_local_tensor", None)
            if local is not None:
                t = local
            # a tensor without a storage of its own (a meta or fake tensor, a subclass that
            # refuses it) has no block to name: expected, and nothing is lost. Anything else
            # reaches the callers' handlers, which say that these names are off.
            try:
                ptr = t.untyped_storage().data_ptr()
            except (AttributeError, NotImplementedError, RuntimeError, TypeError):
                try:
                    ptr = t.data_ptr()
                except (AttributeError, NotImplementedError, RuntimeError, TypeError):
                    return
            out.setdefault(ptr, what)

        pnames = {}

        def param(n, p):
            pnames[id(p)] = n
            put(p, f"parameter {n}")
            if getattr(p, "grad", None) is not None:
                put(p.grad, f"gradient of {n}")

        for root in list(self.roots.values()):
            try:
                for n, p in root.named_parameters():
                    param(n, p)
                for n, b in root.named_buffers():
                    put(b, f"buffer {n}")
            except Exception as e:
                _off.off("before", e)
                continue
        for pid, (ref, n) in list(self.params.items()):
            p = ref()
            if p is None:
                del self.params[pid]
            elif pid not in pnames:
                try:
                    param(n, p)
                except Exception as e:
                    _off.off("before", e)
                    continue
        opt = self.optimizer() if self.optimizer is not None else None
        state = getattr(opt, "state", None) or {}
        try:
            for p, st in state.items():
                n = pnames.get(id(p), "a parameter")
                for k, v in (st.items() if isinstance(st, dict) else ()):
                    if hasattr(v, "data_ptr"):
                        put(v, f"optimizer state {k} of {n}")
        except Exception as e:
            _off.off("before", e)
        return out


def _units(root, budget, base_forward):
    """The modules of a model whose calls name the backward: its parts by parameter count, the
    largest split first and parts of one size together (a model's layers are named alike), at
    most `budget` modules that run a forward of their own. Left to the module that calls them
    (each named call costs, and the caller's name is near enough): modules without parameters
    (dropout, activations), a part under 1/16 of its largest sibling (layer norms, position
    embeddings), and the model itself and what wraps all of it (DDP's module), whose output is
    the loss or the last part's."""
    size = {}
    for _, m in root.named_modules():
        size[id(m)] = sum(_numel(p) for p in m.parameters())
    total = size[id(root)]
    units, seen, order = [], {id(root)}, 0
    heap = [(-total, order, root)]
    while heap:
        top = heap[0][0]
        group = []
        while heap and heap[0][0] == top:
            group.append(heapq.heappop(heap)[2])
        parts = []
        for m in group:
            kids = [c for c in m.children() if id(c) not in seen and size.get(id(c), 0) > 0]
            largest = max((size[id(c)] for c in kids), default=0)
            for c in kids:
                if size[id(c)] * _SMALL >= largest:
                    seen.add(id(c))
                    parts.append(c)
        named = [c for c in parts if size[id(c)] < total and _runs(c, base_forward)]
        if len(units) + len(named) > budget:
            break
        units += named
        for c in parts:
            order += 1
            heapq.heappush(heap, (-size[id(c)], order, c))
    return units


def _numel(p):
    try:
        return int(p.numel())
    except (ValueError, RuntimeError):  # a lazy module's uninitialised parameter has no size yet
        return 1


def _runs(module, base_forward):
    """Whether the module has a forward of its own (a ModuleList or a bare container has not,
    and is never called)."""
    forward = getattr(type(module), "forward", None)
    return forward is not None and forward is not base_forward


def _mark(node):
    """The key the glue marked a node's backward with; None for a node it never marked (its
    metadata dict has no "ranksnap"). A node without metadata raises to the caller, which says
    that the OOM's names are off."""
    return node.metadata.get("ranksnap")


def _set(set_md, key, grad_outputs):
    """A named node's pre-hook, on the autograd thread: the key for what its backward allocates."""
    try:
        set_md(key)
    except Exception as e:  # the backward pass goes on, its allocations unnamed, and said
        _off.off("backward", e)
    return None


def _grad_fn(output):
    """The autograd node of a module call's output: a tensor, or the first tensor of a tuple,
    list or dict (a Hugging Face ModelOutput is a dict) that has one."""
    node = getattr(output, "grad_fn", None)
    if node is not None:
        return node
    if isinstance(output, dict):
        items = output.values()
    elif isinstance(output, (tuple, list)):
        items = output
    else:
        return None
    for o in items:
        node = getattr(o, "grad_fn", None)
        if node is not None:
            return node
    return None


def _user_frame(f, torch_dir):
    """The innermost frame of the user's own code (_users) from f outwards."""
    while f is not None:
        path = f.f_code.co_filename
        if _users(path, torch_dir):
            return _frame(f.f_code.co_name, path, f.f_lineno)
        f = f.f_back
    return None
