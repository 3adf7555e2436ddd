"""torch.nn.modules.module of the stand-in: Module's __call__ with PyTorch 2.11's global
forward pre-hooks and forward hooks (register_module_forward_pre_hook: hook(module, args),
register_module_forward_hook: hook(module, args, output)) and a module's own forward pre-hooks
and forward hooks (register_forward_pre_hook, register_forward_hook, run after the global ones), called around forward by _call_impl, which reads the forward hooks
after forward as PyTorch does (a hook added by a pre-hook runs at that call); children,
named_modules, named_parameters, parameters, named_buffers, and Parameter."""
from ... import Tensor
from ...utils.hooks import register

_global_forward_hooks = {}
_global_forward_pre_hooks = {}


def _has_any_global_hook():
    return bool(_global_forward_hooks or _global_forward_pre_hooks)


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    return register(_global_forward_hooks, hook)


def register_module_forward_pre_hook(hook):
    return register(_global_forward_pre_hooks, hook)


class Parameter(Tensor):
    def __init__(self, nbytes):
        super().__init__(nbytes)
        self.requires_grad = True


class Module:
    def __init__(self):
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_forward_hooks", {})
        object.__setattr__(self, "_forward_pre_hooks", {})

    def __setattr__(self, name, value):
        if isinstance(value, Module):
            self._modules[name] = value
        elif isinstance(value, Parameter):
            self._parameters[name] = value
        object.__setattr__(self, name, value)

    def register_buffer(self, name, tensor):
        self._buffers[name] = tensor
        object.__setattr__(self, name, tensor)

    def _call_impl(self, *args, **kwargs):
        for hook in [*_global_forward_pre_hooks.values(), *self._forward_pre_hooks.values()]:
            out = hook(self, args)
            if out is not None:
                args = out if isinstance(out, tuple) else (out,)
        result = self.forward(*args, **kwargs)
        for hook in [*_global_forward_hooks.values(), *self._forward_hooks.values()]:
            out = hook(self, args, result)
            if out is not None:
                result = out
        return result

    def _wrapped_call_impl(self, *args, **kwargs):
        return self._call_impl(*args, **kwargs)

    __call__ = _wrapped_call_impl

    def register_forward_hook(self, hook):
        return register(self._forward_hooks, hook)

    def register_forward_pre_hook(self, hook):
        return register(self._forward_pre_hooks, hook)

    def children(self):
        return iter(self._modules.values())

    def named_modules(self, memo=None, prefix=""):
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name)

    def named_parameters(self):
        for mp, m in self.named_modules():
            for name, p in m._parameters.items():
                yield (mp + "." if mp else "") + name, p

    def parameters(self):
        for _, p in self.named_parameters():
            yield p

    def named_buffers(self):
        for mp, m in self.named_modules():
            for name, b in m._buffers.items():
                yield (mp + "." if mp else "") + name, b
