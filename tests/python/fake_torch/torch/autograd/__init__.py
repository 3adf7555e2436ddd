"""torch.autograd of the stand-in: backward() and the engine that runs a graph's nodes, as
PyTorch 2.11 runs them for CUDA tensors — on an autograd thread of the device, not the calling
one, with no Python frame under what it runs (so PyTorch records the backward's allocations with
an empty stack), each node's hooks called on that thread just before the node, the node already
the current one (_current_autograd_node): first the hooks of its output tensors
(Tensor.register_hook, which FSDP's pre-backward is), then its pre-hooks (Node.register_prehook),
in Python, whose allocations PyTorch records with their Python frames; the exception of a node
(an OutOfMemoryError) raised again in the caller."""
import threading

from . import graph  # noqa: F401
from .graph import Node  # noqa: F401

_current = threading.local()


def _run(root, out):
    from ..cuda import _allocator
    _allocator.TLS.native = True  # PyTorch's autograd threads run C++: no Python frames recorded
    try:
        order, seen, todo = [], set(), [root]
        while todo:  # the stand-in's graphs are trees: any order from the root down is one
            n = todo.pop(0)
            if id(n) in seen:
                continue
            seen.add(id(n))
            order.append(n)
            todo.extend(n.next_nodes)
        held = None  # the gradient flowing from the node before
        for n in order:
            _current.node = n
            try:
                _allocator.TLS.native = False
                try:
                    for h in [*n._tensor_pre_hooks, *n._pre_hooks]:
                        h(())
                finally:
                    _allocator.TLS.native = True
                grad = n._apply()
            finally:
                _current.node = None
            n.saved = ()  # the graph lets go of what it saved once the node ran
            held = grad
        del held
    except BaseException as e:  # noqa: BLE001 — raised again on the calling thread
        out.append(e)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    t = tensors[0] if isinstance(tensors, (list, tuple)) else tensors
    if t.grad_fn is None:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    out = []
    worker = threading.Thread(target=_run, args=(t.grad_fn, out), name="autograd-device-0")
    worker.start()
    worker.join()
    if out:
        raise out[0]


def current_node():
    return getattr(_current, "node", None)
