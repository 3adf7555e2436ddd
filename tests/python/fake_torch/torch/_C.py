"""_C.py — the stand-in's torch._C: the OOM observer registration and the allocator's user
metadata (torch/csrc/cuda/Module.cpp), the autograd node running (torch/csrc/autograd/init.cpp)."""
from .cuda import _allocator


def _cuda_attach_out_of_memory_observer(observer):
    from . import cuda
    cuda._lazy_init()  # PyTorch initialises CUDA here too
    if _allocator.BACKEND == "cudaMallocAsync":
        raise _allocator.no_support("attachOutOfMemoryObserver")
    _allocator.ALLOCATOR.observers.append(observer)


def _cuda_setMemoryMetadata(metadata):
    _allocator.TLS.user_metadata = str(metadata)


def _cuda_getMemoryMetadata():
    return getattr(_allocator.TLS, "user_metadata", "")


def _current_autograd_node():
    from . import autograd
    return autograd.current_node()
