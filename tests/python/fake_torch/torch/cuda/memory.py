"""torch.cuda.memory of the stand-in: the recorder's and the pluggable allocator's entry points,
with PyTorch 2.11's signatures."""
import sys

from . import _allocator

_pluggable = None


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                           device=None, clear_history=False, compile_context=False,
                           global_record_annotations=False, skip_actions=None):
    from . import _lazy_init
    _lazy_init()
    _allocator.ALLOCATOR.record_history(enabled, context, stacks, max_entries)
    if clear_history:
        _allocator.ALLOCATOR.trace = []


def _snapshot(device=None, augment_with_fx_traces=False):
    return _allocator.ALLOCATOR.snapshot()


def _dump_snapshot(filename="dump_snapshot.pickle"):
    import pickle
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def memory_reserved(device=None):
    return _allocator.ALLOCATOR.reserved()


class CUDAPluggableAllocator:
    def __init__(self, path_to_so_file, alloc_fn_name, free_fn_name):
        import ctypes
        lib = ctypes.CDLL(path_to_so_file)
        getattr(lib, alloc_fn_name)
        getattr(lib, free_fn_name)
        self.path, self.alloc_fn_name, self.free_fn_name = path_to_so_file, alloc_fn_name, free_fn_name


def change_current_allocator(allocator):
    from . import is_initialized
    global _pluggable
    if is_initialized():
        raise RuntimeError("Can't swap an already initialized allocator")
    _pluggable = allocator


def get_current_allocator():
    return _pluggable
