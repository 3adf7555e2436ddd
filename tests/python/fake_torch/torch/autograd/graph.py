"""torch.autograd.graph of the stand-in: Node, with PyTorch 2.11's name(),
register_prehook(fn(grad_outputs)) and metadata (a dict kept with the node), and what its
backward allocates (the stand-in's own)."""
import itertools

_ids = itertools.count()


class _Handle:
    def __init__(self, hooks, hook):
        self.hooks, self.hook = hooks, hook

    def remove(self):
        if self.hook in self.hooks:
            self.hooks.remove(self.hook)


class Node:
    def __init__(self, name, nbytes, next_nodes=(), accumulate=None, saved=()):
        self._name = name
        self.saved = tuple(saved)        # the tensors saved for backward, alive until it runs
        self.nbytes = int(nbytes)        # the gradient this node allocates
        self.next_nodes = list(next_nodes)
        self.accumulate = accumulate     # AccumulateGrad's parameter: the gradient is kept
        self._pre_hooks = []
        self._tensor_pre_hooks = []      # its output's Tensor.register_hook, run before _pre_hooks
        self._metadata = {}

    @property
    def metadata(self):
        return self._metadata

    def name(self):
        return self._name

    def register_prehook(self, fn):
        self._pre_hooks.append(fn)
        return _Handle(self._pre_hooks, fn)

    def _apply(self):
        from .. import empty
        grad = empty(self.nbytes) if self.nbytes else None
        if self.accumulate is not None and grad is not None:
            self.accumulate.grad = grad
        return grad
