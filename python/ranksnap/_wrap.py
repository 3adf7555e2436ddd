"""_wrap.py — the one way the glue puts itself around a call the script makes (the import of
torch, torch.compile, torch.autograd.backward, init_process_group, DeviceMesh.__init__,
new_group, CUDAGraph.capture_begin, a model's generate, sys.exit, os._exit): the glue's part
runs before or after the call, and an exception the call raises reaches the script with no frame
of ranksnap's in its traceback; and the one way it takes a hook of its own off again (drop).

PyTorch offers no hook at these moments (a backward pass about to start, a process group or a
mesh just made, torch just imported), so the glue wraps the calls; but a user must never read
ranksnap as part of their failure. An exception that leaves a Python function gets that
function's frame added to its traceback: the wrapper takes its own entry off before it re-raises
with a bare `raise`, which re-raises the exception being handled as it is, without adding the
frame again. The traceback a bare raise uses is the exception's own (__traceback__) since Python
3.11, and the thread's handled-exception state before (set with PyErr_SetExcInfo).
"""
import ctypes
import functools
import sys

from . import _off

_OWN_STATE = sys.version_info < (3, 11)


def around(real, before=None, after=None):
    """`real` with before(*args, **kwargs) ahead of it and after(result, *args, **kwargs) behind
    it, under real's name and docstring. The glue's parts never fail the call: what they raise
    is ranksnap's own failure (the parts catch what PyTorch raises and say it themselves), said
    once per wrapped call, and the call goes on as without ranksnap."""

    @functools.wraps(real)
    def call(*args, **kwargs):
        if before is not None:
            try:
                before(*args, **kwargs)
            except Exception as e:
                _failed(real, e)
        try:
            out = real(*args, **kwargs)
        except BaseException as e:
            _hide(e)
            raise
        if after is not None:
            try:
                after(out, *args, **kwargs)
            except Exception as e:
                _failed(real, e)
        return out

    return call


def _failed(real, e):
    name = getattr(real, "__qualname__", None) or getattr(real, "__name__", "a call")
    module = getattr(real, "__module__", None)
    where = f"{module}.{name}" if module else name
    _off.off("around " + where, e, ours=True, what=f"ranksnap's part of {where}",
             instead=f"{where} itself runs as without ranksnap")


def _hide(exc):
    """Takes the wrapper's own entry, the first, off the traceback of the exception it handles."""
    tb = exc.__traceback__
    if tb is None or tb.tb_frame.f_code is not _CALL:
        return
    rest = tb.tb_next
    exc.__traceback__ = rest
    if not _OWN_STATE:
        return
    try:
        api = ctypes.pythonapi
        held = (type(exc), exc, rest)
        for o in held:
            if o is not None:
                api.Py_IncRef(ctypes.py_object(o))  # PyErr_SetExcInfo takes these references
        api.PyErr_SetExcInfo(*(ctypes.c_void_p(id(o)) if o is not None else None for o in held))
    except Exception as e:  # the frame stays: a longer traceback, never another error
        _off.off("traceback", e, ours=True)


def drop(handle):
    """Removes a hook the glue put (PyTorch's RemovableHandle), whatever that raises: a hook
    that cannot be removed only costs its call."""
    if handle is not None:
        try:
            handle.remove()
        except Exception as e:
            _off.off("hooks", e)


_CALL = around(len).__code__
