"""torch._dynamo.eval_frame of the stand-in: OptimizedModule, the module torch.compile(module)
returns, which calls the original module (its _orig_mod, a submodule) and warns, as PyTorch 2.11
does, when it is called while a global module hook is registered."""
import warnings

from ..nn.modules import module as _module


class OptimizedModule(_module.Module):
    def __init__(self, mod, mode=None):
        super().__init__()
        self._orig_mod = mod
        self._tree = None
        if mode == "reduce-overhead":
            from .._inductor import cudagraph_trees
            self._tree = cudagraph_trees.Tree()

    def forward(self, *args, **kwargs):
        if self._tree is not None:
            return self._tree.run(self._orig_mod, args, kwargs)
        return self._orig_mod(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        if _module._has_any_global_hook():
            warnings.warn("Using `torch.compile(module)` when there are global hooks on modules (e.g., "
                          "from `register_module_forward_hook`); this will cause the hooks to fire an "
                          "extra time for the `OptimizedModule` created by `torch.compile(module)`.",
                          stacklevel=2)
        return super().__call__(*args, **kwargs)
