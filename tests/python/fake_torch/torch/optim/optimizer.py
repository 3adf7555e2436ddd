"""torch.optim.optimizer of the stand-in: the global step hooks (PyTorch 2.x) and an optimizer
whose first step creates its state, as Adam's does."""
import itertools

_global_post_hooks = {}
_ids = itertools.count()


class RemovableHandle:
    def __init__(self, hooks, key):
        self.hooks, self.key = hooks, key

    def remove(self):
        self.hooks.pop(self.key, None)


def register_optimizer_step_post_hook(hook):
    key = next(_ids)
    _global_post_hooks[key] = hook
    return RemovableHandle(_global_post_hooks, key)


class Optimizer:
    def __init__(self, params, defaults):
        self.params = list(params)
        self.defaults = defaults
        self.state = {}

    def _step(self):
        raise NotImplementedError

    def step(self, *args, **kwargs):
        out = self._step()
        for hook in list(_global_post_hooks.values()):
            hook(self, args, kwargs)
        return out

    def zero_grad(self, set_to_none=True):
        return None


class SGD(Optimizer):
    """Momentum buffers of the parameters' sizes, made at the first step."""

    def __init__(self, params, lr=0.1, momentum=0.9):
        super().__init__(params, {"lr": lr, "momentum": momentum})

    def _step(self):
        from .. import empty
        for i, p in enumerate(self.params):
            if i not in self.state:
                self.state[i] = empty(p.nbytes)
