"""_lib.py — the ctypes binding to libranksnap.so, which ranksnap-run preloaded into this process.

The library is the one already in the process (LD_PRELOAD puts it in the global scope, where
dlopen(NULL) finds its symbols): loading a second copy would give a second ranksnap with its own
state. The structure and function types mirror include/ranksnap.h, field for field.
"""
import ctypes
import ctypes.util

OK = 0
ERR_NOT_INITIALIZED = 4
ERR_OPTION = 5
ERR_UNSUPPORTED = 10

# include/ranksnap.h, ranksnap_recorder_ops
START = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int)
STOP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
PUT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t)
DUMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, PUT)
RESERVED = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p)
TAKE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
GATHER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                          ctypes.c_int, ctypes.c_void_p, TAKE)
BCAST = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


class RecorderOps(ctypes.Structure):
    _fields_ = [("ctx", ctypes.c_void_p), ("start", START), ("stop", STOP), ("dump", DUMP),
                ("reserved", RESERVED), ("gather", GATHER), ("bcast", BCAST),
                ("holds_lock", ctypes.c_void_p)]


def with_gil(name):
    """The library's call `name`, made with the GIL held (ctypes.PyDLL), for a call that must see
    the calling Python thread's state; its signature is lib()'s."""
    f = getattr(ctypes.PyDLL(None), name)
    g = getattr(lib(), name)
    f.restype, f.argtypes = g.restype, g.argtypes
    return f


class FrameworkOom(ctypes.Structure):
    """include/ranksnap.h, ranksnap_framework_oom_info."""
    _fields_ = [("device", ctypes.c_int), ("requested", ctypes.c_uint64),
                ("allocated", ctypes.c_uint64), ("limit", ctypes.c_uint64),
                ("device_free", ctypes.c_uint64), ("device_total", ctypes.c_uint64),
                ("rounding", ctypes.c_uint64), ("codes", ctypes.POINTER(ctypes.c_size_t)),
                ("lines", ctypes.POINTER(ctypes.c_int)), ("n", ctypes.c_int)]


class NotLoaded(RuntimeError):
    pass


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


_lib = None


def lib():
    """The preloaded libranksnap.so, with the signatures of the calls the glue makes."""
    global _lib
    if _lib is not None:
        return _lib
    # CDLL releases the GIL around every call: a ranksnap call that waits (a gather) lets the
    # job's other Python threads run, and a callback from ranksnap takes the GIL back itself.
    handle = ctypes.CDLL(None)
    if not hasattr(handle, "ranksnap_set_recorder"):
        raise NotLoaded("libranksnap.so is not loaded in this process: start the program with "
                        "ranksnap-run (which preloads it), e.g. ranksnap-run --steps 10:15 python train.py")
    sig = {
        "ranksnap_init": (ctypes.c_int, [ctypes.c_void_p]),
        "ranksnap_finalize": (ctypes.c_int, []),
        "ranksnap_abandon": (None, []),
        "ranksnap_exiting": (None, [ctypes.c_int]),
        "ranksnap_step": (ctypes.c_int, [ctypes.c_int64]),
        "ranksnap_steps_from": (ctypes.c_int, [ctypes.c_char_p]),
        "ranksnap_dump": (ctypes.c_int, [ctypes.c_char_p]),
        "ranksnap_annotate_begin": (ctypes.c_int, [ctypes.c_char_p]),
        "ranksnap_annotate_end": (ctypes.c_int, [ctypes.c_char_p]),
        "ranksnap_set_recorder": (ctypes.c_int, [ctypes.POINTER(RecorderOps)]),
        "ranksnap_record_natively": (ctypes.c_int, [ctypes.c_char_p]),
        "ranksnap_set_identity": (ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.c_char_p]),
        "ranksnap_job": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t]),
        "ranksnap_last_error": (ctypes.c_char_p, []),
        "ranksnap_strerror": (ctypes.c_char_p, [ctypes.c_int]),
        "ranksnap_version": (ctypes.c_char_p, []),
    }
    for name, (res, args) in sig.items():
        f = getattr(handle, name)
        f.restype = res
        f.argtypes = args
    _lib = handle
    return _lib


_framework_oom = None


def framework_oom(oom, frames):
    """ranksnap_framework_oom(oom's figures, frames: (code object, line), innermost first),
    through PyDLL: the call keeps the GIL, under which the library reads the frames' names."""
    global _framework_oom
    lib()  # the library is the preloaded one: NotLoaded otherwise
    if _framework_oom is None:
        f = ctypes.PyDLL(None).ranksnap_framework_oom
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.POINTER(FrameworkOom)]
        _framework_oom = f
    n = len(frames)
    codes = (ctypes.c_size_t * n)(*[id(code) for code, _ in frames])
    lines = (ctypes.c_int * n)(*[line for _, line in frames])
    info = FrameworkOom(oom["device"], oom["requested"], oom["allocated"], oom["limit"],
                        oom["device_free"], oom["device_total"], oom["rounding"],
                        ctypes.cast(codes, ctypes.POINTER(ctypes.c_size_t)),
                        ctypes.cast(lines, ctypes.POINTER(ctypes.c_int)), n)
    return _framework_oom(ctypes.byref(info))


def error(status):
    """'RANKSNAP_ERR_...: detail' for a status the library returned."""
    l = lib()
    detail = (l.ranksnap_last_error() or b"").decode("utf-8", "replace")
    name = (l.ranksnap_strerror(status) or b"").decode("utf-8", "replace")
    return f"{name}: {detail}" if detail else name


def path():
    """The file libranksnap.so was loaded from (for PyTorch's CUDAPluggableAllocator)."""
    l = lib()
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    info = _DlInfo()
    addr = ctypes.cast(l.ranksnap_step, ctypes.c_void_p)
    if not libc.dladdr(addr, ctypes.byref(info)) or not info.dli_fname:
        raise NotLoaded("cannot tell which file libranksnap.so was loaded from")
    return info.dli_fname.decode()


def gil_check_address():
    """PyGILState_Check, which ranksnap's signal handler may call (include/ranksnap.h,
    holds_lock): a handler running on the thread that holds the GIL must not wait for a dump
    that needs it."""
    try:
        return ctypes.cast(ctypes.pythonapi.PyGILState_Check, ctypes.c_void_p).value
    except (AttributeError, ValueError):
        return None
