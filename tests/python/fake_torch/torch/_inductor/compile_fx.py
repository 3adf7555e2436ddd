"""torch._inductor.compile_fx of the stand-in: a model compiled as Inductor compiles it, into a
Python wrapper written in the cache folder (TMPDIR/torchinductor_stand_in/xx/cHASH.py) whose
call() makes the buffers the model's forward made, one line each, and loaded with its line map:
each line's FX node stack_trace, the model's own frames that made that buffer (what dynamo traced,
outside torch), so that PyCodeCache.stack_frames_for_code leads back to them. The model is traced
once per input (a guard on it), with no device memory taken."""
import base64
import hashlib
import os
import tempfile
import traceback

from ..cuda import _allocator
from . import codecache

_TORCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _stack_trace(summary):
    """The FX node's stack_trace: the model's frames outside torch, outermost first, as dynamo
    writes it (a traceback's lines): those it traced, from the model's forward in, not the
    script's that called the compiled model."""
    inside = [i for i, f in enumerate(summary) if f.name == "compile_fx" and f.filename == __file__]
    user = [f for f in summary[inside[-1] + 1 if inside else 0:] if not f.filename.startswith(_TORCH)]
    return "".join(traceback.format_list(user))


def compile_fx(model, args, kwargs):
    made = []
    _allocator.TLS.tracer = lambda nbytes, stack: made.append((nbytes, _stack_trace(stack)))
    try:
        model(*args, **kwargs)
    finally:
        _allocator.TLS.tracer = None
    src = ["# a wrapper of the stand-in's inductor", "from torch import empty", "", "",
           "def call(args):", "    bufs = []"]
    linemap = []
    for i, (nbytes, trace) in enumerate(made):
        linemap.append((len(src) + 1, trace))
        src.append(f"    buf{i} = empty({nbytes}); bufs.append(buf{i})")
    src.append("    return bufs[-1] if bufs else None")
    return load_generated("\n".join(src) + "\n", linemap)["call"]


def load_generated(text, linemap=None):
    """Generated code written where Inductor's cache is and loaded from there."""
    # named as Inductor names its code: "c" and 51 characters of the hash in lower-case base32
    key = "c" + base64.b32encode(hashlib.sha256(text.encode()).digest()).decode()[:51].lower()
    path = os.path.join(tempfile.gettempdir(), "torchinductor_stand_in", key[:2], key + ".py")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return codecache.PyCodeCache.load_by_key_path(key, path, linemap)
