"""torch._dynamo.eval_frame of the stand-in: OptimizedModule, the module torch.compile(module)
returns, which calls the original module (its _orig_mod, a submodule) and warns, as PyTorch 2.11
does, when it is called while a global module hook is registered."""
import warnings

from ..nn.modules import module as _module


class OptimizedModule(_module.Module):
    def __init__(self, mod, mode=None, options=None):
        super().__init__()
        self._orig_mod = mod
        self._compiled = {}    # input -> the wrapper Inductor wrote for it
        self._tree = None
        if mode == "reduce-overhead":
            from .._inductor import cudagraph_trees
            self._tree = cudagraph_trees.Tree(bool((options or {}).get("graph_partition")))

    def forward(self, *args, **kwargs):
        if self._tree is not None:
            return self._tree.run(self._orig_mod, args, kwargs)
        key = repr((args, sorted(kwargs.items())))
        call = self._compiled.get(key)
        if call is None:
            from .._inductor import compile_fx
            call = self._compiled[key] = compile_fx.compile_fx(self._orig_mod, args, kwargs)
        return call(args)

    def __call__(self, *args, **kwargs):
        if _module._has_any_global_hook():
            warnings.warn("Using `torch.compile(module)` when there are global hooks on modules (e.g., "
                          "from `register_module_forward_hook`); this will cause the hooks to fire an "
                          "extra time for the `OptimizedModule` created by `torch.compile(module)`.",
                          stacklevel=2)
        return super().__call__(*args, **kwargs)
