"""torch.optim.optimizer of the stand-in: the global step hooks (PyTorch 2.x) and an optimizer
whose first step creates its state, as Adam's does."""
from ..utils.hooks import register

_global_post_hooks = {}


def register_optimizer_step_post_hook(hook):
    return register(_global_post_hooks, hook)


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
    """Momentum buffers of the parameters' sizes, made at the first step, kept as PyTorch keeps
    them: state[parameter] = {"momentum_buffer": tensor}."""

    def __init__(self, params, lr=0.1, momentum=0.9):
        super().__init__(params, {"lr": lr, "momentum": momentum})

    def _step(self):
        from .. import empty
        for p in self.params:
            if p not in self.state:
                self.state[p] = {"momentum_buffer": empty(p.nbytes)}
