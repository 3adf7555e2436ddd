"""torch.cuda of the stand-in: lazy initialisation with its queued calls, one device.

With FAKE_TORCH_CUDA_DRIVER naming a driver library (tests/gpu/fake_cuda_driver.c), it is used
as PyTorch uses the real one: is_available() and device_count() load and initialise it without
making a context (torchrun's and accelerate's launchers ask them), and the lazy initialisation,
which the first tensor brings, makes the device's primary context."""
import ctypes
import os
import threading

from . import _allocator, memory  # noqa: F401
from .graphs import CUDAGraph, graph, graph_pool_handle  # noqa: F401
from ._allocator import OutOfMemoryError  # noqa: F401

_initialized = False
_queued_calls = []
_tls = threading.local()
_device = 0


_driver = None


def _load_driver():
    global _driver
    if _driver is None:
        path = os.environ.get("FAKE_TORCH_CUDA_DRIVER")
        _driver = ctypes.CDLL(path) if path else False
        if _driver:
            _driver.cuInit(0)
    return _driver or None


def is_available():
    _load_driver()
    return True


def is_initialized():
    return _initialized


def device_count():
    _load_driver()
    return 1


def _lazy_call(fn):
    if _initialized:
        fn()
    else:
        _queued_calls.append(fn)


def _lazy_init():
    global _initialized
    if _initialized or getattr(_tls, "is_initializing", False):
        return
    _tls.is_initializing = True
    try:
        driver = _load_driver()
        if driver:
            driver.cuDevicePrimaryCtxRetain(ctypes.byref(ctypes.c_void_p()), _device)
        for fn in _queued_calls:
            fn()
        _queued_calls.clear()
        _initialized = True
    finally:
        del _tls.is_initializing


def init():
    _lazy_init()


def current_device():
    _lazy_init()
    return _device


def set_device(device):
    global _device
    _lazy_init()
    _device = int(str(device).split(":")[-1])


def synchronize(device=None):
    _lazy_init()


def memory_reserved(device=None):
    return _allocator.ALLOCATOR.reserved()


def get_allocator_backend():
    """"native" or "cudaMallocAsync", as PYTORCH_CUDA_ALLOC_CONF chose it when torch was loaded."""
    return _allocator.BACKEND


def memory_allocated(device=None):
    return _allocator.ALLOCATOR.allocated()


def mem_get_info(device=None):
    _lazy_init()
    return _allocator.TOTAL - _allocator.ALLOCATOR.reserved(), _allocator.TOTAL


def set_per_process_memory_fraction(fraction, device=None):
    _lazy_init()
    _allocator.ALLOCATOR.set_fraction(fraction)
