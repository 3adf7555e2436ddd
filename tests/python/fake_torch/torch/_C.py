"""_C.py — the stand-in's torch._C: the OOM observer registration (torch/csrc/cuda/Module.cpp)."""
from .cuda import _allocator


def _cuda_attach_out_of_memory_observer(observer):
    from . import cuda
    cuda._lazy_init()  # PyTorch initialises CUDA here too
    _allocator.ALLOCATOR.observers.append(observer)
