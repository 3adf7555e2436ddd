"""A stand-in for `torch` in the CI tests of ranksnap's PyTorch glue (no GPU, no torch there).

It has exactly the surface the glue (python/ranksnap/_torch.py) and the test scripts use, with
PyTorch 2.11's names and shapes: torch.cuda.memory._record_memory_history / _snapshot /
CUDAPluggableAllocator / change_current_allocator, torch.cuda._lazy_call, is_initialized,
memory_reserved, set_per_process_memory_fraction, torch._C._cuda_attach_out_of_memory_observer,
torch.optim.optimizer.register_optimizer_step_post_hook, torch.distributed's few collectives
(over files), torch.profiler.record_function, torch.OutOfMemoryError, and torch.empty for
"tensors" of device memory that the allocator of torch/cuda/_allocator.py serves and records.
"""
from . import _C, cuda, distributed, optim, profiler  # noqa: F401
from .cuda._allocator import OutOfMemoryError

__version__ = "2.11.0+stand-in"


class Tensor:
    """nbytes of device memory, freed when the last reference goes (CPython: at once)."""

    def __init__(self, nbytes):
        cuda._lazy_init()
        self.nbytes = int(nbytes)
        self.data_ptr_ = cuda._allocator.ALLOCATOR.malloc(self.nbytes)

    def data_ptr(self):
        return self.data_ptr_

    def __del__(self):
        ptr = getattr(self, "data_ptr_", None)
        if ptr is not None:
            cuda._allocator.ALLOCATOR.free(ptr)


def empty(nbytes, device="cuda"):
    if not str(device).startswith("cuda"):
        raise RuntimeError("the stand-in torch has CUDA tensors only")
    return Tensor(nbytes)


def manual_seed(seed):
    return None
