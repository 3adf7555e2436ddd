"""A stand-in for `torch` in the CI tests of ranksnap's PyTorch glue (no GPU, no torch there).

It has exactly the surface the glue (python/ranksnap/_torch.py) and the test scripts use, with
PyTorch 2.11's names and shapes: torch.cuda.memory._record_memory_history / _snapshot /
CUDAPluggableAllocator / change_current_allocator, torch.cuda._lazy_call, is_initialized,
memory_reserved, set_per_process_memory_fraction, torch._C._cuda_attach_out_of_memory_observer,
torch.optim.optimizer.register_optimizer_step_post_hook, torch.distributed's few collectives
(over files), torch.profiler.record_function, torch.OutOfMemoryError, and torch.empty for
"tensors" of device memory that the allocator of torch/cuda/_allocator.py serves and records;
the backward pass as PyTorch runs it (torch.autograd: nodes on an autograd thread, pre-hooks,
torch._C._cuda_setMemoryMetadata and _current_autograd_node), torch.nn.Module with its global
forward hooks, and stand_in_op, the stand-in's operator that makes autograd nodes (none while
gradients are off: torch.no_grad, is_grad_enabled); torch.compile (torch/_dynamo).

FAKE_TORCH_WITHOUT=torch._C._cuda_setMemoryMetadata,torch.autograd.graph.Node.register_prehook
makes it a PyTorch release without those calls: each is deleted from its module or class once
the import is done, before the glue installs itself.
"""
import contextlib
import functools
import importlib
import os
import threading

from . import _C, cuda, distributed, optim, profiler  # noqa: F401
from .cuda._allocator import OutOfMemoryError

__version__ = "2.11.0+stand-in"


class Tensor:
    """nbytes of device memory, freed when the last reference goes (CPython: at once)."""

    def __init__(self, nbytes, grad_fn=None):
        cuda._lazy_init()
        self.nbytes = int(nbytes)
        self.data_ptr_ = cuda._allocator.ALLOCATOR.malloc(self.nbytes)
        self.grad_fn = grad_fn
        self.requires_grad = grad_fn is not None
        self.grad = None

    def data_ptr(self):
        return self.data_ptr_

    def numel(self):
        return self.nbytes

    def untyped_storage(self):
        return self  # one storage per tensor in the stand-in: the same data_ptr()

    def register_hook(self, hook):
        """hook(grad) before the tensor's node runs in the backward pass, ahead of the node's own
        pre-hooks, as PyTorch runs a non-leaf tensor's hooks (the stand-in passes no gradient)."""
        from .autograd.graph import _Handle
        if self.grad_fn is None:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        hooks = self.grad_fn._tensor_pre_hooks
        fn = lambda grads: hook(None)  # noqa: E731
        hooks.append(fn)
        return _Handle(hooks, fn)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        # as torch/_tensor.py: through the module attribute, at call time
        autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def __del__(self):
        ptr = getattr(self, "data_ptr_", None)
        if ptr is not None:
            cuda._allocator.ALLOCATOR.free(ptr)


def empty(nbytes, device="cuda"):
    if not str(device).startswith("cuda"):
        raise RuntimeError("the stand-in torch has CUDA tensors only")
    return Tensor(nbytes)


_grad = threading.local()


def is_grad_enabled():
    return getattr(_grad, "on", True)


class no_grad(contextlib.ContextDecorator):
    """As PyTorch's: a context manager and a decorator (transformers' generate is one)."""

    def __enter__(self):
        self.prev = is_grad_enabled()
        _grad.on = False

    def __exit__(self, *exc):
        _grad.on = self.prev
        return False


inference_mode = no_grad


def compile(model=None, **kwargs):
    """torch.compile: a module becomes an OptimizedModule (torch/_dynamo/eval_frame.py), a
    function is returned as it is; without a model, the decorator."""
    if model is None:
        return functools.partial(compile, **kwargs)
    from ._dynamo import eval_frame
    if isinstance(model, nn.Module):
        return eval_frame.OptimizedModule(model, kwargs.get("mode"), kwargs.get("options"))
    return model


def stand_in_op(name, nbytes, inputs=(), grad_nbytes=None):
    """The stand-in's operator: an output of nbytes whose autograd node (NAME + "Backward0")
    allocates grad_nbytes (default nbytes) and leads to the inputs' nodes, or to an
    AccumulateGrad node for an input that is a parameter."""
    if not is_grad_enabled():
        return Tensor(nbytes)
    nexts = []
    for t in inputs:
        if t.grad_fn is not None:
            nexts.append(t.grad_fn)
        elif getattr(t, "requires_grad", False):
            nexts.append(autograd.Node("torch::autograd::AccumulateGrad", t.nbytes, accumulate=t))
    node = autograd.Node(name + "Backward0", nbytes if grad_nbytes is None else grad_nbytes, nexts,
                         saved=[t for t in inputs if t.grad_fn is not None])
    return Tensor(nbytes, grad_fn=node)


def manual_seed(seed):
    return None


from . import autograd, nn  # noqa: E402,F401  (they use Tensor)


def _without(names):
    for name in filter(None, names.split(",")):
        owner, attr = name.rsplit(".", 1)
        parts = owner.split(".")
        for i in range(len(parts), 0, -1):  # the longest prefix that is a module, then classes
            try:
                obj = importlib.import_module(".".join(parts[:i]))
                break
            except ImportError:
                continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        delattr(obj, attr)


_without(os.environ.get("FAKE_TORCH_WITHOUT", ""))
