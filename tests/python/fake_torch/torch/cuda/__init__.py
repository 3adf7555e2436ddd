"""torch.cuda of the stand-in: lazy initialisation with its queued calls, one device."""
import threading

from . import _allocator, memory  # noqa: F401
from ._allocator import OutOfMemoryError  # noqa: F401

_initialized = False
_queued_calls = []
_tls = threading.local()
_device = 0


def is_available():
    return True


def is_initialized():
    return _initialized


def device_count():
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


def memory_allocated(device=None):
    return _allocator.ALLOCATOR.allocated()


def mem_get_info(device=None):
    _lazy_init()
    return _allocator.TOTAL - _allocator.ALLOCATOR.reserved(), _allocator.TOTAL


def set_per_process_memory_fraction(fraction, device=None):
    _lazy_init()
    _allocator.ALLOCATOR.limit = int(_allocator.TOTAL * fraction)
